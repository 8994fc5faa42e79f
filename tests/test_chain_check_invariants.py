"""`Chain.check` and `Join.check` (run by `memsched.solve` on instances built or edited in Python) refuse
fractional sizes and nonzero entries past the stages, as the constructor and the chain file do."""

from __future__ import annotations

import numpy as np
import pytest
from memsched.solvers.chain import Chain
from memsched.solvers.join.instance import Join

import memsched

SIZE_RULE = "must be an integer number of bytes in 0..1125899906842624"


def tiny() -> Chain:
    """The example chain of docs/chain.md (L = 4, integer sizes in bytes)."""
    return memsched.load(memsched.data_path("examples", "tiny.json"))


def tiny_join() -> Join:
    """The example join (two branches)."""
    return memsched.load(memsched.data_path("join", "tiny.json"))


def test_solve_refuses_scaled_chain_sizes() -> None:
    """x and xbar scaled by 1.3 (x[0] = 5.2 bytes): an InputError, not a store-all peak of truncated sizes."""
    chain = tiny()
    chain.x = chain.x * 1.3
    chain.xbar = chain.xbar * 1.3
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(chain, "100%", "store-all")
    assert err.value.field == "x[0]"
    assert SIZE_RULE in err.value.message and "5.2" in err.value.message


@pytest.mark.parametrize("name", ["x", "xbar", "o_f", "o_b", "o_fa", "o_fn", "o_bh"])
def test_check_refuses_a_fractional_entry_of_each_size_array(name: str) -> None:
    """Every size array, at a stage index (1), is refused with the constructor's message naming it."""
    chain = tiny()
    values = getattr(chain, name).astype(float)  # a copy: aliases such as o_fa (o_f) are left alone
    values[1] += 0.5
    setattr(chain, name, values)
    with pytest.raises(memsched.InputError) as err:
        chain.check()
    assert err.value.field == f"{name}[1]"
    assert SIZE_RULE in err.value.message


def test_check_accepts_whole_float_sizes_as_integers() -> None:
    """Whole floats (2.0) are taken as the constructor takes them: converted to int64, and the solvers answer
    as for the integer chain (no float index in the rotor DP)."""
    chain, doubled = tiny(), tiny()
    chain.x, chain.xbar = chain.x * 2.0, list(chain.xbar * 2)
    doubled.x, doubled.xbar = doubled.x * 2, doubled.xbar * 2
    chain.check()
    assert chain.x.dtype == np.int64 and chain.xbar.dtype == np.int64
    for budget in (46, 54):
        got, want = memsched.solve(chain, budget, "rotor"), memsched.solve(doubled, budget, "rotor")
        assert (got.status, got.makespan, got.peak_memory) == (want.status, want.makespan, want.peak_memory)
        assert got.found


def test_join_check_and_solve_refuse_fractional_branch_sizes() -> None:
    """A branch's sizes scaled by 1.3: Join.check names the branch and entry; the facade refuses too."""
    join = tiny_join()
    for branch in join.branches:
        branch.x = branch.x * 1.3
    with pytest.raises(memsched.InputError) as err:
        join.check()
    assert err.value.field == "branches[0].x[0]" and SIZE_RULE in err.value.message
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(join, "100%")
    assert err.value.field == "branches[0].x[0]"


def test_join_check_refuses_fractional_overhead() -> None:
    """The per-mode overhead of the second branch (no alias of o_f once assigned) is checked too."""
    join = tiny_join()
    branch = join.branches[1]
    branch.o_fa = branch.o_f + 0.25
    with pytest.raises(memsched.InputError) as err:
        join.check()
    assert err.value.field == "branches[1].o_fa[0]" and SIZE_RULE in err.value.message


def _one_stage(**changes: list[float]) -> dict[str, list[float]]:
    """The arrays of a valid one-stage chain (L = 1), with `changes` applied."""
    arrays: dict[str, list[float]] = {"u_f": [1, 0], "u_b": [1, 2], "x": [1, 1, 0], "xbar": [0, 1, 0],
                                      "o_f": [0, 0], "o_b": [0, 0]}
    arrays.update(changes)
    return arrays


def test_constructor_refuses_nonzero_end_entries_of_the_hunt() -> None:
    """x[L+1] = xbar[L+1] = 1 (where rotor said infeasible at 4 and the others fit): refused, x[2] first."""
    with pytest.raises(memsched.InputError) as err:
        Chain(**_one_stage(x=[1, 1, 1], xbar=[0, 1, 1]))
    assert err.value.field == "x[2]"
    assert "must be 0" in err.value.message and "got 1" in err.value.message


@pytest.mark.parametrize(("name", "values", "field"), [
    ("x", [1, 1, 3], "x[2]"),
    ("xbar", [2, 1, 0], "xbar[0]"),
    ("xbar", [0, 1, 2], "xbar[2]"),
    ("u_f", [1, 0.5], "u_f[1]"),
    ("o_f", [0, 1], "o_f[1]"),
])
def test_constructor_refuses_each_nonzero_end_entry(name: str, values: list[float], field: str) -> None:
    """Each end entry of docs/chain.md's notation table (x[L+1], xbar[0], xbar[L+1], u_f[L], o_f[L])."""
    with pytest.raises(memsched.InputError) as err:
        Chain(**_one_stage(**{name: values}))
    assert err.value.field == field and "must be 0" in err.value.message


@pytest.mark.parametrize(("name", "field"), [("x", "x[5]"), ("xbar", "xbar[5]"), ("xbar", "xbar[0]"),
                                             ("u_f", "u_f[4]"), ("o_f", "o_f[4]")])
def test_solve_refuses_end_entries_edited_in_python(name: str, field: str) -> None:
    """An end entry set on a loaded chain (L = 4) in place: memsched.solve and Chain.check refuse it."""
    chain = tiny()
    index = int(field.split("[")[1].rstrip("]"))
    getattr(chain, name)[index] = 1
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(chain, "100%", "rotor")
    assert err.value.field == field and "must be 0" in err.value.message


def test_check_refuses_per_mode_end_entries() -> None:
    """The per-mode forward overheads and times of the loss (o_fa[L], u_fn[L]) are 0 too."""
    chain = tiny()
    chain.o_fa = chain.o_f.copy()
    chain.o_fa[4] = 1
    with pytest.raises(memsched.InputError) as err:
        chain.check()
    assert err.value.field == "o_fa[4]" and "must be 0" in err.value.message
    chain = tiny()
    chain.u_fn = chain.u_f.copy()
    chain.u_fn[4] = 0.5
    with pytest.raises(memsched.InputError) as err:
        chain.check()
    assert err.value.field == "u_fn[4]" and "must be 0" in err.value.message


def test_join_check_refuses_branch_end_entry() -> None:
    """A join branch's x[L_b+1] set to 1: Join.check names the branch."""
    join = tiny_join()
    L = join.branches[0].length
    join.branches[0].x[L + 1] = 1
    with pytest.raises(memsched.InputError) as err:
        join.check()
    assert err.value.field == f"branches[0].x[{L + 1}]" and "must be 0" in err.value.message


def test_valid_chains_and_joins_still_pass() -> None:
    """The example chain, a random chain with early release and the example join pass unchanged, their
    aliases (o_fa is o_f, o_bh is o_b) kept."""
    chain = tiny()
    chain.check()
    assert chain.o_fa is chain.o_f and chain.o_bh is chain.o_b
    from memsched.solvers.chain.generate import random_chain

    random_chain(12, seed=3, overhead=0.5, release=0.5).check()
    tiny_join().check()

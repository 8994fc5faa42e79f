"""Hunt 26 (offload): the smallest feasible budget `memsched solve` searches for a solver whose
success is not monotone in the budget, and the ranges ``--option`` messages state.

1. `find_min_budget` bisected rotor-offload's budgets as if a failure at B meant failures below
   B: on ``random_offload(4, 20, transfer_ratio=0.3, integer_times=True)`` at 20 slots it named
   35 bytes ("none at 34") although rotor-offload meets 33. Such solvers (`monotone` False) now
   get ``min_budget`` only once every budget below it was tried, else an upper bound in the note.
2. `option_type_error` said "a finite number >= 0" for floats it held to 0..1e15 (and scale > 0),
   and "an integer in 0..1000000" for vdnn's lookahead, which must be >= 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_cli as _cli
from memsched.experiments.commands import _checks, _infeasible
from memsched.solvers import registry
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.graph.generate import from_chain
from memsched.solvers.join.generate import random_join
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.result import INFEASIBLE, SolveResult


def _searched(problem: str, instance: object, solver: str, budget: int, **options: object) -> SolveResult:
    """The solver's infeasible answer at `budget`, completed by `find_min_budget`."""
    res = registry.solve(problem, instance, solver, budget, **options)
    assert res.status == INFEASIBLE and res.min_budget is None
    _infeasible.find_min_budget(problem, instance, res, dict(options))
    return res


def _finds(problem: str, instance: object, solver: str, budget: int, **options: object) -> bool:
    return registry.solve(problem, instance, solver, budget, **options).found


# --------------------------------------------------------------------------- 1. not monotone in the budget
def _ro(seed: int):
    return random_offload(4, seed, transfer_ratio=0.3, integer_times=True)


def test_rotor_offload_smallest_budget_is_the_smallest_it_meets():
    inst = _ro(20)  # rotor-offload at 20 slots: nothing up to 32, 33, not 34, 35 on
    assert _finds("offload", inst, "rotor-offload", 33, slots=20)
    assert not _finds("offload", inst, "rotor-offload", 34, slots=20)
    res = _searched("offload", inst, "rotor-offload", 22, slots=20)
    assert res.min_budget == 33, res.details  # was 35 ("none at 34")
    assert "none at 0..32" in res.details["min_budget_method"]
    assert "not monotone" in res.details["min_budget_method"]


def test_a_budget_below_the_failing_one_is_found():
    inst = _ro(22)  # rotor-offload at 20 slots meets 45 and 46, not 47, then 48 on (docs/offload.md)
    res = _searched("offload", inst, "rotor-offload", 47, slots=20)
    assert res.min_budget == 45, res.details  # was 48: bisection above the failing budget only
    assert _finds("offload", inst, "rotor-offload", 45, slots=20)


def test_dtr_gap_in_its_budgets():
    g = from_chain(random_chain(9, seed=109))  # dtr meets 28, not 29, then 30 on
    assert _finds("graph", g, "dtr", 28) and not _finds("graph", g, "dtr", 29)
    res = _searched("graph", g, "dtr", 29)
    assert res.min_budget == 28, res.details  # was 30


def test_too_many_budgets_to_try_give_an_upper_bound_only(monkeypatch):
    monkeypatch.setattr(_infeasible, "MAX_SCAN", 5)
    res = _searched("offload", _ro(20), "rotor-offload", 22, slots=20)
    assert res.min_budget is None
    note = res.details["min_budget_note"]
    assert "upper bound" in note and "smallest" not in note, note
    found = int(re.search(r"a schedule at (\d+) bytes", note).group(1))
    assert found >= 33 and _finds("offload", _ro(20), "rotor-offload", found, slots=20)


def test_which_solvers_are_taken_as_monotone():
    for problem, solver in (("offload", "rotor-offload"), ("offload", "pofo"), ("graph", "dtr"),
                            ("graph", "dtr-orders"), ("graph", "checkmate-approx")):
        assert not _infeasible.monotone(problem, solver), solver
    for problem, solver in (("join", "equal"), ("join", "proportional"), ("join", "sequential")):
        assert _infeasible.monotone(problem, solver), solver
    exact = [(p, n) for p, n, _ in registry.solver_table() if getattr(registry.get_solver(p, n), "exact_layer", False)]
    assert exact and all(_infeasible.monotone(p, n) for p, n in exact)


def test_a_monotone_heuristic_keeps_its_bisection_claim(monkeypatch):
    join = random_join([3, 2], seed=1)
    budget = int(registry.get_problem("join").reference_peak(join)) // 3
    calls = []
    solve = registry.solve
    monkeypatch.setattr(registry, "solve", lambda *a, **k: calls.append(a[3]) or solve(*a, **k))
    res = _searched("join", join, "equal", budget)
    need = res.min_budget
    assert need is not None
    assert res.details["min_budget_method"] == f"checked: a schedule at {need} bytes, none at {need - 1}"
    assert len(calls) < 20  # bisection, not one run per budget
    monkeypatch.undo()
    assert _finds("join", join, "equal", need) and not _finds("join", join, "equal", need - 1)


def test_cli_solve_names_the_budget_rotor_offload_meets(tmp_path: Path):
    path = tmp_path / "ro4s20.json"
    _ro(20).save(str(path))
    code, out, err = _cli("solve", path, "--budget", "22", "--solver", "rotor-offload", "--slots", "20", "--json")
    assert code == 1
    assert json.loads(out)["min_budget"] == 33 and "smallest feasible budget: 33 bytes" in err, err
    code, out, _ = _cli("solve", path, "--budget", "33", "--solver", "rotor-offload", "--slots", "20", "--json")
    assert code == 0 and json.loads(out)["peak_memory"] <= 33


# --------------------------------------------------------------------------- 2. option ranges in messages
def test_float_option_messages_state_the_range_checked():
    assert _checks.option_type_error("float", "scale", 1e20) == "a finite number > 0 and <= 1e+15"
    assert _checks.option_type_error("float", "min_ratio", 1e16) == "a finite number >= 0 and <= 1e+15"
    assert _checks.option_type_error("float", "scale", 0.0) is not None  # the solvers refuse it too
    assert _checks.option_type_error("float", "min_ratio", 0.0) is None
    assert _checks.option_type_error("float", "min_ratio", 1e15) is None


@pytest.mark.parametrize("key, most", [("lookahead", 1000000), ("max_lookahead", 1000000), ("num_workers", 10000),
                                       ("threads", 10000)])
def test_int_options_that_must_be_positive_say_so(key, most):
    assert _checks.option_type_error("int", key, 0) == f"an integer in 1..{most}"
    assert _checks.option_type_error("int", key, 1.5) == f"an integer in 1..{most}"
    assert _checks.option_type_error("int", key, 1) is None


def test_random_seed_has_the_range_of_seed():
    assert _checks.option_type_error("int", "random_seed", -1) == _checks.option_type_error("int", "seed", -1)
    assert _checks.option_type_error("int", "random_seed", 1.5) == _checks.option_type_error("int", "seed", 1.5)


def test_every_option_message_states_the_range_it_applies():
    """For each int / float option of every solver: the bounds the message names are accepted,
    the values just outside refused."""
    kinds = {(k, t) for p, n, _ in registry.solver_table() for k, t in _checks.solver_parameters(p, n).items()}
    checked = 0
    for key, kind in sorted(kinds):
        if kind not in ("int", "float") or key in _checks.BYTES_OPTIONS:
            continue
        want = _checks.option_type_error(kind, key, "x")
        assert want is not None
        if kind == "int":
            low, high = map(int, re.fullmatch(r"an integer in (-?\d+)\.\.(\d+)", want).groups())
            assert _checks.option_type_error(kind, key, low) is None, key
            assert _checks.option_type_error(kind, key, high) is None, key
            assert _checks.option_type_error(kind, key, low - 1) == want, key
            assert _checks.option_type_error(kind, key, high + 1) == want, key
        else:
            op, top = re.fullmatch(r"a finite number (>=?) 0 and <= (\S+)", want).groups()
            assert _checks.option_type_error(kind, key, float(top)) is None, key
            assert _checks.option_type_error(kind, key, float(top) * 1.01) == want, key
            assert (_checks.option_type_error(kind, key, 0.0) is None) == (op == ">="), key
            assert _checks.option_type_error(kind, key, -1e-9) == want, key
        checked += 1
    assert checked > 10


@pytest.mark.parametrize(("solver", "option", "wording"), [
    ("exact-combined", "scale=1e20", "must be a finite number > 0 and <= 1e+15, got 1e+20"),
    ("rotor-offload", "min_ratio=1e16", "must be a finite number >= 0 and <= 1e+15, got 1e+16"),
    ("vdnn", "lookahead=1.5", "must be an integer in 1..1000000, got 1.5"),
    ("vdnn", "lookahead=0", "must be an integer in 1..1000000, got 0"),
    ("offload-prefix", "max_lookahead=0", "must be an integer in 1..1000000, got 0"),
])
def test_cli_option_messages(tmp_path: Path, solver: str, option: str, wording: str):
    path = tmp_path / "inst.json"
    _ro(20).save(str(path))
    code, _, err = _cli("solve", path, "--budget", "90%", "--solver", solver, "--option", option)
    assert code == 2 and wording in err, err

"""Per-mode forward overheads (o_fa for F_all, o_fn for F_ck / F_n) and times (u_fa, u_fn): file
fields, simulator charges, the rotor DP against a brute force over persistent schedules, exact
models <= DP."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest
from conftest import persistent_schedules
from memsched.solvers.chain import Chain, reference_peak, simulate
from memsched.solvers.chain import dp as rotor_mod
from memsched.solvers.chain.dp import min_memory_schedule, rotor_min_budget, rotor_table, solve_rotor
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule
from memsched.solvers.errors import InputError
from memsched.solvers.registry import solve


def mode_chain(L: int, seed: int, **kw) -> Chain:
    """A random chain whose F_all and F_ck / F_n overheads are drawn apart (either may be larger)."""
    base = random_chain(L, seed, overhead=1.0, **kw)
    rng = np.random.default_rng(1000 + seed)
    o_fa = np.append(np.floor(rng.uniform(0, 1.0, L) * base.x[1 : L + 1]), 0).astype(np.int64)
    o_fn = np.append(np.floor(rng.uniform(0, 2.0, L) * base.x[1 : L + 1]), 0).astype(np.int64)
    return Chain.with_mode_overheads(base.u_f, base.u_b, base.x, base.xbar, o_fa, o_fn, base.o_b, name=base.name)


def brute_force(chain: Chain) -> list[tuple[int, float]]:
    """(peak, makespan) of every persistent schedule, replayed by the simulator."""
    out = []
    for ops in persistent_schedules(chain.length):
        sim = simulate(chain, Schedule(list(ops), chain.length))
        assert sim.valid, sim.violation
        out.append((sim.peak_memory, sim.makespan))
    return out


# --------------------------------------------------------------------------- format
def test_old_files_keep_one_overhead_and_new_fields_round_trip(tmp_path):
    old = random_chain(4, 0, overhead=1.0)
    assert np.array_equal(old.o_fa, old.o_f) and np.array_equal(old.o_fn, old.o_f)
    assert "fwd_overhead_all" not in old.to_dict()["stages"][0]
    chain = mode_chain(4, 0)
    assert chain.has_mode_overheads()
    path = tmp_path / "c.json"
    chain.save(path)
    back = Chain.load(path)
    for name in ("o_f", "o_fa", "o_fn", "o_b", "x", "xbar"):
        assert np.array_equal(getattr(back, name), getattr(chain, name)), name
    assert np.array_equal(back.o_f, np.maximum(back.o_fa, back.o_fn))
    # one per-mode field alone: the other is fwd_overhead
    data = old.to_dict()
    data["stages"][1]["fwd_overhead_all"] = 0
    path.write_text(json.dumps(data))
    one = Chain.load(path)
    assert one.o_fa[1] == 0 and one.o_fn[1] == old.o_f[1] == one.o_f[1]


@pytest.mark.parametrize("field, value", [("fwd_overhead_all", 10**6), ("fwd_overhead_nograd", -1)])
def test_bad_mode_fields_name_file_stage_and_field(tmp_path, field, value):
    data = mode_chain(3, 1).to_dict()
    data["stages"][2][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        Chain.load(path)
    message = str(err.value)
    assert str(path) in message and "stages[2]" in message and "\n" not in message


def test_fwd_overhead_must_be_the_larger_mode(tmp_path):
    data = mode_chain(3, 1).to_dict()
    st = data["stages"][0]
    st.update(fwd_overhead=st["fwd_overhead"] + 1)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"stages\[0\].*fwd_overhead"):
        Chain.load(path)
    with pytest.raises(ValueError):
        Chain([1.0, 1.0, 0.0], [2.0, 2.0, 1.0], [1, 1, 1, 0], [0, 2, 2, 0], [1, 1, 0], [0, 0, 0],
              o_fa=[2, 0, 0], o_fn=[0, 0, 0])


# --------------------------------------------------------------------------- simulator
def test_simulator_charges_each_mode_its_overhead():
    # x = [2, 3, 0], xbar = [0, 5, 0], o_fa = [1, 0], o_fn = [7, 0]
    chain = Chain.with_mode_overheads([1.0, 0.0], [2.0, 1.0], [2, 3, 0], [0, 5, 0], [1, 0], [7, 0], [0, 0])
    fa = simulate(chain, Schedule([F_all(0), Loss(1), Bwd(0)], 1))
    assert fa.steps[0].mem_during == 2 + 5 + 1
    ck = simulate(chain, Schedule([F_ck(0), Loss(1), F_all(0), Bwd(0)], 1))
    assert ck.steps[0].mem_during == 2 + 3 + 7
    assert ck.steps[2].mem_during == 2 + 3 + 5 + 1  # delta_1 held, then the tape and o_fa
    assert simulate(chain, Schedule([F_n(0)], 1)).steps[0].mem_during == 2 + 3 + 7


# --------------------------------------------------------------------------- rotor DP
@pytest.mark.parametrize("seed", range(12))
def test_rotor_equals_brute_force_with_mode_overheads(seed):
    L = 1 + seed % 4
    chain = mode_chain(L, seed, size_range=(1, 6), integer_times=True)
    pairs = brute_force(chain)
    lo = min(p for p, _ in pairs)
    assert rotor_min_budget(chain) == lo
    assert simulate(chain, min_memory_schedule(chain)).peak_memory == lo
    hi = reference_peak(chain)
    tables = [rotor_table(chain, hi, use_numba=u) for u in (True, False)]
    assert np.array_equal(tables[0].C, tables[1].C)
    for budget in range(int(chain.x[0]), hi + 1):
        best = min((t for p, t in pairs if p <= budget), default=math.inf)
        assert tables[1].optimum(budget) == pytest.approx(best) if math.isfinite(best) else \
            not math.isfinite(tables[1].optimum(budget))
        res = solve_rotor(chain, budget, slots=0)
        if math.isfinite(best):
            assert res.status == "optimal" and res.objective == pytest.approx(best)
            sim = simulate(chain, res.schedule, budget)
            assert sim.valid and sim.makespan == pytest.approx(best)
        else:
            assert res.status == "infeasible"


@pytest.mark.skipif(not rotor_mod.HAVE_NUMBA, reason="numba not installed")
def test_kernels_agree_on_a_longer_mode_chain():
    chain = mode_chain(15, 3)
    a, b = rotor_table(chain, 150, use_numba=True), rotor_table(chain, 150, use_numba=False)
    assert np.array_equal(a.C, b.C)
    mins = []
    for kernel in (rotor_mod._min_memory_numba, rotor_mod._min_memory_numpy):
        Mm, ch = np.zeros((16, 16), dtype=np.int64), np.full((16, 16), -2, dtype=np.int64)
        kernel(*rotor_mod._arrays(chain), Mm, ch)
        mins.append(np.triu(Mm))
    assert np.array_equal(mins[0], mins[1])


def test_per_mode_overheads_never_cost_and_sometimes_save():
    """Charging each mode its own overhead instead of the larger one for both: the smallest
    budget never rises, and falls on some of these chains."""
    saved = 0
    for seed in range(20):
        chain = mode_chain(8, seed)
        merged = Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, chain.o_b)
        assert rotor_min_budget(chain) <= rotor_min_budget(merged)
        saved += rotor_min_budget(chain) < rotor_min_budget(merged)
    assert saved > 0


# --------------------------------------------------------------------------- exact <= DP
@pytest.mark.parametrize("modes, seed", [("overheads", s) for s in range(4)] + [("times", s) for s in range(3)])
@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_exact_at_most_rotor_with_per_mode_values(modes, seed, solver):
    """Exact <= rotor, replayed, on chains with per-mode forward overheads (o_fa != o_fn) or
    per-mode forward times (u_fa != u_fn)."""
    make = mode_chain if modes == "overheads" else time_chain
    chain = make(5, seed, size_range=(1, 8), integer_times=True)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    for budget in (lo, (lo + hi) // 2):
        rotor = solve("chain", chain, "rotor", budget, slots=0)
        exact = solve("chain", chain, solver, budget, slots=0, time_limit=20)
        assert exact.status == "optimal"
        sim = simulate(chain, exact.schedule, budget)
        assert sim.valid and sim.makespan == pytest.approx(exact.objective)
        assert exact.objective <= rotor.objective + 1e-9


def test_without_mode_values_an_in_place_change_of_o_f_is_charged():
    chain = Chain.homogeneous(3, x=2, xbar=3)
    chain.o_f[:3] = 5
    assert list(chain.o_fa[:3]) == list(chain.o_fn[:3]) == [5, 5, 5]
    loaded = Chain.from_dict(chain.to_dict())
    loaded.o_f[0] = 7
    sim = simulate(loaded, Schedule([F_ck(0)], 3))
    assert sim.steps[0].mem_during == 2 + 2 + 7


# --------------------------------------------------------------------------- per-mode forward times
def time_chain(L: int, seed: int, *, overheads: bool = True, **kw) -> Chain:
    """A random chain whose no-grad forward time u_fn is drawn below F_all's u_fa (integers, so
    sums are exact), with per-mode overheads too when `overheads`."""
    base = mode_chain(L, seed, **kw) if overheads else random_chain(L, seed, overhead=1.0, **kw)
    rng = np.random.default_rng(2000 + seed)
    u_fa = np.append(np.round(base.u_f[:L]) + 1, 0.0)
    u_fn = np.append(np.floor(rng.uniform(0.0, 1.0, L) * u_fa[:L]), 0.0)
    return base.with_mode_times(u_fa, u_fn)


def test_time_fields_default_round_trip_and_keep_old_files(tmp_path):
    old = random_chain(4, 0, overhead=1.0)
    assert old.u_fa is old.u_f and old.u_fn is old.u_f and not old.has_mode_times()
    assert "fwd_time_all" not in old.to_dict()["stages"][0]
    chain = time_chain(4, 0)
    assert chain.has_mode_times() and np.array_equal(chain.u_f, np.maximum(chain.u_fa, chain.u_fn))
    path = tmp_path / "c.json"
    chain.save(path)
    back = Chain.load(path)
    for name in ("u_f", "u_fa", "u_fn", "u_b", "o_fa", "o_fn"):
        assert np.array_equal(getattr(back, name), getattr(chain, name)), name
    assert back.discretised(3.0).has_mode_times() and np.array_equal(back.discretised(3.0).u_fn, chain.u_fn)
    assert not back.is_homogeneous() or back.length == 1
    # one per-mode field alone: the other is fwd_time
    data = old.to_dict()
    data["stages"][1]["fwd_time_nograd"] = data["stages"][1]["fwd_time"] / 2
    path.write_text(json.dumps(data))
    one = Chain.load(path)
    assert one.u_fa[1] == old.u_f[1] == one.u_f[1] and one.u_fn[1] == old.u_f[1] / 2
    # a stage that states both equal to fwd_time: the same table, bit for bit, as the old file
    same = old.to_dict()
    for st in same["stages"]:
        st.update(fwd_time_all=st["fwd_time"], fwd_time_nograd=st["fwd_time"])
    explicit = Chain.from_dict(same)
    hi = reference_peak(old)
    assert np.array_equal(rotor_table(explicit, hi).C, rotor_table(old, hi).C)
    assert explicit.total_time() == old.total_time()


@pytest.mark.parametrize("change, field", [
    (lambda st: st.update(fwd_time=st["fwd_time"] + 1), "fwd_time"),  # not the max of the modes
    (lambda st: st.update(fwd_time_all=st["fwd_time"] * 2), "fwd_time"),  # a mode above fwd_time
    (lambda st: st.update(fwd_time_nograd=-1.0), "fwd_time_nograd"),
    (lambda st: st.update(fwd_time_all="1"), "fwd_time_all"),
])
def test_bad_time_fields_exit_2_with_one_line(tmp_path, change, field):
    from memsched.experiments.cli import main

    data = time_chain(3, 1).to_dict()
    change(data["stages"][2])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        Chain.load(path)
    message = str(err.value)
    assert str(path) in message and "stages[2]" in message and field in message and "\n" not in message
    out, errs = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(errs):
        try:
            code = main(["solve", str(path), "--budget", "90%"])
        except SystemExit as exc:
            code = exc.code
    lines = [line for line in errs.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "bad.json" in lines[0] and field in lines[0]
    with pytest.raises(ValueError):
        Chain([1.0, 0.0], [2.0, 1.0], [1, 1, 0], [0, 2, 0], [0, 0], [0, 0], u_fa=[2.0, 0.0], u_fn=[1.0, 0.0])


def test_simulator_charges_each_mode_its_time():
    chain = Chain([3.0, 0.0], [2.0, 1.0], [2, 3, 0], [0, 5, 0], [0, 0], [0, 0], u_fa=[3.0, 0.0], u_fn=[1.0, 0.0])
    ck = simulate(chain, Schedule([F_ck(0), Loss(1), F_all(0), Bwd(0)], 1))
    assert [s.end - s.start for s in ck.steps] == [1.0, 1.0, 3.0, 2.0] and ck.makespan == 7.0
    assert simulate(chain, Schedule([F_n(0)], 1)).steps[0].end == 1.0
    assert chain.total_time() == 3.0 + 2.0 + 1.0  # store-all: one F_all per stage


@pytest.mark.parametrize("seed", range(12))
def test_rotor_equals_brute_force_with_mode_times(seed):
    L = 1 + seed % 4
    chain = time_chain(L, seed, overheads=seed % 2 == 0, size_range=(1, 6), integer_times=True)
    assert chain.has_mode_times()
    pairs = brute_force(chain)
    hi = reference_peak(chain)
    kernels = ["numpy"] + ["numba"] * rotor_mod.HAVE_NUMBA + ["c"] * (rotor_mod.kernel_backend(None) == "c")
    tables = [rotor_table(chain, hi, kernel=k) for k in kernels]
    for t in tables[1:]:
        assert np.array_equal(t.C, tables[0].C)
    for budget in range(int(chain.x[0]), hi + 1):
        best = min((t for p, t in pairs if p <= budget), default=math.inf)
        got = tables[0].optimum(budget)
        assert got == pytest.approx(best) if math.isfinite(best) else not math.isfinite(got)
        res = solve_rotor(chain, budget, slots=0)
        if math.isfinite(best):
            assert res.status == "optimal" and res.objective == pytest.approx(best)
            sim = simulate(chain, res.schedule, budget)
            assert sim.valid and sim.makespan == pytest.approx(best)


def test_cheaper_no_grad_forwards_change_the_choice():
    """Charging u_fn < u_fa instead of u_f for every forward: the optimum never rises, is
    strictly lower on some budgets, and the DP's schedule there replays at its new value."""
    lower = 0
    for seed in range(6):
        chain = time_chain(6, seed, integer_times=True)
        merged = Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, chain.o_b, o_fa=chain.o_fa,
                       o_fn=chain.o_fn)
        hi = reference_peak(chain)
        t, m = rotor_table(chain, hi), rotor_table(merged, hi)
        for budget in range(rotor_min_budget(chain), hi + 1):
            assert t.optimum(budget) <= m.optimum(budget)
            lower += t.optimum(budget) < m.optimum(budget)
    assert lower > 0

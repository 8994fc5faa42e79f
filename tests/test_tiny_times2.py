"""Times of 1e-12 units, second part (see tests/test_tiny_times.py): the offload simulator's memory sweep,
the join A* search's cap, the chain phase model's warm start, root LP, bound and claim check, and the
offload exact models' agreement check compare times relatively, with no absolute floor of 1e-9 (or
1e-12) units. Each test solves or replays the same instance at times x1 and x1e-12 and asks for the
same answer (relative `RTOL`)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import memsched.api as api

pytest.importorskip("ortools")

#: relative slack between answers at the two scales (float sums)
RTOL = 1e-9
TINY = 1e-12

CHAIN = {"format": "memsched.chain/1", "name": "c", "input_size": 4, "stages": [
    {"fwd_time": 3, "bwd_time": 2, "out_size": 4, "tape_size": 8, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 1, "bwd_time": 1, "out_size": 2, "tape_size": 6, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 2, "bwd_time": 1, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 5, "bwd_time": 1, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0}],
    "loss": {"bwd_time": 1, "bwd_overhead": 0}, "meta": {"units": {"time": "s", "memory": "bytes"}}}


def _scaled(data: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copy of instance `data` with every ``*_time`` field multiplied by `factor`."""
    out = copy.deepcopy(data)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key.endswith("_time"):
                    node[key] = value * factor
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def _load(tmp_path: Path, data: dict[str, Any], factor: float, **kw: Any) -> Any:
    """Instance `data` with times x`factor`, written under `tmp_path` and loaded (`api.load` options `kw`)."""
    path = tmp_path / f"inst{factor:g}.json"
    path.write_text(json.dumps(_scaled(data, factor)))
    return api.load(str(path), **kw)


def _saved(obj: Any, tmp_path: Path) -> dict[str, Any]:
    """`obj` (a Chain or Join) as its JSON dict."""
    path = tmp_path / "saved.json"
    obj.save(str(path))
    return dict(json.loads(path.read_text()), meta={"units": {"time": "s", "memory": "bytes"}})


def _offload(tmp_path: Path, data: dict[str, Any], factor: float, bandwidth: float = 1.0) -> Any:
    """Chain `data` as an offloading instance, times x`factor` and the link (`bandwidth` B/s) sped up as much."""
    return _load(tmp_path, data, factor, problem="offload", bandwidth=bandwidth / factor)


# ------------------------------------------------------------------ offload simulator


def test_offload_simulator_sweeps_tiny_times_as_finely_as_seconds(tmp_path: Path) -> None:
    """Events 1e-12 units apart are not one time class: the same schedule has the same peak at both scales."""
    from memsched.solvers.chain.generate import random_chain
    from memsched.solvers.offload.schedule import OffloadSchedule
    from memsched.solvers.offload.simulator import simulate

    data = _saved(random_chain(5, 0), tmp_path)
    unit, tiny = _offload(tmp_path, data, 1.0, 2.0), _offload(tmp_path, data, TINY, 2.0)
    schedule = api.solve(unit, "80%", "pofo").raw.schedule  # peak 42 (40 in one merged time class)
    assert schedule is not None and schedule.transfers()
    pins = None if schedule.not_before is None else [None if t is None else t * TINY for t in schedule.not_before]
    one, small = simulate(unit, schedule), simulate(tiny, OffloadSchedule(schedule.ops, schedule.length, pins))
    assert one.valid and small.valid
    assert small.peak_memory == one.peak_memory
    assert small.makespan == pytest.approx(one.makespan * TINY, rel=RTOL)


def test_offload_exact_disagreeing_with_the_simulator_is_not_optimal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator charging half the model's makespan is a disagreement at any scale: never ``optimal``.
    (exact-combined's check is the same, but at times below 1 unit its model proves nothing here.)"""
    from memsched.solvers import registry
    from memsched.solvers.offload import exact_free as mod

    real = mod.simulate

    def half(*args: Any, **kw: Any) -> Any:
        sim = real(*args, **kw)
        return SimpleNamespace(valid=sim.valid, violation=sim.violation, makespan=sim.makespan * 0.5,
                               peak_memory=sim.peak_memory, host_peak=sim.host_peak)

    monkeypatch.setattr(mod, "simulate", half)
    res = registry.solve("offload", _offload(tmp_path, CHAIN, TINY), "offload-exact", 24, time_limit=10,
                         warm_start=False)
    assert res.status != "optimal", (res.status, res.objective, res.message)


# ------------------------------------------------------------------ join A*


def test_join_exact_tiny_times_beats_the_dp_as_at_unit_times(tmp_path: Path) -> None:
    """The seed's makespan caps the search relatively: at 1e-12 units the search still finds the faster
    interleaved schedule (tests/test_join_dp.py, test_interleaving_beats_the_sequential_classes)."""
    from memsched.solvers.join.generate import random_join

    join = random_join([3, 1], 34, size_range=(1, 5), integer_times=False, overhead=0.0, loss_overhead=0)
    data = _saved(join, tmp_path)
    for factor in (1.0, TINY):
        inst = _load(tmp_path, data, factor)
        dp, exact = api.solve(inst, 37, "dp"), api.solve(inst, 37, "exact", time_limit=20)
        assert dp.makespan is not None and exact.makespan is not None and exact.status == "optimal"
        assert exact.makespan < dp.makespan * (1 - 1e-6), (factor, exact.makespan, dp.makespan, exact.raw.message)


# ------------------------------------------------------------------ chain phase model


def _phase_model(chain: Any, budget: int) -> tuple[Any, Any, int]:
    from memsched.solvers.chain.exact_model import PhaseModel, discretise

    dchain, M = discretise(chain, budget, 0)
    return PhaseModel.build(dchain, M), dchain, M


def test_chain_phase_hint_takes_the_faster_dp_on_tiny_times(tmp_path: Path) -> None:
    from memsched.solvers.chain import cpsat
    from memsched.solvers.exact.options import Deadline

    chain = _load(tmp_path, CHAIN, TINY)
    seed = api.solve(chain, 26, "periodic").raw  # 21e-12 units; the DP's 18e-12
    model, _, _ = _phase_model(chain, 26)
    values, fits, source = cpsat.phase_hint(model, seed, Deadline(10))
    assert fits and values is not None and source == cpsat.DP_HINT
    assert model.objective.value(values) == pytest.approx(18 * TINY, rel=RTOL)


def test_chain_root_lp_is_the_same_at_tiny_times(tmp_path: Path) -> None:
    """GLOP gets a rescaled objective: its value at 1e-12 units is the unit LP's x1e-12 (it was 0.6% above)."""
    from memsched.solvers.chain.generate import random_chain
    from memsched.solvers.chain.phase_cuts import separate_tape_cuts
    from memsched.solvers.exact.options import Deadline

    data = _saved(random_chain(10, 0), tmp_path)
    reports = []
    for factor in (1.0, TINY):
        model, _, _ = _phase_model(_load(tmp_path, data, factor), 60)
        reports.append(separate_tape_cuts(model, Deadline(20), incumbent=70.0 * factor))
    one, tiny = reports
    assert one.lp_before is not None and tiny.lp_before is not None and one.lp_after is not None
    assert tiny.lp_before == pytest.approx(one.lp_before * TINY, rel=1e-6)
    assert tiny.rounds == one.rounds > 0  # the rounds are not skipped as "within min_gap of 70e-12"
    assert tiny.lp_after == pytest.approx(one.lp_after * TINY, rel=1e-6)


def _answer(chain: Any, budget: int, lp_bound: float | None) -> Any:
    """`phase_answer` for the DP's warm start of `chain` at `budget`, as if the backend found nothing."""
    from memsched.solvers.chain import cpsat
    from memsched.solvers.exact.options import Deadline
    from memsched.solvers.result import FEASIBLE, SolveResult

    model, dchain, M = _phase_model(chain, budget)
    values, fits, _ = cpsat.phase_hint(model, None, Deadline(10))
    assert fits and values is not None
    run = SimpleNamespace(status=FEASIBLE, bound=None, log=[], backend_status="FEASIBLE")

    def result(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="chain", solver="cpsat", status=status, budget=budget, scope="",
                           details=kw.pop("details", {}), **kw)

    return cpsat.phase_answer(result, model, run, None, values, True, dchain, M, Deadline(10), {},
                              lp_bound=lp_bound)


def test_chain_phase_answer_keeps_a_tiny_lp_bound(tmp_path: Path) -> None:
    chain = _load(tmp_path, CHAIN, TINY)
    res = _answer(chain, 26, lp_bound=17 * TINY)
    assert res.objective == pytest.approx(18 * TINY, rel=RTOL)
    assert res.lower_bound == pytest.approx(17 * TINY, rel=1e-6), res.lower_bound
    assert res.details["bound_from"] == "root LP with tape cuts"


def test_chain_phase_answer_claim_check_is_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsched.solvers.chain import cpsat

    real = cpsat.simulate

    def slow(*args: Any, **kw: Any) -> Any:
        sim = real(*args, **kw)
        return SimpleNamespace(raise_if_invalid=lambda: SimpleNamespace(makespan=sim.makespan * 1.5))

    monkeypatch.setattr(cpsat, "simulate", slow)
    with pytest.raises(RuntimeError, match="phase model claims"):
        _answer(_load(tmp_path, CHAIN, TINY), 26, lp_bound=None)


def test_same_or_less_with_an_open_cap() -> None:
    """An infinite cap is no makespan within a tolerance of every finite one (A* stopped at once and
    said infeasible when no fast solver seeded it)."""
    from memsched.solvers.exact.layer import same_or_less

    inf = float("inf")
    assert not same_or_less(inf, 18.0) and same_or_less(18.0, inf) and same_or_less(inf, inf)


def test_join_exact_without_a_seed_searches(tmp_path: Path) -> None:
    """Join `exact` with warm_start=False (no seed, an open cap) proves the optimum instead of 'infeasible'."""
    tiny = str(Path(__file__).resolve().parents[1] / "solvers" / "data" / "join" / "tiny.json")
    res = api.solve(tiny, 20, "exact", warm_start=False, time_limit=20)
    assert res.status == "optimal" and res.makespan is not None
    dp = api.solve(tiny, 20, "dp")
    assert dp.makespan is not None and res.makespan <= dp.makespan * (1 + 1e-9)

"""In-flight micro-batches of a batch smaller than the pipeline (hunt): under 1F1B stage s of S holds
min(S - s, m) micro-batches, not S - s, and interleaved allocations reach S = 2P stages above the
m >= P micro-batches the solvers accept. The simulator charges that, `interleave-dp`, `interleave-v` and
`interleave-cpsat` optimise for it (a brute force over every cut and device map replayed by the
simulator is the referee), and a ``device_of`` index past the devices given is named as such."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from conftest import interleave_chain, run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, Pipeline, simulate
from memsched.solvers.pipeline.interleave import solve_interleave_cpsat, solve_interleave_v
from memsched.solvers.pipeline.interleave_dp import solve_interleave_dp
from memsched.solvers.result import INFEASIBLE, OPTIMAL

P = 2


def expected_in_flight(S: int, schedule: str, m: int | None) -> list[int]:
    """Micro-batches stage s of S holds in one batch of m (None: an endless stream) under `schedule`."""
    if schedule == "gpipe":
        return [int(m or 0)] * S
    return [S - s if m is None else min(S - s, m) for s in range(S)]


def allocations(L: int, smax: int):
    """Every cut of L layers into <= smax contiguous stages with every map of its stages to P devices."""
    for S in range(1, min(L, smax) + 1):
        for cuts in itertools.combinations(range(1, L), S - 1):
            edges = (0, *cuts, L)
            bounds = [(edges[k], edges[k + 1] - 1) for k in range(S)]
            for dev in itertools.product(range(P), repeat=S):
                yield bounds, list(dev)


def straight_or_v(dev: list[int]) -> bool:
    """Whether a device map is in `interleave-v`'s scope: a straight pipeline (stage k on device k) or
    a V shape (2P stages, device k holding stages k and 2P-1-k)."""
    S = len(dev)
    return dev == list(range(S)) or (S == 2 * P and dev == [min(s, 2 * P - 1 - s) for s in range(S)])


def brute_force(inst: Pipeline, budget: int | None, schedule: str, m: int | None, *, v_only: bool = False
                ) -> float:
    """Smallest simulated period (time unit) over `allocations` (`straight_or_v` ones with `v_only`)
    fitting `budget` (inf when none does), checking on the way that the simulator charges
    `expected_in_flight`."""
    best = math.inf
    for bounds, dev in allocations(inst.length, 2 * P):
        if v_only and not straight_or_v(dev):
            continue
        part = Partition.from_bounds(bounds, schedule=schedule, micro_batches=m, devices=P)
        part.device_of = dev
        ev = simulate(inst, part, budget, devices=P)
        assert ev.in_flight == expected_in_flight(len(bounds), schedule, m), (bounds, dev)
        if ev.violation is None:
            best = min(best, ev.period)
    return best


def peaks(inst: Pipeline, schedule: str, m: int | None) -> list[int]:
    """The sorted peaks (bytes per device) of every allocation: budgets between them make memory bind."""
    out = set()
    for bounds, dev in allocations(inst.length, 2 * P):
        part = Partition.from_bounds(bounds, schedule=schedule, micro_batches=m, devices=P)
        part.device_of = dev
        out.add(simulate(inst, part, None, devices=P).peak_memory)
    return sorted(out)


def assert_optimum(res, best: float, name: str) -> None:
    """`res` (a solver's answer) is the brute-force optimum `best`: optimal with that period, or
    infeasible when nothing fits."""
    if math.isinf(best):
        assert res.status == INFEASIBLE, (name, res.status, res.objective)
    else:
        assert res.status == OPTIMAL, (name, res.status, res.message)
        assert res.objective == pytest.approx(best, rel=1e-9), name


CASES = [(seed, L, schedule, m) for seed in (0, 1, 2) for L in (3, 4, 5)
         for schedule, ms in (("1f1b", (2, 3, None)), ("gpipe", (1, 2, 3))) for m in ms]


@pytest.mark.parametrize(("seed", "L", "schedule", "m"), CASES)
def test_interleave_solvers_equal_brute_force(seed: int, L: int, schedule: str, m: int | None) -> None:
    inst = interleave_chain(seed, L)
    levels = peaks(inst, schedule, m)
    # the least peak (only it fits) and peaks up to the middle, where memory binds
    budgets = sorted({levels[len(levels) * k // 16] for k in range(9)})
    for budget in budgets:
        best = brute_force(inst, budget, schedule, m)
        kw = {"devices": P, "schedule": schedule, "micro_batches": m}
        assert_optimum(solve_interleave_dp(inst, budget, **kw), best, "interleave-dp")
        assert_optimum(solve_interleave_cpsat(inst, budget, warm_start=False, time_limit=60, **kw), best,
                       "interleave-cpsat")
        assert_optimum(solve_interleave_v(inst, budget, **kw), brute_force(inst, budget, schedule, m, v_only=True),
                       "interleave-v")


def test_one_micro_batch_under_1f1b_is_refused_for_two_devices() -> None:
    inst = interleave_chain(0, 4)
    for solver in (solve_interleave_dp, solve_interleave_v):
        with pytest.raises(InputError, match="micro-batches as devices") as err:
            solver(inst, None, devices=P, micro_batches=1)
        assert err.value.field == "micro_batches"


def test_in_flight_never_above_the_batch() -> None:
    inst = interleave_chain(0, 6)
    bounds = [(0, 0), (1, 1), (2, 3), (4, 5)]
    for m, want in ((2, [2, 2, 2, 1]), (3, [3, 3, 2, 1]), (None, [4, 3, 2, 1])):
        part = Partition.from_bounds(bounds, micro_batches=m, devices=P)
        part.device_of = [1, 0, 1, 0]
        assert simulate(inst, part, None, devices=P).in_flight == want
    gpipe = Partition.from_bounds(bounds, schedule="gpipe", micro_batches=2, devices=P)
    gpipe.device_of = [1, 0, 1, 0]
    one_f = Partition.from_bounds(bounds, micro_batches=2, devices=P)
    one_f.device_of = [1, 0, 1, 0]
    # 1F1B never holds more than GPipe, which keeps the whole batch
    assert all(a <= b for a, b in zip(simulate(inst, one_f).in_flight, simulate(inst, gpipe).in_flight))
    # straight and replicated pipelines with m >= P: unchanged, D_s / r_s
    straight = Partition.from_bounds([(0, 1), (2, 3), (4, 5)], micro_batches=3, devices=3)
    assert simulate(inst, straight).in_flight == [3, 2, 1]
    replicated = Partition.from_bounds([(0, 2, 2), (3, 5, 1)], micro_batches=3, devices=3)
    assert simulate(inst, replicated).in_flight == [2, 1]


def test_hunt_chain_finds_the_allocation_that_fits() -> None:
    """il0 of the hunt (seed 0, 6 layers, 2 devices, 2 micro-batches, 835000 bytes): both exact solvers
    answered 54 ms "optimal" charging 4, 3, 2, 1 in flight; stages [0] [1] [2-3] [4-5] on devices
    1, 0, 1, 0 hold 2, 2, 2, 1, fit in 830000 bytes and run at 42 ms."""
    inst = interleave_chain(0, 6)
    part = Partition.from_bounds([(0, 0), (1, 1), (2, 3), (4, 5)], micro_batches=2, devices=P)
    part.device_of = [1, 0, 1, 0]
    ev = simulate(inst, part, 835000, devices=P)
    assert ev.violation is None and ev.peak_memory == 830000 and ev.period == 42.0
    for res in (solve_interleave_dp(inst, 835000, devices=P, micro_batches=2),
                solve_interleave_cpsat(inst, 835000, devices=P, micro_batches=2, warm_start=False, time_limit=60)):
        assert res.status == OPTIMAL and res.objective == pytest.approx(42.0)
        assert simulate(inst, res.schedule, 835000, devices=P).violation is None


def test_device_index_past_the_devices_is_named(tmp_path) -> None:
    inst = interleave_chain(0, 4)
    part = Partition.from_bounds([(0, 0), (1, 1), (2, 2), (3, 3)], devices=P)
    part.device_of = [0, 2, 0, 2]
    ev = simulate(inst, part, None, devices=P)
    assert ev.violation == "device_of[1] = 2 is out of range 0..1 (2 devices given)"
    part.device_of = [0, 1, 0, 1]
    assert simulate(inst, part, None, devices=P).violation is None
    # three devices named, two given: a true count excess keeps its count
    part.device_of = [0, 2, 1, 2]
    assert simulate(inst, part, None, devices=P).violation == "the partition uses 3 devices, only 2 available"
    # a straight partition on too many devices keeps its count
    over = Partition.from_bounds([(0, 0), (1, 1), (2, 3)], devices=P)
    assert simulate(inst, over, None, devices=P).violation == "the partition uses 3 devices, only 2 available"
    # the command line: one line, exit 2, naming the entry
    chain = {"format": "memsched.chain/1", "name": "c", "input_size": 5000,
             "stages": [{"name": f"l{i}", "fwd_time": float(inst.fwd[i]), "bwd_time": float(inst.bwd[i]),
                         "out_size": int(inst.act[i]), "tape_size": int(inst.act[i]), "fwd_overhead": 0,
                         "bwd_overhead": 0} for i in range(4)],
             "loss": {"bwd_time": 0.0, "bwd_overhead": 0}, "meta": {"param_sizes": [int(p) for p in inst.params]}}
    sched = {"format": "memsched.partition/1", "schedule": "1f1b", "micro_batches": None, "devices": P,
             "stages": [{"first_layer": k, "last_layer": k, "replicas": 1} for k in range(4)],
             "device_of": [0, 2, 0, 2]}
    (tmp_path / "c.json").write_text(json.dumps(chain))
    (tmp_path / "p.json").write_text(json.dumps(sched))
    res = run_cli("simulate", str(tmp_path / "c.json"), str(tmp_path / "p.json"))
    assert res.code == 2
    assert "device_of[1] = 2 is out of range 0..1" in res.err and "uses 3 devices" not in res.err

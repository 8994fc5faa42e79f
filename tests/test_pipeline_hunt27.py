"""Hunt 27, pipelines: many more devices than layers, and DagNet layer kinds.

1. The pipeline solvers ran far past the size guard and ``--time-limit`` with many more devices
   than layers: the contiguous DP looped over every d <= P (straight pipelines never use more
   than L devices), `dag` ran that DP as its seed without its deadline, `interleave-cpsat` made
   one variable per position and device, and the guard (layers^2 x devices) ignored the P^2 of
   replication. The device dimension now stops where provably nothing changes
   (`dp.useful_devices`, `interleave.model_devices`); the answers are those of the uncapped DPs
   (checked here against brute force; old and new outputs were also compared on random cases).
2. `dag_runner.check_spec` accepted a layer kind other than "block" / "add", and a bare
   KeyError '0' followed.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.pipeline import Partition, Pipeline, dag_dp, simulate
from memsched.solvers.pipeline.dp import partition_dp, solve_madpipe
from memsched.solvers.pipeline.generate import random_pipeline
from memsched.solvers.result import FEASIBLE, OPTIMAL


def three_layers() -> Pipeline:
    """The repro's chain c3.json (times in its unit, sizes in bytes)."""
    return Pipeline(fwd=np.array([1.0, 3.0, 3.0]), bwd=np.array([2.0, 4.0, 2.0]), act=np.array([1000, 100, 1000]),
                    params=np.array([1000, 10000, 0]), input_size=100, name="c3")


class Counting(Deadline):
    """A deadline that never expires and counts its checks."""

    def __init__(self) -> None:
        super().__init__(None)
        self.checks = 0

    def check(self) -> None:
        self.checks += 1


def brute_force(inst: Pipeline, P: int, budget: int | None, *, replication: bool, schedule: str,
                m: int | None, memory: bool = False) -> float:
    """The least period (or peak memory) over every contiguous partition on <= P devices,
    replica counts tried exhaustively, each charged by the simulator."""
    L, best = inst.length, math.inf
    for cuts in itertools.product([False, True], repeat=L - 1):
        ends = [k for k, c in enumerate(cuts) if c] + [L - 1]
        bounds = list(zip([0] + [e + 1 for e in ends[:-1]], ends))
        S = len(bounds)
        if S > P:
            continue
        choices = range(1, P - S + 2) if replication else (1,)
        for reps in itertools.product(choices, repeat=S):
            if sum(reps) > P:
                continue
            part = Partition.from_bounds([(a, b, r) for (a, b), r in zip(bounds, reps)], schedule=schedule,
                                         micro_batches=m, devices=P)
            ev = simulate(inst, part, None if memory else budget, devices=P)
            if ev.violation is None:
                best = min(best, float(ev.peak_memory) if memory else ev.period)
    return best


# ---------------------------------------------------------------------------- 1. devices >> layers
def test_useful_devices_are_the_proven_caps():
    from memsched.solvers.pipeline.dp import useful_devices

    assert useful_devices(3, 10**6) == 3 and useful_devices(40, 8) == 8  # straight: one device per stage
    assert useful_devices(3, 10**6, replication=True) == 10**6  # more replicas keep lowering the period
    assert useful_devices(3, 10**6, replication=True, objective="memory") == 4  # 1F1B: 2^(L-1)
    assert useful_devices(3, 10**6, replication=True, objective="memory", schedule="gpipe", micro_batches=5) == 15
    assert useful_devices(200, 10**6, replication=True, objective="memory") == 10**6


@pytest.mark.parametrize("seed", range(6))
def test_capped_dp_equals_brute_force(seed: int):
    """madpipe's period and least memory equal brute force over every partition and replica
    count, devices well past the layers included (the caps change no answer)."""
    rng = np.random.default_rng(seed)
    for _ in range(6):
        L = int(rng.integers(1, 5))
        inst = random_pipeline(rng, L, bandwidth=None if rng.random() < 0.5 else float(rng.uniform(5, 50)))
        rep = bool(rng.random() < 0.5)
        P = int(rng.integers(1, 6 if rep else 12))
        schedule = "gpipe" if rng.random() < 0.3 else "1f1b"
        m = int(rng.integers(1, 4)) if schedule == "gpipe" else None
        least = brute_force(inst, P, None, replication=rep, schedule=schedule, m=m, memory=True)
        found = partition_dp(inst, P, None, schedule=schedule, micro_batches=m, replication=rep, objective="memory")
        assert found is not None and found[0] == pytest.approx(least)
        budget = int(least * rng.uniform(1.0, 2.0))
        want = brute_force(inst, P, budget, replication=rep, schedule=schedule, m=m)
        res = solve_madpipe(inst, budget, devices=P, schedule=schedule, micro_batches=m, replication=rep)
        assert res.status == OPTIMAL and res.objective == pytest.approx(want), (L, P, rep, schedule)


def test_straight_dp_does_not_walk_every_device():
    """3 layers on 10^6 devices: one deadline check per numpy step, at most L x L steps (every d
    <= P before), and the answer of 3 devices."""
    inst = three_layers()
    clock = Counting()
    found = partition_dp(inst, 10**6, 10**9, deadline=clock)
    assert found == partition_dp(inst, 3, 10**9)
    assert 0 < clock.checks <= 9
    res = solve_madpipe(inst, 10**9, devices=10**6)
    assert res.status == OPTIMAL and res.schedule is not None and res.schedule.devices == 10**6
    assert res.objective == solve_madpipe(inst, 10**9, devices=3).objective


def test_replicated_dp_stops_at_its_deadline():
    expired = Deadline(0.0)
    with pytest.raises(DeadlineExceeded):
        partition_dp(three_layers(), 10**4, 10**9, replication=True, deadline=expired)


def test_dag_gives_its_deadline_to_the_contiguous_dp(monkeypatch: pytest.MonkeyPatch):
    """`dag` runs the contiguous DP first (its bound and fallback): with the time limit, and past
    it (replicated, O(L^2 P^2)) the straight DP's partition is the answer."""
    seen: list[Any] = []
    real = dag_dp.partition_dp

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw.get("deadline"))
        return real(*args, **kw)

    monkeypatch.setattr(dag_dp, "partition_dp", spy)
    inst = three_layers()
    res = dag_dp.solve_dag(inst, 10**9, devices=50, time_limit=60)
    assert res.status == OPTIMAL and seen and seen[0] is not None
    seen.clear()
    stopped = dag_dp.solve_dag(inst, 10**9, devices=50, replication=True, time_limit=0)
    assert stopped.status == FEASIBLE and "time limit" in stopped.message
    assert stopped.schedule is not None and all(s.replicas == 1 for s in stopped.schedule.stages)
    assert seen[0] is not None and seen[-1] is None  # the straight fallback runs to its end


def test_dag_dp_caps_straight_devices_with_the_same_answer():
    inst = three_layers()
    lat = dag_dp.lattice_for(inst, None)
    for budget in (None, 10**9, 70_000):
        assert dag_dp.dag_partition_dp(inst, lat, 10**5, budget) == dag_dp.dag_partition_dp(inst, lat, 3, budget)
    assert dag_dp.solve_dag(inst, 10**9, devices=2 * 10**5, time_limit=60).status == OPTIMAL


def test_interleave_cpsat_models_at_most_one_device_per_stage():
    """Devices are interchangeable and an allocation of T stages uses at most T: the model has
    min(P, T) devices (one variable per position and device of all P before) and the same optimum
    as interleave-dp on P devices."""
    pytest.importorskip("ortools")
    from memsched.solvers.pipeline.interleave import solve_interleave_cpsat
    from memsched.solvers.pipeline.interleave_dp import solve_interleave_dp

    rng = np.random.default_rng(7)
    inst = random_pipeline(rng, 4)
    free = partition_dp(inst, 5, None, objective="memory")
    assert free is not None
    budget = int(free[0] * 1.3)
    res = solve_interleave_cpsat(inst, budget, devices=60, warm_start=False, time_limit=60)
    assert res.status == OPTIMAL and res.schedule is not None and res.schedule.devices == 60
    T = 4  # min(L, 2P) stages
    assert res.details["variables"] < 3 * 60 * T  # devices beyond the T a plan can use are not modelled
    ref = solve_interleave_dp(inst, budget, devices=60)
    assert ref.status == OPTIMAL and res.objective == pytest.approx(ref.objective)
    from memsched.solvers.pipeline.interleave import model_devices

    assert model_devices(10**6, 3) == 3 and model_devices(2, 6) == 2


def test_work_guard_counts_devices_squared_with_replication():
    from memsched.experiments.commands._checks import MAX_DP_STEPS, check_work, work_limit

    assert work_limit("pipeline", "madpipe", 10**4) == 215  # straight: layers^3 <= 1e7 once devices >= layers
    assert work_limit("pipeline", "madpipe", 10**4, replication=True) == 0
    assert work_limit("pipeline", "dag", 31, replication=True) == math.isqrt(MAX_DP_STEPS // 31**2)
    inst = three_layers()
    check_work("pipeline", "madpipe", inst, devices=10**4)  # straight: L^2 P passes
    check_work("pipeline", "madpipe", inst, devices=1000, replication=True)  # 9e6 steps
    with pytest.raises(InputError) as err:
        check_work("pipeline", "madpipe", inst, devices=10**4, replication=True)
    text = str(err.value)
    assert err.value.field == "--devices" and "--replication" in text and "\n" not in text
    assert "at most 1054" in text


# ---------------------------------------------------------------------------- 2. DagNet layer kinds
def test_dagnet_spec_with_an_unknown_kind_is_refused(monkeypatch: pytest.MonkeyPatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    from memsched.models.pipeline import dag_runner

    def spawn(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a rank process was spawned for a spec the runner must refuse first")

    monkeypatch.setattr(dag_runner, "run_ranks", spawn)
    spec = [("conv", [-1]), ("block", [0])]
    with pytest.raises(InputError) as err:
        dag_runner.check_spec(spec)
    assert err.value.field == "spec[0]" and "'conv'" in str(err.value)
    with pytest.raises(InputError) as err:
        dag_runner.profile_dag(dag_runner.DagNet(spec, width=4, in_dim=4, out_dim=2), torch.randn(2, 4), reps=1)
    assert err.value.field == "spec[0]"
    part = Partition.from_bounds([(0, 1)], schedule="gpipe", micro_batches=1)
    with pytest.raises(InputError) as err:
        dag_runner.run_dag_partition(part, spec, width=4, in_dim=4, out_dim=2, batch=2, micro_batches=1, steps=1,
                                     timeout_s=30)
    assert err.value.field == "spec[0]"
    with pytest.raises(InputError) as err:
        dag_runner.check_spec([("block", [-1]), ("ADD", [0])])
    assert err.value.field == "spec[1]"
    with pytest.raises(InputError) as err:
        dag_runner.check_spec([("relu", [-1])], kinds=("block", "add"))
    assert err.value.field == "spec[0]"
    dag_runner.check_spec(dag_runner.residual_spec(2))


def test_zoo_node_names_stay_free():
    pytest.importorskip("torch")
    from memsched.models.pipeline import dag_runner
    from memsched.models.pipeline.dag_zoo import resnet_dag

    net = resnet_dag(18, width=4, depth=1)
    dag_runner.check_spec(net.spec)  # "stem.conv", "add_relu", ...: names, not DagNet kinds


def test_a_dagnet_without_block_or_add_is_refused_when_profiled():
    """A `DagNet` spec using none of its kinds ([("conv", [-1])]) is refused by `profile_dag`, which
    knows the net is a DagNet (check_spec's vocabulary rule alone cannot tell it from a zoo DAG)."""
    torch = pytest.importorskip("torch")
    from memsched.models.pipeline import dag_runner

    with pytest.raises(InputError) as err:
        dag_runner.profile_dag(dag_runner.DagNet([("conv", [-1])], width=4, in_dim=4, out_dim=2),
                               torch.randn(2, 4), reps=1)
    assert err.value.field == "spec[0]"


def test_partition_command_and_sweeps_count_replication_in_the_guard(cli):
    """`memsched partition --replication` and a sweep entry with ``replication = true`` are held to
    layers^2 x devices^2 DP steps (the replicated DPs try every replica count)."""
    from memsched.experiments.sweep.config import SolverSpec, size_error

    import memsched

    path = memsched.data_path("examples", "tiny.json")
    code, _, err = cli("partition", str(path), "--devices", "10000", "--memory", "1GB", "--replication")
    assert code == 2 and "--devices" in err and "replication" in err, err
    def spec(**options: Any) -> SolverSpec:
        return SolverSpec(index=0, name="madpipe", label="madpipe", slots=500, time_limit=None, options=options)

    assert "replication" in (size_error("pipeline", 3, spec(devices=10**4, replication=True), "x") or "")
    assert size_error("pipeline", 3, spec(devices=10**4), "x") is None


def test_the_work_guard_counts_the_devices_a_straight_pipeline_can_use(cli):
    """A straight pipeline of L layers uses at most L devices and the DPs stop there, so a million
    devices on mlp7 (7 layers) is 7^3 DP steps, not 7^2 x 10^6: answered, not refused."""
    from memsched.experiments.commands._checks import MAX_DP_STEPS, dp_steps, work_limit

    import memsched

    assert dp_steps(7, 10**6) == 7**3 and dp_steps(7, 3) == 7 * 7 * 3
    most = work_limit("pipeline", "madpipe", 10**6)
    assert dp_steps(most, 10**6) <= MAX_DP_STEPS < dp_steps(most + 1, 10**6)
    path = memsched.data_path("pipeline", "mlp7.chain.json")
    code, _, err = cli("partition", str(path), "--devices", "1000000", "--memory", "50%", "--solver", "madpipe")
    assert code in (0, 1) and "DP steps" not in err, err

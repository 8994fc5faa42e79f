"""Offloading: the two-stream simulator by hand, its agreement with the chain simulator,
every rejection, the strategies, and the command line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss
from memsched.solvers.errors import InputError
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.baselines import offload_schedule
from memsched.solvers.offload.schedule import Off, Pre, Transfer


def _three_stages(bandwidth: float) -> OffloadInstance:
    # u_f = 1, u_b = 2 (ms), x = 1000 B, xbar = 2000 B: a tape crosses a 1e6 B/s link in 2 ms
    return OffloadInstance(Chain.homogeneous(3, u_f=1, u_b=2, x=1000, xbar=2000), bandwidth)


def test_transfer_overlaps_compute_by_hand():
    inst = _three_stages(1e6)
    schedule = offload_schedule(3, {0}, lookahead=1)
    assert str(schedule) == "F_all(0) F_all(1) Off(abar_1) F_all(2) Loss B(2) Pre(abar_1) B(1) B(0)"
    sim = simulate_offload(inst, schedule)
    assert sim.valid
    times = {str(t.op): (t.start, t.end) for t in sim.ops}
    assert times["Off(abar_1)"] == (1.0, 3.0)
    assert times["Pre(abar_1)"] == (3.0, 5.0)
    assert times["B(1)"] == (5.0, 7.0)
    assert sim.makespan == pytest.approx(9.0)  # fully hidden behind compute
    assert sim.peak_memory == 9000 and sim.host_peak == 2000


def test_slow_link_delays_backward_by_hand():
    inst = _three_stages(1e5)  # 20 ms per tape
    sim = simulate_offload(inst, offload_schedule(3, {0}, lookahead=1))
    times = {str(t.op): (t.start, t.end) for t in sim.ops}
    assert times["Off(abar_1)"] == (1.0, 21.0)
    assert times["Pre(abar_1)"] == (21.0, 41.0)
    assert sim.makespan == pytest.approx(45.0)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 10), seed=st.integers(0, 5000))
def test_without_transfers_matches_chain_simulator(L, seed):
    chain = random_chain(L, seed, overhead=0.5)
    inst = OffloadInstance(chain, 1e9)
    for schedule in (store_all_schedule(L), recompute_all_schedule(L), periodic_schedule(L, max(1, L // 2))):
        a, b = simulate(chain, schedule), simulate_offload(inst, OffloadSchedule.from_chain(schedule))
        assert b.valid and a.peak_memory == b.peak_memory and a.makespan == pytest.approx(b.makespan)


@settings(max_examples=30, deadline=None)
@given(L=st.integers(2, 10), seed=st.integers(0, 5000), k=st.integers(0, 9), d=st.integers(1, 3),
       bandwidth=st.sampled_from([1e4, 1e6, 1e9]))
def test_prefix_schedules_are_valid_and_never_faster_than_compute(L, seed, k, d, bandwidth):
    chain = random_chain(L, seed)
    inst = OffloadInstance(chain, bandwidth)
    sim = simulate_offload(inst, offload_schedule(L, set(range(min(k, L - 1))), d))
    assert sim.valid
    assert sim.makespan >= chain.total_time() - 1e-9
    assert sim.peak_memory <= simulate(chain, store_all_schedule(L)).peak_memory


@pytest.mark.parametrize(
    "ops, position, reason",
    [
        ([Off("abar", 1)], 0, "abar_1 is not on the device"),
        ([F_all(0), Pre("abar", 1)], 1, "abar_1 is not on the host"),
        ([F_all(0), Off("abar", 1), F_all(1)], 2, "a_1 is not on the device"),
        ([F_ck(0), Off("a", 1), Pre("a", 1), Pre("a", 1)], 3, "a_1 is already on the device"),
        ([F_all(0), F_all(1), F_all(2), Loss(3), Off("abar", 3), Bwd(2)], 5, "abar_3 is not on the device"),
    ],
)
def test_rejections(ops, position, reason):
    sim = simulate_offload(_three_stages(1e6), OffloadSchedule(ops, 3))
    assert not sim.valid and sim.violation.position == position and reason in sim.violation.reason


def test_memory_violation_names_the_op():
    inst = _three_stages(1e6)
    sim = simulate_offload(inst, offload_schedule(3, {0}, lookahead=1), budget=8999)
    assert "memory over budget" in sim.violation.reason


@pytest.mark.parametrize("fraction", [1.0, 0.8, 0.65])
def test_strategies_replay_and_fit(fraction):
    chain = random_chain(14, 5, size_range=(10**6, 8 * 10**6))
    inst = OffloadInstance(chain, 12e9)
    budget = int(simulate(chain, store_all_schedule(14)).peak_memory * fraction)
    for name in ("none", "vdnn", "offload-prefix"):
        result = registry.solve("offload", inst, name, budget)
        if result.schedule is not None:
            assert result.peak_memory <= budget and result.objective >= chain.total_time() - 1e-9
        else:
            assert result.status == "infeasible" and result.min_budget > budget
    assert registry.solve("offload", inst, "offload-prefix", budget).status == "feasible"


def test_more_bandwidth_never_hurts_vdnn():
    chain = random_chain(12, 2, size_range=(10**6, 8 * 10**6))
    spans = [simulate_offload(OffloadInstance(chain, bw), offload_schedule(12, set(range(11)), 1)).makespan
             for bw in (1e9, 12e9, 25e9, 50e9)]
    assert spans == sorted(spans, reverse=True)


def test_file_with_host_link(tmp_path):
    chain = random_chain(5, 1)
    OffloadInstance(chain, 25e9, 1e-5).save(tmp_path / "c.json")
    inst = OffloadInstance.load(tmp_path / "c.json")
    assert inst.bandwidth == 25e9 and inst.latency == 1e-5
    assert Chain.load(tmp_path / "c.json").length == 5  # still a valid chain file
    data = json.loads((tmp_path / "c.json").read_text())
    data["host_link"]["bandwidth"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="bad.json.*bandwidth"):
        OffloadInstance.load(tmp_path / "bad.json")


def test_cli_round_trip(cli, examples, tmp_path):
    path = examples / "random30.json"
    res = cli("solve", path, "--budget", "60%", "--solver", "offload-prefix", "--bandwidth", "12GB/s", "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["problem"] == "offload" and out["peak_memory"] <= out["budget"]
    (tmp_path / "s.json").write_text(res.out)
    sim = cli("simulate", path, tmp_path / "s.json", "--bandwidth", "12GB/s", "--json").json()
    assert sim["valid"] and sim["makespan"] == pytest.approx(out["makespan"])
    res = cli("solve", path, "--budget", "60%", "--solver", "vdnn")
    assert res.code == 2 and "bandwidth" in res.err


@settings(max_examples=15, deadline=None)
@given(L=st.integers(2, 12), seed=st.integers(0, 5000), fraction=st.sampled_from([0.4, 0.6, 0.9]),
       bandwidth=st.sampled_from([1e8, 12e9]))
def test_rotor_offload_never_worse_than_checkpointing_alone(L, seed, fraction, bandwidth):
    chain = random_chain(L, seed, size_range=(10**6, 8 * 10**6))
    inst = OffloadInstance(chain, bandwidth)
    budget = int(simulate(chain, store_all_schedule(L)).peak_memory * fraction)
    remat = registry.solve("offload", inst, "remat-only", budget, slots=100)
    both = registry.solve("offload", inst, "rotor-offload", budget, slots=100)
    if remat.schedule is not None:
        assert both.schedule is not None and both.objective <= remat.objective + 1e-9
    if both.schedule is not None:
        assert both.peak_memory <= budget


@settings(max_examples=12, deadline=None)
@given(L=st.integers(2, 5), seed=st.integers(0, 5000), fraction=st.sampled_from([0.6, 0.75, 0.9]),
       bandwidth=st.sampled_from([500.0, 1000.0, 4000.0]))
def test_cpsat_is_exact_for_its_class(L, seed, fraction, bandwidth):
    """With integer times and sizes (transfer times whole ms), the CP-SAT optimum is at most
    every heuristic of its class (store-all compute order) and replays to the model's value."""
    chain = random_chain(L, seed, integer_times=True, size_range=(1, 6))
    inst = OffloadInstance(chain, bandwidth)  # bytes/s; times in ms: a 1-byte value moves in 1000/bw ms
    budget = int(simulate(chain, store_all_schedule(L)).peak_memory * fraction)
    exact = registry.solve("offload", inst, "cpsat", budget, slots=0, time_limit=20)
    assert exact.status in ("optimal", "feasible", "infeasible")
    if exact.status == "feasible":  # a faster schedule of a fast solver outside the model's scope
        assert exact.details["solution_from"] in ("pofo", "offload-prefix", "vdnn", "none")
    for name in ("none", "vdnn", "offload-prefix", "pofo", "remat-only", "rotor-offload"):
        other = registry.solve("offload", inst, name, budget)
        if other.schedule is not None:
            assert exact.schedule is not None
            assert exact.objective <= other.objective + 1e-9
    if exact.status == "optimal" and "solution_from" not in exact.details:
        assert exact.objective == pytest.approx(exact.details["model_makespan"])
        assert exact.details["model_bound"] == pytest.approx(exact.objective)
        assert exact.peak_memory <= budget
    if exact.lower_bound is not None:  # a bound of the problem: below every schedule, recomputing ones too
        for name in ("remat-only", "pofo", "rotor-offload"):
            other = registry.solve("offload", inst, name, budget)
            if other.schedule is not None:
                assert exact.lower_bound <= other.objective + 1e-9


def test_cpsat_schedule_replays_under_float_times(examples):
    """Regression: real-valued times and a discretised memory; the pinned timing must replay
    within the budget (float noise at equal instants once broke the release-first rule)."""
    chain = Chain.load(examples / "cnn12.json")
    inst = OffloadInstance(chain, 12e9)
    budget = int(simulate(chain, store_all_schedule(chain.length)).peak_memory * 0.7)
    result = registry.solve("offload", inst, "cpsat", budget, slots=200, time_limit=5)
    if result.schedule is not None:  # registry.solve raised if the simulator had rejected it
        assert result.peak_memory <= budget
        if "solution_from" not in result.details:  # the model's own schedule (not a better fast one)
            assert result.objective == pytest.approx(result.details["model_makespan"], rel=1e-6)


def test_prefetch_waits_for_a_release_by_compute():
    # rule 4: Pre(a_1) after F_n(1) freed the device copy of a_1 starts when F_n(1) ends,
    # not when it starts (the host copy exists already: the first Off left it)
    inst = _three_stages(1e6)
    ops = [F_ck(0), Off("a", 1), Pre("a", 1), F_n(1), Pre("a", 1), F_all(1), F_all(2), Loss(3),
           Bwd(2), Bwd(1), F_all(0), Bwd(0)]
    sim = simulate_offload(inst, OffloadSchedule(ops, 3))
    assert sim.valid, sim.violation
    f_n = next(t for t in sim.ops if t.op == F_n(1))
    second_pre = [t for t in sim.ops if t.op == Pre("a", 1)][1]
    assert second_pre.start >= f_n.end


def test_host_link_file_is_offloading_for_every_solver_name(cli, tmp_path):
    chain = random_chain(5, 3, integer_times=True, size_range=(1, 6))
    OffloadInstance(chain, 2000.0).save(tmp_path / "c.json")
    for solver in ("cpsat", "offload-prefix"):
        res = cli("solve", tmp_path / "c.json", "--budget", "90%", "--solver", solver, "--slots", "0",
                  "--time-limit", "5", "--json")
        assert res.code == 0, res.err
        assert res.json()["problem"] == "offload"
    res = cli("solve", tmp_path / "c.json", "--budget", "90%", "--solver", "rotor")
    assert res.code == 2 and "rotor" in res.err  # a chain-only solver name is bad input for an offloading file


def _frees(op, present: set) -> list:
    """What a compute op releases from the device (the chain rules, issue order only)."""
    kind, i = op
    if kind in ("F_n", "Loss"):
        return [("a", i)] if ("a", i) in present else []
    if kind == "B":
        return [("abar", i + 1)] + ([("a", i)] if ("a", i) in present else [])
    return []


@settings(max_examples=60, deadline=None)
@given(L=st.integers(2, 6), seed=st.integers(0, 10**6), period=st.integers(1, 3))
def test_rule_4_holds_on_random_schedules(L, seed, period):
    """Random Off / Pre inserted into checkpoint schedules; an independent check of rule 4: a
    Pre(v) starts after the end of every earlier Off(v) and of every earlier compute op that
    freed a device copy of v."""
    import random

    rng = random.Random(seed)
    chain = random_chain(L, seed % 97, integer_times=True, size_range=(1, 5))
    inst = OffloadInstance(chain, rng.choice([500.0, 2000.0]))
    base = list(periodic_schedule(L, min(period, L)).ops) if rng.random() < 0.7 else list(recompute_all_schedule(L).ops)
    ops, present, host = [], {("a", 0)}, set()
    for op in base:
        if rng.random() < 0.5 and present:  # offload something on the device
            v = rng.choice(sorted(present))
            ops.append(Off(*v))
            present.discard(v)
            host.add(v)
        if rng.random() < 0.6 and host - present:  # bring something back
            v = rng.choice(sorted(host - present))
            ops.append(Pre(*v))
            present.add(v)
        ops.append(op)
        kind, i = op
        i = L if kind == "Loss" else i
        for v in _frees((kind, i), present):
            present.discard(v)
        if kind == "F_all":
            present.add(("abar", i + 1))
        elif kind in ("F_ck", "F_n"):
            present.add(("a", i + 1))
    sim = simulate_offload(inst, OffloadSchedule(ops, L))
    if not sim.valid:
        return  # a random insertion broke a logical rule (e.g. a value not on the device when read)
    present = {("a", 0)}
    released: dict = {}
    for t in sim.ops:
        if isinstance(t.op, Transfer):
            v = (t.op.value, t.op.index)
            if t.op.kind == "Pre":
                assert t.start >= released.get(v, 0.0) - 1e-9, (str(t.op), t.start, released.get(v))
                present.add(v)
            else:
                released[v] = max(released.get(v, 0.0), t.end)
                present.discard(v)
            continue
        kind, i = t.op
        i = L if kind == "Loss" else i
        for v in _frees((kind, i), present):
            released[v] = max(released.get(v, 0.0), t.end)
            present.discard(v)
        if kind == "F_all":
            present.add(("abar", i + 1))
        elif kind in ("F_ck", "F_n"):
            present.add(("a", i + 1))

"""The offloading executor: real transfers, plain autograd's gradients, the simulator's memory.

Memory allowance (CPU): the executor measures with the profiler's live-tensor tracker and runs
one op after the other, every transfer complete at its issue. Its peak may not exceed either
the two-stream simulator's prediction or `sequential_replay` (the simulator with each op
starting after the previous one ended) by more than `ALLOWANCE` (1% + 4 KiB, as in
test_models_executor.py), and is at least 85% of the sequential one (it is equal on the tiny
ResNet; on GPT-2 the profile charges F_all the no-grad forward's larger ``fwd_overhead``).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import compare_gradients, reference_step  # noqa: E402
from memsched.models.chain.overheads import tracker_chain  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.measure import tolerances  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor, execute_offload, sequential_replay  # noqa: E402
from memsched.models.run import run  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.chain import reference_peak  # noqa: E402
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, Loss  # noqa: E402
from memsched.solvers.offload import OffloadInstance, OffloadSchedule  # noqa: E402
from memsched.solvers.offload import simulate as simulate_offload  # noqa: E402
from memsched.solvers.offload.combined import add_transfers  # noqa: E402
from memsched.solvers.offload.schedule import Off, Pre  # noqa: E402

torch.set_num_threads(1)

BANDWIDTH = 1e9  # bytes/s: transfers of the tiny tapes take ~0.02 ms, compute ops ~0.1-1 ms
TINY = {
    "resnet18": dict(batch=2, image_size=32, width=4, depth=1),
    "gpt2": dict(batch=2, seq_len=8, width=16, depth=3, vocab=32),  # dropout 0.1, integer input
}
SOLVERS = ("vdnn", "offload-prefix", "rotor-offload", "cpsat")
_CACHE: dict[str, tuple] = {}


def ALLOWANCE(predicted: int) -> float:
    return 1.01 * predicted + 4096


def _setup(name):
    """(model, offloading instance), profiled once per model."""
    if name not in _CACHE:
        model = build_model(name, **TINY[name])
        chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1,
                              warmup=0, name=name)
        _CACHE[name] = (model, OffloadInstance(chain, BANDWIDTH))
    return _CACHE[name]


def _check(model, inst, schedules, *, seed=3):
    """Every schedule: valid, gradients of plain autograd, memory within the allowances."""
    _, ref, ref_input = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=seed)
    executor = OffloadExecutor(model.blocks, model.loss_fn)
    results = []
    for schedule in schedules:
        assert simulate_offload(inst, schedule).valid
        result = executor.step(schedule, model.example_input, model.target, inst=inst, seed=seed,
                               measure_time=False)
        ok, msg = compare_gradients(result.grads, ref)
        assert ok, f"{schedule}: {msg}"
        if ref_input is not None:
            assert torch.allclose(result.input_grad, ref_input, rtol=1e-4, atol=1e-6), str(schedule)
        # the tracker against the predictions under the tracker's overheads (models.chain.overheads)
        assert result.peak_memory <= ALLOWANCE(result.tracker_predicted_peak or result.predicted_peak), str(schedule)
        sequential = result.tracker_sequential_peak or result.sequential_peak
        assert result.peak_memory <= ALLOWANCE(sequential), str(schedule)
        assert result.peak_memory >= 0.85 * sequential, str(schedule)
        assert result.memory_method == "LiveTensorTracker"
        results.append(result)
    return results


@pytest.mark.parametrize("name", sorted(TINY))
def test_solver_schedules_match_autograd_and_memory(name):
    model, inst = _setup(name)
    ref = reference_peak(inst.chain)
    schedules = []
    for solver in SOLVERS:
        found = 0
        for frac in (1.0, 0.9, 0.75, 0.6):
            res = registry.solve("offload", inst, solver, int(frac * ref), time_limit=3)
            if res.found:
                found += 1
                schedules.append(res.schedule)
        assert found, f"{solver} found no schedule for {name}"
    assert sum(len(s.transfers()) for s in schedules) > 0
    results = _check(model, inst, schedules)
    assert all(r.transfers == len(s.transfers()) for r, s in zip(results, schedules))


@pytest.mark.parametrize("name", sorted(TINY))
def test_offloaded_tapes_leave_the_tracked_pool(name):
    model, inst = _setup(name)
    chain = inst.chain
    L = chain.length
    vdnn = registry.solve("offload", inst, "vdnn", reference_peak(chain)).schedule
    executor = OffloadExecutor(model.blocks, model.loss_fn)
    base = executor.step(store_all_schedule(L).ops, model.example_input, model.target, inst=inst,
                         measure_time=False)
    step = executor.step(vdnn, model.example_input, model.target, inst=inst, measure_time=False, trace=True)
    assert step.peak_memory < base.peak_memory
    before = 0
    moved = 0
    for t in step.trace:  # each transfer moves exactly the profiled tape size out of / into the pool
        if t.op.startswith(("Off", "Pre")):
            j = int(t.op.split("_")[1].rstrip(")"))
            expected = int(chain.xbar[j]) * (-1 if t.op.startswith("Off") else 1)
            assert t.measured_after - before == expected, t
            moved += 1
        before = t.measured_after
    assert moved == len(vdnn.transfers()) > 0


@pytest.mark.parametrize("name", sorted(TINY))
def test_activation_transfers_and_repeated_tape_transfers(name):
    model, inst = _setup(name)
    L = inst.length
    ops = [F_ck(0), Off("a", 0), F_all(1), Off("a", 1)]
    ops += [F_all(i) for i in range(2, L)]
    ops += [Off("abar", 2), Pre("abar", 2), Off("abar", 2), Loss(L)]  # the second Off reuses the host copy
    ops += [Bwd(i) for i in range(L - 1, 2, -1)]
    ops += [Pre("abar", 2), Bwd(2), Pre("a", 1), Bwd(1), Pre("a", 0), F_all(0), Bwd(0)]
    schedule = OffloadSchedule(ops, L)
    sim = simulate_offload(inst, schedule)
    assert sim.valid, sim.violation
    (result,) = _check(model, inst, [schedule])
    assert result.predicted_host_peak > 0


@pytest.mark.parametrize("name", sorted(TINY))
def test_recomputation_schedules_with_transfers_everywhere(name):
    # every idle gap of a checkpointing schedule gets an Off/Pre pair: a_j and abar_j both
    # travel, recomputed stages (dropout in gpt2) read prefetched values
    model, inst = _setup(name)
    L = inst.length
    schedules = [add_transfers(inst, s, min_ratio=0.0)
                 for s in (recompute_all_schedule(L), periodic_schedule(L, 2), store_all_schedule(L))]
    assert all(any(t.value == "a" for t in s.transfers()) for s in schedules[:2])
    _check(model, inst, schedules)


def _resident_bytes_after_each_op(inst, schedule):
    """Bytes of the values on the device after each op (a_j: x[j], abar_j: xbar[j], delta_j:
    x[j]), following the simulator's rules; overheads are gone once an op has ended."""
    chain = inst.chain
    L = chain.length
    size = {"a": chain.x, "abar": chain.xbar, "d": chain.x}
    live = {("a", 0)}
    out = []
    for op in schedule:
        if hasattr(op, "value"):  # a transfer
            (live.discard if op.kind == "Off" else live.add)((op.value, op.index))
        else:
            kind, i = op
            if kind == "F_all":
                live.add(("abar", i + 1))
            elif kind in ("F_ck", "F_n"):
                live.add(("a", i + 1))
                if kind == "F_n":
                    live.discard(("a", i))
            elif kind == "Loss":
                live -= {("a", L)}
                live.add(("d", L))
            else:
                live -= {("abar", i + 1), ("d", i + 1), ("a", i)}
                live.add(("d", i))
        out.append(sum(int(size[k][j]) for k, j in live))
    return out


def test_resident_memory_after_each_op_is_exact_on_resnet():
    # after every op (transfers included) the pool holds exactly the values the simulator says
    # are on the device: an offloaded value leaves it, a freed one is not kept by its host copy
    model, inst = _setup("resnet18")
    L = inst.length
    ops = [F_ck(0), Off("a", 0), F_all(1), Off("a", 1)] + [F_all(i) for i in range(2, L)]
    ops += [Off("abar", 2), Pre("abar", 2), Off("abar", 2), Loss(L)] + [Bwd(i) for i in range(L - 1, 2, -1)]
    ops += [Pre("abar", 2), Bwd(2), Pre("a", 1), Bwd(1), Pre("a", 0), F_all(0), Bwd(0)]
    schedules = [OffloadSchedule(ops, L), registry.solve("offload", inst, "vdnn", reference_peak(inst.chain)).schedule]
    schedules += [add_transfers(inst, s, min_ratio=0.0) for s in (recompute_all_schedule(L), periodic_schedule(L, 2))]
    executor = OffloadExecutor(model.blocks, model.loss_fn)
    for schedule in schedules:
        result = executor.step(schedule, model.example_input, model.target, inst=inst, trace=True,
                               measure_time=False)
        expected = _resident_bytes_after_each_op(inst, schedule)
        assert [t.measured_after for t in result.trace] == expected, str(schedule)


def test_sequential_replay_is_the_cpu_measurement_on_resnet():
    model, inst = _setup("resnet18")
    res = registry.solve("offload", inst, "vdnn", reference_peak(inst.chain))
    result, ok = execute_offload(model.blocks, model.loss_fn, res.schedule, model.example_input, model.target,
                                 inst=inst, measure_time=False)
    assert ok
    # the tracker against the replay under the tracker's overheads (models.chain.overheads)
    assert result.peak_memory == sequential_replay(tracker_instance(inst), res.schedule).peak_memory
    assert result.peak_memory == result.tracker_sequential_peak
    assert result.sequential_peak <= result.predicted_peak


def test_invalid_schedules_and_wrong_chains_are_refused():
    model, inst = _setup("gpt2")
    L = inst.length
    executor = OffloadExecutor(model.blocks, model.loss_fn)
    bad = OffloadSchedule([F_all(0), Pre("abar", 1)] + [F_all(i) for i in range(1, L)], L)
    with pytest.raises(ValueError, match="invalid"):
        executor.step(bad, model.example_input, model.target, inst=inst)
    other = build_model("gpt2", **{**TINY["gpt2"], "depth": 2})
    with pytest.raises(ValueError):
        OffloadExecutor(other.blocks, other.loss_fn).step(store_all_schedule(L).ops, other.example_input,
                                                          other.target, inst=inst)


def test_time_is_measured_and_chain_schedules_run():
    model, inst = _setup("gpt2")
    L = inst.length
    result, ok = execute_offload(model.blocks, model.loss_fn, OffloadSchedule.from_chain(periodic_schedule(L, 2)),
                                 model.example_input, model.target, inst=inst, time_repeats=1)
    assert ok and result.time_ms > 0 and result.predicted_makespan > 0 and result.transfers == 0


def test_run_offload_reports_measured_vs_predicted():
    sizes = {**TINY["gpt2"], "device": torch.device("cpu"), "seed": 0}  # as `memsched run` builds them
    out = run("gpt2", "100%", problem="offload", bandwidth="1GB/s", solver="vdnn", sizes=sizes, time_repeats=1,
              profile_repeats=1)
    json.dumps(out)  # plain JSON types only
    for key in ("model", "budget", "solver", "predicted", "measured", "grad_check", "device"):
        assert key in out
    assert out["grad_check"] is True and out["device"] == "cpu" and out["status"] == "feasible"
    assert out["transfers"] > 0 and out["bandwidth"] == 1e9
    assert out["measured"]["peak_memory"] < out["store_all"]["measured"]["peak_memory"]
    assert out["measured"]["peak_memory"] <= ALLOWANCE(out["predicted"]["peak_memory"])
    assert out["measured"]["time"] > 0 and out["predicted"]["makespan"] > 0
    model, inst = _setup("gpt2")
    low = run(model, 1000, problem="offload", bandwidth=BANDWIDTH, solver="vdnn", instance=inst.chain)
    assert low["status"] == "infeasible" and low["predicted"] is None and low["min_budget"] > 1000
    json.dumps(low)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_side_stream_offloading():
    name = "resnet18"
    model = build_model(name, **TINY[name], device="cuda")
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1, warmup=0)
    inst = OffloadInstance(chain, 12e9)
    L = chain.length
    vdnn = registry.solve("offload", inst, "vdnn", reference_peak(chain)).schedule
    mixed = add_transfers(inst, periodic_schedule(L, 2), min_ratio=0.0)
    _, ref, ref_input = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=1)
    executor = OffloadExecutor(model.blocks, model.loss_fn)
    base = executor.step(store_all_schedule(L).ops, model.example_input, model.target, inst=inst, seed=1,
                         time_repeats=1)
    rtol, atol = tolerances(model.example_input.device)
    for schedule in (vdnn, mixed):
        result = executor.step(schedule, model.example_input, model.target, inst=inst, seed=1, time_repeats=1)
        ok, msg = compare_gradients(result.grads, ref, rtol=rtol, atol=atol)
        assert ok, msg
        assert torch.allclose(result.input_grad, ref_input, rtol=rtol, atol=atol)
        assert result.memory_method == "torch.cuda.max_memory_allocated" and result.time_ms > 0
    vd = executor.step(vdnn, model.example_input, model.target, inst=inst, seed=1, measure_time=False)
    assert vd.peak_memory < base.peak_memory


def tracker_instance(inst):
    """`inst` with the tracker's overheads (`models.chain.overheads.tracker_chain`): what the tracker measures."""
    return OffloadInstance(tracker_chain(inst.chain), inst.bandwidth, inst.latency)

"""Ties in the simulators' rules (docs/offload.md rules 1 and 6, docs/pipeline.md's partition format).

1. A zero-length ``Off`` (the host already holds a copy of its value) starts at its own time, after the ops issued
   before it: at a time where an op issued before it starts too, that op allocates first, then the Off releases
   (rule 6: only the releases of ops that started earlier come before the allocations). The simulator used to
   release such an Off before every allocation at its time, under-counting the peak (and so sequential_replay's
   peak could exceed the two-stream one). Checked on the hunt's repro and on random schedules with repeated Offs
   against a recomputation of the peak from the rules' sweep order.
2. A GPipe partition with ``"micro_batches": null`` takes the documented default m = 4P where it is read, the one
   the solvers (and ``memsched partition``) use, through ``memsched simulate`` and the Python API.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from memsched.models.offload.executor import sequential_replay
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import Bwd, F_all, Loss
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, simulate
from memsched.solvers.offload.schedule import Off, Pre, Transfer
from memsched.solvers.pipeline import load as load_pipeline
from memsched.solvers.pipeline import schedule_from_json
from memsched.solvers.pipeline import simulate as simulate_pipeline

import memsched

ROOT = Path(__file__).resolve().parents[1]
MLP7 = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"


# --------------------------------------------------------------------------- 1. zero-length Off at a shared time
def _repro() -> tuple[OffloadInstance, list]:
    c = Chain(u_f=[1.0, 0], u_b=[1.0, 1.0], x=[1, 2, 0], xbar=[0, 2, 0], o_f=[0, 0], o_b=[0, 5])
    inst = OffloadInstance(c, bandwidth=1000.0)  # 1 byte per ms
    return inst, [Off("a", 0), Pre("a", 0), F_all(0), Loss(1), Off("a", 0), Pre("a", 0), Bwd(0)]


def test_zero_length_off_releases_after_the_op_issued_before_it_allocates():
    inst, ops = _repro()
    sim = simulate(inst, OffloadSchedule(ops, 1, [None] * 5 + [20.0, None]), budget=9)
    timed = {(str(t.op), k): (t.start, t.end) for k, t in enumerate(sim.ops)}
    assert timed[("Loss", 3)] == (3.0, 4.0) and timed[("Off(a_0)", 4)] == (3.0, 3.0)
    # at t=3: F_all(0) has ended (releases nothing), the Loss allocates 7 over a_0 (1) + abar_1 (2): 10,
    # then the Off, issued after it and of no time, frees a_0
    assert sim.peak_memory == 10
    assert not sim.valid and sim.violation.position == 3 and "10 > 9" in sim.violation.reason
    assert simulate(inst, OffloadSchedule(ops, 1, [None] * 5 + [20.0, None]), budget=10).valid
    assert sequential_replay(inst, ops).peak_memory <= sim.peak_memory


def test_a_zero_length_off_issued_first_still_frees_before_the_next_allocation():
    """Issue order decides: the same Off issued before the Loss frees a_0 before the Loss allocates (peak 9)."""
    inst, ops = _repro()
    ops = [Off("a", 0), Pre("a", 0), F_all(0), Off("a", 0), Loss(1), Pre("a", 0), Bwd(0)]
    sim = simulate(inst, OffloadSchedule(ops, 1, [None] * 5 + [20.0, None]), budget=9)
    assert sim.valid and sim.peak_memory == 9


def _needs(op, dev: set) -> list:
    """Values op (a store-all compute op) reads, in the simulator's choice of container."""
    kind, i = op
    act = [("a", i)] if ("a", i) in dev else [("abar", i)]
    if kind == "B":
        return [("abar", i + 1), ("d", i + 1)] + act
    return act


def _random_case(rng: random.Random):
    """A store-all chain of integer times and sizes with random Off/Pre pairs between its compute ops (a value
    offloaded again after its Pre: a zero-length Off) and random integer pins: (instance, ops, pins)."""
    L = rng.randint(1, 3)
    x = [rng.randint(0, 4) for _ in range(L + 1)] + [0]  # arrays with the loss's entries, as the repro's
    c = Chain(u_f=[rng.randint(0, 2) for _ in range(L)] + [0], u_b=[rng.randint(0, 2) for _ in range(L + 1)],
              x=x, xbar=[0] + [x[j] + rng.randint(0, 3) for j in range(1, L + 1)] + [0],
              o_f=[rng.randint(0, 3) for _ in range(L)] + [0], o_b=[rng.randint(0, 6) for _ in range(L + 1)])
    inst = OffloadInstance(c, bandwidth=rng.choice([1000.0, 500.0]))  # 1 or 2 ms per byte
    compute = [F_all(i) for i in range(L)] + [Loss(L)] + [Bwd(i) for i in reversed(range(L))]
    ops: list = []
    dev, host = {("a", 0)}, set()
    for op in compute:
        for _ in range(rng.choice([0, 0, 1, 2, 3])):
            offs = sorted(v for v in dev if v[0] != "d")
            pres = sorted(host - dev)
            cands = [Off(*v) for v in offs] * 2 + [Pre(*v) for v in pres]
            if not cands:
                break
            t = rng.choice(cands)
            ops.append(t)
            (dev.discard if t.kind == "Off" else dev.add)((t.value, t.index))
            if t.kind == "Off":
                host.add((t.value, t.index))
        for v in _needs(op, dev | {w for w in host if w[0] == "a"}):
            if v not in dev:
                ops.append(Pre(*v))
                dev.add(v)
        kind, i = op
        ops.append(op)
        if kind == "F_all":
            dev.add(("abar", i + 1))
        elif kind == "Loss":
            dev.add(("d", L))
        else:
            dev -= {("abar", i + 1), ("d", i + 1), ("a", i)}
            dev.add(("d", i))
            host.discard(("abar", i + 1))
    pins = [float(rng.randint(0, 12)) if rng.random() < 0.2 else None for _ in ops]
    return inst, ops, pins


def _reference_peak(inst: OffloadInstance, ops: list, timed: list) -> int:
    """The peak by the documented sweep (rules 3 and 6), from the replay's start and end times: an allocation of
    op k at its start s sorts as (s, 1, k, 0); a release at t of an op started at s as (t, 0) when s < t, else
    (t, 1, k, 1); an Off's release comes at the later (in that order) of its own and of every earlier-issued
    reader's release."""
    c = inst.chain
    L = c.length

    def size(v) -> int:
        return int(c.xbar[v[1]]) if v[0] == "abar" else int(c.x[v[1]])

    def rkey(k: int, t: float) -> tuple:
        return (t, 0, 0, 0) if timed[k][0] < t else (t, 1, k, 1)

    events: list[tuple[tuple, int]] = []
    dev = {("a", 0)}
    readers: dict = {}  # value -> positions of the ops that read it
    for k, op in enumerate(ops):
        s, e = timed[k]
        if isinstance(op, Transfer):
            v = (op.value, op.index)
            if op.kind == "Pre":
                events.append(((s, 1, k, 0), size(v)))
                dev.add(v)
            else:
                when = max([rkey(k, e)] + [rkey(r, timed[r][1]) for r in readers.get(v, [])])
                events.append((when, -size(v)))
                dev.discard(v)
            continue
        kind, i = op
        i = L if kind == "Loss" else i
        needs = _needs((kind, i), dev)
        for v in needs:
            readers.setdefault(v, []).append(k)
        if kind == "F_all":
            out, over, freed = ("abar", i + 1), int(c.o_fa[i]), []
        else:
            out, over = ("d", i), int(c.o_b[i])
            freed = [] if kind == "Loss" else [("abar", i + 1), ("d", i + 1)] + ([("a", i)] if ("a", i) in dev else [])
        events.append(((s, 1, k, 0), size(out) + over))  # delta_i: x[i]
        events.append((rkey(k, e), -(over + sum(size(v) for v in freed))))
        dev -= set(freed)
        dev.add(out)
    mem = peak = int(c.x[0])
    for _, delta in sorted(events, key=lambda ev: ev[0]):
        mem += delta
        peak = max(peak, mem)
    return peak


def test_random_schedules_with_zero_length_offs_peak_as_the_rules_say():
    rng = random.Random(42)
    checked = zero_len = 0
    for _ in range(400):
        inst, ops, pins = _random_case(rng)
        sim = simulate(inst, OffloadSchedule(ops, inst.chain.length, pins))
        assert sim.valid, sim.violation
        timed = [(t.start, t.end) for t in sim.ops]
        zero_len += sum(1 for t in sim.ops if t.stream == "transfer" and t.op.kind == "Off" and t.start == t.end)
        ref = _reference_peak(inst, ops, timed)
        assert sim.peak_memory == ref, (ops, pins, timed)
        assert simulate(inst, OffloadSchedule(ops, inst.chain.length, pins), budget=ref).valid
        if ref > 0:
            assert not simulate(inst, OffloadSchedule(ops, inst.chain.length, pins), budget=ref - 1).valid
        checked += 1
    assert checked == 400 and zero_len > 100  # the generator does exercise zero-length Offs


# --------------------------------------------------------------------------- 2. gpipe partition, micro_batches null
def _gpipe_partition(micro_batches, devices=2) -> dict:
    part = {"format": "memsched.partition/1", "schedule": "gpipe", "micro_batches": micro_batches,
            "stages": [{"first_layer": 0, "last_layer": 2}, {"first_layer": 3, "last_layer": 6}]}
    if devices is not None:
        part["devices"] = devices
    return part


@pytest.mark.parametrize("devices", [2, 3, None])
def test_null_micro_batches_reads_as_four_per_device(devices):
    inst = load_pipeline(MLP7)
    part = schedule_from_json(_gpipe_partition(None, devices), inst)
    P = devices or 2  # without `devices`, the devices its stages use
    assert part.micro_batches == 4 * P
    explicit = simulate_pipeline(inst, schedule_from_json(_gpipe_partition(4 * P, devices), inst))
    got = simulate_pipeline(inst, part)
    assert got.violation is None and (got.peak_memory, got.period) == (explicit.peak_memory, explicit.period)
    one_f_one_b = {**_gpipe_partition(None, devices), "schedule": "1f1b"}
    assert schedule_from_json(one_f_one_b, inst).micro_batches is None  # 1F1B keeps its own (no m needed)


def test_null_micro_batches_through_the_api_and_the_command_line(tmp_path):
    solved = memsched.solve(str(MLP7), 10**8, problem="pipeline", devices=2, schedule="gpipe")
    assert solved.schedule.micro_batches == 8 and solved.schedule.bounds == [(0, 2, 1), (3, 6, 1)]
    api = memsched.simulate(str(MLP7), _gpipe_partition(None))
    assert api.status == "valid" and api.peak_memory == solved.peak_memory
    path = tmp_path / "gp.json"
    path.write_text(json.dumps(_gpipe_partition(None)))
    run = subprocess.run([sys.executable, "-m", "memsched", "simulate", str(MLP7), str(path), "--json"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["valid"] and out["peak_memory"] == solved.peak_memory
    assert [row["in_flight"] for row in out["memory_profile"]] == [8, 8]  # GPipe: all m = 8 in flight

"""Schedules on a join network and their referee, the join simulator.

A schedule is a sequence of operations; each names its branch b (0-based) and stage i
(0-based), except the shared loss: ``{"op": "F_ck", "branch": 1, "stage": 3}``, ``{"op": "Loss"}``.
The JSON form is ``{"format": "memsched.schedule/1", "problem": "join", "ops": [...]}``;
reading also accepts ``["F_ck", 1, 3]`` triples and the rotor names Fe / CF / Fn / Bwd.

Memory rules: those of the chain simulator (`solvers.chain.simulator`), branch by branch, with
one loss for all branches. Each branch b holds its own standalone activations a_j^b, tapes
abar_j^b and gradients delta_j^b; memory is the sum over branches. At the start every input
a_0^b is resident. While an operation runs it holds the state before it, plus its output,
plus its transient overhead; then it frees what it frees:

===========  ======================================  =========================  ==================
op           needs                                   output (charged)           frees after
===========  ======================================  =========================  ==================
F_all(b,i)   a_i^b                                   abar_{i+1}^b: xbar^b[i+1]  -
F_ck(b,i)    a_i^b                                   a_{i+1}^b: x^b[i+1]        -
F_n(b,i)     a_i^b                                   a_{i+1}^b: x^b[i+1]        standalone a_i^b
Loss         a_{L_b}^b for every branch b            delta_{L_b}^b for every    standalone a_{L_b}^b
                                                     b: sum_b x^b[L_b]          for every b
B(b,i)       abar_{i+1}^b, delta_{i+1}^b, a_i^b      delta_i^b: x^b[i]          abar_{i+1}^b,
                                                                                delta_{i+1}^b,
                                                                                standalone a_i^b
===========  ======================================  =========================  ==================

The transient overhead is o_fa^b[i] for F_all(b,i), o_fn^b[i] for F_ck(b,i) and F_n(b,i) (the
per-mode forward overheads of the chain; both are o_f^b[i] when the file gives none), o_b^b[i]
for B(b,i) and the join's loss_overhead for the loss. Time: u_fa^b[i] for F_all(b,i), u_fn^b[i] for
F_ck(b,i) and F_n(b,i) (per-mode forward times; both u_f^b[i] when the file gives none), u_b^b[i]
per backward, loss_time for the loss. The schedule is complete when every delta_0^b is produced;
the loss and each B(b,i) run exactly once. The first violation is reported with its position, op and reason;
memory over the budget does not stop the replay (makespan and peak memory are the whole schedule's), any
other violation ends it before the op breaking it (`solvers.chain.simulator.Simulation`).
"""

from __future__ import annotations

from typing import Any

from ..chain.schedule import F_ALL, F_CK, F_N, LOSS
from ..chain.simulator import Simulation, Step, op_cost, over_budget, profile_rows, stage_precondition
from ..units import memory_unit, size_unit_name
from .instance import Join
from .schedule import JoinSchedule, JOp


# --------------------------------------------------------------------------- simulator
def simulate(join: Join, schedule: JoinSchedule | list[JOp], budget: int | None = None) -> Simulation:
    """Replay `schedule` on `join`; memory above `budget` (when given) is a violation that does
    not stop the replay (`solvers.chain.simulator.Simulation`)."""
    ops = schedule.ops if isinstance(schedule, JoinSchedule) else list(schedule)
    k = join.k
    acts: list[set[int]] = [{0} for _ in range(k)]
    tapes: list[set[int]] = [set() for _ in range(k)]
    grads: list[set[int]] = [set() for _ in range(k)]
    done: list[set[int]] = [set() for _ in range(k)]
    loss_done = False
    mem = join.input_total()
    now = 0.0
    sim = Simulation(initial_memory=mem)
    unit = size_unit_name(memory_unit(join))  # the file's ``meta.units.memory``, named in the violations
    if budget is not None and mem > budget:
        sim.flag(0, ops[0] if ops else None, f"the inputs alone ({mem}) exceed the budget {budget} {unit}")

    for pos, op in enumerate(ops):
        kind, b, i = op
        fail = None
        if kind == LOSS:
            if loss_done:
                fail = "the loss already ran"
            else:
                for bb, c in enumerate(join.branches):
                    L = c.length
                    if L not in acts[bb] and L not in tapes[bb]:
                        fail = f"a_{L} of branch {bb} is not resident (the loss needs every branch's output)"
                        break
        elif not 0 <= b < k:
            fail = f"branch {b} outside 0..{k - 1}"
        elif not 0 <= i < join.branches[b].length:
            fail = f"stage {i} outside 0..{join.branches[b].length - 1} of branch {b}"
        else:
            fail = stage_precondition(kind, i, acts[b], tapes[b], grads[b], done[b], branch=b)
        if fail is None:
            if kind == LOSS:
                out = sum(int(c.x[c.length]) for c in join.branches)
                overhead, duration = join.loss_overhead, join.loss_time
            else:  # the branch's chain rules: F_all charged o_fa, F_ck / F_n charged o_fn
                c = join.branches[b]
                out, overhead, duration = op_cost(c, kind, i)
            during = mem + out + overhead
        if fail is not None:
            return sim.stop(pos, op, fail)
        sim.flag(pos, op, over_budget(during, budget, unit))
        mem += out
        if kind == LOSS:
            loss_done = True
            for bb, c in enumerate(join.branches):
                L = c.length
                grads[bb].add(L)
                if L in acts[bb]:
                    acts[bb].discard(L)
                    mem -= int(c.x[L])
        elif kind == F_ALL:
            tapes[b].add(i + 1)
        elif kind == F_CK:
            acts[b].add(i + 1)
        elif kind == F_N:
            acts[b].add(i + 1)
            if i in acts[b]:
                acts[b].discard(i)
                mem -= int(c.x[i])
        else:  # B
            grads[b].add(i)
            done[b].add(i)
            tapes[b].discard(i + 1)
            grads[b].discard(i + 1)
            mem -= int(c.xbar[i + 1]) + int(c.x[i + 1])
            if i in acts[b]:
                acts[b].discard(i)
                mem -= int(c.x[i])
        sim.steps.append(Step(op, now, now + duration, during, mem))
        now += duration
    missing = []
    if not loss_done:
        missing.append("Loss")
    for bb in range(k):
        if 0 not in grads[bb]:
            todo = sorted(set(range(join.branches[bb].length)) - done[bb], reverse=True)
            missing.extend(f"B({bb},{j})" for j in todo)
    if missing:
        sim.flag(len(ops), None, f"incomplete: missing {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else ""))
    return sim


def memory_profile(join: Join, schedule: JoinSchedule) -> list[dict[str, Any]]:
    """Per operation: op, start, end (time unit), memory while it runs and after it (bytes)."""
    return profile_rows(simulate(join, schedule))

"""The referee for chains: replays any schedule and charges its memory and time.

State: the standalone activations a_j, the tapes abar_j and the gradients delta_j that are
resident. Memory is the sum of their sizes (x[j], xbar[j], x[j]); a tape abar_j counts
xbar[j] and stands for a_j too, so a_j is *available* when a_j or abar_j is resident.
At the start only a_0 is resident.

While an operation runs it holds the state before it, plus its output, plus its transient
overhead (o_fa[i] for F_all(i), o_fn[i] for F_ck(i) and F_n(i), o_b[i] for B(i) and the loss;
o_fa = o_fn = o_f unless the chain file gives per-mode forward overheads); then it frees what it
frees:

===========  ===================================  ==================  =================
op           needs                                output (charged)    frees after
===========  ===================================  ==================  =================
F_all(i)     a_i                                  abar_{i+1}: xbar    -
F_ck(i)      a_i                                  a_{i+1}: x[i+1]     -
F_n(i)       a_i                                  a_{i+1}: x[i+1]     standalone a_i
Loss         a_L                                  delta_L: x[L]       standalone a_L
B(i)         abar_{i+1}, delta_{i+1}, a_i         delta_i: x[i]       abar_{i+1}, delta_{i+1},
                                                                      standalone a_i
===========  ===================================  ==================  =================

Time: u_fa[i] for F_all(i), u_fn[i] for F_ck(i) and F_n(i) (per-mode forward times; both u_f[i]
unless the chain file gives them), u_b[i] for B(i), u_b[L] for the loss.
The schedule is complete when delta_0 is produced; each B(i) and the loss run exactly once.
Memory above the budget is a violation that does not stop the replay: the first one is reported
and the replay goes on, so that makespan and peak memory are the whole schedule's; any other
violation (an op that cannot run) ends the replay before that op.
These are the charges of the persistent rotor recurrence (docs/chain.md): the memory while F_all
runs is state + xbar[i+1] + o_fa[i], while B(i) runs state + x[i] + o_b[i].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..units import memory_unit, size_unit_name
from .instance import Chain
from .schedule import F_ALL, F_CK, F_N, LOSS, B, Op, Schedule

if TYPE_CHECKING:
    from typing import TypeAlias

    from ..join.schedule import JOp
    from ..offload.schedule import Transfer

    #: an operation of any of the chain-based simulators (chain, join, offload)
    AnyOp: TypeAlias = Op | JOp | Transfer


@dataclass(frozen=True)
class Step:
    """One operation as replayed: times in the chain's unit, memory in its size unit.
    (`op` is an `Op`, or a join's `JOp` when the join simulator replays.)"""

    op: AnyOp
    start: float
    end: float
    mem_during: int  # state before + output + overhead
    mem_after: int


@dataclass(frozen=True)
class Violation:
    """The first rule a schedule breaks: the position of the op in the schedule, and why."""

    position: int
    op: AnyOp | None
    reason: str

    def __str__(self) -> str:
        where = f"op #{self.position} {self.op}" if self.op is not None else "end of schedule"
        return f"{where}: {self.reason}"


class ScheduleError(InputError):
    """A schedule that breaks a rule of the simulator."""

    def __init__(self, violation: Violation):
        self.violation = violation
        super().__init__(f"invalid schedule: {violation}")


@dataclass
class Simulation:
    """What a replay found: `steps` in schedule order and the first `violation`, if any. Memory
    over the budget does not stop the replay (every op is a step and `makespan`, `peak_memory` are
    the whole schedule's); a violation of any other rule ends `steps` before the op breaking it.
    `before_violation` gives the steps up to the first violation of either kind."""

    steps: list[Step] = field(default_factory=list)
    violation: Violation | None = None
    initial_memory: int = 0

    @property
    def valid(self) -> bool:
        """True when the replay met no violation."""
        return self.violation is None

    @property
    def makespan(self) -> float:
        """End time of the last operation (the chain's time unit)."""
        return self.steps[-1].end if self.steps else 0.0

    @property
    def peak_memory(self) -> int:
        """Largest memory held while any operation ran, input a_0 included (bytes)."""
        return max([self.initial_memory] + [s.mem_during for s in self.steps])

    @property
    def final_memory(self) -> int:
        """Memory held after the last operation (bytes)."""
        return self.steps[-1].mem_after if self.steps else self.initial_memory

    def flag(self, position: int, op: Any, reason: str | None) -> None:
        """Record the violation (at `position`, by `op`, why) unless `reason` is None or an earlier
        violation is recorded: the first one is kept."""
        if reason is not None and self.violation is None:
            self.violation = Violation(position, op, reason)

    def stop(self, position: int, op: Any, reason: str) -> Simulation:
        """Record the violation as `flag` does (the replay ends) and return this simulation."""
        self.flag(position, op, reason)
        return self

    def before_violation(self) -> Simulation:
        """This replay cut before its first violation: the steps before the op that broke a rule
        (all of them when the violation is the end of the schedule, none when it is the input), the
        same violation and initial memory; this simulation itself when it is valid."""
        if self.violation is None:
            return self
        cut = self.steps[: self.violation.position] if self.violation.op is not None else list(self.steps)
        return Simulation(cut, self.violation, self.initial_memory)

    def raise_if_invalid(self) -> Simulation:
        """This simulation, or `ScheduleError` carrying its violation."""
        if self.violation is not None:
            raise ScheduleError(self.violation)
        return self


def simulate(chain: Chain, schedule: Schedule | list[Op], budget: int | None = None) -> Simulation:
    """Replay `schedule` on `chain`; memory above `budget` (when given) is a violation that does
    not stop the replay (`Simulation`)."""
    ops = schedule.ops if isinstance(schedule, Schedule) else list(schedule)
    L = chain.length
    x, xbar = chain.x, chain.xbar
    acts: set[int] = {0}
    tapes: set[int] = set()
    grads: set[int] = set()
    done_backward: set[int] = set()
    mem = int(x[0])
    now = 0.0
    sim = Simulation(initial_memory=mem)
    unit = size_unit_name(memory_unit(chain))
    if budget is not None and mem > budget:
        sim.flag(0, ops[0] if ops else None, f"the input a_0 alone ({mem}) exceeds the budget {budget} {unit}")

    for pos, op in enumerate(ops):
        kind, i = op
        fail = None
        if kind == LOSS:
            i = L
        elif not 0 <= i < L:
            fail = f"stage {i} outside 0..{L - 1}"
        if fail is None:
            fail = _precondition(kind, i, L, acts, tapes, grads, done_backward)
        if fail is None:
            out, overhead, duration = op_cost(chain, kind, i)
            during = mem + out + overhead
        if fail is not None:
            return sim.stop(pos, op, fail)
        sim.flag(pos, op, over_budget(during, budget, unit))
        mem += out
        if kind == F_ALL:
            tapes.add(i + 1)
        elif kind == F_CK:
            acts.add(i + 1)
        elif kind == F_N:
            acts.add(i + 1)
            mem -= _free_standalone(acts, i, x)
        elif kind == LOSS:
            grads.add(L)
            done_backward.add(L)
            mem -= _free_standalone(acts, L, x)
        else:  # B
            grads.add(i)
            done_backward.add(i)
            tapes.discard(i + 1)
            grads.discard(i + 1)
            mem -= int(xbar[i + 1]) + int(x[i + 1])
            mem -= _free_standalone(acts, i, x)
        sim.steps.append(Step(op, now, now + duration, during, mem))
        now += duration
    if 0 not in grads:
        missing = sorted(set(range(L + 1)) - done_backward)
        names = ["Loss" if j == L else f"B({j})" for j in reversed(missing)]
        sim.flag(len(ops), None, f"incomplete: missing backward {', '.join(names[:5])}"
                 + (" ..." if len(names) > 5 else ""))
    return sim


def over_budget(during: int, budget: int | None, unit: str = "bytes") -> str | None:
    """The violation when `during` (memory held while an operation runs) exceeds `budget`, or None; both are
    in the instance's memory unit, which the message names after them (`unit`: `units.size_unit_name` of its
    ``meta.units.memory``, "bytes" without one, "MB", "slots"): ``memory over budget: 23 > 22 MB while it runs``."""
    if budget is None or during <= budget:
        return None
    return f"memory over budget: {during} > {budget} {unit} while it runs"


def op_cost(chain: Chain, kind: str, i: int, *, per_mode: bool = True) -> tuple[int, int, float]:
    """(output size, transient overhead, duration) of `kind`(i) on `chain` by the rules table:
    F_all(i) makes abar_{i+1} (xbar[i+1]) with o_fa[i], F_ck(i) and F_n(i) make a_{i+1} (x[i+1])
    with o_fn[i], F_all(i) in u_fa[i] and F_ck(i), F_n(i) in u_fn[i] (all with o_f[i] and u_f[i],
    the maxima, without `per_mode`); B(i) and the loss (i = L) make delta_i (x[i]) with o_b[i] in u_b[i]."""
    if kind == F_ALL:
        return (int(chain.xbar[i + 1]), int((chain.o_fa if per_mode else chain.o_f)[i]),
                float((chain.u_fa if per_mode else chain.u_f)[i]))
    if kind in (F_CK, F_N):
        return (int(chain.x[i + 1]), int((chain.o_fn if per_mode else chain.o_f)[i]),
                float((chain.u_fn if per_mode else chain.u_f)[i]))
    return int(chain.x[i]), int(chain.o_b[i]), float(chain.u_b[i])


def _precondition(kind, i, L, acts, tapes, grads, done_backward) -> str | None:
    """Why `kind(i)` cannot run in this state, or None."""
    if kind == LOSS:
        if L in done_backward:
            return "the loss already ran"
        if L not in acts and L not in tapes:
            return f"a_{L} is not resident"
        return None
    return stage_precondition(kind, i, acts, tapes, grads, done_backward)


def stage_precondition(kind: str, i: int, acts: set[int], tapes: set[int], grads: set[int], done: set[int],
                       branch: int | None = None) -> str | None:
    """Why the forward (F_all, F_ck, F_n) or the backward B of stage i cannot run, or None: the
    "needs" column of the rules table, given the resident standalone activations a_j (`acts`),
    tapes abar_j (`tapes`), gradients delta_j (`grads`) and the stages whose B ran (`done`).
    With `branch` (the join simulator's, branch by branch) the messages name branch b."""
    of = "" if branch is None else f" of branch {branch}"
    at = "" if branch is None else f"{branch},"
    if kind in (F_ALL, F_CK, F_N):
        if i not in acts and i not in tapes:
            return f"a_{i}{of} is not resident"
        if kind == F_ALL and (i + 1) in tapes:
            return f"abar_{i + 1}{of} is already resident"
        if kind != F_ALL and (i + 1) in acts:
            return f"a_{i + 1}{of} is already resident"
        return None
    if kind == B:
        if i in done:
            return f"B({at}{i}) already ran"
        if (i + 1) not in tapes:
            return f"abar_{i + 1}{of} is not resident (B({at}{i}) needs the tape of F_all({at}{i}))"
        if (i + 1) not in grads:
            return f"delta_{i + 1}{of} is not resident"
        if i not in acts and i not in tapes:
            return f"a_{i}{of} is not resident"
        return None
    return f"unknown operation {kind!r}"


def _free_standalone(acts: set[int], j: int, x) -> int:
    if j in acts:
        acts.discard(j)
        return int(x[j])
    return 0


def memory_profile(chain: Chain, schedule: Schedule) -> list[dict[str, Any]]:
    """Per operation: op, start, end (time unit), memory while it runs and after it (bytes);
    the replay stops at the first violation."""
    return profile_rows(simulate(chain, schedule))


def profile_rows(sim: Simulation) -> list[dict[str, Any]]:
    """The memory profile rows of a replay (chain or join): per step, op, start, end (time unit),
    memory while it runs and after it (bytes)."""
    return [{"op": str(s.op), "start": s.start, "end": s.end, "mem_during": s.mem_during,
             "mem_after": s.mem_after} for s in sim.steps]

"""Schedules on a join network: operations `JOp` (kind, branch b, stage i; the shared loss has
neither) and `JoinSchedule`. JSON ``{"format": "memsched.schedule/1", "problem": "join", "ops":
[{"op": "F_ck", "branch": 1, "stage": 3}, {"op": "Loss"}, ...]}``; reading also accepts
``["F_ck", 1, 3]`` triples and the rotor names Fe / CF / Fn / Bwd. The referee is
`solvers.join.simulator`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ..chain.schedule import (
    FORWARD_KINDS,
    LOSS,
    SCHEDULE_FORMAT,
    OpSequence,
    check_index,
    fields_under,
    ops_json,
    read_op,
    result_prefix,
)
from .instance import Join


class JOp(NamedTuple):
    """One operation on branch `branch`, stage `stage` (both -1 for the loss)."""

    kind: str
    branch: int = -1
    stage: int = -1

    def __str__(self) -> str:
        return self.kind if self.kind == LOSS else f"{self.kind}({self.branch},{self.stage})"

    def to_json(self) -> dict[str, Any]:
        """``{"op": kind, "branch": b, "stage": i}`` (the loss: ``{"op": "Loss"}``)."""
        if self.kind == LOSS:
            return {"op": LOSS}
        return {"op": self.kind, "branch": self.branch, "stage": self.stage}


LOSS_OP = JOp(LOSS)


@dataclass
class JoinSchedule(OpSequence[JOp]):
    """A sequence of operations on a join with the given branch lengths."""

    ops: list[JOp]
    lengths: list[int]

    def recomputations(self) -> int:
        """Forward operations beyond the first forward of each stage of each branch."""
        return sum(op.kind in FORWARD_KINDS for op in self.ops) - sum(self.lengths)

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.schedule/1`` object of this join schedule (``problem: join``)."""
        return {"format": SCHEDULE_FORMAT, "problem": "join", "lengths": list(self.lengths),
                "ops": [op.to_json() for op in self.ops]}

    @classmethod
    def from_json(cls, data: Any, lengths: list[int], *, path: str = "<schedule>") -> JoinSchedule:
        """Parse a schedule object (or a `memsched solve --json` output holding one; its errors then
        name ``schedule.ops[k]``, `fields_under`)."""
        raw = ops_json(data, path, "join", {"lengths": list(lengths)})
        with fields_under(result_prefix(data, "ops")):
            return cls([_parse_op(item, lengths, path, k) for k, item in enumerate(raw)], list(lengths))


def _parse_op(item: Any, lengths: list[int], path: str, k: int) -> JOp:
    where = f"ops[{k}]"
    kind, (branch, stage) = read_op(item, ("branch", "stage"), path, where)
    if kind == LOSS:
        return LOSS_OP
    branch = check_index(branch, len(lengths), "branch", path, where)
    return JOp(kind, branch, check_index(stage, lengths[branch], "stage", path, where, f" for branch {branch}"))


def store_all_schedule(join: Join) -> JoinSchedule:
    """F_all of every stage of every branch, the loss, then each branch's backward in turn."""
    ops = [JOp("F_all", b, i) for b, c in enumerate(join.branches) for i in range(c.length)]
    ops.append(LOSS_OP)
    ops += [JOp("B", b, i) for b, c in enumerate(join.branches) for i in reversed(range(c.length))]
    return JoinSchedule(ops, join.lengths)

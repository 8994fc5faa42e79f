"""Offloading schedules: the chain operations plus transfers on a second stream.

Transfer operations name a value: ``a_j`` (activation, size x[j]) or ``abar_j`` (tape, size
xbar[j]):

- ``Off(v)``  copy v from device to host (free of charge when the host holds a copy already);
              the device copy is freed when the copy has ended (and every earlier reader of v
              has finished).
- ``Pre(v)``  copy v from host back to device; its device buffer counts from the start.

JSON: ``{"op": "Off", "value": "abar", "index": 3}``; compute operations as in chain
schedules (``{"op": "F_all", "stage": 2}``). Any operation may carry ``"not_before": t``: it
then starts no earlier than time t (the chain's time unit). Exact models use it to pin the
timing they optimised; without it every operation starts as soon as the rules allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..chain.schedule import FORWARD_KINDS, KINDS, LOSS, OP_ALIASES, Op, fields_under, ops_json, parse_op, result_prefix
from ..chain.schedule import Schedule as ChainSchedule
from ..errors import InputError
from ..jsonio import write_json_atomic
from ..units import check_number

OFF, PRE = "Off", "Pre"
VALUES = ("a", "abar")


class Transfer(NamedTuple):
    """A transfer of value `value`_`index` (``a`` or ``abar``)."""

    kind: str
    value: str
    index: int  # type: ignore[assignment]  # the field shadows tuple.index on purpose (the papers' index)

    def __str__(self) -> str:
        return f"{self.kind}({self.value}_{self.index})"

    def to_json(self) -> dict[str, Any]:
        """``{"op": "Off"|"Pre", "value": "a"|"abar", "index": j}``."""
        return {"op": self.kind, "value": self.value, "index": self.index}


def Off(value: str, index: int) -> Transfer:
    """Off(v_j): copy value v_j (``a`` or ``abar``) to the host and release its device copy."""
    return Transfer(OFF, value, index)


def Pre(value: str, index: int) -> Transfer:
    """Pre(v_j): copy value v_j back from the host to the device."""
    return Transfer(PRE, value, index)


@dataclass
class OffloadSchedule:
    """Compute operations and transfers in issue order on a chain of `length` stages."""

    ops: list[Op | Transfer]
    length: int
    not_before: list[float | None] | None = None  # per op, or None for "as soon as possible"

    def release_time(self, pos: int) -> float:
        """The ``not_before`` time of operation `pos` (0 when it has none)."""
        t = None if self.not_before is None else self.not_before[pos]
        return 0.0 if t is None else float(t)

    def __iter__(self):
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __str__(self) -> str:
        return " ".join(map(str, self.ops))

    def transfers(self) -> list[Transfer]:
        """The Off and Pre operations, in issue order."""
        return [op for op in self.ops if isinstance(op, Transfer)]

    def recomputations(self) -> int:
        """Forward operations (F_all, F_ck, F_n) beyond the first forward of each stage, as
        `solvers.chain.schedule.Schedule.recomputations` counts them (transfers are not computations)."""
        forwards = sum(isinstance(op, Op) and op.kind in FORWARD_KINDS for op in self.ops)
        return forwards - self.length

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.schedule/1`` object (``problem: offload``; ``not_before`` per op when set)."""
        ops = [op.to_json() for op in self.ops]
        if self.not_before is not None:
            for item, t in zip(ops, self.not_before):
                if t is not None:
                    item["not_before"] = t
        return {"format": "memsched.schedule/1", "problem": "offload", "length": self.length, "ops": ops}

    def save(self, path: str | Path) -> None:
        """Write the schedule's JSON to `path` atomically (a temporary file renamed into place, as
        `Chain.save`); a folder that refuses it is an `InputError` ("cannot write (...)") naming `path`."""
        write_json_atomic(path, self.to_json(), indent=None)

    @classmethod
    def from_chain(cls, schedule: ChainSchedule) -> OffloadSchedule:
        """A chain schedule as an offloading schedule without transfers."""
        return cls(list(schedule.ops), schedule.length)

    @classmethod
    def from_json(cls, data: Any, length: int, *, path: str = "<schedule>") -> OffloadSchedule:
        """Parse a schedule object (compute ops as in chain schedules, plus Off / Pre transfers); in a
        `memsched solve --json` output, errors name ``schedule.ops[k]`` (`fields_under`)."""
        raw = ops_json(data, path, ("offload", "chain"), {"length": length})  # names schedule.FIELD itself
        with fields_under(result_prefix(data, "ops")):
            return cls._from_ops(raw, length, path)

    @classmethod
    def _from_ops(cls, raw: list[Any], length: int, path: str) -> OffloadSchedule:
        """The schedule of the JSON operations `raw` (``ops``) of the file `path`, for `from_json`."""
        ops: list[Op | Transfer] = []
        not_before: list[float | None] = []
        for k, item in enumerate(raw):
            t = item.get("not_before") if isinstance(item, dict) else None
            if t is not None:  # a time in the chain's unit: finite, >= 0, at most MAX_TIME
                t = check_number(t, path=path, field=f"ops[{k}].not_before", time=True)
            not_before.append(None if t is None else float(t))
            if isinstance(item, dict) and item.get("op") in (OFF, PRE):
                value, index = item.get("value"), item.get("index")
                if value not in VALUES:
                    raise InputError(f"value must be 'a' or 'abar', got {value!r}", path=path, field=f"ops[{k}]")
                if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= length:
                    raise InputError(f"index must be in 0..{length}, got {index!r}", path=path, field=f"ops[{k}]")
                ops.append(Transfer(item["op"], value, index))
            else:  # a compute operation, as in chain schedules; errors name its index in the file
                ops.append(_compute_op(item, length, path, k))
        return cls(ops, length, not_before if any(t is not None for t in not_before) else None)


def _compute_op(item: Any, length: int, path: str, k: int) -> Op:
    """`parse_op` for ``ops[k]`` of an offloading schedule file `path`: an unknown operation's
    error lists the transfers (Off, Pre) with the compute operations, and a transfer not written
    as an object says how to write it."""
    try:
        return parse_op(item, length, path, k)
    except InputError:
        name = _op_name(item)
        if name in (OFF, PRE):
            raise InputError(f"a transfer is an object {{\"op\": \"{name}\", \"value\": \"a\" or \"abar\", "
                             f"\"index\": 0..{length}}}, got {item!r}", path=path, field=f"ops[{k}]") from None
        if _has_name_slot(item) and str(name).lower() not in OP_ALIASES:  # a missing name (None) too
            raise InputError(f"unknown operation {name!r} (one of {', '.join((*KINDS, OFF, PRE))})", path=path,
                             field=f"ops[{k}]") from None
        raise


def _has_name_slot(item: Any) -> bool:
    """True when the JSON op `item` has a place for its name (an object, a non-empty list, a bare string):
    there, a missing or null name is an unknown operation (`_compute_op`); not for 5 or null."""
    return isinstance(item, (dict, str)) or (isinstance(item, (list, tuple)) and bool(item))


def _op_name(item: Any) -> Any:
    """The operation name of a JSON op (``{"op": name, ...}``, ``[name, ...]``, a bare name); None
    when there is none."""
    if isinstance(item, dict):
        return item.get("op")
    if isinstance(item, (list, tuple)) and item:
        return item[0]
    return item if isinstance(item, str) else None


def is_loss(op: Op | Transfer) -> bool:
    """True when `op` is the loss."""
    return isinstance(op, Op) and op.kind == LOSS

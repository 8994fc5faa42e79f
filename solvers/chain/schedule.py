"""Schedules on a chain: sequences of operations F_all, F_ck, F_n, B and Loss.

Operations (stage i is 0-based; the loss is stage L):

- ``F_all(i)``  forward with autograd on: needs a_i, keeps the tape abar_{i+1} (contains a_{i+1}).
- ``F_ck(i)``   forward without autograd: needs a_i, keeps a_i and stores a_{i+1}.
- ``F_n(i)``    forward without autograd: needs a_i, stores a_{i+1} and frees a_i.
- ``Loss``      the loss's backward: needs a_L, produces the gradient delta_L, frees a_L.
- ``B(i)``      backward: needs abar_{i+1}, delta_{i+1} and a_i; produces delta_i and frees
                abar_{i+1}, delta_{i+1} and a_i.

The JSON form is ``{"format": "memsched.schedule/1", "problem": "chain", "ops": [...]}`` with
each op ``{"op": "F_ck", "stage": 0}`` (``{"op": "Loss"}`` for the loss). Reading also accepts
``["F_ck", 0]`` pairs and the rotor names Fe / CF / Fn / Bwd.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from ..errors import InputError, article
from ..jsonio import check_holds_schedule, read_json, write_json_atomic

SCHEDULE_FORMAT = "memsched.schedule/1"
F_ALL, F_CK, F_N, B, LOSS = "F_all", "F_ck", "F_n", "B", "Loss"
KINDS = (F_ALL, F_CK, F_N, B, LOSS)
FORWARD_KINDS = (F_ALL, F_CK, F_N)
OP_ALIASES = {"fe": F_ALL, "f_all": F_ALL, "fall": F_ALL, "cf": F_CK, "f_ck": F_CK, "fck": F_CK,
            "fn": F_N, "f_n": F_N, "b": B, "bwd": B, "loss": LOSS}


class Op(NamedTuple):
    """One operation; `index` is the stage (L for the loss)."""

    kind: str
    index: int  # type: ignore[assignment]  # the field shadows tuple.index on purpose (the papers' index)

    def __str__(self) -> str:
        return self.kind if self.kind == LOSS else f"{self.kind}({self.index})"

    def to_json(self) -> dict[str, Any]:
        """``{"op": kind, "stage": i}`` (the loss has no stage)."""
        return {"op": self.kind} if self.kind == LOSS else {"op": self.kind, "stage": self.index}


def F_all(i: int) -> Op:
    """F_all(i): forward of stage i keeping its tape abar_{i+1}."""
    return Op(F_ALL, i)


def F_ck(i: int) -> Op:
    """F_ck(i): forward of stage i keeping its output a_{i+1} (a checkpoint)."""
    return Op(F_CK, i)


def F_n(i: int) -> Op:
    """F_n(i): forward of stage i that frees its input a_i once a_{i+1} is computed."""
    return Op(F_N, i)


def Bwd(i: int) -> Op:
    """B(i): backward of stage i (needs abar_{i+1}, delta_{i+1}, a_i; produces delta_i)."""
    return Op(B, i)


def Loss(L: int) -> Op:
    """The loss, stage L of a chain of length L."""
    return Op(LOSS, L)


OpT = TypeVar("OpT")


class OpSequence(Generic[OpT]):
    """What the chain and join schedule classes share: the operations ``ops`` in order, iteration
    over them, their count, the text (the operations separated by spaces) and `save`."""

    ops: list[OpT]

    def __iter__(self) -> Iterator[OpT]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __str__(self) -> str:
        return " ".join(map(str, self.ops))

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.schedule/1`` object (each schedule class says its problem)."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write the schedule's JSON to `path` atomically (a temporary file renamed into place, as
        `Chain.save`); a folder that refuses it is an `InputError` ("cannot write (...)") naming `path`."""
        write_json_atomic(path, self.to_json(), indent=None)


@dataclass
class Schedule(OpSequence[Op]):
    """A sequence of operations on a chain of `length` stages."""

    ops: list[Op]
    length: int

    def extend(self, ops: Iterable[Op]) -> None:
        """Append `ops` to the schedule."""
        self.ops.extend(ops)

    def count(self, kind: str) -> int:
        """Number of operations of kind `kind` (F_all, F_ck, F_n, B or Loss)."""
        return sum(op.kind == kind for op in self.ops)

    def recomputations(self) -> int:
        """Forward operations beyond the first forward of each stage."""
        forwards = sum(op.kind in FORWARD_KINDS for op in self.ops)
        return forwards - self.length

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.schedule/1`` object of this chain schedule."""
        return {"format": SCHEDULE_FORMAT, "problem": "chain", "length": self.length,
                "ops": [op.to_json() for op in self.ops]}

    @classmethod
    def from_json(cls, data: Any, length: int, *, path: str = "<schedule>") -> Schedule:
        """Parse a schedule object (or a `memsched solve --json` output holding one; its errors then
        name ``schedule.ops[k]``, `fields_under`)."""
        raw = ops_json(data, path, "chain", {"length": length})
        with fields_under(result_prefix(data, "ops")):
            return cls([parse_op(item, length, path, k) for k, item in enumerate(raw)], length)

    @classmethod
    def load(cls, path: str | Path, length: int) -> Schedule:
        """Read a schedule JSON file for a chain of `length` stages (`InputError` naming the file)."""
        return cls.from_json(read_json(path), length, path=str(path))


def unfold(root: Any, expand: Callable[[Any], list[Any]]) -> list[Op]:
    """The operations of a recursive schedule, expanded depth first on an explicit stack (no
    recursion limit): `expand(problem)` returns, in execution order, operations (`Op`) and
    sub-problems (anything else), each expanded in its turn."""
    ops: list[Op] = []
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, Op):
            ops.append(item)
        else:
            stack.extend(reversed(expand(item)))
    return ops


def result_prefix(data: Any, body: str) -> str:
    """``"schedule."`` when `data` is a result object (``memsched solve --json``, ``partition --json``:
    a ``schedule`` key, no ``format`` and no schedule body `body` of its own: ``ops``, ``sequence``),
    whose schedule's fields an error names as ``schedule.FIELD``; ``""`` for a schedule itself (a
    partition object's ``schedule`` is its pipeline schedule, "1f1b": its ``format`` says what it is)."""
    return "schedule." if isinstance(data, dict) and "schedule" in data and body not in data \
        and "format" not in data else ""


@contextlib.contextmanager
def fields_under(prefix: str) -> Iterator[None]:
    """An `InputError` raised inside that names a field is re-raised naming ``prefix + field``
    (`result_prefix`: ``stages[1].replicas`` of the partition in a result object is
    ``schedule.stages[1].replicas``); with an empty `prefix`, or no field, it passes unchanged."""
    try:
        yield
    except InputError as err:
        if not prefix or err.field is None:
            raise
        raise InputError(err.message, path=err.path, field=prefix + err.field) from None


def ops_json(data: Any, path: str, problem: str | tuple[str, ...] | None = None,
             shape: dict[str, Any] | None = None) -> list[Any]:
    """The list of JSON operations in a schedule object, a bare list, or the output of
    `memsched solve --json` holding one (every problem's schedules use this envelope; an error in the
    schedule it holds names ``schedule.FIELD``, `result_prefix`).

    When the object says which ``problem`` it is for, it must be (one of) `problem`; each key of `shape`
    it has (``length``: L, ``lengths``: [L_b]) must equal the instance's value."""
    prefix = result_prefix(data, "ops")
    if prefix:
        check_holds_schedule(data, path, "ops")
        data = data["schedule"]
        if not isinstance(data, (dict, list)):
            raise InputError(f"expected a schedule object or a list of operations, got {_shown(data)}", path=path,
                             field="schedule")
    if isinstance(data, dict):
        fmt = data.get("format", SCHEDULE_FORMAT)
        if fmt != SCHEDULE_FORMAT:
            raise InputError(f"expected {SCHEDULE_FORMAT!r}, got {_shown(fmt)}", path=path, field=prefix + "format")
        declared = data.get("problem")
        accepted = (problem,) if isinstance(problem, str) else problem
        if accepted is not None and declared is not None and declared not in accepted:
            raise InputError(f"the schedule is for {declared!r} but the instance is {article(accepted[0])} instance",
                             path=path, field=prefix + "problem")
        for key, expected in (shape or {}).items():
            if key in data and not _same_json(data[key], expected):
                what = _type_mismatch(data[key], expected)
                raise InputError(f"the schedule is for {key} {data[key]!r}{what} but the instance has {expected!r}",
                                 path=path, field=prefix + key)
        data = data.get("ops")
    if not isinstance(data, list):
        raise InputError("expected a list of operations", path=path, field=prefix + "ops")
    return data


def _shown(value: Any) -> str:
    """`value` as a message shows it: its repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_json(value: Any, expected: Any) -> bool:
    """True when the JSON `value` equals `expected` (an integer or a list of them) with the types of
    JSON integers throughout: an int, not a bool and not a float such as 2.0, in a list too."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(value, list) and len(value) == len(expected)
                and all(_same_json(v, e) for v, e in zip(value, expected)))
    if isinstance(expected, Integral) and not isinstance(expected, bool):
        return type(value) is int and value == expected
    return type(value) is type(expected) and bool(value == expected)


def _type_mismatch(value: Any, expected: Any) -> str:
    """`` (a float)`` (`` (item 0 a float)`` in a list) where `value` is not of `expected`'s JSON
    type (as `_same_json` compares them); "" where only the values differ."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(value, list):
            return f" (a {type(value).__name__})"
        return next((f" (item {k} a {type(v).__name__})" for k, v in enumerate(value)
                     if _type_mismatch(v, expected[0] if expected else 0)), "")
    if isinstance(expected, Integral) and not isinstance(expected, bool):
        return "" if type(value) is int else f" (a {type(value).__name__})"
    return "" if type(value) is type(expected) else f" (a {type(value).__name__})"


def read_op(item: Any, fields: tuple[str, ...], path: str, where: str) -> tuple[str, list[Any]]:
    """The kind of a JSON operation (its name read through `OP_ALIASES`) and its `fields` (None
    where absent): an object ``{"op": name, field: value, ...}``, a list ``[name, value, ...]`` in
    the order of `fields`, or a bare name. `InputError` at `where` for anything else."""
    if isinstance(item, dict):
        name, values = item.get("op"), [item.get(f) for f in fields]
    elif isinstance(item, (list, tuple)) and item:
        if len(item) > len(fields) + 1:
            raise InputError(f"operation {item!r} has more than its name and {', '.join(fields) or 'nothing'}",
                             path=path, field=where)
        name, values = item[0], [item[k] if len(item) > k else None for k in range(1, len(fields) + 1)]
    elif isinstance(item, str):
        name, values = item, [None] * len(fields)
    else:
        raise InputError(f"cannot read operation {item!r}", path=path, field=where)
    kind = OP_ALIASES.get(str(name).lower())
    if kind is None:
        raise InputError(f"unknown operation {name!r} (one of {', '.join(KINDS)})", path=path, field=where)
    return kind, values


def check_index(value: Any, n: int, what: str, path: str, where: str, context: str = "") -> int:
    """`value` when it is an integer in 0..n-1 (not a bool), else an `InputError` at `where`
    saying that `what` (+ `context`) must be one."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise InputError(f"{what} must be an integer in 0..{n - 1}{context}, got {value!r}", path=path, field=where)
    return value


def parse_op(item: Any, length: int, path: str, k: int) -> Op:
    """The chain operation of the JSON `item` at ``ops[k]`` of the file `path` (`read_op`; the stage
    an integer in 0..length-1, the loss is stage `length`); `InputError` naming ``ops[k]``."""
    where = f"ops[{k}]"
    kind, (index,) = read_op(item, ("stage",), path, where)
    if kind == LOSS:
        return Op(LOSS, length)
    return Op(kind, check_index(index, length, "stage", path, where))

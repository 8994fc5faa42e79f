"""The heterogeneous chain of docs/chain.md (the rotor model) and its `memsched.chain/1` file.

Notation (stages 0-based, as in the recurrence of docs/chain.md; the loss is stage L):

- ``x[0]`` is the size of the input a_0, ``x[i+1]`` the size of a_{i+1}, output of stage i;
  ``x[L+1] = 0``.  Arrays of length L+2, integers (bytes, or slots once discretised).
- ``xbar[i+1]`` is the size of the tape abar_{i+1} kept by F_all(i) (it contains a_{i+1});
  ``xbar[0] = xbar[L+1] = 0``.  Length L+2.
- ``u_f[i]``, ``u_b[i]``: forward and backward times of stage i; ``u_f[L] = 0`` and
  ``u_b[L]`` is the loss's backward time.  Length L+1, floats (the file's time unit).
- ``o_f[i]``, ``o_b[i]``: transient memory while F(i) or B(i) runs; ``o_f[L] = 0``,
  ``o_b[L]`` is the loss's overhead.  Length L+1, integers.
- Per-mode forward overheads (optional in the file): ``o_fa[i]`` while F_all(i) runs (autograd,
  the tape being built) and ``o_fn[i]`` while F_ck(i) or F_n(i) runs (no autograd). Both default
  to ``o_f``, and ``o_f = max(o_fa, o_fn)`` always holds (invariant checked): a tool that knows one
  forward overhead charges ``o_f`` and stays an upper bound. The chain simulator, the rotor DP and
  the exact models charge ``o_fa`` and ``o_fn``.
- Per-mode forward times (optional in the file), the same way: ``u_fa[i]`` is F_all(i)'s time
  (autograd, the tape built) and ``u_fn[i]`` F_ck(i)'s and F_n(i)'s (no autograd). Both default to
  ``u_f``, and ``u_f = max(u_fa, u_fn)`` always holds (invariant checked), so a tool that knows one
  forward time charges ``u_f`` and stays an upper bound; ``u_fa[L] = u_fn[L] = 0``.
- Early release in B(i) (optional in the file, ``bwd_overhead_released``): an executor that gives
  up delta_{i+1} and the tape's output a_{i+1} as soon as autograd has consumed them (as one
  ``loss.backward()`` does) peaks during B(i) *below* the memory at B(i)'s start. ``o_b[i]`` is then
  that release's overhead, which may be negative, down to ``-(x[i+1] + xbar[i+1])`` (B(i) never
  frees more than its inputs, so its charge stays at or above the memory it leaves), and ``o_bh[i]``
  (the file's ``bwd_overhead``, >= 0) the overhead when B(i) holds its inputs to its end; always
  ``o_bh >= o_b`` (invariant checked), so a tool that ignores the release charges ``o_bh`` and stays
  an upper bound. Without the field ``o_bh`` *is* ``o_b``. The loss has no release field
  (``o_b[L] = o_bh[L] >= 0``). Chain solvers charge ``o_b``; the join and offload problems charge
  ``o_bh`` (`Chain.held`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..jsonio import read_json, warn_unknown, warns_once_loaded, write_json_atomic
from ..units import (
    MAX_BYTES,
    MAX_TIME,
    MEMORY_UNIT_BYTES,
    check_not_too_large_memory_unit,
    check_number,
    meta_memory_unit,
    short_number,
    size_array,
    size_limit,
    size_unit_name,
)

FORMAT = "memsched.chain/1"
STAGE_FIELDS = ("fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead")
#: optional per-mode forward overheads (bytes): F_all's and F_ck / F_n's; each defaults to fwd_overhead
MODE_FIELDS = ("fwd_overhead_all", "fwd_overhead_nograd")
#: optional per-mode forward times (the file's time unit): F_all's and F_ck / F_n's; each defaults to fwd_time
TIME_MODE_FIELDS = ("fwd_time_all", "fwd_time_nograd")
#: optional overhead of B(i) releasing delta_{i+1} and the tape's output early (bytes, may be < 0)
RELEASE_FIELD = "bwd_overhead_released"
LOSS_FIELDS = ("bwd_time", "bwd_overhead")
#: every key a stage may have (`parse_stages`); others are reported (`jsonio.warn_unknown`) and ignored
STAGE_KEYS = (*STAGE_FIELDS, *MODE_FIELDS, *TIME_MODE_FIELDS, RELEASE_FIELD, "name")
#: every top-level key of a chain file: ``host_link`` is the offloading instance's (solvers/offload/instance.py)
CHAIN_KEYS = ("format", "name", "input_size", "stages", "loss", "meta", "host_link")
#: the keys of ``meta.units`` (`check_units`); ``meta`` itself is free-form
UNIT_KEYS = ("time", "memory")
SIZE_FIELDS = ("out_size", "tape_size", "fwd_overhead", "bwd_overhead")
#: time units a file may declare in meta.units.time, with their number per second
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}
#: units of counted work a file may declare instead (``memsched profile --cost flops``): no number
#: per second, so a chain in them cannot be combined with a link in bytes/s (offloading, pipelines)
WORK_UNITS = ("MFLOP",)


@dataclass(eq=False)
class Chain:
    """A chain of L stages followed by a loss, with the arrays of the module docstring."""

    u_f: np.ndarray
    u_b: np.ndarray
    x: np.ndarray
    xbar: np.ndarray
    o_f: np.ndarray
    o_b: np.ndarray
    name: str = "chain"
    stage_names: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    #: F_all's and F_ck / F_n's forward overheads; None (the default) means o_f
    o_fa: np.ndarray = None  # type: ignore[assignment]
    o_fn: np.ndarray = None  # type: ignore[assignment]
    #: F_all's and F_ck / F_n's forward times; None (the default) means u_f
    u_fa: np.ndarray = None  # type: ignore[assignment]
    u_fn: np.ndarray = None  # type: ignore[assignment]
    #: B(i)'s overhead holding its inputs to its end (the file's bwd_overhead); None means o_b
    o_bh: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.u_f = _time_array(self.u_f, "u_f")
        self.u_b = _time_array(self.u_b, "u_b")
        self.x = size_array(self.x, "x")
        self.xbar = size_array(self.xbar, "xbar")
        self.o_f = size_array(self.o_f, "o_f")
        self.o_b = size_array(self.o_b, "o_b")
        # without per-mode values o_fa and o_fn *are* o_f (the same array: an in-place change of o_f
        # is seen by every charge)
        self.o_fa = self.o_f if self.o_fa is None else size_array(self.o_fa, "o_fa")
        self.o_fn = self.o_f if self.o_fn is None else size_array(self.o_fn, "o_fn")
        self.u_fa = self.u_f if self.u_fa is None else _time_array(self.u_fa, "u_fa")
        self.u_fn = self.u_f if self.u_fn is None else _time_array(self.u_fn, "u_fn")
        self.o_bh = self.o_b if self.o_bh is None else size_array(self.o_bh, "o_bh")
        self.check()
        if not self.stage_names:
            self.stage_names = [f"stage{i}" for i in range(self.length)]

    def check(self) -> None:
        """Every invariant of the module docstring, vectorised (cheap: every derived chain, discretised
        or retimed, runs it too): the lengths (L+1 or L+2), times finite in 0..`MAX_TIME` (the file's
        unit), sizes integers in 0..`MAX_BYTES` (bytes, or slots once discretised; an array assigned in
        Python is converted as the constructor converts it, `_as_arrays`: 5.2 bytes is refused, not
        truncated), the entries past the stages zero (`_check_ends`: ``x[L+1]``, ``xbar[0]``,
        ``xbar[L+1]``, the forward times and overheads of the loss), ``xbar[i] >= x[i]`` for the
        stages' outputs (the tape contains the output), ``u_f = max(u_fa, u_fn)``, ``o_f = max(o_fa, o_fn)``
        and the early-release bounds. `InputError` naming the array and index (``u_b[2]``) otherwise:
        the same rules as the chain file's (`parse_stages`), for chains built or edited in Python."""
        self._as_arrays()
        self._check_lengths()
        for name in _TIME_ARRAYS:
            _check_range(getattr(self, name), name, MAX_TIME, _TIME_RULE)
        for name in ("x", "xbar", "o_f", "o_fa", "o_fn"):
            _check_size_range(getattr(self, name), name)
        self._check_ends()
        L = self.length
        low = np.flatnonzero(self.xbar[1 : L + 1] < self.x[1 : L + 1])
        if low.size:
            i = int(low[0]) + 1
            raise InputError(f"{int(self.xbar[i])} < x[{i}] = {int(self.x[i])}: the tape of stage {i - 1} contains its "
                             "output", field=f"xbar[{i}]")
        if not np.array_equal(self.o_f, np.maximum(self.o_fa, self.o_fn)):
            raise InputError("must equal max(o_fa, o_fn) (the larger of the per-mode forward overheads)", field="o_f")
        if not np.array_equal(self.u_f, np.maximum(self.u_fa, self.u_fn)):
            raise InputError("must equal max(u_fa, u_fn) (the larger of the per-mode forward times)", field="u_f")
        self._check_release()
        # o_b may be < 0 (early release) only under a held o_bh >= 0; without o_bh it *is* o_bh
        _check_size_range(self.o_bh, "o_bh" if self.o_bh is not self.o_b else "o_b")

    def _as_arrays(self) -> None:
        """Each size array an int64 array (`units.size_array`: whole numbers only, an `InputError` in the
        constructor's words naming the entry, ``x[0]``, for 5.2) and each time array a float array
        (`_time_array`), as the constructor makes them: an array assigned in Python (``chain.x = chain.x
        * 1.3``) is then neither truncated nor a float index in a solver. Arrays already of that dtype
        are kept as they are, and two attributes that are one array (``o_fa`` *is* ``o_f`` without
        per-mode overheads, ``o_bh`` *is* ``o_b`` without early release) stay one array."""
        for names, convert in ((_SIZE_ARRAYS, size_array), (_TIME_ARRAYS, _time_array)):
            done: dict[int, np.ndarray] = {}  # id of an attribute's value -> its converted array
            for name in names:
                value = getattr(self, name)
                if id(value) not in done:
                    done[id(value)] = convert(value, name)
                setattr(self, name, done[id(value)])

    def _check_ends(self) -> None:
        """The entries past the stages are 0 (module docstring; the chain file cannot state them, so a
        chain that breaks one would not survive `save`): ``x[L+1]``, ``xbar[0]``, ``xbar[L+1]``, and the
        loss's forward time and overhead ``u_f[L]``, ``u_fa[L]``, ``u_fn[L]``, ``o_f[L]``, ``o_fa[L]``,
        ``o_fn[L]``. `InputError` naming the entry (``x[2]``) otherwise. (Called after the range checks:
        every entry is then a number.)"""
        L = self.length
        ends = [("x", L + 1, "x[L+1], no activation after the loss"), ("xbar", 0, "xbar[0], the input has no tape"),
                ("xbar", L + 1, "xbar[L+1], the loss keeps no tape")]
        ends += [(name, L, f"{name}[L], the loss has no forward") for name in ("u_f", "u_fa", "u_fn")]
        ends += [(name, L, f"{name}[L], the loss has no forward") for name in ("o_f", "o_fa", "o_fn")]
        for name, i, why in ends:
            value = getattr(self, name)[i]
            if value != 0:
                raise InputError(f"must be 0 ({why}), got {value.item()!r}", field=f"{name}[{i}]")

    def _check_lengths(self) -> None:
        """u_f is a 1-D array of L+1 >= 1 times; the other arrays have length L+1 or L+2."""
        if self.u_f.ndim != 1 or self.u_f.size == 0:
            raise InputError(f"must be a 1-D array of L+1 >= 1 times (the loss's last), got shape {self.u_f.shape}",
                             field="u_f")
        L = self.length
        shapes = {"u_b": (self.u_b, L + 1), "x": (self.x, L + 2), "xbar": (self.xbar, L + 2), "o_f": (self.o_f, L + 1),
                  "o_b": (self.o_b, L + 1), "o_fa": (self.o_fa, L + 1), "o_fn": (self.o_fn, L + 1),
                  "u_fa": (self.u_fa, L + 1), "u_fn": (self.u_fn, L + 1), "o_bh": (self.o_bh, L + 1)}
        for name, (arr, n) in shapes.items():
            if arr.shape != (n,):
                raise InputError(f"must have length {n} (L = {L}, len(u_f) = L+1), got shape {arr.shape}", field=name)

    def _check_release(self) -> None:
        """The invariants of early release (module docstring): ``o_bh >= o_b``, ``o_bh[L] = o_b[L]``
        and ``o_b[i] >= -(x[i+1] + xbar[i+1])``, so that B(i)'s charge is at least what it leaves."""
        L = self.length
        if self.o_bh is not self.o_b and (np.any(self.o_bh < self.o_b) or self.o_bh[L] != self.o_b[L]):
            raise InputError("(B holding its inputs) must be >= o_b (B releasing them), and equal to it for the loss",
                             field="o_bh")
        floor = -(self.x[1 : L + 1] + self.xbar[1 : L + 1])
        low = np.flatnonzero(self.o_b[:L] < floor)
        if low.size:
            i = int(low[0])
            raise InputError(f"{int(self.o_b[i])} is below -(x[{i + 1}] + xbar[{i + 1}]) = {int(floor[i])}: "
                             f"B({i}) cannot free more than its inputs", field=f"o_b[{i}]")

    def has_release(self) -> bool:
        """True when some B(i) releases its inputs early (o_b below o_bh somewhere)."""
        return self.o_bh is not self.o_b and not np.array_equal(self.o_bh, self.o_b)

    def held(self) -> Chain:
        """This chain with every B(i) holding its inputs to its end (``o_b = o_bh``): what the join and
        offload problems, and any tool that ignores ``bwd_overhead_released``, charge. `self` when
        nothing is released early."""
        if not self.has_release():
            return self
        return replace(self, o_b=self.o_bh.copy(), o_bh=self.o_bh.copy(), stage_names=list(self.stage_names),
                       meta=dict(self.meta))

    @property
    def length(self) -> int:
        """L, the number of stages (the loss excluded)."""
        return len(self.u_f) - 1

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_stages(
        cls,
        input_size: int,
        stages: list[dict[str, Any]],
        loss: dict[str, Any] | None = None,
        *,
        name: str = "chain",
        meta: dict[str, Any] | None = None,
    ) -> Chain:
        """Build from per-stage dicts with the fields of the chain file."""
        loss = loss or {"bwd_time": 0.0, "bwd_overhead": 0}
        L = len(stages)
        modes: dict[str, np.ndarray] = {}  # per-mode forward overheads when a stage gives one
        if any(f in s for s in stages for f in MODE_FIELDS):
            modes = {key: np.array([s.get(f, s["fwd_overhead"]) for s in stages] + [0], dtype=np.int64)
                     for key, f in zip(("o_fa", "o_fn"), MODE_FIELDS)}
        if any(f in s for s in stages for f in TIME_MODE_FIELDS):  # per-mode forward times likewise
            modes.update({key: np.array([s.get(f, s["fwd_time"]) for s in stages] + [0.0], dtype=float)
                          for key, f in zip(("u_fa", "u_fn"), TIME_MODE_FIELDS)})
        o_b = np.array([s["bwd_overhead"] for s in stages] + [loss["bwd_overhead"]], dtype=np.int64)
        if any(RELEASE_FIELD in s for s in stages):  # B(i) releasing early charges o_b, o_bh holds the file's
            modes["o_bh"] = o_b
            o_b = np.array([s.get(RELEASE_FIELD, s["bwd_overhead"]) for s in stages] + [loss["bwd_overhead"]],
                           dtype=np.int64)
        return cls(
            u_f=np.array([s["fwd_time"] for s in stages] + [0.0], dtype=float),
            u_b=np.array([s["bwd_time"] for s in stages] + [loss["bwd_time"]], dtype=float),
            x=np.array([input_size] + [s["out_size"] for s in stages] + [0], dtype=np.int64),
            xbar=np.array([0] + [s["tape_size"] for s in stages] + [0], dtype=np.int64),
            o_f=np.array([s["fwd_overhead"] for s in stages] + [0], dtype=np.int64),
            o_b=o_b,
            name=name,
            stage_names=[s.get("name", f"stage{i}") for i, s in enumerate(stages)] if L else [],
            meta=dict(meta or {}),
            **modes,
        )

    @classmethod
    def with_mode_overheads(cls, u_f: Any, u_b: Any, x: Any, xbar: Any, o_fa: Any, o_fn: Any, o_b: Any,
                            **kwargs: Any) -> Chain:
        """A chain with per-mode forward overheads; ``o_f`` is set to ``max(o_fa, o_fn)``."""
        o_fa, o_fn = np.asarray(o_fa, dtype=np.int64), np.asarray(o_fn, dtype=np.int64)
        return cls(u_f, u_b, x, xbar, np.maximum(o_fa, o_fn), o_b, o_fa=o_fa, o_fn=o_fn, **kwargs)

    def has_mode_overheads(self) -> bool:
        """True when F_all and F_ck / F_n have different overheads somewhere."""
        return not np.array_equal(self.o_fa, self.o_fn)

    def has_mode_times(self) -> bool:
        """True when F_all and F_ck / F_n have different forward times somewhere."""
        return not np.array_equal(self.u_fa, self.u_fn)

    def with_mode_times(self, u_fa: Any, u_fn: Any) -> Chain:
        """This chain with per-mode forward times (length L+1, the loss's 0); ``u_f`` becomes
        ``max(u_fa, u_fn)``. Sizes, overheads, names and meta are shared, not copied."""
        u_fa, u_fn = np.asarray(u_fa, dtype=float), np.asarray(u_fn, dtype=float)
        return Chain(np.maximum(u_fa, u_fn), self.u_b, self.x, self.xbar, self.o_f, self.o_b, name=self.name,
                     stage_names=list(self.stage_names), meta=dict(self.meta), o_fa=self.o_fa, o_fn=self.o_fn,
                     u_fa=u_fa, u_fn=u_fn, o_bh=self.o_bh)

    @classmethod
    def homogeneous(
        cls, L: int, *, u_f: float = 1.0, u_b: float = 2.0, x: int = 1, xbar: int | None = None,
        loss_time: float = 0.0, name: str = "homogeneous",
    ) -> Chain:
        """L identical stages (the setting of Revolve): sizes x, tape xbar (default 2x)."""
        xbar = 2 * x if xbar is None else xbar
        stage = {"fwd_time": u_f, "bwd_time": u_b, "out_size": x, "tape_size": xbar,
                 "fwd_overhead": 0, "bwd_overhead": 0}
        return cls.from_stages(x, [dict(stage) for _ in range(L)],
                               {"bwd_time": loss_time, "bwd_overhead": 0}, name=name)

    # ----------------------------------------------------------------- file format
    def to_dict(self) -> dict[str, Any]:
        """The `memsched.chain/1` JSON object."""
        L = self.length
        stages = [
            {"name": self.stage_names[i], "fwd_time": float(self.u_f[i]), "bwd_time": float(self.u_b[i]),
             "out_size": int(self.x[i + 1]), "tape_size": int(self.xbar[i + 1]),
             "fwd_overhead": int(self.o_f[i]), "bwd_overhead": int(self.o_bh[i])}
            for i in range(L)
        ]
        if self.has_release():
            for i, st in enumerate(stages):
                st[RELEASE_FIELD] = int(self.o_b[i])
        if self.has_mode_overheads():
            for i, st in enumerate(stages):
                st.update(fwd_overhead_all=int(self.o_fa[i]), fwd_overhead_nograd=int(self.o_fn[i]))
        if self.has_mode_times():
            for i, st in enumerate(stages):
                st.update(fwd_time_all=float(self.u_fa[i]), fwd_time_nograd=float(self.u_fn[i]))
        return {
            "format": FORMAT,
            "name": self.name,
            "input_size": int(self.x[0]),
            "stages": stages,
            "loss": {"bwd_time": float(self.u_b[L]), "bwd_overhead": int(self.o_b[L])},
            "meta": copy.deepcopy(self.meta),  # the caller may edit the object without changing the chain
        }

    def save(self, path: str | Path) -> None:
        """Write the chain file atomically (a temporary file renamed into place)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    @warns_once_loaded
    def from_dict(cls, data: Any, *, path: str = "<chain>") -> Chain:
        """Validate and build; every error names `path`, the stage and the field."""
        per = check_header(data, path, FORMAT, CHAIN_KEYS, "a chain file")
        unit = meta_memory_unit(data.get("meta"))
        input_size = _number(data, "input_size", path, "input_size", integer=True, per=per, unit=unit)
        clean = parse_stages(data.get("stages"), path, "stages", per=per, unit=unit)
        loss = data.get("loss")
        if not isinstance(loss, dict):
            raise InputError("missing or not an object", path=path, field="loss")
        warn_unknown(loss, LOSS_FIELDS, path, "loss", "a chain's loss")
        loss_clean = {f: _number(loss, f, path, f"loss.{f}", integer=f == "bwd_overhead", per=per, unit=unit)
                      for f in LOSS_FIELDS}
        check_total(input_size + sum(item[f] for item in clean for f in SIZE_FIELDS) + loss_clean["bwd_overhead"],
                    path, "stages", per=per, unit=unit)
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise InputError("must be an object", path=path, field="meta")
        return cls.from_stages(input_size, clean, loss_clean, name=str(data.get("name", Path(path).stem)),
                               meta=meta)

    @classmethod
    def load(cls, path: str | Path) -> Chain:
        """Read a chain file; a missing file or invalid JSON is an `InputError` naming it."""
        return cls.from_dict(read_json(path), path=str(path))

    # ----------------------------------------------------------------- derived views
    def is_homogeneous(self) -> bool:
        """True when all L stages are identical (the loss may differ) and x[0] = x[i]."""
        L = self.length
        return bool(
            np.all(self.u_f[:L] == self.u_f[0]) and np.all(self.u_b[:L] == self.u_b[0])
            and np.all(self.x[: L + 1] == self.x[0]) and np.all(self.xbar[1 : L + 1] == self.xbar[1])
            and np.all(self.o_f[:L] == self.o_f[0]) and np.all(self.o_b[:L] == self.o_b[0])
            and np.all(self.o_fa[:L] == self.o_fa[0]) and np.all(self.o_fn[:L] == self.o_fn[0])
            and np.all(self.u_fa[:L] == self.u_fa[0]) and np.all(self.u_fn[:L] == self.u_fn[0])
        )

    def discretised(self, slot: float) -> Chain:
        """The same chain with every size in slots of `slot` bytes, rounded up.

        Rounding up keeps schedules safe: a schedule that fits S slots in the discretised chain
        fits S * slot bytes in this one. The ceiling is computed exactly (integer arithmetic on
        the exact value of `slot`), so no size is ever rounded down by float noise.
        """
        from ..discretize import round_up  # the one discretisation of every problem

        def up(a: np.ndarray) -> np.ndarray:
            return round_up(a, slot)

        optional = {"u_fa": self.u_fa.copy(), "u_fn": self.u_fn.copy()} if self.has_mode_times() else {}
        if self.has_release():
            optional["o_bh"] = up(self.o_bh)
        return Chain(self.u_f.copy(), self.u_b.copy(), up(self.x), up(self.xbar), up(self.o_f), up(self.o_b),
                     name=self.name, stage_names=list(self.stage_names), meta=dict(self.meta),
                     o_fa=up(self.o_fa), o_fn=up(self.o_fn), **optional)

    def time_units_per_second(self) -> float:
        """How many of the file's time units make a second (meta.units.time: ms by default). A chain
        timed in counted work (`WORK_UNITS`) has no such number: `InputError` naming the field."""
        unit = str(self.meta.get("units", {}).get("time", "ms"))
        if unit in WORK_UNITS:
            raise InputError(f"{unit} counts work, not time: transfers over a link in bytes/s need times in "
                             "seconds (profile with --cost measured or roofline:<device>)", field="meta.units.time")
        return TIME_UNITS.get(unit, 1e3)

    def total_time(self) -> float:
        """sum u_fa + sum u_b: the makespan of a schedule without recomputation (store-all), and a
        lower bound on every schedule (each B(i) needs the tape of one F_all(i))."""
        return float(self.u_fa.sum() + self.u_b.sum())


def _time_array(value: Any, name: str) -> np.ndarray:
    """`value` as a float array (a chain's times); `InputError` naming `name` when it is not numbers."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be an array of numbers, got {value!r:.80}", field=name) from None


def _check_range(arr: np.ndarray, name: str, high: float, what: str) -> None:
    """Every entry of `arr` in 0..`high` (NaN and infinities fail); `InputError` naming the first
    entry out of range (``u_b[2]``) and saying it must be `what`."""
    bad = np.flatnonzero(~((arr >= 0) & (arr <= high)))
    if bad.size:
        i = int(bad[0])
        value = arr[i].item()
        raise InputError(f"must be {what}, got {value!r}", field=f"{name}[{i}]")


#: a chain's arrays of sizes (bytes, or slots once discretised) and of times (the file's unit)
_SIZE_ARRAYS = ("x", "xbar", "o_f", "o_b", "o_fa", "o_fn", "o_bh")
_TIME_ARRAYS = ("u_f", "u_b", "u_fa", "u_fn")

#: what a chain's time must be (`Chain.check`)
_TIME_RULE = f"a non-negative finite time, at most {MAX_TIME:g} (the time unit)"


def _check_size_range(arr: np.ndarray, name: str) -> None:
    """Every entry of the size array `arr` in 0..`MAX_BYTES` (the limit of a chain file's sizes)."""
    _check_range(arr, name, MAX_BYTES, f"a non-negative size, at most {MAX_BYTES} (1 PiB)")


def named_object(obj: Any, path: str, where: str) -> str:
    """Check that the list entry at `where` is a JSON object; its label for error messages, with
    its ``name`` when it has one."""
    if not isinstance(obj, dict):
        raise InputError("must be an object", path=path, field=where)
    return f"{where} ({obj['name']})" if "name" in obj else where


def parse_stages(stages: Any, path: str, where: str, *, per: int = 1, unit: str | None = None,
                 what: str = "a chain stage") -> list[dict[str, Any]]:
    """The validated stage objects of a chain (or of a join branch) at `where` of the file `path`:
    the `STAGE_FIELDS` (sizes integers in the file's memory unit `unit` of `per` bytes, at most `MAX_BYTES`
    once in bytes: `check_header`; times in the file's unit), the per-mode forward
    overheads `MODE_FIELDS` when a stage gives one (``fwd_overhead`` must be their max), the per-mode
    forward times `TIME_MODE_FIELDS` likewise (``fwd_time`` must be their max), the tape
    holding the output (xbar >= x) and a name; `InputError` naming the stage and field otherwise. A key
    not among `STAGE_KEYS` is an `UnknownFieldWarning` (`what`: "a chain stage") and is ignored."""
    if not isinstance(stages, list) or not stages:
        raise InputError("must be a non-empty list of stages", path=path, field=where)
    clean: list[dict[str, Any]] = []
    for i, stage in enumerate(stages):
        at = named_object(stage, path, f"{where}[{i}]")
        warn_unknown(stage, STAGE_KEYS, path, at, what)
        item = {f: _number(stage, f, path, f"{at}.{f}", integer=f in SIZE_FIELDS, per=per, unit=unit)
                for f in STAGE_FIELDS}
        if any(f in stage for f in MODE_FIELDS):  # per-mode overheads: fwd_overhead is their max
            for f in MODE_FIELDS:
                item[f] = (_number(stage, f, path, f"{at}.{f}", integer=True, per=per, unit=unit) if f in stage
                           else item["fwd_overhead"])
            if max(item[f] for f in MODE_FIELDS) != item["fwd_overhead"]:
                raise InputError(f"fwd_overhead {item['fwd_overhead']} must be the larger of {MODE_FIELDS[0]} "
                                 f"{item[MODE_FIELDS[0]]} and {MODE_FIELDS[1]} {item[MODE_FIELDS[1]]}",
                                 path=path, field=f"{at}.fwd_overhead")
        if any(f in stage for f in TIME_MODE_FIELDS):  # per-mode forward times: fwd_time is their max
            for f in TIME_MODE_FIELDS:
                item[f] = (_number(stage, f, path, f"{at}.{f}", integer=False) if f in stage
                           else item["fwd_time"])
            if max(item[f] for f in TIME_MODE_FIELDS) != item["fwd_time"]:
                raise InputError(f"fwd_time {item['fwd_time']} must be the larger of {TIME_MODE_FIELDS[0]} "
                                 f"{item[TIME_MODE_FIELDS[0]]} and {TIME_MODE_FIELDS[1]} "
                                 f"{item[TIME_MODE_FIELDS[1]]}", path=path, field=f"{at}.fwd_time")
        if item["tape_size"] < item["out_size"]:
            raise InputError(
                f"tape_size {item['tape_size']} < out_size {item['out_size']} (the tape contains the output)",
                path=path, field=f"{at}.tape_size")
        if RELEASE_FIELD in stage:
            item[RELEASE_FIELD] = _released(stage[RELEASE_FIELD], item, path, f"{at}.{RELEASE_FIELD}")
        item["name"] = check_name(stage.get("name", f"stage{i}"), path, f"{at}.name")
        clean.append(item)
    return clean


def _released(value: Any, item: dict[str, Any], path: str, where: str) -> int:
    """A stage's ``bwd_overhead_released``: an integer of bytes (it may be negative) between
    ``-(out_size + tape_size)`` (B(i) frees at most delta_{i+1} and the tape) and ``bwd_overhead``
    (releasing never costs more); an `InputError` reports the value as the file wrote it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number, got {value!r}", path=path, field=where)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"must be a finite integer number of bytes, got {value!r}", path=path, field=where)
    if isinstance(value, float) and not value.is_integer():
        raise InputError(f"must be an integer number of bytes, got {value!r}", path=path, field=where)
    low, high = -(item["out_size"] + item["tape_size"]), item["bwd_overhead"]
    if not low <= value <= high:  # (exact for ints of any size; both bounds are at most 1 PiB in magnitude)
        shown = short_number(value)  # (too long to print: "an integer of about N digits", sign kept below)
        shown = f"a negative {shown[3:]}" if value < 0 and shown.startswith("an ") else shown
        raise InputError(f"{shown} must lie between -(out_size + tape_size) = {low} and "
                         f"bwd_overhead = {high}", path=path, field=where)
    return int(value)


def check_name(value: Any, path: str, where: str) -> str:
    """A name read from a file (a stage's, a join branch's): a string, or an integer read as its text;
    anything else (a list, an object, a bool, a float) is an `InputError` naming `where`."""
    if not isinstance(value, (str, int)) or isinstance(value, bool):  # numbers are read as their text
        raise InputError(f"must be a string, got {value!r:.80}", path=path, field=where)
    return str(value)


def _number(obj: dict[str, Any], key: str, path: str, where: str, *, integer: bool, per: int = 1,
            unit: str | None = None) -> Any:
    """obj[key] validated by `units.check_number`: sizes (integers, in the memory unit `unit` of `per`
    bytes: `check_header`, `units.meta_memory_unit`) at most 1 PiB once in bytes (`check_bytes`), times at
    most `units.MAX_TIME`; a size's error words the limit in `unit` (None: bytes)."""
    if key not in obj:
        raise InputError("missing required field", path=path, field=where)
    value = check_number(obj[key], path=path, field=where, integer=integer, time=not integer,
                         unit=unit if integer else None)
    if integer:
        check_bytes(int(value), per, path, where, unit=unit)
    return value


def check_bytes(size: int, per: int, path: str | None, field: str, *, unit: str | None = None) -> None:
    """One size of a file, `size` units of `per` bytes (`check_header`), is at most `MAX_BYTES`
    (1 PiB) in bytes; `InputError` naming `path` and `field` otherwise, that words the limit in the
    file's memory unit `unit` (`units.size_limit`; None: the unit's bytes only). (A unit that is no
    byte unit, "slots", has `per` = 1: its numbers themselves are capped.)"""
    if size * per <= MAX_BYTES:
        return
    if unit is None:
        raise InputError(f"{size} units of the file's memory unit ({per} bytes each) is {size * per} bytes, too "
                         f"large (at most {MAX_BYTES} bytes, 1 PiB)", path=path, field=field)
    shown = f"{size} is" if per == 1 else f"{size} {size_unit_name(unit)} is {size * per} bytes,"
    raise InputError(f"{shown} too large (at most {size_limit(unit)})", path=path, field=field)


def check_total(total: int, path: str, field: str, *, per: int = 1, unit: str | None = None) -> None:
    """The sizes of one instance, `total` units of `per` bytes (`check_header`), add up to at most
    `MAX_BYTES` bytes (1 PiB; so sums stay exact in int64, in bytes as in the file's unit); the error
    words the total and the limit in the file's memory unit `unit` (`units.size_limit`; None: bytes,
    or units of `per` bytes)."""
    if total * per <= MAX_BYTES:
        return
    if unit is None or MEMORY_UNIT_BYTES.get(unit.strip().lower()) == 1:
        what = f"{total} bytes" if per == 1 else f"{total} units of {per} bytes each, {total * per} bytes"
        raise InputError(f"the sizes add up to {what}, more than {MAX_BYTES} (1 PiB)", path=path, field=field)
    what = f"{total} {size_unit_name(unit)}" + ("" if per == 1 else f" ({total * per} bytes)")
    raise InputError(f"the sizes add up to {what}, more than {size_limit(unit)}", path=path, field=field)


def check_header(data: Any, path: str, fmt: str, keys: tuple[str, ...], what: str) -> int:
    """A JSON object of format `fmt` (its ``format`` field), with an optional ``name`` (a string)
    and ``meta`` (an object whose ``units`` follow `check_units`). A top-level key other than `keys`
    (those of `what`, "a chain file"), a key of ``meta.units`` other than `UNIT_KEYS` and a ``meta``
    key close to "units" are each an `UnknownFieldWarning`. Returns the bytes per size unit
    (`check_units`)."""
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    if data.get("format") != fmt:
        raise InputError(f"expected {fmt!r}, got {data.get('format')!r}", path=path, field="format")
    warn_unknown(data, keys, path, "", what)
    if "name" in data and not isinstance(data["name"], str):
        raise InputError(f"must be a string, got {data['name']!r}", path=path, field="name")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise InputError("must be an object", path=path, field="meta")
    per = check_units(meta, path, "meta")
    warn_unknown(meta, ("units",), path, "meta", "memsched", near_only=True)  # free-form: only "unit" for "units"
    warn_unknown_units(meta, path, "meta")
    return per


def warn_unknown_units(meta: dict[str, Any], path: str, where: str) -> None:
    """An `UnknownFieldWarning` for each key of the object ``units`` of `meta` (at `where`: "meta",
    "graph.meta"; checked by `check_units`) other than `UNIT_KEYS`."""
    units = meta.get("units")
    if isinstance(units, dict):
        warn_unknown(units, UNIT_KEYS, path, f"{where}.units", "the units")


def check_units(meta: dict[str, Any], path: str, where: str) -> int:
    """``units`` of an instance file's `meta` object (at `where`: "meta", or "graph.meta" for a
    graph), optional: an object whose ``time`` is one of `TIME_UNITS` or `WORK_UNITS` and whose
    ``memory`` names a unit (`check_memory_unit`). Returns the bytes per size unit: that of a byte
    unit (`units.MEMORY_UNIT_BYTES`: 1024 for "KiB"), 1 when no unit is given (bytes) and for a unit
    that is no byte unit ("slots"), whose numbers the 1 PiB limit then caps as they are written.
    `InputError` naming `path` and the field otherwise."""
    units = meta.get("units", {})
    if not isinstance(units, dict):
        raise InputError(f"must be an object, got {units!r:.80}", path=path, field=f"{where}.units")
    if "time" in units and (not isinstance(units["time"], str) or units["time"] not in (*TIME_UNITS, *WORK_UNITS)):
        raise InputError(f"unknown time unit {units['time']!r:.80} (one of {', '.join((*TIME_UNITS, *WORK_UNITS))})",
                         path=path, field=f"{where}.units.time")
    if "memory" not in units:
        return 1
    return check_memory_unit(units["memory"], path, f"{where}.units.memory")


def check_memory_unit(unit: Any, path: str, field: str) -> int:
    """A file's memory unit (``meta.units.memory``): a string naming a unit, a byte unit of
    `units.MEMORY_UNIT_BYTES` (case-insensitive, "bytes", "KiB", "MB", ...) or a unit that is no
    byte unit, a word starting with a letter ("slots"); a number, a list, an empty string or one
    that starts with no letter ("5") is an `InputError` naming `field`, as is a byte unit too large for
    sizes of at most 1 PiB ("PiB", "PB", "EiB": `units.check_not_too_large_memory_unit`, the one check of
    every loader, chain, join, graph, and so offloading and pipelines). Returns the bytes per unit (1 for
    a unit that is no byte unit)."""
    name = unit.strip() if isinstance(unit, str) else ""
    if not name or not name[0].isalpha() or len(name) > 40:
        raise InputError(f"must be the name of a memory unit (bytes, KiB, MiB, kB, MB, ..., or a unit that is no "
                         f"byte unit, such as \"slots\"), got {unit!r:.80}", path=path, field=field)
    check_not_too_large_memory_unit(name, path=path, field=field)
    return MEMORY_UNIT_BYTES.get(name.lower(), 1)

"""Join networks (Siamese, cross-modal): k chains joined at the loss, and the `memsched.join/1` file.

Notation (Beaumont, Herrmann, Pallez, Shilova, "Optimal memory-aware backpropagation of deep
join networks", Phil. Trans. R. Soc. A 378, 2020, with the rotor chain model of docs/chain.md):

- branch b = 0..k-1 is a chain of L_b stages in the rotor model, stored as a
  `solvers.chain.instance.Chain` whose own loss entries are zero (``u_b[L_b] = o_b[L_b] = 0``):
  ``x^b[0]`` is its input a_0^b, ``x^b[L_b]`` its last activation a_{L_b}^b, and so on;
- the loss is shared: it needs a_{L_b}^b of every branch, runs ``loss_time`` (its bwd_time)
  with a transient ``loss_overhead`` (its bwd_overhead), and produces every branch's gradient
  delta_{L_b}^b (size x^b[L_b]);
- per-mode forward overheads (optional per stage, ``fwd_overhead_all`` o_fa^b[i] while F_all(b,i)
  runs and ``fwd_overhead_nograd`` o_fn^b[i] while F_ck(b,i) / F_n(b,i) run, as in the chain file;
  ``fwd_overhead`` = their max) are kept in each branch's Chain and charged by the join simulator,
  the DP and the exact models; without them both are o_f^b[i]. Per-mode forward times likewise
  (``fwd_time_all`` u_fa^b[i] for F_all(b,i), ``fwd_time_nograd`` u_fn^b[i] for F_ck / F_n;
  ``fwd_time`` = their max; both u_f^b[i] without them).

Sizes are integers (bytes, or slots once discretised), times floats (the file's unit).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chain.instance import (
    LOSS_FIELDS,
    Chain,
    _number,
    check_header,
    check_name,
    check_total,
    named_object,
    parse_stages,
)
from ..errors import InputError
from ..jsonio import read_json, warn_unknown, warns_once_loaded, write_json_atomic
from ..units import check_number, meta_memory_unit, plain_number

FORMAT = "memsched.join/1"
#: every top-level key of a join file, and of a branch; others are reported (`jsonio.warn_unknown`) and ignored
JOIN_KEYS = ("format", "name", "branches", "loss", "meta")
BRANCH_KEYS = ("name", "input_size", "stages")


@dataclass(eq=False)
class Join:
    """k branches (chains, loss entries zero) joined by a loss of time ``loss_time`` and
    transient memory ``loss_overhead``."""

    branches: list[Chain]
    loss_time: float = 0.0
    loss_overhead: int = 0
    name: str = "join"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.branches:
            raise ValueError("a join needs at least one branch")
        for b, chain in enumerate(self.branches):
            if chain.length < 1:
                raise ValueError(f"branch {b} has no stage")
            if chain.u_b[-1] != 0 or chain.o_b[-1] != 0 or chain.has_release():  # the loss is the join's
                self.branches[b] = _without_loss(chain)
        self.loss_time = float(self.loss_time)
        self.loss_overhead = int(self.loss_overhead)

    def check(self) -> None:
        """The rules of the join file's loader (`from_dict`), for a join built or edited in Python: each
        branch by `Chain.check` (its times finite in 0..`MAX_TIME` of the file's unit, sizes integers in
        0..`MAX_BYTES` (5.2 bytes refused, whole floats converted), the entries past its stages 0 (``x[L_b+1]``,
        ...); the error's field prefixed ``branches[b].``, as ``branches[1].x[0]``), the loss
        time ``loss_time`` a time and ``loss_overhead`` an integer size (bytes, or the file's memory unit)
        by `units.check_number`. The first bad entry is an `InputError` naming the field (no path)."""
        for b, branch in enumerate(self.branches):
            try:
                branch.check()
            except InputError as err:
                raise InputError(err.message, field=f"branches[{b}].{err.field}" if err.field else f"branches[{b}]") \
                    from None
        check_number(plain_number(self.loss_time), path=None, field="loss_time", time=True)
        check_number(plain_number(self.loss_overhead), path=None, field="loss_overhead", integer=True)

    # ----------------------------------------------------------------- views
    @property
    def k(self) -> int:
        """Number of branches."""
        return len(self.branches)

    @property
    def lengths(self) -> list[int]:
        """L_b for each branch."""
        return [c.length for c in self.branches]

    def input_total(self) -> int:
        """X_0 = sum_b x^b[0], what the inputs (and at the end the gradients delta_0^b) hold."""
        return int(sum(int(c.x[0]) for c in self.branches))

    def total_time(self) -> float:
        """sum of all u_f and u_b plus the loss: the makespan without recomputation."""
        return float(sum(c.total_time() for c in self.branches) + self.loss_time)

    def discretised(self, slot: float) -> Join:
        """Every size in slots of `slot` bytes, rounded up exactly (`discretize.round_up`, as
        `Chain.discretised`; ``loss_overhead`` included), so a schedule that fits S slots fits S * slot bytes."""
        from ..discretize import round_up  # the one discretisation of every problem

        # (a float ceil(o / slot - 1e-9) rounds o = k * slot + 1 down to k once slot > 1e9 bytes)
        loss_overhead = int(round_up([self.loss_overhead], slot)[0])
        return Join([c.discretised(slot) for c in self.branches], self.loss_time, loss_overhead, name=self.name,
                    meta=dict(self.meta))

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_chains(cls, chains: list[Chain], *, loss_time: float = 0.0, loss_overhead: int = 0,
                    name: str = "join") -> Join:
        """Join existing chains (their own loss entries are dropped)."""
        return cls([_without_loss(c) for c in chains], loss_time, loss_overhead, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The `memsched.join/1` JSON object."""
        branches = []
        for c in self.branches:
            d = c.to_dict()
            branches.append({"name": c.name, "input_size": d["input_size"], "stages": d["stages"]})
        return {"format": FORMAT, "name": self.name, "branches": branches,
                "loss": {"bwd_time": self.loss_time, "bwd_overhead": self.loss_overhead},
                "meta": copy.deepcopy(self.meta)}  # the caller may edit the object without changing the join

    def save(self, path: str | Path) -> None:
        """Write the join file atomically."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    @warns_once_loaded
    def from_dict(cls, data: Any, *, path: str = "<join>") -> Join:
        """Validate and build; every error names `path`, the branch, the stage and the field. Sizes are
        in the file's ``meta.units.memory`` and at most 1 PiB once in bytes, each and summed
        (`chain.instance.check_header`); a branch's ``name`` is a string (an integer is read as its text).
        A key the loader does not read (`JOIN_KEYS`, `BRANCH_KEYS`, `chain.instance.STAGE_KEYS`) is an
        `UnknownFieldWarning`, and is ignored."""
        per = check_header(data, path, FORMAT, JOIN_KEYS, "a join file")
        unit = meta_memory_unit(data.get("meta"))
        raw = data.get("branches")
        if not isinstance(raw, list) or not raw:
            raise InputError("must be a non-empty list of branches", path=path, field="branches")
        chains = []
        for b, br in enumerate(raw):
            if isinstance(br, dict) and "name" in br:  # checked before `named_object` puts it in every field
                check_name(br["name"], path, f"branches[{b}].name")
            where_b = named_object(br, path, f"branches[{b}]")
            warn_unknown(br, BRANCH_KEYS, path, where_b, "a join branch")
            input_size = _number(br, "input_size", path, f"{where_b}.input_size", integer=True, per=per, unit=unit)
            clean = parse_stages(br.get("stages"), path, f"{where_b}.stages", per=per, unit=unit,
                                 what="a join stage")
            chains.append(Chain.from_stages(input_size, clean, {"bwd_time": 0.0, "bwd_overhead": 0},
                                            name=check_name(br.get("name", f"branch{b}"), path,
                                                            f"branches[{b}].name")))
        loss = data.get("loss")
        if not isinstance(loss, dict):
            raise InputError("missing or not an object", path=path, field="loss")
        warn_unknown(loss, LOSS_FIELDS, path, "loss", "a join's loss")
        loss_time = _number(loss, "bwd_time", path, "loss.bwd_time", integer=False)
        loss_overhead = _number(loss, "bwd_overhead", path, "loss.bwd_overhead", integer=True, per=per, unit=unit)
        check_total(loss_overhead + sum(int(v) for c in chains for a in (c.x, c.xbar, c.o_f, c.o_bh) for v in a),
                    path, "branches", per=per, unit=unit)
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise InputError("must be an object", path=path, field="meta")
        return cls(chains, loss_time, loss_overhead, name=str(data.get("name", Path(path).stem)), meta=meta)

    @classmethod
    def load(cls, path: str | Path) -> Join:
        """Read a join file; a missing file or invalid JSON is an `InputError` naming it."""
        return cls.from_dict(read_json(path), path=str(path))


def _without_loss(chain: Chain) -> Chain:
    """The same chain with u_b[L] = o_b[L] = 0 (the join's loss replaces the chain's), held
    (`Chain.held`: the join problem charges each B(i) holding its inputs to its end)."""
    chain = chain.held()
    u_b, o_b = chain.u_b.copy(), chain.o_b.copy()
    u_b[-1], o_b[-1] = 0.0, 0
    return Chain(chain.u_f.copy(), u_b, chain.x.copy(), chain.xbar.copy(), chain.o_f.copy(), o_b,
                 name=chain.name, stage_names=list(chain.stage_names), meta=dict(chain.meta),
                 o_fa=chain.o_fa.copy(), o_fn=chain.o_fn.copy(), u_fa=chain.u_fa.copy(), u_fn=chain.u_fn.copy())


def branch_with_loss(join: Join, b: int) -> Chain:
    """Branch b alone as a chain whose loss is the join's (for k = 1 this is the same problem)."""
    c = join.branches[b]
    u_b, o_b = c.u_b.copy(), c.o_b.copy()
    u_b[-1], o_b[-1] = join.loss_time, join.loss_overhead
    return Chain(c.u_f.copy(), u_b, c.x.copy(), c.xbar.copy(), c.o_f.copy(), np.asarray(o_b),
                 name=c.name, stage_names=list(c.stage_names), meta=dict(c.meta), o_fa=c.o_fa.copy(),
                 o_fn=c.o_fn.copy(), u_fa=c.u_fa.copy(), u_fn=c.u_fn.copy())

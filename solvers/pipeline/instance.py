"""The pipelined model-parallelism instance (docs/pipeline.md) and its loaders.

A chain of L layers (0-based, in the instance's layer order). Layer ``l`` has

- ``fwd[l]``, ``bwd[l]``: forward and backward times for one micro-batch (the file's time unit,
  ``time_unit`` seconds each: milliseconds for PipeDream profiles and, unless the chain file's
  ``meta.units.time`` says otherwise, for chain files);
- ``act[l]``: size in bytes of its output activation a_l (for one micro-batch);
- ``params[l]``: size in bytes of its weights W_l;
- optionally (a measured profile, `models.pipeline.dag_runner.profile_dag`) what autograd really
  saves: ``saved_by[l]``, the layers among l itself and its consumers that keep l's output for
  their backward (a convolution keeps its input, a ReLU its output, an add nothing), and
  ``saved_extra[l]``, the bytes l saves that are neither its inputs nor its output (max-pool
  indices, a batch norm's normalised input inside a fused module); ``input_saved``: whether
  layer 0 keeps the pipeline's input. Without ``saved_by`` the stash is the classic one (every
  input of every layer kept; `stash`).

``input_size`` is the size of a_{-1}, the network's input, read by layer ``input_layer`` only (0, the
first layer of the instance's order; another index after `Pipeline.reordered` puts other layers, such
as a second source, before it). No cut carries the input: the stage holding ``input_layer`` keeps it
(its stash), as the first stage of a chain does. ``cut[l]`` (for l < L-1) is the size
of what crosses a cut between layers l and l+1: ``act[l]`` for a chain; for a PipeDream graph
read in topological order it is the sum of the outputs of layers <= l consumed by a layer > l
(what PipeDream sends between stages).

Machine side (not in the files): ``weight_factor`` multiplies the weights of a stage to account
for their gradients and optimizer state (default 4: weights + gradients + two Adam moments),
``bandwidth`` is the link bandwidth in bytes/s (None: communication is not charged).

Loading:

- ``memsched.chain/1`` files: layer l = stage l of the chain, ``act[l] = out_size``,
  ``input_size`` = the chain's input_size, both converted into bytes from the file's
  ``meta.units.memory`` (bytes when absent; a unit that is no byte unit is refused), and the
  pipeline's ``meta.units.memory`` is then "bytes"; ``params[l]`` = ``meta.param_sizes[l]`` when
  the file has such a list (bytes), else 0; the loss is folded into the last layer's backward time.
- PipeDream ``graph.txt`` profiles: one node per line ``ID -- DESC -- forward_compute_time=F,
  backward_compute_time=B, activation_size=A, parameter_size=W[ -- stage_id=S]`` (times in ms,
  sizes in bytes; ``activation_size`` may be a list ``[a; b]``, summed as PipeDream does; after
  the fields only one ``stage_id=S``, S an integer >= 0, ignored), then edge lines
  ``\\tID1 -- ID2``. Nodes are read in a topological order, ties broken by their order in the
  file (Kahn's algorithm with a priority on the line number). Source nodes whose description
  starts with "Input" become ``input_size`` (PipeDream also removes them); one of non-zero size
  feeding a node other than the first layer of that order is refused (no stage would be charged
  its transfer, stash and buffers).
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..jsonio import warns_once_loaded
from ..units import MAX_BYTES, MAX_TIME, byte_unit, check_number, memory_unit, plain_number, size_array

DEFAULT_WEIGHT_FACTOR = 4.0
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(eq=False)
class Pipeline:
    """A chain of layers to partition into pipeline stages (see the module docstring)."""

    fwd: np.ndarray
    bwd: np.ndarray
    act: np.ndarray
    params: np.ndarray
    input_size: int = 0
    cut: np.ndarray | None = None
    name: str = "pipeline"
    layer_names: list[str] = field(default_factory=list)
    time_unit: float = 1e-3
    weight_factor: float = DEFAULT_WEIGHT_FACTOR
    bandwidth: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    succ: list[list[int]] | None = None
    latency: float = 0.0
    saved_by: list[list[int]] | None = None
    saved_extra: np.ndarray | None = None
    input_saved: bool = True
    input_layer: int = 0
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.fwd = np.asarray(self.fwd, dtype=float)
        self.bwd = np.asarray(self.bwd, dtype=float)
        self.act = size_array(self.act, "act")  # 2.5 bytes is refused, not truncated
        self.params = size_array(self.params, "params")
        L = len(self.fwd)
        if L == 0:
            raise ValueError("a pipeline needs at least one layer")
        for name in ("bwd", "act", "params"):
            if getattr(self, name).shape != (L,):
                raise ValueError(f"Pipeline.{name} must have length {L}")
        if self.succ is not None:
            self.succ = [sorted({int(v) for v in vs}) for vs in self.succ]
            if len(self.succ) != L or any(not u < v < L for u, vs in enumerate(self.succ) for v in vs):
                raise ValueError("Pipeline.succ must list, per layer, later layers (index order is topological)")
        if not 0 <= self.input_layer < L or (self.input_layer > 0 and self.succ is None):
            raise ValueError(f"Pipeline.input_layer must be a layer 0..{L - 1} (0 for a chain)")
        if self.saved_by is not None:
            self.saved_by = [sorted({int(w) for w in ws}) for ws in self.saved_by]
            succ = self.succ if self.succ is not None else [[l + 1] if l + 1 < L else [] for l in range(L)]
            if len(self.saved_by) != L or any(w != l and w not in succ[l] for l, ws in enumerate(self.saved_by)
                                              for w in ws):
                raise ValueError("Pipeline.saved_by must list, per layer, itself and/or some of its consumers")
        if self.saved_extra is not None:
            self.saved_extra = size_array(self.saved_extra, "saved_extra")
            if self.saved_extra.shape != (L,) or (self.saved_extra < 0).any():
                raise ValueError(f"Pipeline.saved_extra must be {L} non-negative byte counts")
        derived = self.act[:-1].copy() if self.succ is None else _cuts(self.act, self.succ)
        if self.cut is None:
            self.cut = derived
        self.cut = size_array(self.cut, "cut")
        if self.cut.shape != (L - 1,):
            raise ValueError(f"Pipeline.cut must have length {L - 1}")
        if not np.array_equal(self.cut, derived):  # the DPs' bounds (interleave-dp's stash bound) rely on it
            raise ValueError("Pipeline.cut must be what crosses each cut: act[:-1] for a chain, the outputs of "
                             "layers <= l read by a later layer for a DAG (leave it out: it is derived)")
        if not self.layer_names:
            self.layer_names = [f"layer{i}" for i in range(L)]
        if self.weight_factor < 0 or not math.isfinite(self.weight_factor):
            raise ValueError("weight_factor must be a non-negative number")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise ValueError("bandwidth must be positive (or None)")
        if self.latency < 0 or not math.isfinite(self.latency):
            raise ValueError("latency must be a non-negative number of seconds")

    def check(self) -> None:
        """The number rule of the loaders (`units.check_number`), for a pipeline built or edited in Python:
        its times (``fwd``, ``bwd``: finite, in 0..`MAX_TIME`, the time unit of ``time_unit`` seconds) and
        sizes (``act``, ``params``, ``cut``, ``saved_extra``, ``input_size``: integers in 0..`MAX_BYTES`
        bytes; ``cut`` and ``saved_extra`` when present). The first bad entry is an `InputError` naming
        the array and index (``fwd[3]``; no path). The totals its loaders also cap are not re-added here."""
        arrays: list[tuple[str, Any, bool]] = [(name, getattr(self, name), True) for name in ("fwd", "bwd")]
        arrays += [(name, getattr(self, name), False) for name in ("act", "params", "cut", "saved_extra")]
        arrays.append(("input_size", np.asarray([self.input_size]), False))
        for name, values, time in arrays:
            if values is None:
                continue
            values = np.asarray(values, dtype=float)
            with np.errstate(invalid="ignore"):
                wrong = ~np.isfinite(values) | (values < 0) | (values > (MAX_TIME if time else MAX_BYTES))
                if not time:
                    wrong |= values != np.floor(values)
            bad = np.flatnonzero(wrong)
            if bad.size:
                i = int(bad[0])
                where = name if name == "input_size" else f"{name}[{i}]"
                check_number(plain_number(np.ravel(getattr(self, name))[i]), path=None, field=where, time=time,
                             integer=not time)

    @property
    def length(self) -> int:
        """L, the number of layers."""
        return len(self.fwd)

    def with_machine(self, *, bandwidth: float | None = None, weight_factor: float | None = None,
                     latency: float | None = None) -> Pipeline:
        """A copy with another bandwidth (bytes/s; None: not charged), weight factor and/or
        per-message latency (seconds, charged once per boundary crossing with the bandwidth)."""
        return replace(self, bandwidth=bandwidth,
                       weight_factor=self.weight_factor if weight_factor is None else weight_factor,
                       latency=self.latency if latency is None else float(latency))

    @property
    def is_chain(self) -> bool:
        """True when every layer feeds exactly the next one (no DAG edges beyond the chain)."""
        return self.succ is None or all(vs == ([l + 1] if l + 1 < self.length else [])
                                        for l, vs in enumerate(self.succ))

    def first_use(self) -> np.ndarray:
        """Per layer, the first layer (in index order) that consumes its output; L when none."""
        L = self.length
        if self.succ is None:
            return np.arange(1, L + 1)
        cached = self._cache.get("first_use")
        if cached is None:
            cached = self._cache["first_use"] = np.array([min(vs) if vs else L for vs in self.succ], dtype=np.int64)
        return cached.copy()

    def reordered(self, order: list[int]) -> Pipeline:
        """The same network with its layers in another topological `order` (a permutation of
        0..L-1): cuts are recomputed from the DAG edges, ``input_layer`` follows the layer that reads
        the input (`ValueError` if `order` is not topological)."""
        L = self.length
        if sorted(order) != list(range(L)):
            raise ValueError("the order must be a permutation of the layers")
        pos = np.empty(L, dtype=np.int64)
        pos[np.asarray(order)] = np.arange(L)
        succ = self.succ if self.succ is not None else [[l + 1] if l + 1 < L else [] for l in range(L)]
        new_succ = [[int(pos[v]) for v in succ[u]] for u in order]
        if any(v <= k for k, vs in enumerate(new_succ) for v in vs):
            raise ValueError("the order is not topological (a layer comes before one it consumes)")
        idx = np.asarray(order)
        act = self.act[idx]
        saved_by = None if self.saved_by is None else [[int(pos[w]) for w in self.saved_by[u]] for u in order]
        extra = None if self.saved_extra is None else self.saved_extra[idx]
        return replace(self, fwd=self.fwd[idx], bwd=self.bwd[idx], act=act, params=self.params[idx],
                       cut=_cuts(act, new_succ), layer_names=[self.layer_names[i] for i in order],
                       succ=new_succ, meta={**self.meta, "order": list(map(int, order))}, saved_by=saved_by,
                       saved_extra=extra, input_layer=int(pos[self.input_layer]))

    @property
    def cut_sizes(self) -> np.ndarray:
        """Bytes crossing the cut after layer l, l = 0..L-2 (`cut` once validated, never None)."""
        assert self.cut is not None  # set by __post_init__
        return self.cut

    def cut_messages(self) -> np.ndarray:
        """Number of tensors crossing the cut after layer l, l = 0..L-2 (1 for a chain): each
        is one message, paying the latency once per direction."""
        L = self.length
        delta = np.zeros(L + 1, dtype=np.int64)
        for u, vs in enumerate(self.succ if self.succ is not None else [[l + 1] for l in range(L - 1)] + [[]]):
            if vs and max(vs) > u:
                delta[u] += 1
                delta[max(vs)] -= 1
        return np.cumsum(delta)[: L - 1]

    def messages_into(self, l: int) -> int:
        """Tensors received by a stage starting at layer l > 0 (1 for l = 0: the input, when layer 0
        reads it)."""
        if l == 0:
            return 1
        cached = self._cache.get("cut_messages")
        if cached is None:
            cached = self._cache["cut_messages"] = self.cut_messages()
        return int(cached[l - 1])

    def internal_stash(self, i: int) -> np.ndarray:
        """For stages [i, j], j = i..L-1: bytes of the outputs of layers in [i, j] consumed by a
        layer in [i, j] (kept per micro-batch until the backward; for a chain, act[i..j-1])."""
        L = self.length
        fu = self.first_use()[i:]
        acts = self.act[i:].astype(np.int64)
        contrib = np.zeros(L - i + 1, dtype=np.int64)
        np.add.at(contrib, np.minimum(fu - i, L - i), acts)
        return np.cumsum(contrib)[: L - i]

    @property
    def measured_saves(self) -> bool:
        """True when the stash follows the profile's measured saves (``saved_by`` given)."""
        return self.saved_by is not None

    def stash(self, i: int) -> np.ndarray:
        """A_s for the stages [i, j], j = i..L-1: bytes one micro-batch keeps for its backward.

        Classic (no ``saved_by``): ``cut[i - 1]`` (i > 0) ``+ internal_stash(i)``, plus ``input_size``
        for the stages holding ``input_layer``: every input of every layer of the stage. Measured: the
        output of each layer v counted once when a layer of the stage keeps it (v itself or a consumer
        in ``saved_by[v]``; a tensor crossing the boundary before i counts only when a layer of the
        stage keeps it), and the pipeline's input when the stage holds ``input_layer`` and
        ``input_saved``. Both plus ``saved_extra`` of the stage's layers (0 when absent)."""
        L = self.length
        extra = np.cumsum(self.saved_extra[i:]) if self.saved_extra is not None else 0
        acts = self.act.astype(np.int64)
        contrib = np.zeros(L - i + 1, dtype=np.int64)
        if i <= self.input_layer and (self.saved_by is None or self.input_saved):
            contrib[self.input_layer - i] += int(self.input_size)
        if self.saved_by is None:
            received = int(self.cut_sizes[i - 1]) if i > 0 else 0
            return received + np.cumsum(contrib)[: L - i] + self.internal_stash(i) + extra
        for v in range(L):
            later = [w for w in self.saved_by[v] if w >= i]
            if later:
                contrib[min(later) - i] += int(acts[v])
        return np.cumsum(contrib)[: L - i] + extra

    def input_of(self, l: int) -> int:
        """Bytes a stage starting at layer l receives: what crosses the cut before l (a_{l-1} on a
        chain); for l = 0 the network's input when layer 0 reads it (``input_layer`` = 0), else 0."""
        if l == 0:
            return int(self.input_size) if self.input_layer == 0 else 0
        return int(self.cut_sizes[l - 1])

    def comm_time(self, nbytes: float, messages: int = 0) -> float:
        """Time (instance unit) to move `nbytes` over a link in `messages` transfers, each
        paying the latency; 0 when bandwidth is not charged."""
        if self.bandwidth is None:
            return 0.0
        return (float(nbytes) / self.bandwidth + messages * self.latency) / self.time_unit

    def total_time(self) -> float:
        """sum of fwd + bwd: the period on one device."""
        return float(self.fwd.sum() + self.bwd.sum())

    def to_graph_txt(self) -> str:
        """This pipeline in PipeDream's graph.txt format (times in ms, sizes in bytes; its DAG edges,
        and the optional ``saved_by`` / ``saved_extra`` fields when the profile has them)."""
        scale = self.time_unit / 1e-3
        lines = []
        input_id, ids, descs = _graph_nodes(self.layer_names)
        succ = self.succ if self.succ is not None else [[l + 1] for l in range(self.length - 1)] + [[]]
        if self.input_size:
            keep = "" if self.saved_by is None else f", saved_by=[{ids[self.input_layer] if self.input_saved else ''}]"
            lines.append(f"{input_id} -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, "
                         f"activation_size={float(self.input_size):.1f}, parameter_size=0.000{keep}")
        for i in range(self.length):
            extra = "" if self.saved_extra is None else f", saved_extra={int(self.saved_extra[i])}"
            if self.saved_by is not None:
                extra += ", saved_by=[" + "; ".join(ids[w] for w in self.saved_by[i]) + "]"
            lines.append(f"{ids[i]} -- {descs[i]} -- forward_compute_time={self.fwd[i] * scale:.9f}, "
                         f"backward_compute_time={self.bwd[i] * scale:.9f}, activation_size={float(self.act[i]):.1f}, "
                         f"parameter_size={float(self.params[i]):.1f}{extra}")
        if self.input_size:
            lines.append(f"\t{input_id} -- {ids[self.input_layer]}")
        lines += [f"\t{ids[u]} -- {ids[v]}" for u, vs in enumerate(succ) for v in vs]
        return "\n".join(lines) + "\n"


#: a node ID `_graph_nodes` keeps from a layer name: one word, none of the separators of an edge line
#: or a ``saved_by=[a; b]`` list (whitespace, ``;``, ``,``, brackets)
_NODE_ID = re.compile(r"[^\s;,\[\]]+")


def _graph_nodes(names: list[str]) -> tuple[str, list[str], list[str]]:
    """(the Input node's ID, each layer's node ID, each layer's DESC) for `Pipeline.to_graph_txt`, so that
    `from_graph_txt` reads a layer back named as written: it names a layer ``"ID: DESC"``, so a name of
    that form (one read from a graph.txt) keeps its ID when that is one word (no whitespace) not taken by an
    earlier layer (`_NODE_ID`), and its DESC as `_graph_desc` writes it; any other layer gets a free
    ``node{l+1}`` and its whole name as DESC (read back as ``"node{l+1}: name"``, which a second round trip
    keeps)."""
    own: list[str | None] = []
    taken: set[str] = set()  # the IDs kept so far (a set: 20,000-layer graphs)
    for name in names:
        head, sep, _ = name.partition(": ")
        ok = bool(sep) and _NODE_ID.fullmatch(head) is not None and head not in taken
        own.append(head if ok else None)
        if ok:
            taken.add(head)

    def free(i: int) -> str:
        """``node{i}``, or ``node{i}.k`` with the least k >= 1 when a layer's own ID is ``node{i}``."""
        pick, k = f"node{i}", 0
        while pick in taken:
            k += 1
            pick = f"node{i}.{k}"
        taken.add(pick)
        return pick

    input_id = free(0)
    ids = [h if h is not None else free(i + 1) for i, h in enumerate(own)]
    descs = [_graph_desc(name.partition(": ")[2] if h is not None else name) for name, h in zip(names, own)]
    return input_id, ids, descs


def _graph_desc(name: str) -> str:
    """A layer name as the DESC of a graph.txt node line that `from_graph_txt` reads back as the same
    layer: whitespace runs (newlines included) become one space, no " -- " (the line's separator) is
    left inside or at its ends, and a description starting with "Input" (which the loader takes for the
    pipeline's input) is prefixed with "layer "."""
    padded = " " + " ".join(name.split()) + " "
    while " -- " in padded:
        padded = padded.replace(" -- ", " - ")
    desc = padded.strip()
    return f"layer {desc}" if desc.startswith("Input") else desc


def _cuts(act: np.ndarray, succ: list[list[int]]) -> np.ndarray:
    """cut[l], l = 0..L-2: bytes of the outputs of layers <= l consumed by a layer > l."""
    L = len(act)
    delta = np.zeros(L + 1, dtype=np.int64)
    for u, vs in enumerate(succ):
        if vs and max(vs) > u:
            delta[u] += int(act[u])
            delta[max(vs)] -= int(act[u])
    return np.cumsum(delta)[: L - 1]


# ---------------------------------------------------------------------------- loaders
def load(path: str | Path) -> Pipeline:
    """A pipeline from a chain file (JSON, ``memsched.chain/1``) or a PipeDream graph.txt."""
    from ..jsonio import read_text

    path = str(path)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        return from_chain_json(text, path=path)
    return from_graph_txt(text, path=path)


@warns_once_loaded
def from_chain_json(text: str, *, path: str = "<chain>") -> Pipeline:
    """A pipeline from the text of a ``memsched.chain/1`` file (validated by the chain loader, which
    reports the keys it does not read: `jsonio.UnknownFieldWarning`); a key of its free-form ``meta``
    close to ``param_sizes``, the one more it reads here, is reported too ("param_size")."""
    from ..chain.instance import Chain
    from ..jsonio import parse_json, warn_unknown

    chain = Chain.from_dict(parse_json(text, path), path=path)
    # ("unit" for "units": reported by the chain loader)
    warn_unknown(chain.meta, ("param_sizes",), path, "meta", "the pipeline loader", near_only=True)
    return from_chain(chain, path=path)


def from_chain(chain: Any, *, path: str = "<chain>") -> Pipeline:
    """Layer l = stage l of a `solvers.chain.Chain`; activation = out_size and input = input_size,
    converted into bytes from the chain's size unit (`chain_bytes`); parameters from
    ``meta["param_sizes"]`` (a list of L byte counts) when present, else 0; the loss's backward
    time is added to the last layer. The pipeline's sizes are bytes (its ``meta.units.memory``
    says so): weights x factor and link bandwidths in bytes/s are added to them."""
    L = chain.length
    meta = dict(chain.meta)
    acts, input_size = chain_bytes(chain, path)
    if isinstance(meta.get("units"), dict):
        meta["units"] = {**meta["units"], "memory": "bytes"}
    params = _param_sizes(meta.get("param_sizes"), L, path, others=_chain_total_bytes(chain))
    unit = "ms"
    units = meta.get("units")
    if isinstance(units, dict) and "time" in units:
        unit = str(units["time"])
    if unit not in TIME_UNITS:
        from ..chain.instance import WORK_UNITS

        why = ("counts work, not time: a pipeline's period adds transfers over links in bytes/s, which need times "
               "in seconds (profile with --cost measured or roofline:<device>)") if unit in WORK_UNITS else (
               f"is not a time unit (one of {', '.join(TIME_UNITS)})")
        raise InputError(f"{unit!r} {why}", path=path, field="meta.units.time")
    bwd = chain.u_b[:L].astype(float).copy()
    bwd[-1] += float(chain.u_b[L])
    return Pipeline(fwd=chain.u_f[:L].copy(), bwd=bwd, act=acts,
                    params=np.asarray(params, dtype=np.int64), input_size=input_size,
                    name=chain.name, layer_names=list(chain.stage_names), time_unit=TIME_UNITS[unit], meta=meta)


def _param_sizes(params: Any, L: int, path: str, *, others: int = 0) -> list[int]:
    """``meta.param_sizes`` of a chain file: L integer byte counts in 0..`MAX_BYTES` (an integral
    float such as 2.0 counts, as for the stages' sizes; 1000000.7 is refused, not truncated), or
    [0] * L when absent; with the file's `others` sizes (bytes, the stages' summed) they add up to at
    most `MAX_BYTES`. An `InputError` names the file and ``meta.param_sizes`` (or its entry)."""
    if params is None:
        return [0] * L
    if not isinstance(params, list) or len(params) != L:
        raise InputError(f"must be a list of {L} non-negative byte counts (at most {MAX_BYTES} each)", path=path,
                         field="meta.param_sizes")
    sizes = [int(check_number(p, path=path, field=f"meta.param_sizes[{i}]", integer=True))
             for i, p in enumerate(params)]
    _capped_sum([others, *sizes], path, "meta.param_sizes")
    return sizes


def chain_bytes(chain: Any, path: str = "<chain>") -> tuple[np.ndarray, int]:
    """(out sizes a_0..a_{L-1} of the stages, input size) of `chain` in bytes: its sizes (in its
    ``meta.units.memory``, `units.unit_bytes`) times the bytes per unit. A unit that is no byte
    unit ("slots") is an `InputError` naming the file and ``meta.units.memory`` (a pipeline adds
    weights and times transfers in bytes/s). A size above `MAX_BYTES` once in bytes is refused
    earlier, by the chain's loader naming the size's field; the check here guards chains built
    in other ways."""
    per = byte_unit(chain, "a pipeline (weights in bytes, links in bytes/s)", path=path)
    sizes = [int(v) for v in chain.x[: chain.length + 1]]
    if max(sizes) * per > MAX_BYTES:
        raise InputError(f"a size of {max(sizes)} {memory_unit(chain)} is {max(sizes) * per} bytes, too large (at most "
                         f"{MAX_BYTES} bytes, 1 PiB)", path=path, field="meta.units.memory")
    return np.asarray([v * per for v in sizes[1:]], dtype=np.int64), sizes[0] * per


_FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
#: optional node fields of a measured profile: who keeps the node's output, bytes saved besides
_OPTIONAL = ("saved_by", "saved_extra")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def _chain_total_bytes(chain: Any) -> int:
    """The sizes of a chain file summed, in bytes (as its loader's 1 PiB check adds them: the input,
    every stage's out_size, tape_size, fwd_overhead and bwd_overhead, the loss's bwd_overhead)."""
    arrays = (chain.x, chain.xbar, chain.o_f, chain.o_bh)
    return sum(int(v) for a in arrays for v in a) * byte_unit(chain, "a pipeline (weights in bytes, links in bytes/s)")


def _capped_sum(values: list[float] | list[int], path: str, where: str) -> float:
    """sum(values), sizes in bytes each at most `MAX_BYTES` already: at most `MAX_BYTES` (1 PiB) too, the
    rule for a file's sizes summed (an ``activation_size`` list, ``meta.param_sizes``); an `InputError`
    naming `path` and `where` otherwise."""
    from ..chain.instance import check_total

    total = sum(values)
    check_total(math.ceil(total), path, where)
    return total


def _check_file_total(nodes: dict[str, dict[str, Any]], path: str) -> None:
    """The sizes of a PipeDream profile (every node's ``activation_size``, ``parameter_size`` and
    ``saved_extra``, bytes) add up to at most `MAX_BYTES` (1 PiB); an `InputError` naming the line
    where the running sum passes it otherwise."""
    total = 0.0
    for node in nodes.values():
        total += sum(node.get(key, 0.0) for key in ("activation_size", "parameter_size", "saved_extra"))
        if total > MAX_BYTES:
            raise InputError(f"the sizes of the profile add up to more than {MAX_BYTES} bytes (1 PiB) by this line",
                             path=path, field=f"line {node['line']}")


def _parse_number(text: str, path: str, where: str) -> float:
    text = text.strip()
    if not _NUMBER.match(text):
        raise InputError(f"not a number: {text!r}", path=path, field=where)
    from ..units import check_number

    return float(check_number(float(text), path=path, field=where, time=where.endswith("_time")))


#: the one part a node line may have after its fields: PipeDream's stage assignment (ignored here)
_STAGE_ID = re.compile(r"^stage_id\s*=\s*[0-9]+$")


def _check_trailing(extra: list[str], path: str, where: str) -> None:
    """The parts of a node line after its fields (split at `` -- ``): none, or one
    ``stage_id=S`` with S an integer >= 0 (ignored); anything else, a second part included, is an
    `InputError` naming the line (a field placed there, such as ``saved_extra=N``, would be lost)."""
    if not extra:
        return
    if len(extra) > 1:
        raise InputError(f"expected at most one part after the fields (' -- stage_id=S'), got "
                         f"{' -- '.join(extra)!r:.80}", path=path, field=where)
    part = extra[0].strip()
    if not _STAGE_ID.match(part):
        why = ("fields go in the comma-separated list before it" if not part.startswith("stage_id=")
               else "S must be an integer >= 0")
        raise InputError(f"expected ' -- stage_id=S' after the fields, got {part!r:.80} ({why})", path=path,
                         field=where)


def from_graph_txt(text: str, *, path: str = "<graph.txt>", name: str | None = None) -> Pipeline:
    """Parse a PipeDream profile (see the module docstring). Errors name the line and field."""
    nodes: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    edges: list[tuple[str, str, int]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {lineno}"
        if raw.startswith("\t") or raw.startswith(" "):
            parts = raw.strip().split(" -- ")
            if len(parts) != 2 or not all(parts):
                raise InputError(f"expected an edge 'nodeA -- nodeB', got {raw.strip()!r}", path=path, field=where)
            edges.append((parts[0].strip(), parts[1].strip(), lineno))
            continue
        parts = raw.strip().split(" -- ")
        if len(parts) < 3:
            raise InputError("expected 'ID -- DESC -- forward_compute_time=..., backward_compute_time=..., "
                             "activation_size=..., parameter_size=...'", path=path, field=where)
        _check_trailing(parts[3:], path, where)
        node_id, desc = parts[0].strip(), parts[1].strip()
        if node_id in nodes:
            raise InputError(f"node {node_id!r} defined twice (first at line {nodes[node_id]['line']})",
                             path=path, field=where)
        values: dict[str, Any] = {}
        for item in parts[2].split(", "):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep:
                raise InputError(f"expected key=value, got {item.strip()!r}", path=path, field=where)
            if key not in _FIELDS + _OPTIONAL:
                raise InputError(f"unknown field {key!r}", path=path, field=f"{where}: {key}")
            if key in values:  # PipeDream's own reader would keep the last one: ambiguous, so refused
                raise InputError("field given twice", path=path, field=f"{where}: {key}")
            value = value.strip()
            if key == "saved_by":
                if not (value.startswith("[") and value.endswith("]")):
                    raise InputError(f"expected a list [node; ...], got {value!r}", path=path, field=f"{where}: {key}")
                values[key] = [v.strip() for v in value[1:-1].split(";") if v.strip()]
            elif key == "activation_size" and value.startswith("["):
                if not value.endswith("]"):
                    raise InputError(f"unterminated list {value!r}", path=path, field=f"{where}: {key}")
                inner = [v for v in value[1:-1].split(";") if v.strip()]
                values[key] = _capped_sum([_parse_number(v, path, f"{where}: {key}") for v in inner], path,
                                          f"{where}: {key}")
            else:
                values[key] = _parse_number(value, path, f"{where}: {key}")
        for key in _FIELDS:
            if key not in values:
                raise InputError("missing field", path=path, field=f"{where}: {key}")
        nodes[node_id] = {"desc": desc, "line": lineno, **values}
        order.append(node_id)
    if not nodes:
        raise InputError("no nodes in the profile", path=path)
    _check_file_total(nodes, path)
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    indeg = {n: 0 for n in nodes}
    seen: set[tuple[str, str]] = set()
    for a, b, lineno in edges:
        for end in (a, b):
            if end not in nodes:
                raise InputError(f"edge names unknown node {end!r}", path=path, field=f"line {lineno}")
        if a == b:
            raise InputError(f"self-loop on {a!r}", path=path, field=f"line {lineno}")
        if (a, b) in seen:
            continue
        seen.add((a, b))
        succ[a].append(b)
        indeg[b] += 1
    # Drop "Input" sources: their output is the pipeline's input (PipeDream removes them too).
    input_size = 0.0
    inputs = [n for n in order if indeg[n] == 0 and nodes[n]["desc"].startswith("Input")]
    if len(inputs) == len(order):
        inputs = []
    for n in inputs:
        input_size += nodes[n]["activation_size"]
        for m in succ[n]:
            indeg[m] -= 1
    rank = {n: i for i, n in enumerate(order)}
    heap = [rank[n] for n in order if indeg[n] == 0 and n not in inputs]
    heapq.heapify(heap)
    topo: list[str] = []
    while heap:
        n = order[heapq.heappop(heap)]
        topo.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(heap, rank[m])
    if len(topo) + len(inputs) != len(order):
        stuck = [n for n in order if n not in set(topo) and n not in inputs]
        raise InputError(f"the edges form a cycle (through {stuck[0]!r}, line {nodes[stuck[0]]['line']})",
                         path=path)
    reader = _input_reader(nodes, succ, inputs, path)
    pos = {n: i for i, n in enumerate(topo)}
    L = len(topo)
    # cut[l]: outputs of layers <= l consumed by some layer > l.
    last_use = [pos[n] for n in topo]
    for n in topo:
        for m in succ[n]:
            last_use[pos[n]] = max(last_use[pos[n]], pos[m])
    act = [int(math.ceil(nodes[n]["activation_size"])) for n in topo]
    delta = np.zeros(L + 1, dtype=np.int64)
    for i in range(L):
        if last_use[i] > i:  # alive on cuts i .. last_use-1
            delta[i] += act[i]
            delta[last_use[i]] -= act[i]
    cut = np.cumsum(delta)[: L - 1]
    saves = _graph_saves(nodes, succ, topo, inputs, path)
    return Pipeline(
        fwd=np.array([nodes[n]["forward_compute_time"] for n in topo], dtype=float),
        bwd=np.array([nodes[n]["backward_compute_time"] for n in topo], dtype=float),
        act=np.array(act, dtype=np.int64),
        params=np.array([int(math.ceil(nodes[n]["parameter_size"])) for n in topo], dtype=np.int64),
        input_size=int(math.ceil(input_size)),
        cut=cut,
        name=name or Path(path).name.removesuffix(".txt").removesuffix(".graph"),
        layer_names=[f"{n}: {nodes[n]['desc']}" for n in topo],
        time_unit=1e-3,
        meta={"source": "pipedream graph.txt", "node_ids": topo},
        succ=[[pos[m] for m in succ[n]] for n in topo],
        input_layer=0 if reader is None else pos[reader],
        **saves,
    )


def _input_reader(nodes: dict[str, dict[str, Any]], succ: dict[str, list[str]], inputs: list[str],
                  path: str) -> str | None:
    """The one layer that reads the ``Input`` sources of non-zero ``activation_size`` (bytes), None
    when there are none: the pipeline model has the input read by one layer (``input_layer``; no
    cut carries it), so an input read by two layers would have the second read's transfer, stash
    and buffers charged to no stage. An `InputError` naming the Input's line and the two readers
    otherwise. Inputs of size 0 (gnmt's) may feed any layers. The reader need not come first in
    the order (a DAG may have other sources, and `Pipeline.to_graph_txt` writes a reordered one)."""
    readers: list[tuple[str, str]] = []  # (reader, the Input it reads)
    for n in inputs:
        if nodes[n]["activation_size"] > 0:
            readers += [(m, n) for m in succ[n] if all(m != r for r, _ in readers)]
    if len(readers) > 1:
        (first, _), (other, n) = readers[0], readers[1]
        raise InputError(f"Input node {n!r} ({nodes[n]['activation_size']:.0f} bytes) feeds {other!r} (line "
                         f"{nodes[other]['line']}) besides {first!r} (line {nodes[first]['line']}): the pipeline "
                         f"charges the input to the one layer that reads it; route it through one node that every "
                         f"reader reads", path=path, field=f"line {nodes[n]['line']}")
    return readers[0][0] if readers else None


def _graph_saves(nodes: dict[str, dict[str, Any]], succ: dict[str, list[str]], topo: list[str],
                 inputs: list[str], path: str) -> dict[str, Any]:
    """The optional ``saved_by`` / ``saved_extra`` fields of a profile as `Pipeline` keywords:
    ``saved_by`` only when some node has it (a node without it is kept by all its consumers)."""
    out: dict[str, Any] = {}
    if any("saved_extra" in nodes[n] for n in topo):
        out["saved_extra"] = np.array([int(math.ceil(nodes[n].get("saved_extra", 0.0))) for n in topo],
                                      dtype=np.int64)
    if not any("saved_by" in nodes[n] for n in topo + inputs):
        return out
    pos = {n: i for i, n in enumerate(topo)}
    for n in topo + inputs:
        for w in nodes[n].get("saved_by", []):
            if w != n and w not in succ[n]:
                raise InputError(f"{w!r} is neither the node nor one of its consumers", path=path,
                                 field=f"line {nodes[n]['line']}: saved_by")
            if w in inputs:
                raise InputError(f"an Input node saves nothing ({w!r})", path=path,
                                 field=f"line {nodes[n]['line']}: saved_by")
    out["saved_by"] = [[pos[w] for w in nodes[n].get("saved_by", succ[n])] for n in topo]
    out["input_saved"] = not inputs or any(nodes[n].get("saved_by", succ[n]) for n in inputs)
    return out

"""The ideal lattice of a pipeline's DAG: where a DAG partition may put its stage boundaries.

PipeDream (Narayanan et al., SOSP 2019) splits a network between *antichains* of its layer
DAG: the layers before a boundary form an **ideal** I (a set closed under predecessors; its
maximal elements are the antichain). A DAG partition into S stages is a chain of ideals
``{} = I_0 < I_1 < ... < I_S = V`` and stage s holds ``I_s \\ I_{s-1}``; a stage may end inside
a residual or inception block. Every such chain is a contiguous partition of *some*
topological order (stage by stage, layers by index inside a stage), which is how the result
is stated (`solvers.pipeline.schedule.Partition.order`).

Per ideal I (layer indices of the instance, whose index order is topological):

- ``work[I]`` = sum of fwd + bwd over I (time unit), ``params[I]``, ``act[I]`` = sums of
  params and act over I (bytes);
- ``cut[I]`` = sum of act[v] over v in I with a consumer outside I: what crosses the boundary
  (forward activations; their gradients come back), the stage input in_s of the next stage;
- ``dead[I]`` = the layers of I with no consumer in I (sinks of I); for a stage ``J \\ I``
  the layers whose outputs are not consumed inside the stage are ``dead[J] \\ I``.

The lattice is enumerated breadth-first (one layer added at a time) up to ``max_states``
ideals; `LatticeTooLarge` is raised beyond (the caller then coarsens the DAG). Building it
takes seconds past ~10^5 ideals: given a wall-clock `Deadline`, the enumeration and the sums
check it as they go (`tick`) and raise `DeadlineExceeded` once it is spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .instance import Pipeline

if TYPE_CHECKING:
    from ..exact.options import Deadline

#: a long loop checks its deadline once every this many steps (step 0 included): one check costs ~0.2 us
CHECK_EVERY = 4096


def tick(deadline: Deadline | None, step: int, every: int = CHECK_EVERY) -> None:
    """``deadline.check()`` (`DeadlineExceeded` when spent) at every `every`-th `step`, step 0
    included; nothing without a deadline."""
    if deadline is not None and step % every == 0:
        deadline.check()


class LatticeTooLarge(Exception):
    """The DAG has more ideals than the cap given to `ideal_lattice`."""


def successors(inst: Pipeline) -> list[list[int]]:
    """succ[l]: the layers that consume layer l's output (a chain: l + 1)."""
    if inst.succ is not None:
        return [list(s) for s in inst.succ]
    return [[l + 1] if l + 1 < inst.length else [] for l in range(inst.length)]


@dataclass
class Lattice:
    """The ideals of a DAG with the per-ideal sums of the module docstring (N ideals, V layers).

    ``masks[k]`` is ideal k as a Python int bit set; ``bits`` the same as an (N, words) uint64
    array, ``contains[v]`` the (N,) mask of the ideals holding layer v; ideals are sorted by size
    (the empty ideal first, V last)."""

    masks: list[int]
    bits: np.ndarray
    size: np.ndarray
    work: np.ndarray
    params: np.ndarray
    act: np.ndarray
    cut: np.ndarray
    messages: np.ndarray
    dead: list[list[int]]
    dead_member: np.ndarray
    dead_act: np.ndarray
    contains: np.ndarray
    succ: list[list[int]]
    granularity: str = "all antichain splits"

    @property
    def n(self) -> int:
        """Number of ideals N."""
        return len(self.masks)

    def supersets(self, k: int) -> np.ndarray:
        """Indices of the ideals that strictly contain ideal k: those holding every maximal
        layer of k (its `dead` layers, which have no consumer in k)."""
        ok = self.size > self.size[k]
        for v in self.dead[k]:
            ok &= self.contains[v]
        return np.flatnonzero(ok)

    def layers(self, k: int) -> list[int]:
        """The layers of ideal k, in index (topological) order."""
        m, out, v = self.masks[k], [], 0
        while m:
            if m & 1:
                out.append(v)
            m >>= 1
            v += 1
        return out


def ideal_lattice(inst: Pipeline, max_states: int = 50_000, groups: list[list[int]] | None = None,
                  deadline: Deadline | None = None) -> Lattice:
    """All ideals of `inst`'s DAG that are unions of `groups` (default: single layers), module
    docstring; `LatticeTooLarge` past `max_states`; `DeadlineExceeded` once `deadline` is spent
    (checked once per breadth-first level and every `CHECK_EVERY` ideals)."""
    succ = successors(inst)
    return _sums(inst, _ideal_masks(inst, succ, max_states, groups, deadline), succ, deadline)


def _ideal_masks(inst: Pipeline, succ: list[list[int]], max_states: int, groups: list[list[int]] | None,
                 deadline: Deadline | None) -> list[int]:
    """The ideals of `ideal_lattice` as bit sets, breadth-first (the empty ideal first, V last);
    `LatticeTooLarge` past `max_states`, `DeadlineExceeded` once `deadline` is spent."""
    V = inst.length
    groups = groups if groups is not None else [[v] for v in range(V)]
    gmask = [sum(1 << v for v in g) for g in groups]
    preds = [0] * V
    for u, vs in enumerate(succ):
        for v in vs:
            preds[v] |= 1 << u
    gpred = [0] * len(groups)
    for k, g in enumerate(groups):
        for v in g:
            gpred[k] |= preds[v]
        gpred[k] &= ~gmask[k]
    # group successors: adding group g can only make groups fed by g available
    owner = {v: k for k, g in enumerate(groups) for v in g}
    gsucc = [sorted({owner[w] for v in g for w in succ[v]} - {k}) for k, g in enumerate(groups)]
    seen = {0}
    order = [0]
    frontier: list[tuple[int, frozenset[int]]] = [(0, frozenset(k for k in range(len(groups)) if gpred[k] == 0))]
    while frontier:
        tick(deadline, 0)
        nxt = []
        for m, avail in frontier:
            for gi in avail:  # a group whose predecessors are all in the ideal m
                m2 = m | gmask[gi]
                if m2 in seen:
                    continue
                seen.add(m2)
                tick(deadline, len(seen))
                new = set(avail)
                new.discard(gi)
                new.update(h for h in gsucc[gi] if gpred[h] & m2 == gpred[h] and not m2 & gmask[h])
                nxt.append((m2, frozenset(new)))
            if len(seen) > max_states:
                raise LatticeTooLarge(f"more than {max_states} ideals")
        order += [m for m, _ in nxt]
        frontier = nxt
    return order


def series_groups(inst: Pipeline, piece: int | None = None) -> list[list[int]]:
    """Groups for a coarser lattice: inside a multi-branch region (a layer some edge jumps over
    in index order), a run of layers u -> v where u feeds only v and v is fed only by u is one
    group, cut into pieces of at most `piece` layers (None: whole runs). Other layers stay alone,
    so a purely sequential part keeps every boundary."""
    V = inst.length
    succ = successors(inst)
    npred = [0] * V
    for vs in succ:
        for v in vs:
            npred[v] += 1
    jumped = [False] * V
    reach = 0
    for u in range(V):
        if reach > u:
            jumped[u] = True
        if succ[u]:
            reach = max(reach, max(succ[u]))
    groups: list[list[int]] = []
    owned: set[int] = set()
    for u in range(V):
        if u in owned:
            continue
        g = [u]
        owned.add(u)
        while jumped[g[-1]] and len(succ[g[-1]]) == 1 and (piece is None or len(g) < piece):
            v = succ[g[-1]][0]
            if npred[v] != 1 or not jumped[v] or v in owned:
                break
            g.append(v)
            owned.add(v)
        groups.append(g)
    return groups


def coarsest_needed(inst: Pipeline, max_states: int, deadline: Deadline | None = None) -> tuple[Lattice, str]:
    """The finest lattice within `max_states` ideals: every ideal, else series runs cut into
    pieces of 3, then whole runs, then the prefixes of the index order (the linearised chain).
    A coarsened lattice also holds every prefix of the index order (`with_prefixes`), so its
    chains include the contiguous partitions of that order: at most `max_states` + V - 1 ideals.
    Returns the lattice and a phrase naming its granularity (for the solver's scope);
    `DeadlineExceeded` once `deadline` is spent (`ideal_lattice`)."""
    try:
        return ideal_lattice(inst, max_states, deadline=deadline), "all antichain splits"
    except LatticeTooLarge:
        pass
    succ = successors(inst)
    for piece, phrase in ((3, "antichain splits, series runs in pieces of 3 layers"),
                          (None, "antichain splits between series runs")):
        try:
            masks = _ideal_masks(inst, succ, max_states, series_groups(inst, piece), deadline)
        except LatticeTooLarge:
            continue
        lat = _sums(inst, with_prefixes(masks, inst.length), succ, deadline)
        lat.granularity = f"{phrase}, plus the contiguous splits of the index order"
        return lat, lat.granularity
    lat = _sums(inst, with_prefixes([], inst.length), succ, deadline)
    lat.granularity = "splits of the linearised chain only"
    return lat, lat.granularity


def with_prefixes(masks: list[int], V: int) -> list[int]:
    """`masks` (ideals as bit sets) plus the V + 1 prefixes of the index order ({0..k-1}, ideals
    since that order is topological) not among them, sorted by size (stable: the empty ideal
    first, the whole network last)."""
    seen = set(masks)
    merged = masks + [p for p in ((1 << k) - 1 for k in range(V + 1)) if p not in seen]
    return sorted(merged, key=int.bit_count)


def _sums(inst: Pipeline, masks: list[int], succ: list[list[int]], deadline: Deadline | None = None) -> Lattice:
    """The `Lattice` of the ideals `masks` (module docstring): numpy over (N, V) arrays, seconds
    past ~10^5 ideals, so `deadline` is checked between the steps and once per layer."""
    V, N = inst.length, len(masks)
    words = (V + 63) // 64
    nbytes = (V + 7) // 8
    tick(deadline, 0)
    raw = np.frombuffer(b"".join(m.to_bytes(nbytes, "little") for m in masks), dtype=np.uint8)
    member = np.unpackbits(raw.reshape(N, nbytes), axis=1, bitorder="little")[:, :V].astype(bool)
    packed = np.zeros((N, words), dtype=np.uint64)
    for w in range(words):
        tick(deadline, 0)
        chunk = member[:, 64 * w: 64 * (w + 1)].astype(np.uint64)
        weights = np.left_shift(np.uint64(1), np.arange(chunk.shape[1], dtype=np.uint64))
        packed[:, w] = (chunk * weights).sum(axis=1, dtype=np.uint64)
    fb = inst.fwd + inst.bwd
    act = inst.act.astype(np.int64)
    # v crosses the boundary of I when v in I and some consumer is not in I
    has_out = np.zeros((N, V), dtype=bool)
    consumed_in = np.zeros((N, V), dtype=bool)
    for v, vs in enumerate(succ):
        tick(deadline, 0)
        if vs:
            inside = member[:, vs]
            has_out[:, v] = member[:, v] & ~inside.all(axis=1)
            consumed_in[:, v] = inside.any(axis=1)
    cut = (has_out * act[None, :]).sum(axis=1)
    dead_mask = member & ~consumed_in
    flat = np.nonzero(dead_mask)[1].tolist()  # row-major: the dead layers of each ideal in turn
    ends = np.cumsum(dead_mask.sum(axis=1)).tolist()
    dead = [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    tick(deadline, 0)
    return Lattice(masks=masks, bits=packed, size=member.sum(axis=1), work=member @ fb,
                   params=member.astype(np.int64) @ inst.params.astype(np.int64),
                   act=member.astype(np.int64) @ act, cut=cut.astype(np.int64),
                   messages=has_out.sum(axis=1).astype(np.int64), dead=dead, dead_member=dead_mask,
                   dead_act=dead_mask.astype(np.int64) @ act, contains=np.ascontiguousarray(member.T), succ=succ)


__all__ = ["CHECK_EVERY", "Lattice", "LatticeTooLarge", "coarsest_needed", "ideal_lattice", "series_groups",
           "successors", "tick", "with_prefixes"]

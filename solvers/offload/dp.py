"""POFO-style dynamic program: rematerialization combined with offloading of checkpoints.

After Beaumont, Eyraud-Dubois and Shilova (NeurIPS 2021, "Efficient combination of
rematerialization and offloading for training DNNs"). The persistent rotor DP
(`solvers.chain.dp`) is extended so that, in its C_ck branch, the checkpoint a_i may travel
to the host while the right sub-chain runs, lending its bytes to that sub-chain.

Notation of `solvers.chain.dp` (stages 0-based, loss = stage L, ``x[L+1] = 0``):
``x, xbar, u_fa, u_fn, u_b, o_fa, o_fn, o_b`` (per-mode forward overheads: o_fa[i] while F_all(i)
runs, o_fn[i] while F_ck(i) / F_n(i) run, and per-mode forward times: u_fa[i] for F_all(i),
u_fn[i] for F_ck(i) / F_n(i), as the simulators charge them; o_f and u_f without per-mode values);
``S(i, j) = sum_{k=i}^{j-1} u_fn[k]`` (the forward sweep F_ck(i) F_n(i+1) .. F_n(j-1));
``T(size) = OffloadInstance.transfer_time(size)`` (size in real bytes, result in the chain's
time unit).

**Where a_i lives.** In C(m, i, l) the value a_i is the caller's (not counted in m). It is
either a standalone activation (``s = 1``: a_0, or produced by an F_ck / F_n of the caller),
or it lives inside the tape abar_i (``s = 0``: the caller ran F_all(i-1)). Its container has
size ``y_1(i) = x[i]`` or ``y_0(i) = xbar[i]`` and is the value that travels (``Off("a", i)``
or ``Off("abar", i)``). So there are two tables P_1 and P_0; the optimum at budget M is
``P_1(M - x[0], 0, L)``.

**Recurrence.** Leaves, C_all and the plain C_ck are rotor's (with the exact C_all charge):

    P_s(m, i, i) = u_fa[i] + u_b[i]  if m >= max(x[i+1] + xbar[i+1] + o_fa[i],
                                                 x[i] + x[i+1] + xbar[i+1] + o_b[i])
    P_s(m, i, l) = min(C_all, C_all_off, min_j C_ck(j), min_j C_off(j))     (l > i, i < j <= l)
    C_all  = u_fa[i] + u_b[i] + P_0(m - xbar[i+1], i+1, l)
             if m >= max(x[l+1] + xbar[i+1] + o_fa[i], x[i] + x[i+1] + xbar[i+1] + o_b[i])
    C_ck(j)  = S(i, j) + P_1(m - x[j], j, l) + P_s(m, i, j-1)          if m >= msweep(i, l, j)
    C_off(j) = S(i, j) + max(0, T(y) - S(i, j))           (sweep, then wait for Off to end)
               + P_1(m - x[j] + y, j, l)                   (right sub-chain, with a_i's bytes)
               + W(j)                                      (wait for Pre(a_i))
               + P_s(m, i, j-1)                            if m >= msweep(i, l, j)   (y = y_s(i))
    W(j)   = max(0, T(y) - u_b[j])   if m >= bmem(j)   (Pre overlaps B(j), the last op of (j, l))
           = T(y)                    otherwise        (Pre after B(j))
    C_all_off = u_fa[i] + max(0, T(y) - u_fa[i]) + P_0(m - xbar[i+1] + y, i+1, l) + W' + u_b[i]
             if m >= max(x[l+1] + xbar[i+1] + o_fa[i], x[i] + x[i+1] + xbar[i+1] + o_b[i])
    W'     = max(0, T(y) - u_b[i+1]) if m >= xbar[i+1] + x[i+1] + x[i+2] + xbar[i+2] + o_b[i+1], else T(y)
    msweep(i, l, j) = x[l+1] + max(x[i+1] + o_fn[i], max_{i<k<j} (x[k] + x[k+1] + o_fn[k]))
    bmem(j)         = 2 x[j] + x[j+1] + xbar[j+1] + o_b[j]    (u_b[L], o_b[L]: the loss)

C_off(j) is the schedule  F_ck(i) Off(a_i) F_n(i+1..j-1) [(j, l)] Pre(a_i) [(i, j-1)]
(abar_i in place of a_i when s = 0); C_all_off is  F_all(i) Off(a_i) [(i+1, l)] Pre(a_i) B(i)
(POFO's offloaded input of an F_all), with the same pins and waits. As in the chain's rotor DP,
the gate of a split j is its own sweep msweep(i, l, j) (rotor's mmin(i, l) = msweep(i, l, l)
on every option; with o_fa = o_fn it is implied by the options' own conditions, so the table
is the same, and with o_fa < o_fn a chain of C_all steps, which never runs F_n, must not be
gated by o_fn); the Pre moved before the last op of (j, l) when
m >= bmem(j). The tables span m = 0 .. M - x[0] + max(x, xbar) (lent bytes can lift a
sub-chain above the top-level m; beyond the table the index is clipped, which only wastes
memory).

**Why the charges are safe (never below the two-stream simulator).** The schedule carries
``not_before`` pins (set by `pin_transfers` from replays of its prefixes) and the rules of
`solvers.offload.simulator` give, by induction over the schedule:

1. *Offload.* Off(a_i) is issued right after F_ck(i), the last reader of a_i before the gap,
   so it starts with F_ck(i) (the transfer stream is idle then: see 3) and ends T(y) later.
   When S(i, j) < T(y) the first op of (j, l) is pinned to the end of the Off (the charge
   max(0, T - S)). The simulator releases a_i at max(end of Off, end of F_ck(i)), so before
   (j, l) allocates anything: (j, l) may use m - x[j] + y. During the sweep a_i is still
   counted (outside m, as before), so the sweep needs msweep only (the sweep's terms for k >= j
   belong to (j, l), which checks them with its own, larger, memory).
2. *Prefetch.* Pre(a_i) is pinned to the end of the compute op issued just before it, so it
   never overlaps an op of (j, l) that may use the lent bytes, except B(j) when m >= bmem(j):
   at B(j) the right sub-chain holds exactly a_j, abar_{j+1}, delta_{j+1} and allocates
   delta_j + o_b[j] (every persistent (j, l) ends so), which with a_i back (outside m) fits.
   Otherwise it starts after B(j), when the state is delta_j (in m) plus a_i (outside m),
   the state (i, j-1) starts from. (i, j-1) starts with a read of a_i, so it waits for the
   Pre: the charge W(j).
3. *No contention.* Every Pre ends before the next compute op starts, and every Off ends
   before its right sub-chain starts, hence before the next F_ck can issue another Off; so
   every transfer finds the transfer stream idle, and no issue-order stall arises. The
   replay's makespan therefore equals the DP value (up to float rounding), except that an
   Off of a value the host already holds is free in the simulator while the DP still
   charges max(0, T - S) for it (the DP is then above the replay); the peak is within the
   budget (sizes rounded up to slots, as for rotor).

The DP value is kept in ``details["dp_estimate"]``, also when another solver's schedule is
returned, and left out when no DP schedule fits; the reported makespan and peak are the
simulator's. If the replay ever exceeded the budget (it should not), or if the rotor schedule
is faster (it can be only through rotor's exact-size retry), the rotor (remat-only) schedule
at the same budget and slots is returned instead; so is rotor-offload's schedule when it is
faster (``details["solution_from"]``): it prefetches several steps ahead and queues
transfers, outside this class. Status ``feasible``: the DP is optimal only
within its own class (persistent schedules whose only transfers are the C_off pairs above,
with these pins, at the stated slots), not for the two-stream model.

**Cost.** Two tables of (L+1)(L+2)/2 rows of M+1 entries, O(L^3 M) time, vectorised with numpy
over (j, m) (no numba kernel): fine for L up to a few tens at 500 slots.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..chain.baselines import store_all_schedule
from ..chain.dp import EXACT_RETRY_CELLS, _offsets, solve_rotor, table_cells
from ..chain.instance import Chain
from ..chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Op
from ..discretize import check_slots, effective_slots
from ..errors import InputError, flag
from ..result import FEASIBLE, INFEASIBLE, SolveResult
from ..units import MAX_BYTES
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import OffloadSimulation, simulate

LEAF, ALL, NONE, ALL_OFF = -1, 0, -2, -3  # choice codes; 0 < c <= L: C_ck(c); c > L: C_off(c - L - 1)

#: Largest pair of tables we build.
MAX_CELLS = 40_000_000

#: Relative slack on "the sweep covers the offload" (below it, the right sub-chain is pinned).
EPS = 1e-9


class PofoTable:
    """The tables P_s(m, i, l) (s = 0: a_i inside abar_i, s = 1: standalone) and their choices."""

    def __init__(self, work, inst: OffloadInstance, M: int) -> None:
        self.work = work
        self.inst = inst
        L = work.length
        self.L, self.M = L, M
        x = np.asarray(work.x, dtype=np.int64)
        xbar = np.asarray(work.xbar, dtype=np.int64)
        o_fa = np.asarray(work.o_fa, dtype=np.int64)  # F_all's forward overhead
        o_fn = np.asarray(work.o_fn, dtype=np.int64)  # F_ck's / F_n's forward overhead
        o_b = np.asarray(work.o_b, dtype=np.int64)
        u_fa = np.asarray(work.u_fa, dtype=np.float64)  # F_all's forward time (leaves, C_all, C_all_off)
        u_b = np.asarray(work.u_b, dtype=np.float64)
        real = inst.chain
        # transfer times of the real (not discretised) containers
        self.T = np.array([[inst.transfer_time(int(real.xbar[i])) for i in range(L + 1)],
                           [inst.transfer_time(int(real.x[i])) for i in range(L + 1)]])
        self.y = np.stack([xbar[: L + 1], x[: L + 1]])
        sf = np.concatenate([[0.0], np.cumsum(np.asarray(work.u_fn, dtype=np.float64))])  # no-grad sweeps S(i, j)
        self.sf = sf
        off = _offsets(L)
        self.off = off
        nrows = (L + 1) * (L + 2) // 2
        C = np.full((2, nrows, M + 1), np.inf)
        CH = np.full((2, nrows, M + 1), NONE, dtype=np.int32)
        ms = np.arange(M + 1, dtype=np.int64)
        inf = np.inf
        # fw[k] = x[k] + x[k+1] + o_fn[k]: memory of F_n(k) besides delta
        fw = x[: L + 1] + x[1: L + 2] + o_fn[: L + 1]
        for l in range(L + 1):
            for i in range(l, -1, -1):
                r = off[i] + (l - i)
                t = u_fa[i] + u_b[i]
                if i == l:
                    need = int(max(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i]))
                    if need <= M:
                        C[:, r, need:] = t
                        CH[:, r, need:] = LEAF
                    continue
                js = np.arange(i + 1, l + 1)
                nj = js.size
                # msweep(i, l, j): running max of fw[k] for i < k < j
                inner = np.full(nj, -1, dtype=np.int64)
                if nj > 1:
                    inner[1:] = np.maximum.accumulate(fw[i + 1: l])
                # the gate of split j (C_ck and C_off alike): the sweep F_ck(i) F_n(i+1..j-1) only
                msweep = x[l + 1] + np.maximum(x[i + 1] + o_fn[i], inner)
                S = sf[js] - sf[i]
                bmem = 2 * x[js] + x[js + 1] + xbar[js + 1] + o_b[js]
                rows_right = off[js] + (l - js)
                rows_left = off[i] + (js - 1 - i)
                shifted = ms[None, :] - x[js][:, None]
                ok = shifted >= 0
                sh = np.where(ok, shifted, 0)
                right_ck = np.where(ok, C[1][rows_right[:, None], sh], inf)
                xb = int(xbar[i + 1])
                rs = off[i + 1] + (l - i - 1)
                lo = int(max(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i]))
                for s in (0, 1):
                    if s == 0 and i == 0:
                        continue  # a_0 is never inside a tape
                    cand = np.full((2 + 2 * nj, M + 1), inf)
                    if lo <= M:
                        cand[0, lo:] = t + C[0, rs, lo - xb: M + 1 - xb]
                    Ty, yi = float(self.T[s, i]), int(self.y[s, i])
                    lo_off = lo
                    if yi > 0 and lo_off <= M:
                        # C_all_off: a_i's container travels while (i+1, l) runs with its bytes
                        idx = np.clip(ms - xb + yi, 0, M)
                        bm = int(xb + x[i + 1] + x[i + 2] + xbar[i + 2] + o_b[i + 1])
                        w_pre = np.where(ms >= bm, max(0.0, Ty - float(u_b[i + 1])), Ty)
                        w_off = max(0.0, Ty - float(u_fa[i])) if u_fa[i] < Ty * (1 + EPS) + 1e-12 else 0.0
                        alloff = t + w_off + C[0, rs, idx] + w_pre
                        alloff[:lo_off] = inf
                        cand[1 + 2 * nj] = alloff
                    left = C[s][rows_left]  # (nj, M+1): P_s(m, i, j-1)
                    ck = S[:, None] + right_ck + left
                    ck[ms[None, :] < msweep[:, None]] = inf
                    cand[1: 1 + nj] = ck
                    if yi > 0:
                        idx = np.clip(ms[None, :] - x[js][:, None] + yi, 0, M)
                        right_off = C[1][rows_right[:, None], idx]
                        # Pre overlapping the last op of (j, l) when B(j)'s state + y fits m
                        hidden = ms[None, :] >= bmem[:, None]
                        wait = np.where(hidden, np.maximum(0.0, Ty - u_b[js])[:, None], Ty)
                        # the right sub-chain waits for the end of Off(a_i) when the sweep is short
                        wait_off = np.where(S < Ty * (1 + EPS) + 1e-12, np.maximum(0.0, Ty - S), 0.0)
                        offv = ((S + wait_off)[:, None] + right_off) + wait + left
                        bad = (ms[None, :] < msweep[:, None]) | ~ok
                        offv[bad] = inf
                        cand[1 + nj: 1 + 2 * nj] = offv
                    k = np.argmin(cand, axis=0)
                    best = cand[k, ms]
                    code = np.where(k == 0, ALL, np.where(k <= nj, i + k, L + 1 + i + k - nj))
                    code = np.where(k == 1 + 2 * nj, ALL_OFF, code)
                    finite = np.isfinite(best)
                    C[s, r] = best
                    CH[s, r] = np.where(finite, code, NONE)
        self.C, self.CH = C, CH

    def value(self, m: int, s: int = 1, i: int = 0, l: int | None = None) -> float:
        """P_s(m, i, l) of the module docstring (inf when infeasible; l defaults to L)."""
        l = self.L if l is None else l
        if m < 0:
            return math.inf
        return float(self.C[s, self.off[i] + l - i, min(m, self.M)])

    def schedule(self, m: int) -> tuple[OffloadSchedule, list[Any]]:  # noqa: C901
        """The schedule achieving P_1(m, 0, L) and, per op, how `pin_transfers` pins it: None,
        "prev" (a Pre: at the end of the compute op issued before it) or the position of an Off
        (the first op of a right sub-chain that must wait for that Off to end)."""
        L, x, xbar, o_b = self.L, self.work.x, self.work.xbar, self.work.o_b
        ops: list[list[Any]] = []  # [op, pin]; Off entries are identified by their list object
        stack: list[Any] = [(1, 0, L, m)]
        wait_for: list[Any] | None = None
        while stack:
            item = stack.pop()
            if isinstance(item, Transfer):  # a prefetch after the last op of (j, l)
                ops.append([item, "prev"])
                continue
            if isinstance(item, Op):
                ops.append([item, None])
                continue
            if item[0] == "before-last":  # (j, l) is complete: its last op is B(j) or the loss
                ops.insert(len(ops) - 1, [item[1], "prev"])
                continue
            if item[0] == "wait":  # the next op starts the right sub-chain
                wait_for = item[1]
                continue
            s, a, b, mm = item
            c = int(self.CH[s, self.off[a] + b - a, mm])
            if c == NONE:  # pragma: no cover - would be a bug
                raise RuntimeError(f"P_{s}({mm}, {a}, {b}) is infeasible")
            first = len(ops)
            if c == LEAF:
                ops.extend([[Loss(L), None]] if a == L else [[F_all(a), None], [Bwd(a), None]])
            elif c == ALL:
                ops.append([F_all(a), None])
                stack.append(Bwd(a))
                stack.append((0, a + 1, b, mm - int(xbar[a + 1])))
            elif c == ALL_OFF:  # F_all(a) Off(v_a) [(a+1, b)] Pre(v_a) B(a)
                v = "a" if s == 1 else "abar"
                ops.append([F_all(a), None])
                entry = [Off(v, a), None]
                ops.append(entry)
                stack.append(Bwd(a))
                last = xbar[a + 1] + x[a + 1] + x[a + 2] + xbar[a + 2] + o_b[a + 1]
                stack.append(("before-last", Pre(v, a)) if mm >= last else Pre(v, a))
                stack.append((0, a + 1, b, min(self.M, mm - int(xbar[a + 1]) + int(self.y[s, a]))))
                if self.work.u_fa[a] < self.T[s, a] * (1 + EPS) + 1e-12:
                    stack.append(("wait", entry))
            elif c <= L:
                ops.append([F_ck(a), None])
                ops.extend([F_n(k), None] for k in range(a + 1, c))
                stack.append((s, a, c - 1, mm))
                stack.append((1, c, b, mm - int(x[c])))
            else:
                j = c - L - 1
                v = "a" if s == 1 else "abar"
                ops.append([F_ck(a), None])
                entry = [Off(v, a), None]
                ops.append(entry)
                ops.extend([F_n(k), None] for k in range(a + 1, j))
                stack.append((s, a, j - 1, mm))
                last = 2 * x[j] + x[j + 1] + xbar[j + 1] + o_b[j]
                stack.append(("before-last", Pre(v, a)) if mm >= last else Pre(v, a))
                stack.append((1, j, b, min(self.M, mm - int(x[j]) + int(self.y[s, a]))))
                if self.sf[j] - self.sf[a] < self.T[s, a] * (1 + EPS) + 1e-12:
                    stack.append(("wait", entry))
            if wait_for is not None:
                ops[first][1] = ("off", wait_for)
                wait_for = None
        where = {id(e): k for k, e in enumerate(ops)}
        pins = [where[id(pin[1])] if isinstance(pin, tuple) else pin for _, pin in ops]
        return OffloadSchedule([op for op, _ in ops], L), pins


def pin_transfers(inst: OffloadInstance, schedule: OffloadSchedule, pins: list[Any]) -> OffloadSchedule:
    """Set ``not_before`` (rules 1-2 of the module docstring): a Pre at the end of the compute op
    issued just before it; the first op of a right sub-chain at the end of the Off it waits for.
    Times of the ops issued before a pinned op do not depend on it, so one replay per pin, in
    issue order, fixes them all."""
    nb: list[float | None] = [None] * len(schedule.ops)
    for p, pin in enumerate(pins):
        if pin is None:
            continue
        ends = _replay_prefix(inst, OffloadSchedule(schedule.ops[:p], schedule.length, nb[:p]))
        if pin == "prev":
            q = max(k for k in range(p) if not isinstance(schedule.ops[k], Transfer))
            nb[p] = ends[q]
        else:
            nb[p] = ends[pin]
    return OffloadSchedule(list(schedule.ops), schedule.length, nb if any(t is not None for t in nb) else None)


#: the DP is also run planning on links this many times faster (outside its class; see solve_pofo)
PLAN_LINK_FACTORS = (2.0, 4.0)


def _without_off_waits(inst: OffloadInstance, schedule: OffloadSchedule, pins: list[Any]) -> OffloadSchedule:
    """The schedule pinned as `pin_transfers` does, but keeping only the prefetch pins ("prev"):
    no compute op waits for the end of an Off."""
    return pin_transfers(inst, schedule, [pin if pin == "prev" else None for pin in pins])


def _replay_prefix(inst: OffloadInstance, prefix: OffloadSchedule) -> list[float]:
    """End times of the ops of an (incomplete) schedule, as the simulator computes them."""
    sim = simulate(inst, prefix)
    # an incomplete schedule is reported as a violation after its last op; its times are valid
    if sim.violation is not None and sim.violation.position < len(prefix.ops):  # pragma: no cover - a bug
        raise RuntimeError(f"pofo built an invalid schedule: {sim.violation}")
    return [t.end for t in sim.ops]


def _extra(work) -> int:
    """The most a sub-chain's memory can be lifted by lent bytes: max over x and xbar."""
    L = work.length
    return int(max(np.max(work.x[: L + 1]), np.max(work.xbar[: L + 1])))


def _run_dp(inst: OffloadInstance, work: Chain, M: int, budget: int,
            details: dict[str, Any], plan: OffloadInstance | None = None
            ) -> tuple[OffloadSimulation, OffloadSchedule, float] | None:
    """Fill the tables for `work` (sizes in units of M), rebuild, pin and replay; (replay,
    schedule, DP value) when it fits `budget` (real bytes), else None. Notes go to `details`.
    `plan`: the instance whose link the DP plans with (default `inst`); the ops are always
    pinned and replayed on `inst`. Besides the pinned schedule, the same ops without the waits
    for Offs (only the prefetch pins kept) and without any pin are replayed (outside the DP's
    class: a right sub-chain may start while its caller's Off runs, as in POFO's own model); the
    fastest that fits is returned."""
    m_top = M - int(work.x[0])
    if m_top < 0:
        return None
    extra = _extra(work)  # lent bytes can lift a sub-chain above m_top
    cells = 2 * table_cells(work.length, m_top + extra)
    if cells > MAX_CELLS:
        raise InputError(f"the pofo tables would have {cells:.3g} cells; use fewer {flag('slots')}",
                         field=flag("slots"))
    table = PofoTable(work, plan or inst, m_top + extra)
    est = table.value(m_top)
    if not math.isfinite(est):
        return None
    ops, pins = table.schedule(m_top)
    best: tuple[OffloadSimulation, OffloadSchedule] | None = None
    for n, sched in enumerate((pin_transfers(inst, ops, pins), _without_off_waits(inst, ops, pins),
                               OffloadSchedule(list(ops.ops), ops.length))):
        sim = simulate(inst, sched)
        if not (sim.valid and sim.peak_memory <= budget):
            if n == 0 and plan is None:
                details["dp_overflow"] = f"the DP schedule replays at {sim.peak_memory} > {budget}: {sim.violation}"
            continue
        if best is None or sim.makespan < best[0].makespan * (1 - 1e-12):
            if best is not None or n > 0:
                details["dp_unpinned"] = f"{est:.6g} -> {sim.makespan:.6g}"
            best = (sim, sched)
    if best is None:
        return None
    return best[0], best[1], est


def _outside_class(inst: OffloadInstance, budget: int,
                   slots: int) -> tuple[OffloadSimulation, OffloadSchedule, float, str] | None:
    """The faster of rotor-offload's and offload-prefix's schedules at `budget` (replay, schedule,
    makespan, solver) when one fits, else None: both queue transfers on the stream (outside the DP)."""
    from .baselines import solve_prefix  # imported here: both import the registry
    from .combined import solve_rotor_offload

    best = None
    for name, res in (("rotor-offload", solve_rotor_offload(inst, budget, slots=slots)),
                      ("offload-prefix", solve_prefix(inst, budget))):
        if res.schedule is None:
            continue
        sim = simulate(inst, res.schedule)
        if sim.valid and sim.peak_memory <= budget and (best is None or sim.makespan < best[0].makespan):
            best = (sim, res.schedule, sim.makespan, name)
    return best


def solve_pofo(inst: OffloadInstance, budget: int, *, slots: int = 500, time_limit: float | None = None,
               **_: Any) -> SolveResult:
    """Rotor DP extended with offloading of checkpoints (see the module docstring).

    With `time_limit` (seconds, wall clock), the first DP always runs; each later stage (the
    plans on faster links, the exact-size retry, the comparison with rotor-offload and
    offload-prefix) runs only when the time spent plus the first DP's duration fits the limit,
    and ``details["skipped"]`` names those left out (the answer is a heuristic's either way)."""
    t0 = time.perf_counter()
    skipped: list[str] = []

    def affordable(stage: str, cost: float) -> bool:
        """Whether an optional stage of about `cost` seconds fits the time limit (else noted)."""
        if time_limit is None or time.perf_counter() - t0 + cost <= time_limit:
            return True
        skipped.append(stage)
        return False

    budget = int(budget)
    slots = check_slots(slots)
    chain = inst.chain
    L = chain.length
    rounded = effective_slots(budget, slots) > 0  # else slots = 0, or a budget of at most `slots` units
    scope = ("persistent schedules with offloaded checkpoints (prefetch not overlapped), "
             + (f"{slots}-slot discretisation" if rounded else "exact sizes")
             + "; heuristic for the two-stream model")
    common: dict[str, Any] = {"problem": "offload", "solver": "pofo", "budget": budget}
    details: dict[str, Any] = {"slots": slots}
    rotor = solve_rotor(chain, budget, slots=slots)
    rotor_sched = OffloadSchedule.from_chain(rotor.schedule) if rotor.schedule is not None else None
    rotor_sim = simulate(inst, rotor_sched) if rotor_sched is not None else None
    # the rotor (remat-only) candidate when its schedule fits: (replay, schedule, rotor's DP value)
    rotor_fit: tuple[OffloadSimulation, OffloadSchedule, float] | None = None
    if rotor_sim is not None and rotor_sched is not None and rotor_sim.valid and rotor_sim.peak_memory <= budget:
        rotor_fit = (rotor_sim, rotor_sched, float(rotor.objective if rotor.objective is not None else math.inf))
    store_all = OffloadSchedule.from_chain(store_all_schedule(L))
    sa = simulate(inst, store_all)
    if sa.peak_memory <= budget:
        return SolveResult(status=FEASIBLE, objective=sa.makespan, peak_memory=sa.peak_memory, schedule=store_all,
                           scope=scope + "; store-all fits", solve_time_s=time.perf_counter() - t0,
                           details={**details, "dp_estimate": sa.makespan, "transfers": 0}, **common)
    if not rounded:
        work, M = chain, budget
    else:
        slot = budget / slots
        work, M = chain.discretised(slot), slots
        details["slot_size"] = slot  # in the chain's memory unit, as budget
    t_dp = time.perf_counter()
    candidate = _run_dp(inst, work, M, budget, details)
    dp_s = time.perf_counter() - t_dp  # the cost estimate of every optional stage below
    for factor in PLAN_LINK_FACTORS:
        if inst.bandwidth * factor > MAX_BYTES or not affordable(f"plan on a {factor:g}x faster link", dp_s):
            break
        # the DP planned on a faster link charges shorter waits and offloads more; its ops,
        # replayed on the real link with transfers queued, are kept when they fit and are faster
        notes: dict[str, Any] = {}
        plan = OffloadInstance(chain, inst.bandwidth * factor, inst.latency / factor)
        alt = _run_dp(inst, work, M, budget, notes, plan=plan)
        if alt is not None and (candidate is None or alt[0].makespan < candidate[0].makespan * (1 - 1e-12)):
            candidate = alt
            details["dp_link_factor"] = factor
            details["dp_unpinned"] = notes.get("dp_unpinned", f"planned on a {factor:g}x faster link")
    worse = candidate is None or (rotor_fit is not None and rotor_fit[0].makespan < candidate[0].makespan)
    if worse and rounded and 2 * table_cells(L, budget - int(chain.x[0]) + _extra(chain)) <= EXACT_RETRY_CELLS \
            and affordable("exact-size retry", dp_s):
        # the slot rounding may have lost schedules (rotor retries with exact sizes too)
        exact = _run_dp(inst, chain, budget, budget, details)
        if exact is not None and (candidate is None or exact[0].makespan < candidate[0].makespan):
            candidate = exact
            scope = scope.replace(f"{slots}-slot discretisation", "exact sizes (the slot rounding lost schedules)")
    if candidate is not None:
        # the DP's own value, before rotor's or an outside schedule may replace its schedule
        details["dp_estimate"] = candidate[2]
    if candidate is not None and rotor_fit is not None and rotor_fit[0].makespan < candidate[0].makespan:
        details["fallback"] = "rotor (remat-only) is faster"
        candidate = None
    if candidate is None and rotor_fit is not None:
        candidate = rotor_fit
        details.setdefault("fallback", "remat-only (rotor) schedule")
    if candidate is not None:
        details["dp_makespan"] = candidate[0].makespan
    outside = _outside_class(inst, budget, slots) if affordable("rotor-offload and offload-prefix", dp_s) else None
    if skipped:
        details["skipped"] = skipped
    if outside is not None and (candidate is None or outside[0].makespan < candidate[0].makespan * (1 - 1e-12)):
        # rotor-offload's and offload-prefix's schedules lie outside the DP's class (prefetches
        # several backward steps ahead, transfers queued behind each other): the faster is returned
        details["solution_from"] = outside[3]
        scope += f"; the schedule is {outside[3]}'s (outside this class), faster here"
        candidate = outside[:3]
    if candidate is None:
        return SolveResult(status=INFEASIBLE, scope=scope, solve_time_s=time.perf_counter() - t0,
                           message=f"no schedule of this model fits {budget}", min_budget=None,
                           details=details, **common)
    sim, sched = candidate[0], candidate[1]
    details["transfers"] = len(sched.transfers())
    details["host_peak"] = sim.host_peak
    details["rotor_makespan"] = rotor_fit[0].makespan if rotor_fit is not None else None
    return SolveResult(status=FEASIBLE, objective=sim.makespan, peak_memory=sim.peak_memory, schedule=sched,
                       scope=scope, solve_time_s=time.perf_counter() - t0, details=details, **common)

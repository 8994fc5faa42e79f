"""A re-implementation, for comparison only, of the recurrence of ColossalAI's POFO port.

ColossalAI (hpcaitech/ColossalAI, ``colossalai/fx/passes/algorithms/ckpt_solver_pofo.py``,
class ``PofoSolver``) ships a port of the POFO dynamic program (Beaumont, Eyraud-Dubois and
Shilova, NeurIPS 2021). This module states the same recurrence in our own code and notation so
that its schedules can be replayed by our two-stream simulator; it is not a solver of the
registry and nothing in `solvers/` uses it.

**Its model.** A forward sweep over top-level *segments*; the state before stage i is
``(i, A, df, db, bar)``: A bytes of kept activations, df bytes still to offload, db bytes to
prefetch during the backward, and whether the input of stage i sits inside the tape abar_i
(bar) or is the standalone a_i. In slots of M/S bytes (A, df, db rounded up), with
beta = bytes per time unit, in = xbar[i] or x[i], free = M - A - in:

- *enable* (F_all(i), later B(i)): needs ``xbar[i+1] + o_f[i]`` and ``xbar[i+1] + x[i+1] + x[i] + o_b[i]``
  within free; eps_f = max(0, xbar[i+1] + o_f[i] - M + A + df + in), eps_b likewise with the
  backward's memory and db; time u_f[i] + u_b[i] + (eps_f + eps_b)/beta; the link moves
  u_f[i] beta + eps_f bytes of df during the forward and u_b[i] beta + eps_b of db during the
  backward;
- *no-grad* segment i..j (F_ck(i) F_n(i+1..j), later the rotor schedule of i..j):
  eps = max_k (mmax_ng(i, k) - beta * sum_{i<=t<k} u_f[t]) with
  mmax_ng(i, k) = x[k+1] + o_f[k] (+ x[k] for k > i); feasible only when
  max_{i<=k<L} mmax_ng(i, k) <= free; the backward time is the rotor time R of i..j at
  ``free - x[i]``, estimated with the link as ``(max(R, db/beta) + R + db/beta) / 2``;
- either may *offload its input* (``in`` joins db, leaves A unchanged) or keep it (A grows);
- the loss: the enable terms plus the time to flush df and db.

The optimum is the state ``(0, 0, 0, 0, False)``. The schedule: ``[Off(in)] F_all(i) (rest)
[Pre(in)] B(i)`` or ``[Off(in)] F_ck(i) F_n(i+1..j) (rest) [Pre(in)] rotor(i..j)``. The port
issues Off before the forward that reads the input; our simulator releases a value at its Off,
so the adapter issues it right after that forward (both start together). Times come from our
simulator (ASAP, no pins); a schedule that overflows the budget there counts as invalid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from memsched.solvers.chain.dp import rotor_table
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, simulate
from memsched.solvers.offload.schedule import Off, Pre

INF = math.inf


class PortDP:
    """The port's table for one instance, budget `M` (bytes) and `S` memory slots."""

    def __init__(self, inst: OffloadInstance, M: int, S: int = 20) -> None:
        self.inst, self.M, self.S = inst, float(M), S
        c = inst.chain
        self.L = c.length
        self.x, self.xbar = [float(v) for v in c.x], [float(v) for v in c.xbar]
        self.o_f, self.o_b = [float(v) for v in c.o_f], [float(v) for v in c.o_b]
        self.u_f, self.u_b = [float(v) for v in c.u_f], [float(v) for v in c.u_b]
        self.beta = inst.bandwidth / (inst.time_scale * inst.bytes_per_unit)  # size units per time unit
        self.unit = self.M / S
        self.rotor = rotor_table(c.discretised(self.unit), S)
        shape = (2, self.L + 1, S + 1, S + 1, S + 1)
        self.opt = np.full(shape, INF)
        self.what: dict[tuple[int, int, int, int, int], tuple[Any, ...]] = {}
        self._fill()

    def disc(self, v: float) -> int:
        """Bytes to slots, rounded up."""
        return int(math.ceil(v / self.unit - 1e-12))

    def get(self, i: int, A: int, df: int, db: int, bar: bool) -> float:
        """The table's value (inf outside it)."""
        if A + df > self.S or A + db > self.S:
            return INF
        return float(self.opt[int(bar), i, A, df, db])

    def enable(self, i: int, A: float, df: float, db: float, bar: bool) -> tuple[float, float, float] | None:
        """(offload bytes, prefetch bytes, time) of F_all(i)..B(i), None when it does not fit."""
        M, beta = self.M, self.beta
        inp = self.xbar[i] if bar else self.x[i]
        f_use = self.xbar[i + 1] + self.o_f[i]
        b_use = self.xbar[i + 1] + self.x[i + 1] + self.x[i] + self.o_b[i]
        free = M - A - inp
        if f_use > free or b_use > free:
            return None
        eps_f = max(0.0, f_use - M + A + df + inp)
        eps_b = max(0.0, b_use - M + A + db + inp)
        return (self.u_f[i] * beta + eps_f, self.u_b[i] * beta + eps_b,
                self.u_f[i] + self.u_b[i] + (eps_f + eps_b) / beta)

    def mmax_ng(self, i: int, k: int) -> float:
        """Memory of F_n(k) in the no-grad sweep from i (F_ck(i) for k = i)."""
        return self.x[k + 1] + self.o_f[k] + (self.x[k] if k > i else 0.0)

    def rotor_m(self, i: int, A: float, bar: bool) -> int:
        """The rotor table's memory (slots) for the backward of a no-grad segment from i."""
        inp = self.xbar[i] if bar else self.x[i]
        return int(math.floor((self.M - A - inp - self.x[i]) / self.unit))

    def step(self, A: float, df: float, db: float, inp: float, off: bool, vals: tuple[float, float, float]
             ) -> tuple[float, float, float]:
        """The next (A, df, db) in bytes."""
        od, pd, _ = vals
        if off:
            return A, max(0.0, df + inp - od), max(0.0, db - pd) + inp
        return A + inp, max(0.0, df - od), max(0.0, db - pd)

    def _fill(self) -> None:
        L, S, u = self.L, self.S, self.unit
        for A in range(S + 1):
            for df in range(S - A + 1):
                for db in range(S - A + 1):
                    for bar in (False, True):
                        vals = self.enable(L, A * u, df * u, db * u, bar)
                        if vals is None:
                            continue
                        inp = self.xbar[L] if bar else self.x[L]
                        _, ndf, ndb = self.step(A * u, df * u, db * u, inp, False, vals)
                        self.opt[int(bar), L, A, df, db] = vals[2] + (ndf + ndb) / self.beta
        for i in reversed(range(L)):
            worst = [max(self.mmax_ng(i, k) for k in range(i, L))]
            for A in range(S + 1):
                for df in range(S - A + 1):
                    for db in range(S - A + 1):
                        for bar in (False, True):
                            self._cell(i, A, df, db, bar, worst[0])

    def _cell(self, i: int, Ad: int, dfd: int, dbd: int, bar: bool, worst: float) -> None:
        u, beta = self.unit, self.beta
        A, df, db = Ad * u, dfd * u, dbd * u
        inp = self.xbar[i] if bar else self.x[i]
        best, choice = INF, None
        vals = self.enable(i, A, df, db, bar)
        if vals is not None:
            for off in (True, False):
                nA, ndf, ndb = self.step(A, df, db, inp, off, vals)
                v = vals[2] + self.get(i + 1, self.disc(nA), self.disc(ndf), self.disc(ndb), True)
                if v < best:
                    best, choice = v, ("all", off)
        free = self.M - A - inp
        if worst <= free:
            m = self.rotor_m(i, A, bar)
            eps, fwd = 0.0, 0.0
            for j in range(i, self.L):
                eps = max(eps, self.mmax_ng(i, j) - beta * fwd)
                fwd += self.u_f[j]
                eps_f = max(0.0, eps - self.M + A + df + inp)
                comp = self.rotor.value(m, i, j) if 0 <= m <= self.rotor.M else INF
                if not math.isfinite(comp):
                    continue
                comm = db / beta
                back = (max(comp, comm) + comp + comm) / 2
                vals_ng = (fwd * beta + eps_f, back * beta, fwd + eps_f / beta + back)
                for off in (True, False):
                    nA, ndf, ndb = self.step(A, df, db, inp, off, vals_ng)
                    v = vals_ng[2] + self.get(j + 1, self.disc(nA), self.disc(ndf), self.disc(ndb), False)
                    if v < best:
                        best, choice = v, ("ng", off, j)
        self.opt[int(bar), i, Ad, dfd, dbd] = best
        if choice is not None:
            self.what[(i, Ad, dfd, dbd, int(bar))] = choice

    def schedule(self) -> OffloadSchedule | None:
        """The port's schedule from the state (0, 0, 0, 0, False), issued as our simulator needs."""
        if not math.isfinite(self.get(0, 0, 0, 0, False)):
            return None
        ops: list[Any] = []
        self._rec(0, 0, 0, 0, False, ops)
        return OffloadSchedule(ops, self.L)

    def _rec(self, i: int, Ad: int, dfd: int, dbd: int, bar: bool, ops: list[Any]) -> None:
        u = self.unit
        if i == self.L:
            ops.append(Loss(self.L))
            return
        A, df, db = Ad * u, dfd * u, dbd * u
        inp = self.xbar[i] if bar else self.x[i]
        value = ("abar" if bar else "a", i)
        choice = self.what[(i, Ad, dfd, dbd, int(bar))]
        if choice[0] == "all":
            off = choice[1]
            vals = self.enable(i, A, df, db, bar)
            assert vals is not None
            nA, ndf, ndb = self.step(A, df, db, inp, off, vals)
            ops.append(F_all(i))
            if off:
                ops.append(Off(*value))
            self._rec(i + 1, self.disc(nA), self.disc(ndf), self.disc(ndb), True, ops)
            if off:
                ops.append(Pre(*value))
            ops.append(Bwd(i))
            return
        _, off, j = choice
        m = self.rotor_m(i, A, bar)
        eps, fwd = 0.0, 0.0
        for k in range(i, j + 1):
            eps = max(eps, self.mmax_ng(i, k) - self.beta * fwd)
            fwd += self.u_f[k]
        eps_f = max(0.0, eps - self.M + A + df + inp)
        comp, comm = self.rotor.value(m, i, j), db / self.beta
        back = (max(comp, comm) + comp + comm) / 2
        nA, ndf, ndb = self.step(A, df, db, inp, off, (fwd * self.beta + eps_f, back * self.beta, 0.0))
        ops.append(F_ck(i))
        if off:
            ops.append(Off(*value))
        ops.extend(F_n(k) for k in range(i + 1, j + 1))
        self._rec(j + 1, self.disc(nA), self.disc(ndf), self.disc(ndb), False, ops)
        if off:
            ops.append(Pre(*value))
        ops.extend(self.rotor.schedule(m, i, j).ops)


def port_makespan(inst: OffloadInstance, budget: int, slots: int = 20) -> tuple[float | None, str]:
    """(makespan replayed by our simulator, note): None when the port finds no schedule
    ("none") or its schedule breaks our simulator's rules or the budget (the violation)."""
    dp = PortDP(inst, budget, slots)
    sched = dp.schedule()
    if sched is None:
        return None, "none"
    sim = simulate(inst, sched, budget)
    if not sim.valid:
        return None, f"invalid: {sim.violation}"
    return sim.makespan, "ok"

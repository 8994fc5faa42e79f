"""The Lagrangian dual of the phase model by column generation (Dantzig-Wolfe): a master LP
picks a convex combination of whole phase-block points per phase (`solvers.chain.phase_lagrange`:
each block point is a 0-1 assignment of that phase's start state and ops, feasible for all of
the phase's own rows, memory included) subject to the phase-to-phase transition rows.

Master (GLOP): ``min sum c_p lam_p`` over columns p (block points; ``c_p`` their forward times)
with ``sum_{p in block k} lam_p = 1`` for every phase k and every transition row
``sum_p a_p lam_p = 0``; artificial slack columns (cost `BIG` per unit) keep it feasible before
any complete schedule is among the columns. Pricing: the block DPs under the master's row duals
(multipliers ``mu = -y``), which give the Lagrangian value

    Z = sum_b u_b + sum_k min_{block k} (c + mu . a)

a lower bound of the model's optimum for whatever duals (weak duality, no convergence needed),
and the columns of negative reduced cost ``min_k - pi_k``. Stabilisation (boxstep): the
artificial slacks' costs keep the duals within `delta` of the multipliers of the best Z so far
(``s+`` costs ``y_c + delta``, ``s-`` costs ``delta - y_c``); the box moves when Z improves and
widens (x4) when its own problem is solved without a better Z. When no column prices out at the
master's duals and no slack is used, the master's value is the Lagrangian dual's maximum: the
best bound this relaxation gives (``converged``).

What it gives (docs/chain.md, "Scale"): on ``random_chain(L, 0)`` the dual closes 10-50% of the
root LP's gap (L = 10 tight: 64.63 against LP 62.64 and optimum 66.49), less as L grows, and at
L = 50 it does not converge in minutes (the master LP's re-solves dominate).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..exact.options import Deadline
from .exact_model import PhaseModel
from .phase_lagrange import FA, FC, FN, PhaseLagrangian

#: cost of one unit of an artificial slack of a transition row (chain time unit per unit)
BIG_FACTOR = 10.0
#: a column enters when its reduced cost is below minus this (chain time unit)
RC_TOL = 1e-7


@dataclass
class ColgenReport:
    """What `column_generation` did: best Z (chain time unit; None before a pricing), its history,
    iterations, columns, the last master value, whether the dual is solved (no column priced out
    at the master's duals: Z's maximum reached), seconds, and the multipliers of the best Z."""

    bound: float | None = None
    history: list[float] = field(default_factory=list)
    iterations: int = 0
    columns: int = 0
    master: float | None = None
    converged: bool = False
    seconds: float = 0.0
    #: seconds in the master LP and in pricing (the block DPs)
    master_s: float = 0.0
    price_s: float = 0.0
    mu: np.ndarray | None = None
    nu: np.ndarray | None = None

    def as_details(self) -> dict[str, Any]:
        """The report as `SolveResult.details` entries."""
        return {
            "lagrange_bound": self.bound,
            "lagrange_iterations": self.iterations,
            "lagrange_columns": self.columns,
            "lagrange_master": self.master,
            "lagrange_converged": self.converged,
            "lagrange_s": round(self.seconds, 3),
        }


def block_points(model: PhaseModel, values: list[float]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The per-phase block points (ops, sa, st) of a 0-1 point of the model (e.g. an encoded schedule)."""
    L = model.L
    out = []
    code = {"FA": FA, "FC": FC, "FN": FN}
    for k in range(L + 1):
        nst = L if k == L else k + 1
        ops = np.zeros(nst, np.int64)
        sas = np.zeros(nst + 1, np.int64)
        sts = np.zeros(nst + 1, np.int64)
        for j in range(nst):
            for kind, c in code.items():
                i = model.index.get((kind, k, j))
                if i is not None and values[i] > 0.5:
                    ops[j] = c
        if k < L:
            for j in range(1, k + 1):
                sas[j] = int(values[model.index[("SA", k, j)]] > 0.5)
            for j in range(1, k + 2):
                sts[j] = int(values[model.index[("ST", k, j)]] > 0.5)
        out.append((ops, sas, sts))
    return out


def column_generation(
    model: PhaseModel,
    deadline: Deadline,
    *,
    incumbent: float | None = None,
    start: list[float] | None = None,
    mu: np.ndarray | None = None,
    nu: np.ndarray | None = None,
    max_iter: int = 10_000,
    share: float | None = None,
    delta: float = 0.5,
) -> ColgenReport:
    """Column generation on the phase blocks (module docstring). `start`: a 0-1 point of the model
    (the warm start) whose blocks seed the master; `mu`, `nu`: multipliers priced first (e.g.
    `phase_lagrange.lp_multipliers`). Stops when the dual is solved, when the best Z reaches
    `incumbent` (less 1e-9 relative), after `max_iter` pricings, or when `share` of the deadline's
    limit (or the deadline) is spent. Every Z is a valid lower bound; the report keeps the best."""
    from ortools.linear_solver import pywraplp

    t0 = time.perf_counter()
    rep = ColgenReport()
    if model.trivially_infeasible:
        return rep
    lag = PhaseLagrangian(model)
    L = lag.L
    stop_at = None
    if share is not None and deadline.limit is not None:
        stop_at = deadline.elapsed() + share * deadline.limit
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return rep
    # GLOP's presolve on every re-solve of the growing master cost most of its time at L = 50
    solver.SetSolverSpecificParametersAsString("use_preprocessing:false")
    inf = solver.infinity()
    big = BIG_FACTOR * max(1.0, float(sum(lag.u_fa)) + float(sum(lag.u_fn)))
    rows: dict[tuple, Any] = {}
    for k in range(1, L + 1):
        for j in range(1, k + 1):
            rows[("ST", k, j)] = solver.Constraint(0.0, 0.0)
        for j in range(1, k):
            rows[("SA", k, j)] = solver.Constraint(0.0, 0.0)
    conv = [solver.Constraint(1.0, 1.0) for _ in range(L + 1)]
    obj = solver.Objective()
    obj.SetMinimization()
    obj.SetOffset(lag.const)
    slacks: dict[tuple, tuple[Any, Any]] = {}
    for r, ct in rows.items():
        sp, sm = solver.NumVar(0.0, inf, ""), solver.NumVar(0.0, inf, "")
        ct.SetCoefficient(sp, 1.0)
        ct.SetCoefficient(sm, -1.0)
        slacks[r] = (sp, sm)

    def box(m: np.ndarray | None, n: np.ndarray | None, width: float) -> None:
        """Keep the master's duals y (= -multipliers) within `width` of the centre (m, n) (0 and
        `big` without one): the slack s+ of a row costs y_c + width, s- costs width - y_c."""
        for r, (sp, sm) in slacks.items():
            yc = 0.0 if m is None or n is None else -float((m if r[0] == "ST" else n)[r[1], r[2]])
            obj.SetCoefficient(sp, yc + width)
            obj.SetCoefficient(sm, width - yc)

    seen: set[tuple[int, bytes]] = set()

    def add(k: int, ops: np.ndarray, sas: np.ndarray, sts: np.ndarray) -> bool:
        key = (k, ops.tobytes() + sas.tobytes() + sts.tobytes())
        if key in seen:
            return False
        seen.add(key)
        cost, coef = lag.links(k, ops, sas, sts)
        v = solver.NumVar(0.0, inf, "")
        obj.SetCoefficient(v, cost)
        conv[k].SetCoefficient(v, 1.0)
        for r, c in coef.items():
            rows[r].SetCoefficient(v, float(c))
        rep.columns += 1
        return True

    def price(m: np.ndarray, n: np.ndarray) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] | None:
        t1 = time.perf_counter()
        sols = lag.blocks(m, n)
        rep.price_s += time.perf_counter() - t1
        if sols is None:
            return None
        z = lag.const + sum(b[0] for b in sols)
        rep.history.append(z)
        if rep.bound is None or z > rep.bound:
            rep.bound, rep.mu, rep.nu = z, m.copy(), n.copy()
        return sols

    if start is not None:
        for k, (ops, sas, sts) in enumerate(block_points(model, start)):
            add(k, ops, sas, sts)
    if mu is not None and nu is not None:
        sols = price(mu, nu)
        if sols is None:
            rep.seconds = time.perf_counter() - t0
            return rep
        for k, (_, ops, sas, sts) in enumerate(sols):
            add(k, ops, sas, sts)
    width = big if rep.mu is None else delta
    box(rep.mu, rep.nu, width)
    centre = rep.bound
    while rep.iterations < max_iter and not deadline.expired():
        if stop_at is not None and deadline.elapsed() > stop_at:
            break
        if incumbent is not None and rep.bound is not None and rep.bound >= incumbent - 1e-9 * max(1.0, incumbent):
            break
        t1 = time.perf_counter()
        left = deadline.left()
        if left is not None:
            solver.SetTimeLimit(max(1, int(1000 * left)))
        ok = solver.Solve() == pywraplp.Solver.OPTIMAL
        rep.master_s += time.perf_counter() - t1
        if not ok:
            break
        rep.master = obj.Value()
        slack_used = any(sp.solution_value() > 1e-9 or sm.solution_value() > 1e-9 for sp, sm in slacks.values())
        cur_mu, cur_nu = np.zeros((L + 1, L + 1)), np.zeros((L + 1, L + 1))
        for (kind, k, j), ct in rows.items():
            (cur_mu if kind == "ST" else cur_nu)[k, j] = -ct.dual_value()
        pis = [ct.dual_value() for ct in conv]
        rep.iterations += 1
        sols = price(cur_mu, cur_nu)
        if sols is None:
            break
        added = False
        for k, (_, ops, sas, sts) in enumerate(sols):
            cost, coef = lag.links(k, ops, sas, sts)
            rc = cost + sum(c * (cur_mu if r[0] == "ST" else cur_nu)[r[1], r[2]] for r, c in coef.items()) - pis[k]
            if rc < -RC_TOL and add(k, ops, sas, sts):
                added = True
        if not added and not slack_used:
            rep.converged = True  # no column prices out and no slack is used: the dual is solved
            break
        if rep.bound is not None and (centre is None or rep.bound > centre + 1e-9 * max(1.0, abs(rep.bound))):
            centre = rep.bound  # a serious step: the box moves to the best multipliers
            box(rep.mu, rep.nu, width)
        elif not added:  # the box's problem is solved at its centre: widen it
            width = min(big, 4.0 * width)
            box(rep.mu, rep.nu, width)
    rep.seconds = time.perf_counter() - t0
    return rep


__all__ = ["ColgenReport", "block_points", "column_generation"]

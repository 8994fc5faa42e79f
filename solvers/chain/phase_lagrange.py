"""A Lagrangian bound of the phase model (`solvers.chain.exact_model`) whose subproblems keep
every phase integral: the phase-to-phase rows are dualised and each phase is solved exactly by
a dynamic program over its stages and memory slots.

Blocks. With the transition rows (tapes ``ST[k-1,j] = ST[k,j] + FA[k,j-1]``, standalone
activations ``SA[k-1,j] = Ain[k,j] - FN[k,j]``) moved into the objective with multipliers
``mu[k,j]``, ``nu[k,j]``, the model splits into one block per phase k: its start state
(``SA[k,.]``, ``ST[k,.]``), its forward ops and its own rows (one kind per slot, availability,
``Ain <= 1``, the dominance rows, ``B(k)`` / ``Loss`` needs, the memory rows of its slots and
of its terminal op). The memory rows mention the state after a slot (``SA[k-1,i]`` for i < j);
the block states it as ``Ain[k,i] - FN[k,i]``, equal on every point of the model. Each block
also keeps two rows implied by binarity of the next phase's variables (``ST[k,j] + FA[k,j-1]
<= 1`` for j <= k) and nothing else. So every 0-1 point of the model restricted to phase k is a
point of block k, and for *any* multipliers

    Z(mu, nu) = sum_u[b] + sum_k min over block k of (c - multipliers' terms) . x_k

is at most the model's optimum (weak duality: on a point of the model the dualised rows vanish).
`lagrangian_bound` improves the multipliers by subgradient ascent (Polyak steps towards the warm
start's makespan); every evaluated Z is a valid bound, so the best one is. Subgradient steps stall
on this dual (at ``random_chain(10, 0)``, M = 71 they never leave the LP duals' Z, 58.38, where the
dual's maximum is 58.69); `solvers.chain.phase_colgen` solves it by column generation instead.
`lp_multipliers` gives the LP relaxation's duals of the dualised rows, where Z >= the LP value.

Keeps phases integral, not tapes: a convex combination of phase points may make a tape in two
phases with weight 1/2 each, so this bound is weaker than fixing the tape variables integral.

The block DP. The memory before slot j of phase k is ``base + Lft + R``: ``base`` = a_0 (and
delta_{k+1} for k < L), ``Lft`` the start-state items of index <= j and everything made (or
freed, F_n) by slots < j, ``R`` the start-state items of index > j. A left-to-right pass over the
stages with state (kind of the previous slot's op, Lft, R) on the integer grid Lft + R <= M - base
is exact: R starts at any value (the memory promised to items not yet chosen) and each chosen
item moves its size from R to Lft; what is left of R at the end is memory never used, which only
makes a point harder to fit. Sizes are the model's integers (slots), so the grid has at most
(M+1)^2 states; each stage is O(16 M^2), a phase O(k M^2), one Z about 1e8 steps at L = 50,
M = 100 (numba; plain Python when numba is missing, for small tests only).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..exact.options import Deadline
from .exact_model import PhaseModel
from .jit import njit

INF = 1e300
#: op codes of a slot: 0 idle, 1 F_all, 2 F_ck, 3 F_n
IDLE, FA, FC, FN = 0, 1, 2, 3


@njit(cache=True)
def _phase_dp(nst, is_loss, Mp, xs, xb, cop, add, out, csa, cst, hsa, hst, term):  # pragma: no cover - numba
    """Exact minimum of one phase block. Stages 0..nst-1; start-state items of index 1..nst (index
    nst: the tape abar_{k+1} of a backward phase). ``cop[j, o]``: cost of op o at stage j (>= INF:
    not allowed); ``add``/``out``: memory the op's output keeps / needs while it runs; ``csa``,
    ``cst``: costs of the start-state items (``hsa``, ``hst``: they exist); ``term``: memory of the
    terminal op beyond the state. Returns (value, ops, sa, st); value >= INF when infeasible."""
    S = Mp + 1
    V = np.full((4, S, S), INF)
    for r in range(S):
        V[0, 0, r] = 0.0
    P = np.zeros((nst, 2, 2, S, S), np.int8)
    Q = np.zeros((nst, 4, S, S), np.int8)
    for j in range(nst):
        W = np.full((2, 2, S, S), INF)
        for f in range(4):
            for lf in range(S):
                for r in range(S - lf):
                    v = V[f, lf, r]
                    if v >= INF:
                        continue
                    for sa in range(2 if hsa[j] else 1):
                        if sa == 1 and f >= 2:
                            continue  # Ain <= 1
                        for st in range(2 if hst[j] else 1):
                            if st == 1 and (f == 1 or f == 2):
                                continue  # ST + FA[j-1] <= 1 (next ST binary); FC[j-1] + ST[j] <= 1 (dominance)
                            s = sa * xs[j] + st * xb[j]
                            if s > r:
                                continue
                            a = 1 if (j == 0 or sa == 1 or f >= 2) else 0
                            t = 1 if (st == 1 or f == 1) else 0
                            c = v
                            if sa == 1:
                                c += csa[j]
                            if st == 1:
                                c += cst[j]
                            if c < W[a, t, lf + s, r - s]:
                                W[a, t, lf + s, r - s] = c
                                P[j, a, t, lf + s, r - s] = f * 4 + sa * 2 + st
        V = np.full((4, S, S), INF)
        last_b = (not is_loss) and j == nst - 1 and j >= 1
        for a in range(2):
            for t in range(2):
                if last_b and a == 0 and t == 0:
                    continue  # B(k) needs a_k
                for lf in range(S):
                    for r in range(S - lf):
                        w = W[a, t, lf, r]
                        if w >= INF:
                            continue
                        if w < V[0, lf, r]:
                            V[0, lf, r] = w
                            Q[j, 0, lf, r] = a * 2 + t
                        if a == 0 and t == 0:
                            continue
                        for o in range(1, 4):
                            co = cop[j, o]
                            if co >= INF or (o == 3 and a == 0):
                                continue
                            if lf + r + out[j, o] > Mp:
                                continue
                            nl = lf + add[j, o]
                            if o == 3:
                                nl -= xs[j]
                            c = w + co
                            if c < V[o, nl, r]:
                                V[o, nl, r] = c
                                Q[j, o, nl, r] = a * 2 + t
    # terminal op
    best = INF
    bf, bl, br, bst = -1, -1, -1, 0
    for f in range(4):
        if is_loss and f == 0:
            continue  # the Loss needs a_L
        if (not is_loss) and f >= 2:
            continue
        for lf in range(S):
            for r in range(S - lf):
                v = V[f, lf, r]
                if v >= INF:
                    continue
                st = 0
                s = 0
                if not is_loss and f == 0:  # ST[k,k+1] + FA[k,k] = 1
                    st = 1
                    s = xb[nst]
                    if s > r:
                        continue
                    v += cst[nst]
                if lf + r + term > Mp:
                    continue
                if v < best:
                    best, bf, bl, br, bst = v, f, lf + s, r - s, st
    ops = np.zeros(nst, np.int64)
    sas = np.zeros(nst + 1, np.int64)
    sts = np.zeros(nst + 1, np.int64)
    if best >= INF:
        return best, ops, sas, sts
    sts[nst] = bst
    f, lf, r = bf, bl - bst * xb[nst], br + bst * xb[nst]
    for j in range(nst - 1, -1, -1):
        ops[j] = f
        at = Q[j, f, lf, r]
        a, t = at // 2, at % 2
        if f > 0:
            lf -= add[j, f]
            if f == 3:
                lf += xs[j]
        code = P[j, a, t, lf, r]
        fp, sa, st = code // 4, (code // 2) % 2, code % 2
        sas[j], sts[j] = sa, st
        s = sa * xs[j] + st * xb[j]
        f, lf, r = fp, lf - s, r + s
    return best, ops, sas, sts


@dataclass
class LagrangeReport:
    """What `lagrangian_bound` did: the best bound Z (chain time unit, None before a first
    evaluation), evaluations, the bound after each, seconds, and the multipliers of the best Z."""

    bound: float | None = None
    iterations: int = 0
    history: list[float] = field(default_factory=list)
    seconds: float = 0.0
    mu: np.ndarray | None = None
    nu: np.ndarray | None = None

    def as_details(self) -> dict[str, float | int | None]:
        """The report as `SolveResult.details` entries."""
        return {
            "lagrange_bound": self.bound,
            "lagrange_iterations": self.iterations,
            "lagrange_s": round(self.seconds, 3),
        }


class PhaseLagrangian:
    """The Lagrangian dual function of a `PhaseModel` (dominance rows on: the model the solvers use).

    Multipliers ``mu[k, j]`` (1 <= j <= k <= L) of the tape rows ``ST[k-1,j] - ST[k,j] - FA[k,j-1]
    = 0`` and ``nu[k, j]`` (1 <= j < k <= L) of ``SA[k-1,j] - Ain[k,j] + FN[k,j] = 0``, as (L+1)^2
    arrays (other entries unused)."""

    def __init__(self, model: PhaseModel) -> None:
        if not model.dominance:
            raise ValueError("the Lagrangian blocks state the dominance rows: build the model with dominance=True")
        self.model = model
        ch, L = model.chain, model.L
        self.L, self.M = L, int(model.budget)
        self.x = np.array([int(v) for v in ch.x], np.int64)
        self.xb = np.array([int(v) for v in ch.xbar], np.int64)
        self.o_fa = [int(v) for v in ch.o_fa]
        self.o_fn = [int(v) for v in ch.o_fn]
        self.o_b = [int(v) for v in ch.o_b]
        self.u_fa = [float(v) for v in ch.u_fa]
        self.u_fn = [float(v) for v in ch.u_fn]
        self.const = float(ch.u_b.sum())

    def zeros(self) -> tuple[np.ndarray, np.ndarray]:
        """Multipliers all 0 (Z is then the sum of each phase's cheapest block point)."""
        n = self.L + 1
        return np.zeros((n, n)), np.zeros((n, n))

    def costs(self, k: int, mu: np.ndarray, nu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Block k's costs under the multipliers: ``cop[j, o]`` of op o at stage j (>= INF: op not in
        the model), ``csa[j]``, ``cst[j]`` of the start-state items (chain time unit)."""
        L = self.L
        nst = L if k == L else k + 1
        cop = np.full((nst, 4), INF)
        for j in range(nst):
            kinds = self.model.kinds(k, j)
            link_in = j + 1 < k  # nu[k, j+1] exists: Ain[k, j+1] contains FC/FN[k, j]
            cop[j, FA] = self.u_fa[j] - (mu[k, j + 1] if j + 1 <= k else 0.0)
            if "FC" in kinds:
                cop[j, FC] = self.u_fn[j] - (nu[k, j + 1] if link_in else 0.0)
            if "FN" in kinds:
                cop[j, FN] = self.u_fn[j] - (nu[k, j + 1] if link_in else 0.0) + (nu[k, j] if 1 <= j < k else 0.0)
        csa = np.zeros(nst + 1)
        cst = np.zeros(nst + 1)
        if k < L:
            for j in range(1, k + 1):
                csa[j] = nu[k + 1, j] - (nu[k, j] if j < k else 0.0)
            for j in range(1, k + 2):
                cst[j] = mu[k + 1, j] - (mu[k, j] if j <= k else 0.0)
        return cop, csa, cst

    def solve_block(
        self, k: int, cop: np.ndarray, csa: np.ndarray, cst: np.ndarray
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """The exact minimum of block k (phase k) for costs shaped as `costs` returns: (value, ops,
        sa, st) (module docstring; value >= INF when the block has no point)."""
        L, x, xb = self.L, self.x, self.xb
        nst = L if k == L else k + 1
        base = x[0] + (x[k + 1] if k < L else 0)
        Mp = self.M - int(base)
        if Mp < 0:
            return INF, np.zeros(nst, np.int64), np.zeros(nst + 1, np.int64), np.zeros(nst + 1, np.int64)
        add = np.zeros((nst, 4), np.int64)
        out = np.zeros((nst, 4), np.int64)
        for j in range(nst):
            add[j, FA], out[j, FA] = xb[j + 1], xb[j + 1] + self.o_fa[j]
            add[j, FC], out[j, FC] = x[j + 1], x[j + 1] + self.o_fn[j]
            add[j, FN], out[j, FN] = x[j + 1], x[j + 1] + self.o_fn[j]
        hsa = np.zeros(nst + 1, np.int64)
        hst = np.zeros(nst + 1, np.int64)
        if k < L:
            hsa[1 : k + 1] = 1
            hst[1 : k + 1] = 1  # ST[k,k+1] is chosen with the terminal op
        term = int(x[k] + self.o_b[k])
        xs_ext = np.zeros(nst + 1, np.int64)
        xb_ext = np.zeros(nst + 1, np.int64)
        xs_ext[:] = x[: nst + 1]
        xb_ext[:] = xb[: nst + 1]
        val, ops, sas, sts = _phase_dp(nst, k == L, Mp, xs_ext, xb_ext, cop, add, out, csa, cst, hsa, hst, term)
        return float(val), ops, sas, sts

    def _phase(self, k: int, mu: np.ndarray, nu: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        return self.solve_block(k, *self.costs(k, mu, nu))

    def blocks(self, mu: np.ndarray, nu: np.ndarray) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] | None:
        """Each phase's block minimum under the multipliers, indexed by k: (value, ops, sa, st) with
        ``ops[j]`` the op code of stage j, ``sa[j]``, ``st[j]`` the start-state items (0/1; st[k+1]
        is the tape abar_{k+1} of phase k < L); None when some block has no point (then the model
        has none either)."""
        out = []
        for k in range(self.L + 1):
            b = self._phase(k, mu, nu)
            if b[0] >= INF:
                return None
            out.append(b)
        return out

    def links(self, k: int, ops: np.ndarray, sas: np.ndarray, sts: np.ndarray) -> tuple[float, dict[tuple, int]]:
        """A point of block k: its makespan share (forward times of its ops, chain time unit) and its
        coefficients in the dualised rows {("ST"|"SA", k', j): coefficient}."""
        L = self.L
        cost = sum(self.u_fa[j] if o == FA else self.u_fn[j] for j, o in enumerate(ops) if o != IDLE)
        coef: dict[tuple, int] = {}

        def put(key: tuple, c: int) -> None:
            if c:
                coef[key] = coef.get(key, 0) + c

        if k < L:  # as the next phase of k+1: +ST[k,j], +SA[k,j]
            for j in range(1, k + 2):
                put(("ST", k + 1, j), int(sts[j]))
            for j in range(1, k + 1):
                put(("SA", k + 1, j), int(sas[j]))
        if k >= 1:  # as the phase that starts the row
            for j in range(1, k + 1):
                put(("ST", k, j), -(int(sts[j]) if k < L else 0) - int(ops[j - 1] == FA))
            for j in range(1, k):
                put(("SA", k, j), -(int(sas[j]) if k < L else 0) - int(ops[j - 1] >= FC) + int(ops[j] == FN))
        return float(cost), coef

    def evaluate(self, mu: np.ndarray, nu: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Z(mu, nu) (a lower bound of the model's optimum; inf when some block has no point, which
        proves the model infeasible) and its subgradient (the dualised rows' residuals at the
        blocks' minimisers), shaped like the multipliers."""
        sols = self.blocks(mu, nu)
        gmu, gnu = np.zeros_like(mu), np.zeros_like(nu)
        if sols is None:
            return math.inf, gmu, gnu
        z = self.const + sum(b[0] for b in sols)
        for k, (_, ops, sas, sts) in enumerate(sols):
            for (kind, kk, j), c in self.links(k, ops, sas, sts)[1].items():
                (gmu if kind == "ST" else gnu)[kk, j] += c
        return z, gmu, gnu


def lp_multipliers(
    model: PhaseModel, deadline: Deadline | None = None
) -> tuple[float | None, np.ndarray | None, np.ndarray | None]:
    """(value, mu, nu) of the LP relaxation of the block form (GLOP): the model's rows with
    ``SA[k-1,i]`` in phase k's memory rows written as ``Ain[k,i] - FN[k,i]`` (the same polytope,
    given the transition rows), and the duals of the transition rows as multipliers (``mu = -y``:
    Z adds ``+mu * row``). With them Z is at least the LP value (the blocks' integer points lie in
    their LP relaxation); a start for `lagrangian_bound`. (None, None, None) when GLOP fails."""
    from ortools.linear_solver import pywraplp

    L = model.L
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None or model.trivially_infeasible:
        return None, None, None
    left = None if deadline is None else deadline.left()
    if left is not None:
        solver.SetTimeLimit(max(1, int(1000 * left)))
    inf = solver.infinity()
    xs = [solver.NumVar(0.0, 1.0, "") for _ in model.keys]
    links: list[tuple[str, int, int, object]] = []
    for row in model.rows:
        if row.name.startswith("tape cut"):
            continue
        terms = dict(row.expr.terms)
        lo, hi = row.lo, row.hi
        if row.name.startswith("memory"):
            k = L if row.name == "memory Loss" else int(re.findall(r"\d+", row.name)[-1])
            for v in [v for v in terms if model.keys[v][0] == "SA" and model.keys[v][1] == k - 1]:
                coef: float = terms.pop(v)
                i: int = model.keys[v][2]
                sub = model.a_in(k, i).add(model.get("FN", k, i), -1.0)
                for w, c in sub.terms.items():
                    terms[w] = terms.get(w, 0.0) + coef * c
                shift: float = coef * sub.const
                lo = None if lo is None else lo - shift
                hi = None if hi is None else hi - shift
        ct = solver.Constraint(-inf if lo is None else lo, inf if hi is None else hi)
        for v, c in terms.items():
            ct.SetCoefficient(xs[v], c)
        m = re.fullmatch(r"(ST|SA)\[(\d+),(\d+)\]( = Ain-FN)?", row.name)
        if m:
            links.append((m.group(1), int(m.group(2)) + 1, int(m.group(3)), ct))
    obj = solver.Objective()
    for v, c in model.objective.terms.items():
        obj.SetCoefficient(xs[v], c)
    obj.SetOffset(model.objective.const)
    obj.SetMinimization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None, None, None
    mu, nu = np.zeros((L + 1, L + 1)), np.zeros((L + 1, L + 1))
    for kind, k, j, ct in links:
        (mu if kind == "ST" else nu)[k, j] = -ct.dual_value()  # type: ignore[attr-defined]
    return float(obj.Value()), mu, nu


def lagrangian_bound(
    model: PhaseModel,
    deadline: Deadline,
    *,
    incumbent: float | None = None,
    max_iter: int = 1000,
    share: float | None = None,
    theta: float = 1.0,
    patience: int = 8,
    mu: np.ndarray | None = None,
    nu: np.ndarray | None = None,
) -> LagrangeReport:
    """Subgradient ascent on Z (module docstring) from `mu`, `nu` (default 0): Polyak steps
    ``theta (target - Z) / |g|^2`` with target `incumbent` (a makespan of the model, chain time unit)
    or, without one, 1.05 max(Z, 1); theta halves after `patience` steps without a better Z. Stops
    after `max_iter` evaluations, at a zero subgradient (Z is then the optimum of the model), when Z
    reaches the incumbent, or when `share` of the deadline's limit (or the deadline) is spent.
    Returns the best Z (every Z is a valid bound)."""
    import time

    t0 = time.perf_counter()
    lag = PhaseLagrangian(model)
    rep = LagrangeReport()
    if model.trivially_infeasible:
        return rep
    if mu is None or nu is None:
        mu, nu = lag.zeros()
    stop_at = None
    if share is not None and deadline.limit is not None:
        stop_at = deadline.elapsed() + share * deadline.limit
    stalled = 0
    while rep.iterations < max_iter and not deadline.expired():
        if stop_at is not None and deadline.elapsed() > stop_at:
            break
        z, gmu, gnu = lag.evaluate(mu, nu)
        rep.iterations += 1
        rep.history.append(z)
        if rep.bound is None or z > rep.bound:
            if rep.bound is not None and z - rep.bound < 1e-6 * max(1.0, abs(z)):
                stalled += 1
            else:
                stalled = 0
            rep.bound, rep.mu, rep.nu = z, mu.copy(), nu.copy()
        else:
            stalled += 1
        if not math.isfinite(z):
            break
        if incumbent is not None and z >= incumbent - 1e-9 * max(1.0, abs(incumbent)):
            break
        norm = float((gmu**2).sum() + (gnu**2).sum())
        if norm == 0.0:
            break
        if stalled >= patience:
            theta, stalled = theta / 2.0, 0
            if theta < 1e-4:
                break
            mu, nu = rep.mu.copy(), rep.nu.copy()  # type: ignore[union-attr]
            continue
        target = incumbent if incumbent is not None else 1.05 * max(z, 1.0)
        step = theta * max(target - z, 1e-6 * max(1.0, abs(z))) / norm
        mu = mu + step * gmu
        nu = nu + step * gnu
    rep.seconds = time.perf_counter() - t0
    return rep


__all__ = ["LagrangeReport", "PhaseLagrangian", "lagrangian_bound"]

"""One backend-neutral linear model, emitted to OR-Tools' MILP backends (`milp_runner`) or to
CP-SAT (`cpsat_runner.linear_to_cpsat`).

Variables have bounds and integrality; rows are ``lb <= sum coef * var <= ub``; the objective
``sum coef * var + offset`` is minimised. The chain phase model and the Checkmate MILP are
both stated this way, so each is written once and solved by any backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class LinearModel:
    """Variables (parallel lists lb, ub, integer, names), rows (indices, coefficients, lb, ub)
    and a minimised objective {variable: coefficient} plus a constant `offset`."""

    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rows: list[tuple[list[int], list[float], float, float]] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)
    offset: float = 0.0

    def var(self, lb: float, ub: float, integer: bool, name: str = "") -> int:
        """Add a variable with bounds [lb, ub] (integer when `integer`); returns its index."""
        self.lb.append(lb)
        self.ub.append(ub)
        self.integer.append(integer)
        self.names.append(name)
        return len(self.lb) - 1

    def add(self, idx: list[int], coef: list[float], lb: float = -math.inf, ub: float = math.inf) -> None:
        """Add the row lb <= sum_k coef[k] * x[idx[k]] <= ub."""
        self.rows.append((idx, coef, lb, ub))

    @property
    def num_vars(self) -> int:
        """Number of variables."""
        return len(self.lb)

    def value(self, values: list[float]) -> float:
        """Objective value of an assignment (offset included)."""
        return self.offset + sum(c * values[i] for i, c in self.objective.items())

    def violated(self, values: list[float], tol: float = 1e-6) -> int:
        """How many rows and bounds an assignment breaks (0: feasible)."""
        bad = sum(1 for v, lo, hi in zip(values, self.lb, self.ub) if v < lo - tol or v > hi + tol)
        bad += sum(1 for v, integer in zip(values, self.integer) if integer and abs(v - round(v)) > tol)
        for idx, coef, lo, hi in self.rows:
            s = sum(c * values[i] for i, c in zip(idx, coef))
            if s < lo - tol or s > hi + tol:
                bad += 1
        return bad

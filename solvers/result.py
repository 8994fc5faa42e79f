"""What every solver returns: status, objective, bound, time, and the schedule itself."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

OPTIMAL, FEASIBLE, INFEASIBLE, TIMEOUT = "optimal", "feasible", "infeasible", "timeout"
STATUSES = (OPTIMAL, FEASIBLE, INFEASIBLE, TIMEOUT)


@dataclass
class SolveResult:
    """One solver run.

    ``status``: optimal (proven, for the model named in ``scope``), feasible (a schedule, no
    proof), infeasible (proven: no schedule of this solver's model fits), timeout (the limit
    was reached before any schedule was found). ``objective`` is the makespan (chains, graphs)
    or the period (pipelines), in the instance's time unit; ``lower_bound`` a proven bound on
    the optimum of ``scope`` when the solver has one. ``peak_memory`` and ``objective`` are
    the simulator's replay values, never the solver's own claims (`solvers.registry.solve`
    checks that they agree). ``log`` holds (seconds, objective, bound) as the search improves.
    ``seeded_by`` names the fast solver whose schedule warm-started an exact solver ("" when
    none did); ``lower_bound`` is a finite number or None, never above ``objective``.
    """

    problem: str
    solver: str
    status: str
    objective: float | None = None
    peak_memory: int | None = None
    lower_bound: float | None = None
    solve_time_s: float = 0.0
    budget: int | None = None
    schedule: Any = None
    min_budget: int | None = None
    scope: str = ""
    message: str = ""
    log: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    seeded_by: str = ""

    @property
    def found(self) -> bool:
        """True when a schedule was found."""
        return self.schedule is not None and self.status in (OPTIMAL, FEASIBLE, TIMEOUT)

    @property
    def gap(self) -> float | None:
        """Relative gap (objective - bound) / objective, when both exist."""
        if self.objective is None or self.lower_bound is None or not self.objective:
            return None
        return max(0.0, (self.objective - self.lower_bound) / abs(self.objective))

    @property
    def from_exact_layer(self) -> bool:
        """True for the answer of an exact solver: the exact layer (`solvers.exact.layer.referee`) writes
        ``details["fast"]``, the fast solvers that seeded it ({} when none ran), in every answer it gives."""
        return isinstance(self.details.get("fast"), dict)

    def to_json(self, objective_key: str = "makespan") -> dict[str, Any]:
        """The `--json` object of docs/cli.md (NaN and infinities become null); ``log`` is there for every
        answer of an exact solver (`from_exact_layer`; ``[]`` when the search logged nothing) and for any
        other result that has one. JSON-native (`_json_native`): what ``json.loads(json.dumps(...))`` of it
        gives back (str keys, lists for tuples), so that it equals the object ``memsched solve --json`` prints."""
        out: dict[str, Any] = {
            "problem": self.problem,
            "solver": self.solver,
            "status": self.status,
            objective_key: _finite(self.objective),
            "peak_memory": self.peak_memory,
            "budget": self.budget,
            "lower_bound": _finite(self.lower_bound),
            "gap": _finite(self.gap),
            "solve_time_s": round(self.solve_time_s, 6),
            "scope": self.scope,
            "seeded_by": self.seeded_by or None,
        }
        if self.min_budget is not None:
            out["min_budget"] = self.min_budget
        if self.message:
            out["message"] = self.message
        if self.log or self.from_exact_layer:  # an exact solver's log is always written, [] when empty
            out["log"] = [[round(t, 4), _finite(o), _finite(b)] for t, o, b in self.log]
        out.update(self.details)
        out["schedule"] = self.schedule.to_json() if self.schedule is not None else None
        return _json_native(out)


def _json_native(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as JSON reads it back: a solver's details may hold int keys (join ``dp``'s ``ending``
    ``{branch: "ck"}``) or tuples, which JSON writes as "1" and lists. A numpy scalar or array
    becomes its Python value (``.tolist()``); NaN and infinities are kept (JSON's NaN, Infinity)."""
    native: dict[str, Any] = json.loads(json.dumps(obj, default=_plain))
    return native


def _plain(value: Any) -> Any:
    """`json.dumps`'s fallback: a numpy value (anything with ``tolist``) as a Python one; else TypeError."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _finite(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def gap_closed(objective: float, bound: float | None, rel: float = 1e-6) -> bool:
    """Whether the lower `bound` proves `objective` optimal within `rel` *relative* to it. No
    absolute floor: an instance timed in seconds has makespans near 1e-6, where a floor of 1e-6
    (``rel * max(1, |objective|)``) would call a bound 100% below the objective a proof."""
    return bound is not None and objective - bound <= rel * abs(objective)

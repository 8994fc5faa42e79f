"""bench_time_limits checks every exact solver (every solver of the exact layer), as its docstring, the README and
cli.md say: before, join/milp, offload/milp, pipeline/milp and pipeline/dag-milp had no case."""

from __future__ import annotations

from memsched.experiments.bench_time_limits import CASES
from memsched.solvers import registry


def test_every_exact_solver_has_a_case():
    exact = {(problem, name) for problem in registry.PROBLEMS for _, name, _ in registry.solver_table(problem)
             if getattr(registry.get_solver(problem, name), "exact_layer", False)}
    assert exact, "no exact solver found"
    assert exact <= {(problem, solver) for problem, solver, *_ in CASES}, exact - {(p, s) for p, s, *_ in CASES}

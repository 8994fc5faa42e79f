"""The solver listing says "takes memory_gb" exactly for the solvers that take it: the join and offload MILPs
(with SCIP) do, as their docs say, and the pipeline MILPs refuse it (a 1 GB limit on a tiny instance is accepted
where taken, refused naming ``--option memory_gb`` where not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.experiments.commands.solvers import fast_solver_table
from memsched.solvers.errors import InputError

from memsched.api import solve

ROOT = Path(__file__).resolve().parents[1]
CASES = [("join", str(ROOT / "solvers" / "data" / "join" / "siamese8.json"), {}),
         ("offload", str(ROOT / "examples" / "tiny.json"), {"bandwidth": "12GB/s"})]


@pytest.mark.parametrize("problem,path,extra", CASES)
def test_a_milp_that_takes_memory_gb_says_so(problem: str, path: str, extra: dict[str, str]) -> None:
    listed = {(p, n): summary for p, n, summary in fast_solver_table()}
    assert "takes memory_gb" in listed[(problem, "milp")]
    res = solve(path, "90%", "milp", memory_gb=1.0, time_limit=20, **extra)
    assert res.status in ("optimal", "feasible")


def test_the_pipeline_milp_refuses_memory_gb_and_does_not_list_it() -> None:
    listed = {(p, n): summary for p, n, summary in fast_solver_table()}
    assert "memory_gb" not in listed[("pipeline", "milp")]
    with pytest.raises(InputError) as err:
        solve(str(ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"), "90%", "milp", problem="pipeline",
              devices=2, memory_gb=1.0)
    assert err.value.field is not None and err.value.field.endswith("memory_gb")

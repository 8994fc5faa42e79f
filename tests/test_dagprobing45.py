"""`dag-cpsat` states its model at CP-SAT's probing level `probing` (0 by default, as `cpsat`):
at CP-SAT's default level 2 its presolve merged cliques of the model's Booleans without looking at
the time limit, and a 5 s limit on a 345-ideal DAG ended after 9-10 s (docs/pipeline.md, Options)."""

from __future__ import annotations

from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.pipeline import dag_cpsat
from memsched.solvers.pipeline.generate import parallel_branches
from memsched.solvers.result import OPTIMAL


@pytest.fixture
def probing_levels(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``cp_model_probing_level`` of every CP-SAT run of `dag-cpsat` (None: left to CP-SAT)."""
    seen: list[Any] = []
    real = dag_cpsat.run_cpsat

    def spy(*args: Any, **kw: Any) -> Any:
        run = real(*args, **kw)
        seen.append(run.solver.parameters.cp_model_probing_level if run.solver is not None else None)
        return run

    monkeypatch.setattr(dag_cpsat, "run_cpsat", spy)
    return seen


@pytest.mark.parametrize(("options", "level"), [({}, 0), ({"probing": 2}, 2)])
def test_probing_level_reaches_cpsat(probing_levels: list[Any], options: dict[str, Any], level: int) -> None:
    inst = parallel_branches(2, 3, seed=1)
    res = registry.solve("pipeline", inst, "dag-cpsat", None, devices=2, time_limit=20, workers=1, **options)
    assert res.status == OPTIMAL
    assert probing_levels == [level]
    fast = registry.solve("pipeline", inst, "dag", None, devices=2)
    assert res.objective is not None and fast.objective is not None
    assert res.objective <= fast.objective * (1 + 1e-9)

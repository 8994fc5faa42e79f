"""``budget=None`` through the registry, for every registered solver of every problem.

The pipeline reads None as "no memory limit" (its DP and heuristic solvers, its simulators and its
benchmarks do): every pipeline solver takes it, the exact ones too (their layer took ``int(budget)``,
a TypeError), and answers as with a budget nothing reaches; an exact solver stays never worse than
its fast solvers (warm start and referee at None). The other problems need a budget: every one of
their solvers refuses None with a one-line `InputError` naming ``budget`` (it was a TypeError from
deep inside each solver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.layer import referee
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.pipeline import Partition, simulate
from memsched.solvers.result import FEASIBLE, OPTIMAL, SolveResult

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
#: small instances, one per problem that needs a budget (offload: the chain with a host link)
NEEDS_BUDGET = {"chain": DATA / "examples" / "tiny.json", "graph": DATA / "graphs" / "linear10.json",
                "join": DATA / "join" / "tiny.json", "offload": DATA / "examples" / "tiny.json"}
#: pipeline instances (path, devices P)
PIPELINES = [(DATA / "pipeline" / "mlp7.chain.json", 2), (DATA / "pipeline" / "tiny-resnet.graph.txt", 3)]
#: a budget per device that no partition of these instances reaches (bytes)
HUGE = 10**15
LIMIT = 5.0  # s, for the exact solvers: the instances are solved to optimality in well under a second


def _load(problem: str, path: Path) -> Any:
    desc = registry.get_problem(problem)
    return desc.load(str(path), bandwidth=1e9) if problem == "offload" else desc.load(str(path))


def _solvers(problems: list[str]) -> list[tuple[str, str]]:
    return [(p, s) for p in problems for _, s, _ in registry.solver_table(p)]


def _exact(problems: list[str]) -> list[tuple[str, str]]:
    """The solvers of `problems` that run through the exact layer (warm start, model, referee)."""
    return [(p, s) for p, s in _solvers(problems) if getattr(registry.get_solver(p, s), "exact_layer", False)]


def _needs_budget() -> list[str]:
    return [p for p in registry.available_problems() if p != "pipeline"]


@pytest.mark.parametrize(("problem", "solver"), _solvers(_needs_budget()))
def test_a_problem_without_a_no_limit_refuses_none_in_one_line_naming_budget(problem, solver):
    inst = _load(problem, NEEDS_BUDGET[problem])
    with pytest.raises(InputError) as err:
        registry.solve(problem, inst, solver, None, time_limit=2)
    assert err.value.field == "budget"
    assert "\n" not in str(err.value) and str(err.value).startswith("budget: ")
    assert "None" in str(err.value)


@pytest.mark.parametrize(("problem", "solver"), _exact(_needs_budget()))
def test_an_exact_solver_called_directly_refuses_none_naming_budget(problem, solver):
    fn = registry.get_solver(problem, solver)
    with pytest.raises(InputError) as err:
        fn(_load(problem, NEEDS_BUDGET[problem]), None, time_limit=2)
    assert err.value.field == "budget"


def test_every_problem_is_covered():
    assert set(_needs_budget()) | {"pipeline"} == set(registry.available_problems())
    assert set(_needs_budget()) <= set(NEEDS_BUDGET)


@pytest.mark.parametrize(("path", "P"), PIPELINES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("solver", [s for _, s in _solvers(["pipeline"])])
def test_every_pipeline_solver_takes_none_as_no_limit(solver, path, P):
    inst = _load("pipeline", path)
    free = registry.solve("pipeline", inst, solver, None, devices=P, time_limit=LIMIT)
    assert free.status in (OPTIMAL, FEASIBLE), free.message
    assert free.schedule is not None and free.budget is None
    assert simulate(inst, free.schedule, None, devices=P).violation is None
    huge = registry.solve("pipeline", inst, solver, HUGE, devices=P, time_limit=LIMIT)
    assert (free.status, free.objective) == (huge.status, huge.objective)


@pytest.mark.parametrize(("path", "P"), PIPELINES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("solver", [s for _, s in _exact(["pipeline"])])
def test_a_pipeline_exact_solver_at_none_is_never_worse_than_its_fast_solvers(solver, path, P):
    inst = _load("pipeline", path)
    fn = registry.get_solver("pipeline", solver)
    fast = {name: registry.solve("pipeline", inst, name, None, devices=P).objective for name in fn.fast_solvers}
    assert all(v is not None for v in fast.values())
    res = registry.solve("pipeline", inst, solver, None, devices=P, time_limit=LIMIT)
    assert res.objective is not None and res.objective <= min(fast.values()) * (1 + 1e-9)
    assert res.seeded_by in fast  # the warm start ran at None
    assert set(res.details["fast"]) <= set(fast)
    alone = registry.solve("pipeline", inst, solver, None, devices=P, time_limit=LIMIT, warm_start=False)
    assert alone.status == OPTIMAL and alone.objective == pytest.approx(res.objective)


def test_the_referee_at_none_keeps_an_optimum_and_replaces_a_slower_model_schedule():
    path, P = PIPELINES[0]
    inst = _load("pipeline", path)
    seed = registry.solve("pipeline", inst, "madpipe", None, devices=P)
    options, deadline = ExactOptions(), Deadline(LIMIT)
    best = SolveResult(problem="pipeline", solver="cpsat", status=OPTIMAL, objective=seed.objective,
                       lower_bound=seed.objective, schedule=seed.schedule, scope="contiguous partitions")
    kept = referee("pipeline", "cpsat", inst, None, best, [], None, deadline, options)
    assert kept.status == OPTIMAL and kept.budget is None and kept.objective == seed.objective
    one_stage = Partition.from_bounds([(0, inst.length - 1)])
    slow = SolveResult(problem="pipeline", solver="cpsat", status=FEASIBLE, schedule=one_stage,
                       scope="contiguous partitions")
    out = referee("pipeline", "cpsat", inst, None, slow, [seed], seed, deadline, options)
    assert out.objective == seed.objective < simulate(inst, one_stage, None).period
    assert out.details["solution_from"] == "madpipe" and out.status == FEASIBLE

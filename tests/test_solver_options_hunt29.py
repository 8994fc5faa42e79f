"""Solver-option fixes of hunt 29.

1. Chain `milp` / `cpsat` with ``warm_start=False`` give the model no hint (neither the seed nor the
   rotor DP on the model's sizes, `phase_hint`) and fix nothing against one; the answer is still the
   brute-force optimum.
2. Graph `cpsat`: each node's cap is lowered to its number of paths to a sink (`useful_caps`, same
   optimum), and building the model checks the deadline (a large ``max_computations`` ignored the limit).
3. The graph's linear models (`checkmate`) hand ``seed`` and ``verbose`` to the backend (`linmodel`).
4. Join `exact` (A*) refuses ``workers``, ``seed``, ``verbose`` and ``memory_gb`` instead of ignoring them.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from conftest import TIGHT_FRACS, brute_force, budget_for, chains, least_phase_budget, tight_budget
from hypothesis import HealthCheck, given, settings
from memsched.solvers.chain import cpsat as chain_cpsat
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import Deadline, DeadlineExceeded, ExactOptions
from memsched.solvers.graph import linmodel
from memsched.solvers.graph.cpsat import MoccasinModel
from memsched.solvers.graph.instance import Graph
from memsched.solvers.graph.milp import CheckmateModel
from memsched.solvers.registry import get_problem, solve

import memsched

JOIN = memsched.data_path("join", "tiny.json")
GRAPH = memsched.data_path("graphs", "linear10.json")


# ---------------------------------------------------------------------------- 1. chain warm_start=false
@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_chain_models_get_no_hint_without_warm_start(solver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dp_hint(_model: Any) -> None:
        raise AssertionError("the rotor DP hint ran with warm_start=False")

    monkeypatch.setattr(chain_cpsat, "_dp_hint", no_dp_hint)
    chain = random_chain(4, 1, size_range=(1, 5), integer_times=True)
    budget = budget_for(chain, 0.4, feasible=True)
    res = solve("chain", chain, solver, budget, slots=0, time_limit=20, warm_start=False)
    assert not res.seeded_by and res.details["fast"] == {}
    assert res.details["warm_start"] == "" and res.details["warm_start_fits"] is False
    assert res.details.get("rc_fixed", 0) == 0
    best, _ = brute_force(chain, budget, phase=True)
    assert res.status == "optimal" and res.objective == pytest.approx(best)


def test_phase_hint_is_none_without_warm_start() -> None:
    from memsched.solvers.chain.exact_model import PhaseModel

    chain = random_chain(3, 0, size_range=(1, 5), integer_times=True)
    model = PhaseModel.build(chain, budget_for(chain, 0.5, feasible=True))
    assert chain_cpsat.phase_hint(model, None, Deadline(None), warm_start=False) == (None, False, "")
    assert chain_cpsat.phase_hint(model, None, Deadline(None))[1]  # the DP's start, by default


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_length=3), TIGHT_FRACS)
def test_chain_models_without_warm_start_equal_brute_force(chain: Any, frac: float) -> None:
    """At budgets from the least feasible one (or one below) up to the store-all peak."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, _ = brute_force(chain, budget, phase=True)
    for solver in ("milp", "cpsat"):
        res = solve("chain", chain, solver, budget, slots=0, time_limit=20, warm_start=False)
        if best is None:
            assert res.status == "infeasible", solver
        else:
            assert res.status == "optimal" and res.objective == pytest.approx(best), solver


# ---------------------------------------------------------------------------- 2. graph cpsat caps and deadline
def _path_graph(n: int) -> Graph:
    return Graph.from_lists([1.0] * n, [1] * n, [(i, i + 1) for i in range(n - 1)])


def test_useful_caps_count_paths_to_a_sink() -> None:
    from memsched.solvers.graph.cpsat import useful_caps

    assert useful_caps(_path_graph(3), 60) == [1, 1, 1]
    diamond = Graph.from_lists([1.0] * 4, [1] * 4, [(0, 1), (0, 2), (1, 3), (2, 3), (0, 3)])
    assert useful_caps(diamond, 10**6) == [3, 1, 1, 1]
    assert useful_caps(diamond, 2) == [2, 1, 1, 1]


def test_graph_cpsat_lowers_caps_without_changing_the_answer() -> None:
    graph = Graph.load(GRAPH)
    budget = int(0.6 * get_problem("graph").reference_peak(graph))
    small = solve("graph", graph, "cpsat", budget, max_computations=2, time_limit=20)
    large = solve("graph", graph, "cpsat", budget, max_computations=25, time_limit=20)
    assert large.details["caps_lowered"] == graph.n  # 20 paths at most (f0), below 25 everywhere
    assert large.scope.startswith("at most 25 computations per node")
    assert small.status == large.status == "optimal" and small.objective == pytest.approx(large.objective)


class _CountingDeadline(Deadline):
    """No limit, but `check` raises from its `expire_after`+1-th call on."""

    def __init__(self, expire_after: int):
        super().__init__(None)
        self.calls, self.expire_after = 0, expire_after

    def check(self) -> None:
        self.calls += 1
        if self.calls > self.expire_after:
            raise DeadlineExceeded("spent")


def test_graph_cpsat_model_checks_the_deadline_while_building() -> None:
    """The precedence Booleans (caps[u] * caps[v] per edge) are built under the deadline too."""
    graph = _path_graph(2)
    deadline = _CountingDeadline(expire_after=2)  # the copies' loop checks once per node here
    with pytest.raises(DeadlineExceeded):
        MoccasinModel(graph, np.ones(2, np.int64), 2, [150, 150], [1, 1], deadline=deadline)


# ---------------------------------------------------------------------------- 3. checkmate's seed and verbose
def _checkmate_model(integer: bool) -> linmodel.LinearModel:
    graph = Graph.load(GRAPH)
    return CheckmateModel(graph, np.asarray(graph.cost_ram, np.int64), 7, integer_memory=integer).model


@pytest.mark.parametrize("backend, isolate", [("cbc", True), ("highs", False), ("scip", True)])
def test_linear_model_passes_seed_and_verbose(backend: str, isolate: bool, monkeypatch: pytest.MonkeyPatch,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    seen: list[ExactOptions] = []
    for name in ("run_milp", "run_isolated"):
        real = getattr(linmodel, name)

        def spy(*args: Any, _real: Any = real, **kw: Any) -> Any:
            seen.append(args[3])
            return _real(*args, **kw)

        monkeypatch.setattr(linmodel, name, spy)
    res = linmodel.solve_milp(_checkmate_model(False), backend, deadline=Deadline(20), seed=5, verbose=True,
                              isolate=isolate)
    assert res.status == "optimal"
    assert seen and seen[0].seed == 5 and seen[0].verbose is True
    assert capfd.readouterr().err.strip()  # the backend's log


def test_linear_model_on_cpsat_passes_seed_and_verbose(capfd: pytest.CaptureFixture[str]) -> None:
    res = linmodel.solve_cpsat_linear(_checkmate_model(True), deadline=Deadline(20), seed=5, verbose=True,
                                      feasibility_only=True)
    assert res.values is not None
    assert "random_seed: 5" in capfd.readouterr().err


# ---------------------------------------------------------------------------- 4. join exact refuses options
@pytest.mark.parametrize("option, value", [("workers", 2), ("seed", 7), ("verbose", True), ("memory_gb", 1.0),
                                           ("num_workers", 2), ("random_seed", 3)])
def test_join_exact_refuses_options_it_does_not_use(option: str, value: Any) -> None:
    join = get_problem("join").load(JOIN)
    budget = int(0.8 * get_problem("join").reference_peak(join))
    with pytest.raises(InputError, match="not taken by the join's exact A"):
        solve("join", join, "exact", budget, **{option: value})


def test_join_exact_runs_without_them_and_the_cli_refuses_them() -> None:
    join = get_problem("join").load(JOIN)
    budget = int(0.8 * get_problem("join").reference_peak(join))
    assert solve("join", join, "exact", budget, warm_start=False, time_limit=20).status == "optimal"
    cli = [sys.executable, "-m", "memsched.experiments.cli"]
    proc = subprocess.run([*cli, "solve", JOIN, "--budget", "80%", "--solver", "exact", "--option", "seed=7"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown option 'seed' for exact" in lines[0], lines


def test_join_exact_is_left_out_of_a_shared_option() -> None:
    """`solver_parameters` leaves out what join `exact` declares it does not take, so an option given to a
    list of solvers goes only to those that take it (no failed run of `exact`)."""
    from memsched.experiments.commands._checks import solver_parameters

    assert not {"workers", "seed", "verbose", "memory_gb", "threads"} & set(solver_parameters("join", "exact"))
    res = memsched.solve(JOIN, "80%", ["cpsat", "exact"], workers=1, time_limit=20)
    assert all(r.status == "optimal" for r in res), [(r.solver, r.status, r.message) for r in res]


def test_checkmate_verbose_writes_the_backends_log() -> None:
    cli = [sys.executable, "-m", "memsched.experiments.cli"]
    graph = memsched.data_path("graphs", "linear10.json")
    proc = subprocess.run([*cli, "solve", graph, "--budget", "80%", "--solver", "checkmate", "--option",
                           "verbose=true", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stderr) > 200 and len(proc.stdout.strip().splitlines()) == 1

"""Costs far from 1 (times in seconds: 1e-6, 1e-9; or 1e6) reach the MILP/LP backends scaled by a
power of two (`milp_runner.objective_scale`) with no absolute gap, so their answers scale with the
costs: the backends' absolute tolerances (HiGHS's ``mip_abs_gap`` 1e-6, CBC's, SCIP's epsilons) made
Checkmate's MILP "prove" an optimum 3% high at costs near 1e-6, and its LP bound exceed the optimum
at costs near 1e-9. Also: the graph loader refuses a falsy non-object ``graph`` and a NaN / infinite
/ boolean node id."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.graph import generate
from memsched.solvers.graph.brute import brute_force_checkmate
from memsched.solvers.graph.instance import Graph
from memsched.solvers.graph.simulator import simulate
from memsched.solvers.registry import get_solver

#: Checkmate's linear graph L = 6 (13 nodes) at budget 5: its optimum in Checkmate's class
LIN6_BUDGET = 5
LIN6_OPTIMUM = 27.61666666666667
#: a small DAG (tiny_lp.py of the hunt) at budget 9 without a warm start: Checkmate's optimum is 14
TINY_EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (1, 3), (0, 5), (4, 5)]
TINY_CPU = [1.0, 2.0, 3.0, 1.0, 5.0, 1.0]
TINY_RAM = [3, 2, 4, 1, 2, 3]
SCALES = (1e-6, 1e-9, 1e6)


def _backends() -> list[str]:
    """The MILP backends of `checkmate` that this machine has ("auto" is CBC on these sizes)."""
    from memsched.solvers.exact import highs_runner
    from ortools.linear_solver import pywraplp

    out = ["auto", "scip"]
    if highs_runner.available():
        out.append("highs")
    from memsched.solvers.exact.cbc_cmd import cbc_program

    if cbc_program() is not None or pywraplp.Solver.CreateSolver("CBC") is not None:
        out.append("cbc")
    return out


def lin6(scale: float) -> Graph:
    """The hunt's lin6 graph with its costs times `scale`."""
    g = generate.linear_graph(6)
    cpu = g.cost_cpu * np.linspace(1, 2.7, g.n) * scale
    return Graph.from_lists(cpu, g.cost_ram, g.edges, name="lin6")


def tiny(scale: float) -> Graph:
    return Graph.from_lists(np.array(TINY_CPU) * scale, np.array(TINY_RAM), TINY_EDGES, name="tiny")


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _checkmate(graph: Graph, budget: int, backend: str, **kw: object):  # noqa: ANN202 (a SolveResult)
    opts = {} if backend == "auto" else {"backend": backend}
    return get_solver("graph", "checkmate")(graph, budget, slots=0, time_limit=20, **opts, **kw)


def _check(result, graph: Graph, budget: int, optimum: float) -> None:  # noqa: ANN001
    assert result.status == "optimal", (result.status, result.objective)
    assert _close(result.objective, optimum), (result.objective, optimum)
    assert result.lower_bound is not None and result.lower_bound <= result.objective * (1 + 1e-12)
    assert result.lower_bound <= optimum * (1 + 1e-9)
    assert simulate(graph, result.schedule.sequence, budget).valid


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("backend", _backends())
def test_checkmate_optimum_scales_with_the_costs(backend: str, scale: float) -> None:
    graph = lin6(scale)
    _check(_checkmate(graph, LIN6_BUDGET, backend), graph, LIN6_BUDGET, LIN6_OPTIMUM * scale)


@pytest.mark.parametrize("scale", SCALES)
def test_cpsat_agrees_on_lin6(scale: float) -> None:
    graph = lin6(scale)
    cp = _checkmate(graph, LIN6_BUDGET, "cpsat")
    assert cp.status == "optimal" and _close(cp.objective, LIN6_OPTIMUM * scale)


@pytest.mark.parametrize("scale", (1e-9, 1e-6, 1.0))
@pytest.mark.parametrize("backend", _backends())
def test_checkmate_without_warm_start_matches_brute_force(backend: str, scale: float) -> None:
    graph = tiny(scale)
    best, _ = brute_force_checkmate(graph, 9)
    assert _close(best, 14.0 * scale)
    _check(_checkmate(graph, 9, backend, warm_start=False), graph, 9, best)


@pytest.mark.parametrize("scale", (1e-9, 1e-6))
def test_lp_bound_is_below_checkmates_optimum(scale: float) -> None:
    from memsched.solvers.graph.lp_bounds import lp_relaxation

    graph = lin6(scale)
    value, _, _, status = lp_relaxation(graph, LIN6_BUDGET, time_limit=20)
    assert status == "optimal" and value is not None
    assert value <= LIN6_OPTIMUM * scale * (1 + 1e-9)
    # the relaxation's value scales with the costs
    ref, _, _, _ = lp_relaxation(lin6(1.0), LIN6_BUDGET, time_limit=20)
    assert ref is not None and _close(value, ref * scale, 1e-6)
    approx = get_solver("graph", "checkmate-approx")(graph, LIN6_BUDGET, slots=0, time_limit=20)
    assert approx.lower_bound <= LIN6_OPTIMUM * scale * (1 + 1e-9)


def test_objective_scale_is_a_power_of_two_into_a_normal_range() -> None:
    from memsched.solvers.exact.milp_runner import objective_scale

    for top, want in ((1e-9, True), (3e-6, True), (0.5, True), (1.0, False), (2000.0, False), (1e6, True),
                      (1e12, True)):
        m = LinearModel(objective={0: top, 1: -top / 7})
        s = objective_scale(m)
        assert math.frexp(s)[0] == 0.5  # a power of two: scaling is exact
        assert (s != 1.0) == want
        if want:
            assert 512 <= top * s < 1024
    assert objective_scale(LinearModel()) == 1.0


@pytest.mark.parametrize("backend", ["scip", "highs", "cbc", "glop"])
def test_run_milp_answers_in_the_models_units(backend: str) -> None:
    """min 1e-7 x + 1.1e-7 y + offset, x + y >= 1 (x, y binary; LP for glop): 1e-7 + offset."""
    from memsched.solvers.exact import highs_runner
    from memsched.solvers.exact.milp_runner import run_milp
    from memsched.solvers.exact.options import Deadline

    if backend == "highs" and not highs_runner.available():
        pytest.skip("no highspy")
    m = LinearModel()
    x, y = m.var(0, 1, True), m.var(0, 1, True)
    m.add([x, y], [1.0, 1.0], 1.0)
    m.objective = {x: 1e-7, y: 1.1e-7}
    m.offset = 3e-9
    run = run_milp(m, "scip" if backend == "glop" else backend, Deadline(10), relax=backend == "glop")
    assert run.status == "optimal"
    assert run.objective == m.value(run.values) and _close(run.objective, 1.03e-7)
    if backend != "glop":
        assert run.bound is not None and run.bound <= run.objective and _close(run.bound, 1.03e-7, 1e-6)


def _chain_ns(tmp_path: Path, scale: float) -> str:
    """examples/random10.json with every time times `scale`, in seconds (ms when scale is 1)."""
    src = Path(__file__).resolve().parents[1] / "examples" / "random10.json"
    data = json.loads(src.read_text())

    def times(o: object) -> object:
        if isinstance(o, dict):
            return {k: v * scale if k.endswith("_time") and isinstance(v, (int, float)) else times(v)
                    for k, v in o.items()}
        return [times(v) for v in o] if isinstance(o, list) else o

    data = times(data)
    data["meta"]["units"]["time"] = "ms" if scale == 1.0 else "s"
    path = tmp_path / f"chain_{scale:g}.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("backend", ["scip", "highs", "cbc"])
def test_chain_milp_in_seconds_matches_milliseconds(tmp_path: Path, backend: str) -> None:
    from memsched.solvers.chain import load, reference_peak
    from memsched.solvers.exact import highs_runner

    if backend == "highs" and not highs_runner.available():
        pytest.skip("no highspy")
    ms, ns = load(_chain_ns(tmp_path, 1.0)), load(_chain_ns(tmp_path, 1e-9))
    budget = int(0.36 * reference_peak(ms))  # near the tightest budget that fits (34% does not)
    solve = get_solver("chain", "milp")
    a = solve(ms, budget, backend=backend, slots=0, time_limit=20, warm_start=False)
    b = solve(ns, budget, backend=backend, slots=0, time_limit=20, warm_start=False)
    assert a.status == b.status == "optimal"
    assert _close(b.objective, a.objective * 1e-9, 1e-7), (a.objective, b.objective)
    assert b.lower_bound <= b.objective and _close(b.lower_bound, a.lower_bound * 1e-9, 1e-6)


def _load(tmp_path: Path, text: str) -> Graph:
    path = tmp_path / "g.json"
    path.write_text(text)
    return Graph.load(str(path))


@pytest.mark.parametrize("value", ["[]", "0", "false", '""', "[1]"])
def test_graph_attribute_must_be_an_object(tmp_path: Path, value: str) -> None:
    text = f'{{"nodes": [{{"id": 0, "cost_cpu": 1, "cost_ram": 1}}], "links": [], "graph": {value}}}'
    with pytest.raises(InputError, match="graph"):
        _load(tmp_path, text)


def test_graph_attribute_null_or_missing_is_fine(tmp_path: Path) -> None:
    for extra in ("", ', "graph": null', ', "graph": {}'):
        g = _load(tmp_path, '{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1}], "links": []' + extra + "}")
        assert g.n == 1


@pytest.mark.parametrize("nid", ["NaN", "Infinity", "-Infinity", "true"])
def test_node_id_must_be_finite_and_not_a_boolean(tmp_path: Path, nid: str) -> None:
    text = f'{{"nodes": [{{"id": {nid}, "cost_cpu": 1, "cost_ram": 1}}], "links": []}}'
    with pytest.raises(InputError, match=r"nodes\[0\]\.id"):
        _load(tmp_path, text)


# ---------------------------------------------------------------------------- proofs are relative
def test_a_bound_far_below_a_tiny_objective_proves_nothing():
    """An objective of 7e-8 with a bound of 6e-8 (14% below) was "optimal" for the portfolio's merge:
    its test allowed 1e-6 * max(1, |objective|), an absolute 1e-6 for every objective below 1."""
    from memsched.solvers.exact import portfolio
    from memsched.solvers.exact.milp_runner import BackendRun
    from memsched.solvers.result import gap_closed

    def run(objective: float, bound: float) -> BackendRun:
        return BackendRun("feasible", values=[1.0], objective=objective, bound=bound)

    merged = portfolio.merge_runs({"scip": run(7e-8, 6e-8), "highs": run(7.5e-8, 5e-8)}, 1.0)
    assert merged.status == "feasible" and merged.bound == 6e-8
    assert portfolio.merge_runs({"scip": run(7e-8, 7e-8 * (1 - 1e-9))}, 1.0).status == "optimal"
    assert not gap_closed(7e-8, 6e-8) and gap_closed(7e-8, 7e-8) and gap_closed(0.0, 0.0)
    assert not gap_closed(1.0, None)

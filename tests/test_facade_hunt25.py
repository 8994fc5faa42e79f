"""Facade bugs of hunt 25 (`memsched.api`, `memsched.results`): sweep options per solver, a solver that
refuses the instance in a comparison, plain graph schedules, empty sweeps shown, plot of a pipeline result,
empty solver lists, sweep latency, `Result.period`, numpy positions, an offloading chain's memory unit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memsched
from memsched.results import SweepResult

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
TINY = DATA / "examples" / "tiny.json"
CNN12 = DATA / "examples" / "cnn12.json"
HOMOGENEOUS = DATA / "examples" / "homogeneous20.json"
RANDOM10 = DATA / "examples" / "random10.json"
GRAPH = DATA / "graphs" / "linear10.json"


def test_sweep_gives_each_solver_only_the_options_it_takes():
    """segments is periodic's option: rotor's rows were all "unsupported" ("no option 'segments' for rotor")."""
    sw = memsched.sweep(HOMOGENEOUS, budgets=["50%", "70%"], solvers=["periodic", "rotor"], segments=3)
    rows = sw.rows
    assert [r["status"] for r in rows if r["solver"] == "rotor"] == ["optimal", "optimal"]
    alone = memsched.solve(HOMOGENEOUS, "50%", solver="periodic", segments=3)
    assert rows[0]["solver"] == "periodic" and rows[0]["objective"] == alone.objective


def test_a_comparison_keeps_the_results_of_the_solvers_before_one_that_refuses_the_instance():
    """Revolve refuses a heterogeneous chain: the comparison raised after rotor ran, and rotor's result was lost."""
    cmp = memsched.solve(RANDOM10, "50%", solver=["rotor", "revolve"])
    assert [r.solver for r in cmp] == ["rotor", "revolve"]
    assert cmp["rotor"].found and cmp.best is cmp["rotor"]
    refused = cmp["revolve"]
    assert refused.status == "unsupported" and not refused.found and refused.schedule is None
    assert "homogeneous" in refused.message
    assert list(cmp.to_pandas()["status"]) == ["optimal", "unsupported"]
    assert "unsupported" in cmp._repr_html_()


def test_a_comparison_whose_every_solver_refuses_the_instance_is_an_input_error():
    with pytest.raises(memsched.InputError, match="homogeneous"):
        memsched.solve(RANDOM10, "50%", solver=["revolve"])


@pytest.mark.parametrize("schedule", [["a", "b"], [1.5], [True, False], [0, None]])
def test_a_plain_graph_schedule_of_non_integers_is_an_input_error(schedule):
    """["a"] raised a bare ValueError; [1.5] and bools were silently read as integers. (Fix 40: a plain list
    holds node ids, as a schedule file's sequence: ["0", "1"] names the nodes of ids 0 and 1, as there.)"""
    with pytest.raises(memsched.InputError) as err:
        memsched.simulate(GRAPH, schedule)
    assert err.value.field == "schedule" and "node indices" in str(err.value)


def test_plot_of_a_plain_graph_schedule_of_strings_is_an_input_error():
    with pytest.raises(memsched.InputError) as err:
        memsched.plot(GRAPH, ["a", "b"])
    assert err.value.field == "schedule" and "node indices" in str(err.value)


def test_a_plain_graph_schedule_of_integers_still_replays():
    order = [int(i) for i in memsched.solve(GRAPH, "100%", solver="checkpoint-all").schedule.indices(
        memsched.load(GRAPH))]
    assert memsched.simulate(GRAPH, order).status == "valid"
    assert memsched.simulate(GRAPH, [np.int64(i) for i in order]).status == "valid"
    with pytest.raises(memsched.InputError, match="unknown node 999"):  # fix 40: ids, as a schedule file's
        memsched.simulate(GRAPH, [999])


def test_an_empty_sweep_is_shown_as_zero_runs():
    """Jupyter's display of a 0-row SweepResult raised InputError (no column 'objective')."""
    assert "0 runs" in SweepResult([], source="empty")._repr_html_()


def test_plot_takes_the_problem_of_a_pipeline_result_as_simulate_does():
    """plot(chain_file, pipeline_result) said "a pipeline result cannot be drawn as chain"."""
    result = memsched.solve(CNN12, "90%", problem="pipeline", devices=4)
    assert memsched.simulate(CNN12, result).status == "valid"
    assert memsched.plot(CNN12, result) is not None
    assert memsched.plot(None, result) is not None


def test_sweep_refuses_an_empty_list_of_solvers():
    """sweep(solvers=[]) ran the default solver; solve(solver=[]) is an InputError."""
    with pytest.raises(memsched.InputError) as err:
        memsched.sweep(TINY, budgets=["60%"], solvers=[])
    assert err.value.field == "solvers"


def test_sweep_takes_a_latency_as_solve_does():
    """sweep had no latency: it was read as a solver option ("no option 'latency' for pofo")."""
    sw = memsched.sweep(CNN12, budgets=["40%"], solvers=["pofo"], bandwidth="10GB/s", latency=0.001)
    alone = memsched.solve(CNN12, "40%", solver="pofo", bandwidth="10GB/s", latency=0.001)
    without = memsched.solve(CNN12, "40%", solver="pofo", bandwidth="10GB/s")
    assert sw.rows[0]["status"] == alone.status and sw.rows[0]["objective"] == alone.objective
    assert alone.objective != without.objective  # the latency reached the instance


def test_period_is_none_unless_pipeline():
    """Result.period of a chain result was its makespan."""
    chain = memsched.solve(CNN12, "60%")
    assert chain.makespan is not None and chain.period is None
    pipe = memsched.solve(CNN12, "90%", problem="pipeline", devices=4)
    assert pipe.period == pipe.makespan is not None


def test_a_comparison_takes_numpy_integers_as_positions():
    cmp = memsched.solve(TINY, "60%", solver=["rotor", "periodic"])
    assert cmp[np.int64(1)] is cmp[1] and cmp[np.int32(-1)] is cmp[1]
    with pytest.raises(IndexError):
        cmp[np.int64(2)]
    with pytest.raises(KeyError):
        cmp[True]
    with pytest.raises(KeyError):
        cmp[np.True_]


def test_an_offloading_result_shows_sizes_in_its_chains_memory_unit(tmp_path):
    """The summary of an offloading result on a chain in KiB showed the KiB counts as bytes."""
    data = json.loads(CNN12.read_text())
    data["meta"].setdefault("units", {})["memory"] = "KiB"
    path = tmp_path / "cnn12_kib.json"
    path.write_text(json.dumps(data))
    result = memsched.solve(path, "40%", solver="vdnn", bandwidth="1GB/s")
    budget = dict(result.summary())["budget"]
    assert budget.endswith("KiB)") and "GiB" in budget
    table = memsched.solve(path, "40%", solver=["vdnn", "remat-only"], bandwidth="1GB/s")._repr_html_()
    assert "GiB" in table.split("<img")[0]  # the peak of remat-only, hundreds of GiB (MiB when read as bytes)

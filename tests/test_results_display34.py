"""Facade results of hunt 34 (`memsched.results`): the rich display of sweep rows without an objective, the
flat columns of a run that found no schedule, and missing numbers in `to_pandas` as NaN, not None."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import memsched
from memsched.results import RunResult, SweepResult

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
TINY = DATA / "examples" / "tiny.json"
GRAPH = DATA / "graphs" / "linear10.json"
PIPELINE = DATA / "pipeline" / "tiny-resnet.graph.txt"

#: rows made by hand: no objective, no overhead (only solve times)
TIMES = [{"instance": "a", "solver": "s", "budget": 1, "solve_time_s": 0.1},
         {"instance": "a", "solver": "t", "budget": 1, "solve_time_s": 0.25}]


# ---------------------------------------------------------------------------- 1. sweep rows without an objective
def test_rich_display_of_sweep_rows_without_objective_is_the_plain_table():
    """It raised InputError "values: no column 'objective' in the rows", though the rows plot with a `y`."""
    sweep = SweepResult(TIMES)
    html = sweep._repr_html_()
    assert "2 runs" in html and "<table" in html
    assert "0.25" in html and "solve_time_s" in html  # the rows' own columns, as they are
    assert sweep.plot(y="solve_time_s") is not None


def test_rich_display_of_rows_without_the_grid_columns_does_not_raise():
    sweep = SweepResult([{"objective": 3.0, "note": "x"}, {"objective": None, "note": "y"}])
    html = sweep._repr_html_()
    assert "<table" in html and "note" in html


def test_sweep_plot_without_a_default_column_names_y():
    """The default y of rows with neither overhead nor objective was a KeyError from deep in the drawing."""
    with pytest.raises(memsched.InputError, match=r"^y: the rows have no overhead or objective column.*solve_time_s"):
        SweepResult(TIMES).plot()


# ---------------------------------------------------------------------------- 2. a run that found no schedule
def _found(problem: str = "chain") -> dict:
    return {"model": "m", "problem": problem, "solver": "rotor", "status": "optimal", "device": "cpu", "budget": 100,
            "predicted": {"makespan": 10.0, "peak_memory": 90, "tracker_peak_memory": 80, "model_peak_memory": 90},
            "measured": {"time": 11.0, "time_min": 10.5, "time_max": 12.0, "time_runs": 3, "peak_memory": 85,
                         "independent_peak": 95, "independent_method": "probe"},
            "ratio": {"memory": 1.06}, "grad_check": True}


def _infeasible(problem: str = "chain") -> dict:
    return {"model": "m", "problem": problem, "solver": "rotor", "status": "infeasible", "device": "cpu",
            "budget": 1, "message": "no schedule fits 1", "min_budget": 50, "predicted": None, "measured": None,
            "grad_check": None}


def test_run_without_schedule_has_the_flat_columns_of_a_found_run():
    """It had columns ``predicted: None, measured: None`` instead of predicted_* / measured_*."""
    found, none = RunResult(_found()).row(), RunResult(_infeasible()).row()
    assert "predicted" not in none and "measured" not in none
    flat = {k for k in found if k.startswith(("predicted_", "measured_"))}
    assert flat == {k for k in none if k.startswith(("predicted_", "measured_"))}
    assert all(none[k] is None for k in flat)
    frame = pd.concat([RunResult(_found()).to_pandas(), RunResult(_infeasible()).to_pandas()], ignore_index=True)
    assert "predicted" not in frame.columns and "measured" not in frame.columns
    missing = RunResult(_infeasible()).to_pandas()
    assert missing["predicted_makespan"].dtype == float and math.isnan(missing["predicted_makespan"].iloc[0])
    assert frame["measured_peak_memory"].tolist()[0] == 85 and math.isnan(frame["measured_peak_memory"].iloc[1])


def test_offloading_run_without_schedule_has_the_replay_columns():
    found = _found("offload")
    found["predicted"].update(host_peak=5, sequential_peak=91, tracker_sequential_peak=81, sequential_makespan=12.0)
    names = set(RunResult(found).row())
    none = set(RunResult(_infeasible("offload")).row())
    assert {k for k in names if k.startswith("predicted_")} == {k for k in none if k.startswith("predicted_")}
    assert "predicted_host_peak" not in RunResult(_infeasible()).row()  # only an offloading run predicts it


def test_rich_display_of_run_without_schedule_is_one_line_per_block():
    html = RunResult(_infeasible())._repr_html_()
    assert "predicted_makespan" not in html and html.count(">predicted<") == 1 and html.count(">measured<") == 1


@pytest.mark.torch
@pytest.mark.slow
def test_real_runs_found_and_not_share_their_columns():
    """`_RUN_BLOCKS` names the keys `memsched.run` writes (a chain profiled once, for both runs)."""
    pytest.importorskip("torch")
    sizes = {"batch": 2, "image_size": 32, "width": 8, "depth": 1}
    chain = memsched.profile("resnet18", device="cpu", repeats=1, **sizes)
    none = memsched.run("resnet18", "1%", chain=chain, device="cpu", time_repeats=1, **sizes)
    found = memsched.run("resnet18", "100%", chain=chain, device="cpu", time_repeats=1, **sizes)
    assert none.status == "infeasible" and found.status == "optimal", found.data.get("message")
    flat = {k for k in found.row() if k.startswith(("predicted_", "measured_"))}
    assert flat and flat == {k for k in none.row() if k.startswith(("predicted_", "measured_"))}


# ---------------------------------------------------------------------------- 3. missing numbers as NaN
def _all_nan_floats(frame, columns) -> None:
    for column in columns:
        assert frame[column].dtype == float, (column, frame[column].dtype)
        assert frame[column].isna().all(), column


def test_comparison_with_nothing_found_has_float_columns():
    frame = memsched.solve(str(TINY), 1, solver=["rotor", "sqrt"]).to_pandas()
    assert not frame["status"].isin(["optimal", "feasible"]).any()
    _all_nan_floats(frame, ["objective", "peak_memory", "ratio_to_best"])
    assert frame[["objective", "lower_bound"]].max(axis=1).isna().all()  # NaN, never None
    assert frame["status"].dtype != float  # text stays text


def test_result_without_schedule_has_float_columns():
    frame = memsched.solve(str(TINY), 1, solver="rotor").to_pandas()
    _all_nan_floats(frame, ["objective", "peak_memory"])


def test_graph_sweep_without_bounds_has_float_columns():
    frame = memsched.sweep(str(GRAPH), ["60%", "100%"], ["dtr", "checkpoint-all"]).to_pandas()
    _all_nan_floats(frame, ["lower_bound", "gap"])
    assert frame[["objective", "lower_bound"]].max(axis=1).notna().any()


def test_pipeline_sweep_overhead_is_float():
    frame = memsched.sweep(str(PIPELINE), ["100%"], ["madpipe"], devices=2).to_pandas()
    _all_nan_floats(frame, ["overhead"])
    assert frame["objective"].notna().all()


def test_text_in_a_number_column_is_left_as_it_is():
    frame = SweepResult([{"instance": "a", "solver": "s", "budget": 1, "objective": "n/a"}]).to_pandas()
    assert frame["objective"].tolist() == ["n/a"]

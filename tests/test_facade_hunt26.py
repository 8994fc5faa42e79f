"""Facade bugs of hunt 26 (`memsched.results`, `memsched.api`, `experiments.plotting.adapters`): the plot of a
run without a schedule, the units of a sweep's axes, None cells of a sweep's table, plain schedules of the
wrong shape, and the display of an "invalid" replay of a plain schedule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import memsched
from memsched.results import RunResult, SweepResult

pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
TINY = DATA / "examples" / "tiny.json"
CNN12 = DATA / "examples" / "cnn12.json"
JOIN = DATA / "join" / "tiny.json"
GRAPH = DATA / "graphs" / "linear10.json"
PIPELINE = DATA / "pipeline" / "tiny-resnet.graph.txt"


# ---------------------------------------------------------------------------- 1. RunResult.plot
def _run(predicted: dict | None, measured: dict | None, status: str = "optimal") -> RunResult:
    return RunResult({"model": "custom", "solver": "rotor", "device": "cpu", "status": status,
                      "predicted": predicted, "measured": measured, "grad_check": None})


def test_runresult_plot_of_a_run_that_found_no_schedule_is_an_input_error():
    """It drew bars of 0 ms and 0 MiB for an infeasible run (predicted and measured None)."""
    run = _run(None, None, status="infeasible")
    with pytest.raises(memsched.InputError, match=r"rotor: no schedule \(infeasible\) to draw"):
        run.plot()
    assert "<table>" in run._repr_html_()  # the rich display still never raises


def test_runresult_plot_draws_no_bar_of_zero_for_a_missing_value():
    run = _run({"makespan": 500.0, "peak_memory": 2**21}, {"time": None, "peak_memory": 2**21})
    time_ax, memory_ax = run.plot().axes[:2]
    assert [p.get_height() for p in time_ax.patches] == [500.0]  # the measured time is missing: no bar, no 0
    assert [p.get_height() for p in memory_ax.patches] == [2.0, 2.0]
    assert "missing" in [t.get_text() for t in time_ax.texts]


# ---------------------------------------------------------------------------- 2. SweepResult.plot units
def test_sweep_plot_labels_each_axis_with_its_unit():
    """The y axis said 'makespan', 'peak_memory' (raw bytes, ticks to 1.8e9), 'solve_time_s'."""
    sweep = memsched.sweep(CNN12, budgets=["50%", "100%"], solvers=["rotor"])
    assert sweep.plot(y="objective").axes[0].get_ylabel() == "makespan (ms)"
    assert sweep.plot(y="solve_time_s").axes[0].get_ylabel() == "solve time (s)"
    ax = sweep.plot(y="peak_memory").axes[0]
    label = ax.get_ylabel()
    match = re.fullmatch(r"peak memory \((KiB|MiB|GiB)\)", label)
    assert match, label
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[match.group(1)]
    drawn = sorted(float(v) for line in ax.get_lines() for v in line.get_ydata())
    assert drawn == pytest.approx(sorted(r["peak_memory"] / scale for r in sweep.rows))
    assert ax.get_ylim()[1] < 1e4


def test_sweep_plot_of_a_pipeline_gives_the_period_in_ms():
    sweep = memsched.sweep(PIPELINE, budgets=["100%", "150%"], solvers=["madpipe"], devices=2)
    assert sweep.plot(y="objective").axes[0].get_ylabel() == "period (ms)"


def test_sweep_plot_scales_sizes_from_the_instance_memory_unit(tmp_path):
    """A chain in KiB: its sizes are converted to a binary unit as the timeline figures convert them."""
    data = json.loads(CNN12.read_text())
    data["meta"]["units"]["memory"] = "KiB"
    path = tmp_path / "cnn12-kib.json"
    path.write_text(json.dumps(data))
    sweep = memsched.sweep(path, budgets=["50%", "100%"], solvers=["rotor"])
    ax = sweep.plot(y="peak_memory").axes[0]
    assert ax.get_ylabel() == "peak memory (TiB)"  # ~1.8e9 KiB
    drawn = sorted(float(v) for line in ax.get_lines() for v in line.get_ydata())
    assert drawn == pytest.approx(sorted(r["peak_memory"] * 2**10 / 2**40 for r in sweep.rows))


def test_sweep_plot_keeps_a_unit_that_is_no_byte_unit_and_says_when_the_unit_is_unknown():
    rows = [{"instance": "n", "solver": "s", "budget": b, "budget_fraction": b / 40, "objective": 2.0 * b,
             "objective_name": "makespan", "peak_memory": b - 1, "status": "optimal"} for b in (20, 30)]
    ax = SweepResult(rows, units={"n": (None, "slots")}).plot(y="peak_memory").axes[0]
    assert ax.get_ylabel() == "peak memory (slots)"
    assert sorted(float(v) for v in ax.get_lines()[0].get_ydata()) == [19.0, 29.0]
    unknown = SweepResult(rows)  # rows of a sweep file: units not known
    assert unknown.plot(y="peak_memory").axes[0].get_ylabel() == "peak memory (size unit of the instance)"
    assert unknown.plot(y="objective").axes[0].get_ylabel() == "makespan (time unit of the instance)"


# ---------------------------------------------------------------------------- 3. SweepResult._repr_html_
def test_sweep_table_shows_missing_cells_as_dashes_when_nothing_was_found():
    """The pivot of an all-None objective column (object dtype) showed 'None' cells."""
    sweep = memsched.sweep(CNN12, budgets=[1000, 2000], solvers=["rotor", "periodic"])
    html = sweep._repr_html_()
    assert "None" not in html and html.count("<td>–</td>") == 4
    assert str(sweep.pivot().dtypes.iloc[0]) == "float64"


# ---------------------------------------------------------------------------- 4. plain schedules' shapes
@pytest.mark.parametrize("path,schedule", [
    (TINY, ["F_all(0)", "Loss"]), (TINY, [("F_all", 0, 1)]), (TINY, [[1, 2]]), (TINY, [("F_all", 1.5)]),
    (TINY, [("F_all", True)]), (JOIN, ["x"]), (JOIN, ["F_all(0)"]), (JOIN, [(0, 1)]), (JOIN, [[0, 99]]),
    (JOIN, [(1, 2, 3)]), (JOIN, [("F_all", 0)]),
])
def test_a_plain_schedule_of_the_wrong_shape_is_an_input_error_naming_schedule(path, schedule):
    """Each raised a bare ValueError (too many / not enough values to unpack), or replayed as "invalid"."""
    for call in (memsched.simulate, memsched.plot):
        with pytest.raises(memsched.InputError) as err:
            call(path, schedule)
        assert err.value.field == "schedule" and "entry 0" in str(err.value)


def test_plain_schedules_of_operations_still_replay():
    chain_result = memsched.solve(TINY, "100%", solver="rotor")
    ops = [tuple(op) for op in chain_result.schedule.ops]
    assert memsched.simulate(TINY, ops).status == "valid"
    assert memsched.simulate(TINY, [list(op) for op in ops]).objective == chain_result.objective
    join_result = memsched.solve(JOIN, "100%", solver="dp")
    replay = memsched.simulate(JOIN, [tuple(op) for op in join_result.schedule.ops])
    assert replay.status == "valid" and replay.objective == join_result.objective
    assert "data:image/png" in replay._repr_html_()


# ---------------------------------------------------------------------------- 5. display of invalid replays
def test_the_display_of_an_invalid_graph_replay_of_a_node_out_of_range_does_not_raise():
    """_repr_html_ and plot raised IndexError (graph.cost_cpu[999]). A plain list now names nodes by id
    (fix 40): one naming no node is an InputError before any replay; an invalid replay is still displayed."""
    graph = memsched.load(GRAPH)
    for call in (memsched.simulate, memsched.plot):
        with pytest.raises(memsched.InputError, match="unknown node 999"):
            call(graph, [0, 1, 999])
    replay = memsched.simulate(graph, [0, 2])  # node 2 needs node 1
    assert replay.status == "invalid" and "needs predecessor" in replay.violation
    assert "data:image/png" in replay._repr_html_()
    assert replay.plot() is not None
    assert memsched.plot(graph, [0, 2]) is not None


def test_the_graph_timeline_is_drawn_up_to_the_node_out_of_range():
    from memsched.experiments.plotting.adapters import graph_timeline

    tl = graph_timeline(memsched.load(GRAPH), [0, 1, 999])
    assert [b.label for b in tl.bars] == ["f0", "f1"] and tl.failure is not None
    assert "999" in tl.failure.message and tl.failure.time == tl.end_time


def test_the_display_of_an_invalid_join_replay_of_plain_triples_does_not_raise():
    """_repr_html_ and plot raised AttributeError ('tuple' object has no attribute 'kind')."""
    replay = memsched.simulate(JOIN, [("F_all", 0, 1)])
    assert replay.status == "invalid"
    assert "data:image/png" in replay._repr_html_()
    assert replay.plot() is not None


def test_the_adapters_read_plain_entries_or_refuse_them_as_input_errors():
    from memsched.experiments.plotting.adapters import graph_timeline, join_timeline

    join = memsched.load(JOIN)
    assert join_timeline(join, [("F_all", 0, 1)]).failure is not None  # drawn, a plain triple read as a JOp
    for bad in (["x"], [(0, 1)]):
        with pytest.raises(memsched.InputError, match="entry 0"):
            join_timeline(join, bad)
    with pytest.raises(memsched.InputError, match="node indices"):
        graph_timeline(memsched.load(GRAPH), ["a"])


@pytest.mark.parametrize("name", ["chain", "join", "graph"])
def test_a_replay_of_a_plain_list_writes_its_json(name):
    """`simulate(instance, plain list).to_json()` raised AttributeError ('list' has no to_json): the
    plain list is now the problem's schedule object, written as a solver's schedule is."""
    instance = memsched.load({"chain": TINY, "join": JOIN, "graph": GRAPH}[name])
    solved = memsched.solve(instance, "100%")
    ops = solved.raw.schedule.sequence if name == "graph" else solved.raw.schedule.ops
    plain = [int(v) for v in ops] if name == "graph" else [tuple(op) for op in ops]
    replay = memsched.simulate(instance, plain)
    assert replay.status == "valid" and replay.makespan == solved.makespan
    assert replay.to_json()["schedule"] == solved.raw.schedule.to_json()
    if name == "graph":  # a plain list names nodes by id, as the JSON does: an id naming no node is refused
        with pytest.raises(memsched.InputError, match="unknown node"):
            memsched.simulate(instance, [*plain, "no such node"])


def test_a_pipeline_result_replays_and_draws_on_the_machine_it_was_solved_on():
    """`simulate(path, result)` replayed on the default machine (weights x4 instead of x2: 'invalid' at the
    budget it was solved for) while `simulate(path, result.to_json())` used the recorded one."""
    inst = memsched.load(PIPELINE).with_machine(weight_factor=2.0, bandwidth=1e8, latency=0.001)
    solved = memsched.solve(inst, "30MB", "dag", devices=3)
    assert solved.status == "optimal"
    for form in (solved, solved.to_json()):
        replay = memsched.simulate(PIPELINE, form, "30MB")
        assert replay.status == "valid" and replay.peak_memory == solved.peak_memory
        assert replay.makespan == pytest.approx(solved.makespan)
    for form in (solved, solved.to_json()):
        drawn = memsched.plot(PIPELINE, form, budget="30MB")
        notes = [t.get_text() for ax in drawn.axes for t in ax.texts]
        assert "peak 28.4 MiB" in notes and not any("needs" in n for n in notes)  # not 29.1 MiB, over budget

"""Schedule figures (issue 10): memory timeline above the operations, for every problem that is
importable; the drawn peak is the simulator's; invalid schedules are drawn up to the violation."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from memsched.experiments.plotting import (  # noqa: E402
    Timeline,
    plot_comparison,
    plot_schedule,
    plot_to_file,
    register_timeline,
    timeline_for,
)
from memsched.experiments.plotting.timeline import _ADAPTERS, profile_timeline  # noqa: E402
from memsched.solvers.chain import Chain, simulate  # noqa: E402
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Schedule  # noqa: E402


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _artists(fig: Figure, gid: str) -> list:
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def _memory_peak(fig: Figure) -> float:
    lines = _artists(fig, "memory")
    assert lines, "no memory line drawn"
    return max(float(np.max(line.get_ydata())) for line in lines)


def _chain(examples, name: str = "random10") -> Chain:
    return Chain.load(examples / f"{name}.json")


# ---------------------------------------------------------------------------- chains
@pytest.mark.parametrize("name", ["tiny", "cnn12", "random10"])
@pytest.mark.parametrize("kind", ["store-all", "periodic", "recompute-all"])
def test_chain_plotted_peak_is_the_simulators(examples, name, kind):
    chain = _chain(examples, name)
    L = chain.length
    schedule = {"store-all": store_all_schedule(L), "periodic": periodic_schedule(L, max(1, L // 3)),
                "recompute-all": recompute_all_schedule(L)}[kind]
    sim = simulate(chain, schedule)
    fig = plot_schedule("chain", chain, schedule, budget=sim.peak_memory)
    assert isinstance(fig, Figure)
    assert _memory_peak(fig) == sim.peak_memory
    (peak,) = _artists(fig, "peak")
    assert float(peak.get_ydata()[0]) == sim.peak_memory
    (budget,) = _artists(fig, "budget")
    assert float(budget.get_ydata()[0]) == sim.peak_memory
    assert not _artists(fig, "failure")
    # the two panels share the time axis, which spans the makespan
    assert fig.axes[0].get_shared_x_axes().joined(fig.axes[0], fig.axes[1])
    assert fig.axes[1].get_xlim()[1] >= sim.makespan


def test_chain_memory_line_follows_every_step(examples):
    chain = _chain(examples, "cnn12")
    schedule = periodic_schedule(chain.length, 3)
    sim = simulate(chain, schedule)
    tl = timeline_for("chain", chain, schedule)
    (series,) = tl.memory
    vertices = set(zip(series.times.tolist(), series.values.tolist()))
    for s in sim.steps:
        assert (s.start, float(s.mem_during)) in vertices and (s.end, float(s.mem_during)) in vertices
        assert (s.end, float(s.mem_after)) in vertices
    assert series.values[0] == sim.initial_memory
    assert tl.objective == pytest.approx(sim.makespan) and tl.failure is None
    assert [b.start for b in tl.bars] == [s.start for s in sim.steps]


def test_chain_rows_and_recomputations(examples):
    chain = _chain(examples, "random10")
    schedule = periodic_schedule(chain.length, 3)
    tl = timeline_for("chain", chain, schedule)
    assert tl.rows == ["F_all", "F_ck / F_n", "B / loss"]
    recomputed = [b for b in tl.bars if b.category.startswith("recompute ")]
    assert len(recomputed) == schedule.recomputations() > 0
    assert {b.row for b in tl.bars if b.category in ("F_ck", "F_n")} == {"F_ck / F_n"}
    assert {b.row for b in tl.bars if b.category in ("B", "Loss")} == {"B / loss"}
    fig = plot_schedule("chain", chain, schedule)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "recomputed F_all" in labels and "backward (B)" in labels and "loss" in labels
    assert fig.axes[-1].get_xlabel() == "time (ms)"  # the file's meta units
    assert "MiB" in fig.axes[0].get_ylabel()


def test_chain_over_budget_is_drawn_up_to_the_failing_op(examples):
    chain = _chain(examples, "random10")
    schedule = store_all_schedule(chain.length)
    budget = int(0.6 * simulate(chain, schedule).peak_memory)
    sim = simulate(chain, schedule, budget).before_violation()
    assert sim.violation is not None
    tl = timeline_for("chain", chain, schedule, budget)
    drawn = [b for b in tl.bars if not b.failed]
    (failed,) = [b for b in tl.bars if b.failed]
    assert len(drawn) == len(sim.steps) == sim.violation.position
    assert failed.start == pytest.approx(sim.makespan)
    assert tl.failure is not None and tl.failure.message == str(sim.violation)
    assert tl.failure.memory > budget  # what the failing op would need
    fig = plot_schedule("chain", chain, schedule, budget=budget)
    assert _memory_peak(fig) == sim.peak_memory <= budget
    (marker,) = _artists(fig, "failure")
    assert float(marker.get_xdata()[0]) == pytest.approx(sim.makespan)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(str(sim.violation.op) in t and "over budget" in t for t in texts)
    assert "INVALID" in fig.axes[0].get_title(loc="left")


def test_chain_broken_rule_is_marked(examples):
    chain = _chain(examples, "tiny")
    ops = list(store_all_schedule(chain.length).ops)
    del ops[2]  # F_all(3) now runs without a_3
    tl = timeline_for("chain", chain, Schedule(ops, chain.length))
    assert tl.failure is not None and "not resident" in tl.failure.message
    assert len([b for b in tl.bars if not b.failed]) == 2
    assert [b.label for b in tl.bars if b.failed] == ["3"]


def test_chain_incomplete_schedule_is_marked_at_the_end(examples):
    chain = _chain(examples, "tiny")
    ops = list(store_all_schedule(chain.length).ops)[:-1]
    tl = timeline_for("chain", chain, Schedule(ops, chain.length))
    assert tl.failure is not None and "incomplete" in tl.failure.message
    assert tl.failure.time == pytest.approx(tl.objective)
    assert not any(b.failed for b in tl.bars)


def test_comparison_shares_time_and_memory_scales(examples, tmp_path):
    chain = _chain(examples, "random10")
    L = chain.length
    schedules = {"store-all": store_all_schedule(L), "periodic": periodic_schedule(L, 3),
                 "recompute-all": recompute_all_schedule(L)}
    peaks = {k: simulate(chain, s).peak_memory for k, s in schedules.items()}
    out = tmp_path / "cmp.png"
    fig = plot_comparison("chain", chain, schedules, budget=peaks["store-all"], path=out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes) == 6
    mem_axes = fig.axes[0::2]
    assert len({ax.get_xlim() for ax in fig.axes}) == 1
    assert len({ax.get_ylim() for ax in mem_axes}) == 1
    lines = _artists(fig, "memory")
    assert [float(np.max(line.get_ydata())) for line in lines] == list(peaks.values())
    titles = [ax.get_title(loc="left") for ax in mem_axes]
    assert all(t.startswith(k) for t, k in zip(titles, schedules))
    with pytest.raises(Exception, match="nothing to compare"):
        plot_comparison("chain", chain, {})


def test_plot_to_file_formats_and_bad_extension(examples, tmp_path):
    chain = _chain(examples, "tiny")
    schedule = store_all_schedule(chain.length)
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}
    for ext, head in magic.items():
        path = plot_to_file("chain", chain, schedule, tmp_path / f"f.{ext.upper()}", budget=100, title="t")
        assert path.read_bytes()[: len(head)] == head
    from memsched.solvers.errors import InputError

    with pytest.raises(InputError, match="unknown figure format"):
        plot_to_file("chain", chain, schedule, tmp_path / "f.jpg")
    assert not (tmp_path / "f.jpg").exists()
    with pytest.raises(InputError, match="cannot write"):
        plot_to_file("chain", chain, schedule, tmp_path / "missing" / "f.png")


def test_library_does_not_open_pyplot_figures(examples):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    chain = _chain(examples, "tiny")
    plot_schedule("chain", chain, store_all_schedule(chain.length))
    assert plt.get_fignums() == before


# ---------------------------------------------------------------------------- command line
def _solve(cli, path, tmp_path, solver, budget="60%"):
    res = cli("solve", path, "--budget", budget, "--solver", solver, "--json")
    assert res.code == 0, res.err
    out = tmp_path / f"{solver}.json"
    out.write_text(res.out)
    return out


def test_cli_plot_png_pdf_svg(cli, examples, tmp_path):
    path = examples / "cnn12.json"
    sched = _solve(cli, path, tmp_path, "periodic")
    for ext, head in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")):
        fig = tmp_path / f"out.{ext}"
        res = cli("plot", path, sched, "-o", fig, "--budget", "60%")
        assert res.code == 0, res.err
        assert fig.read_bytes()[: len(head)] == head


def test_cli_plot_rejects_bad_input_with_exit_2(cli, examples, tmp_path):
    path = examples / "cnn12.json"
    sched = _solve(cli, path, tmp_path, "periodic")
    res = cli("plot", path, sched, "-o", tmp_path / "out.gif")
    assert res.code == 2 and "unknown figure format" in res.err
    assert res.err.count("\n") == 1 and "Traceback" not in res.err
    assert not (tmp_path / "out.gif").exists()
    assert cli("plot", path, tmp_path / "nope.json", "-o", tmp_path / "o.png").code == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ops": [{"op": "F_zz", "stage": 0}]}))
    res = cli("plot", path, bad, "-o", tmp_path / "o.png")
    assert res.code == 2 and "F_zz" in res.err
    assert cli("plot", path, sched, "-o", tmp_path / "o.png", "--label", "a", "--label", "b").code == 2
    assert cli("plot", path, sched).code == 2  # -o is required


def test_cli_plot_compare_and_invalid_schedule(cli, examples, tmp_path):
    path = examples / "random10.json"
    a = _solve(cli, path, tmp_path, "periodic")
    b = _solve(cli, path, tmp_path, "recompute-all")
    c = tmp_path / "store-all.json"
    c.write_text(json.dumps(store_all_schedule(10).to_json()))
    fig = tmp_path / "cmp.svg"
    res = cli("plot", path, a, b, c, "-o", fig, "--budget", "60%")
    assert res.code == 0, res.err
    assert "invalid schedule" in res.err and "store-all" in res.err  # drawn, and said
    text = fig.read_text()
    assert "periodic" in text and "recompute-all" in text and "INVALID" in text


def test_cli_solve_plot(cli, examples, tmp_path):
    fig = tmp_path / "solved.png"
    res = cli("solve", examples / "cnn12.json", "--budget", "70%", "--solver", "periodic", "--plot", fig)
    assert res.code == 0, res.err
    assert fig.read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------- graphs
@pytest.mark.skipif(not _has("memsched.solvers.graph.simulator"), reason="memsched.solvers.graph not available")
def test_graph_figure_peak_and_rows():
    from memsched.solvers.graph import generate
    from memsched.solvers.graph.simulator import simulate as graph_simulate

    graph = generate.linear_graph(6)
    n = graph.n
    order = list(range(n))
    sim = graph_simulate(graph, order)
    fig = plot_schedule("graph", graph, order, budget=sim.peak_memory)
    assert _memory_peak(fig) == sim.peak_memory
    tl = timeline_for("graph", graph, order)
    assert tl.objective == pytest.approx(sim.makespan)
    assert set(tl.rows) <= {"forward", "backward"}
    if any(graph.backward):
        assert {b.row for b in tl.bars} == {"forward", "backward"}
    # computing a forward node again is a recomputation
    first_backward = next((v for v in order if graph.backward and graph.backward[v]), n - 1)
    again = order[:first_backward] + [graph.preds[first_backward][0]] + order[first_backward:]
    tl2 = timeline_for("graph", graph, again)
    assert sum(b.category.startswith("recompute") for b in tl2.bars) == 1
    assert tl2.plotted_peak == graph_simulate(graph, again).peak_memory


@pytest.mark.skipif(not _has("memsched.solvers.graph.simulator"), reason="memsched.solvers.graph not available")
def test_graph_violation_is_marked(tmp_path):
    from memsched.solvers.graph import generate
    from memsched.solvers.graph.simulator import simulate as graph_simulate

    graph = generate.linear_graph(5)
    order = list(range(graph.n))
    peak = graph_simulate(graph, order).peak_memory
    tl = timeline_for("graph", graph, order, peak - 1)
    assert tl.failure is not None and "exceeds the budget" in tl.failure.message
    assert tl.plotted_peak <= peak - 1
    assert sum(b.failed for b in tl.bars) == 1
    skipped = order[:1] + order[2:]  # node 1 never computed: node 2 lacks its predecessor
    tl = timeline_for("graph", graph, skipped)
    assert tl.failure is not None and len([b for b in tl.bars if not b.failed]) == 1
    plot_to_file("graph", graph, skipped, tmp_path / "g.png")


@pytest.mark.skipif(not _has("memsched.solvers.graph.simulator"), reason="memsched.solvers.graph not available")
def test_cli_plot_graph(cli, tmp_path):
    from memsched.solvers.graph import generate

    graph = generate.linear_graph(4)
    gpath = tmp_path / "g.json"
    graph.save(gpath)
    spath = tmp_path / "s.json"
    spath.write_text(json.dumps({"format": "memsched.schedule/1", "problem": "graph",
                                 "sequence": [graph.ids[v] for v in range(graph.n)]}))
    res = cli("plot", gpath, spath, "-o", tmp_path / "g.png")
    assert res.code == 0, res.err


# ---------------------------------------------------------------------------- pipelines
@pytest.mark.skipif(not _has("memsched.solvers.pipeline.simulator"), reason="memsched.solvers.pipeline not available")
def test_pipeline_figure_peak_is_the_simulators(examples):
    from memsched.solvers.pipeline.instance import from_chain
    from memsched.solvers.pipeline.simulator import Partition
    from memsched.solvers.pipeline.simulator import simulate as evaluate

    inst = from_chain(_chain(examples, "random10"))
    part = Partition.from_bounds([(0, 2), (3, 5), (6, 9)])
    ev = evaluate(inst, part)
    tl = timeline_for("pipeline", inst, part, ev.peak_memory)
    assert tl.rows == ["stage 0 [0-2]", "stage 1 [3-5]", "stage 2 [6-9]"]
    assert tl.objective == pytest.approx(ev.period) and tl.objective_name == "period"
    assert [float(s.values.max()) for s in tl.memory] == [float(m) for m in ev.stage_memory]
    fig = plot_schedule("pipeline", inst, part, budget=ev.peak_memory)
    assert _memory_peak(fig) == ev.peak_memory
    assert len(_artists(fig, "memory")) == 3
    over = timeline_for("pipeline", inst, part, ev.peak_memory - 1)
    assert over.failure is not None and over.failure.memory == ev.peak_memory


@pytest.mark.skipif(not _has("memsched.solvers.pipeline.simulator"), reason="memsched.solvers.pipeline not available")
def test_cli_plot_partition_over_a_chain_file(cli, examples, tmp_path):
    from memsched.solvers.pipeline.simulator import Partition

    part = tmp_path / "part.json"
    part.write_text(json.dumps(Partition.from_bounds([(0, 4), (5, 9)]).to_json()))
    res = cli("plot", examples / "random10.json", part, "-o", tmp_path / "p.png")
    assert res.code == 0, res.err


# ---------------------------------------------------------------------------- joins
JOIN_DIR = Path(__file__).resolve().parent.parent / "solvers" / "data" / "join"


@pytest.mark.skipif(not _has("memsched.solvers.join.simulator"), reason="memsched.solvers.join not available")
def test_join_figure_peak_rows_and_violation():
    from memsched.solvers.join import Join
    from memsched.solvers.join import simulate as join_simulate
    from memsched.solvers.join import store_all_schedule as join_store_all

    join = Join.load(JOIN_DIR / "crossmodal3.json")
    schedule = join_store_all(join)
    sim = join_simulate(join, schedule)
    fig = plot_schedule("join", join, schedule, budget=sim.peak_memory)
    assert _memory_peak(fig) == sim.peak_memory
    tl = timeline_for("join", join, schedule)
    assert tl.rows[-1] == "loss" and len(tl.rows) == 2 * join.k + 1
    assert {b.row for b in tl.bars if b.category == "Loss"} == {"loss"}
    over = timeline_for("join", join, schedule, sim.peak_memory - 1)
    assert over.failure is not None and "over budget" in over.failure.message
    assert over.plotted_peak <= sim.peak_memory - 1 < over.failure.memory
    assert sum(b.failed for b in over.bars) == 1


@pytest.mark.skipif(not _has("memsched.solvers.join.simulator"), reason="memsched.solvers.join not available")
def test_cli_plot_join(cli, tmp_path):
    path = JOIN_DIR / "tiny.json"
    res = cli("solve", path, "--budget", "80%", "--json", "--plot", tmp_path / "solved.pdf")
    assert res.code == 0, res.err
    assert (tmp_path / "solved.pdf").read_bytes()[:4] == b"%PDF"
    sched = tmp_path / "s.json"
    sched.write_text(res.out)
    res = cli("plot", path, sched, sched, "-o", tmp_path / "j.png", "--budget", "80%")
    assert res.code == 0, res.err


# ---------------------------------------------------------------------------- offloading
@pytest.mark.skipif(not _has("memsched.solvers.offload.simulator"), reason="memsched.solvers.offload not available")
def test_offload_figure_has_transfers_and_the_simulators_peak(examples):
    from memsched.solvers import registry
    from memsched.solvers.offload import OffloadInstance, OffloadSchedule
    from memsched.solvers.offload import simulate as simulate_offload

    chain = _chain(examples, "random10")
    inst = OffloadInstance(chain, 12e9)
    store_all = OffloadSchedule.from_chain(store_all_schedule(chain.length))
    reference = simulate_offload(inst, store_all)
    assert timeline_for("offload", inst, store_all).plotted_peak == reference.peak_memory
    budget = int(0.6 * reference.peak_memory)
    result = registry.solve("offload", inst, "vdnn", budget)
    assert result.schedule is not None
    sim = simulate_offload(inst, result.schedule, budget)
    tl = timeline_for("offload", inst, result.schedule, budget)
    assert tl.rows[-1] == "transfers" and tl.failure is None
    assert {"offload", "prefetch"} <= {b.category for b in tl.bars if b.row == "transfers"}
    fig = plot_schedule("offload", inst, result.schedule, budget=budget)
    assert _memory_peak(fig) == sim.peak_memory == tl.peak_memory
    over = timeline_for("offload", inst, store_all, budget)
    assert over.failure is not None and "over budget" in over.failure.message
    assert over.plotted_peak <= budget < over.failure.memory
    assert sum(b.failed for b in over.bars) == 1


@pytest.mark.skipif(not _has("memsched.solvers.offload.simulator"), reason="memsched.solvers.offload not available")
def test_cli_plot_offload(cli, examples, tmp_path):
    path = examples / "random10.json"
    res = cli("solve", path, "--budget", "60%", "--solver", "vdnn", "--bandwidth", "12GB/s", "--json")
    assert res.code == 0, res.err
    sched = tmp_path / "vdnn.json"
    sched.write_text(res.out)
    res = cli("plot", path, sched, "-o", tmp_path / "o.svg", "--bandwidth", "12GB/s", "--budget", "60%")
    assert res.code == 0, res.err
    assert "prefetch" in (tmp_path / "o.svg").read_text()


# ---------------------------------------------------------------------------- extension points
def test_generic_memory_profile_adapter():
    """A problem without an adapter is drawn from memory_profile + replay (e.g. offloading, with
    transfers on their own row that the memory line does not follow)."""
    profile = [
        {"op": "F_all(0)", "start": 0.0, "end": 1.0, "mem_during": 5, "mem_after": 5},
        {"op": "offload(1)", "start": 0.5, "end": 2.0, "mem_during": 5, "mem_after": 5, "overlaps": True},
        {"op": "F_all(1)", "start": 1.0, "end": 2.0, "mem_during": 9, "mem_after": 7},
        {"op": "F_all(1)", "start": 2.0, "end": 3.0, "mem_during": 8, "mem_after": 8},
        {"op": "Loss", "start": 3.0, "end": 3.5, "mem_during": 9, "mem_after": 4},
    ]
    module = types.SimpleNamespace(
        memory_profile=lambda inst, sched: profile,
        replay=lambda inst, sched, budget: types.SimpleNamespace(objective=3.5, peak_memory=9, violation=None),
    )
    tl = profile_timeline("offload", None, None, 10, module)
    assert tl.plotted_peak == 9 and tl.peak_memory == 9
    assert "transfers" in tl.rows and tl.rows[0] == "F_all"
    assert [b.category for b in tl.bars].count("recompute F_all") == 1
    assert 0.5 not in tl.memory[0].times.tolist()  # the overlapping transfer is not on the memory line
    assert isinstance(plot_schedule_from_timeline(tl), Figure)


def plot_schedule_from_timeline(tl: Timeline) -> Figure:
    from memsched.experiments.plotting import plot_timeline

    return plot_timeline(tl, title="generic")


def test_register_timeline_overrides(examples):
    chain = _chain(examples, "tiny")
    timeline_for("chain", chain, store_all_schedule(chain.length))  # built-ins registered
    original = _ADAPTERS["chain"]
    calls = []

    def fake(instance, schedule, budget):
        calls.append(budget)
        return original(instance, schedule, budget)

    try:
        register_timeline("chain", fake)
        plot_schedule("chain", chain, store_all_schedule(chain.length), budget=123)
        assert calls == [123]
    finally:
        register_timeline("chain", original)


def test_figures_show_inline_in_notebooks(examples):
    chain = _chain(examples, "tiny")
    fig = plot_schedule("chain", chain, store_all_schedule(chain.length))
    assert fig._repr_png_()[:4] == b"\x89PNG"  # even where no pyplot backend registered a formatter

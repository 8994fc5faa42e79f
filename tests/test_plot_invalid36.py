"""`memsched plot` of a schedule over the budget: drawn up to the violation, but the title's makespan
(period) and peak are the simulator's for the whole schedule, as `memsched simulate` reports them, and the
memory drawn goes over the budget on the failing operation (the curve crosses the budget line); a
schedule whose replay a broken rule ends has its numbers labelled "up to the violation"; valid
schedules are drawn as before, their numbers the simulator's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from memsched.experiments.plotting import plot_schedule, timeline_for  # noqa: E402
from memsched.solvers.chain import Chain, simulate  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Schedule  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "solvers" / "data" / "examples"
COMMENT = re.compile(r"<!-- ([^>]*(?:makespan|period) [^>]*) -->")


def _title_numbers(svg: str) -> tuple[str, float, str]:
    """(the summary comment, its makespan in ms, its peak text "64.2 MiB") of a one-schedule SVG."""
    (summary,) = COMMENT.findall(svg)
    makespan = float(re.search(r"makespan ([0-9.]+) ms", summary).group(1))
    peak = re.search(r"peak ([0-9.]+ [KMG]iB)", summary).group(1)
    return summary, makespan, peak


def _drawn_memory(fig) -> float:
    """Highest memory the figure's memory panels draw: the memory line and its part over a failing op."""
    lines = [a for ax in fig.axes for a in ax.get_lines() if a.get_gid() in ("memory", "failing memory")]
    assert lines
    return max(float(np.max(line.get_ydata())) for line in lines)


def test_cli_plot_over_budget_reports_the_simulators_makespan_and_peak(cli, tmp_path):
    """The hunter's case: sqrt solved at 70 %, drawn at 50 %: op #9 goes over the budget."""
    instance = EXAMPLES / "random10.json"
    res = cli("solve", instance, "--budget", "70%", "--solver", "sqrt", "--json")
    assert res.code == 0, res.err
    sched = tmp_path / "sqrt.json"
    sched.write_text(res.out)
    res = cli("simulate", instance, sched, "--json")
    assert res.code == 0, res.err
    replay = json.loads(res.out)
    res = cli("plot", instance, sched, "-o", tmp_path / "s.svg", "--budget", "50%")
    assert res.code == 0 and "drawn up to the violation" in res.err, res.err
    summary, makespan, peak = _title_numbers((tmp_path / "s.svg").read_text())
    assert "INVALID" in summary
    assert makespan == pytest.approx(replay["makespan"], abs=0.005)  # 63.93, not the prefix's 15.65
    assert peak == f"{replay['peak_memory'] / 2**20:.3g} MiB"  # 64.2 MiB, not the prefix's 41.6


def test_chain_over_budget_draws_memory_over_the_budget_and_whole_numbers():
    chain = Chain.load(EXAMPLES / "random10.json")
    schedule = store_all_schedule(chain.length)
    whole = simulate(chain, schedule)
    budget = int(0.6 * whole.peak_memory)
    over = simulate(chain, schedule, budget)
    assert over.violation is not None and "over budget" in over.violation.reason
    tl = timeline_for("chain", chain, schedule, budget)
    assert tl.objective == pytest.approx(whole.makespan) and tl.peak_memory == whole.peak_memory
    assert not getattr(tl, "partial", False)
    fig = plot_schedule("chain", chain, schedule, budget=budget)
    failing = over.steps[over.violation.position]
    assert _drawn_memory(fig) == failing.mem_during > budget  # the curve crosses the budget line
    title = fig.axes[0].get_title(loc="left")
    assert "INVALID" in title and "up to the violation" in title  # says the drawing stops there
    peak_texts = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("peak")]
    assert peak_texts and all("so far" in t for t in peak_texts)  # the marker is not the whole peak


def test_chain_broken_rule_labels_the_prefix_numbers():
    """A replay that a broken rule ends has no whole-schedule numbers: the title says whose they are."""
    chain = Chain.load(EXAMPLES / "tiny.json")
    ops = list(store_all_schedule(chain.length).ops)
    del ops[2]  # F_all(3) now runs without a_3: the replay stops there
    schedule = Schedule(ops, chain.length)
    sim = simulate(chain, schedule)
    tl = timeline_for("chain", chain, schedule)
    assert tl.failure is not None and "not resident" in tl.failure.message
    assert tl.objective == pytest.approx(sim.makespan) and tl.peak_memory == sim.peak_memory
    title = plot_schedule("chain", chain, schedule).axes[0].get_title(loc="left")
    assert title.startswith("up to the violation: makespan") and "INVALID" in title


def test_valid_chain_plot_is_unchanged():
    chain = Chain.load(EXAMPLES / "random10.json")
    schedule = store_all_schedule(chain.length)
    sim = simulate(chain, schedule)
    fig = plot_schedule("chain", chain, schedule, budget=sim.peak_memory)
    title = fig.axes[0].get_title(loc="left")
    assert "INVALID" not in title and "violation" not in title
    assert f"makespan {sim.makespan:.4g} ms" in title
    (peak,) = [a for a in fig.axes[0].get_lines() if a.get_gid() == "peak"]
    assert float(peak.get_ydata()[0]) == sim.peak_memory
    assert [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("peak")] == [
        f"peak {sim.peak_memory / 2**20:.3g} MiB"]
    assert not [a for ax in fig.axes for a in ax.get_lines() if a.get_gid() == "failing memory"]


def test_join_over_budget_numbers_are_the_simulators():
    from memsched.solvers.join import Join
    from memsched.solvers.join import simulate as join_simulate
    from memsched.solvers.join import store_all_schedule as join_store_all

    join = Join.load(EXAMPLES.parent / "join" / "crossmodal3.json")
    schedule = join_store_all(join)
    whole = join_simulate(join, schedule)
    budget = int(0.7 * whole.peak_memory)
    tl = timeline_for("join", join, schedule, budget)
    assert tl.failure is not None
    assert tl.objective == pytest.approx(whole.makespan) and tl.peak_memory == whole.peak_memory
    assert _drawn_memory(plot_schedule("join", join, schedule, budget=budget)) > budget


def test_offload_over_budget_numbers_are_the_simulators():
    from memsched.solvers.offload import OffloadInstance, OffloadSchedule
    from memsched.solvers.offload import simulate as simulate_offload

    inst = OffloadInstance(Chain.load(EXAMPLES / "random10.json"), 12e9)
    store_all = OffloadSchedule.from_chain(store_all_schedule(inst.chain.length))
    whole = simulate_offload(inst, store_all)
    budget = int(0.6 * whole.peak_memory)
    tl = timeline_for("offload", inst, store_all, budget)
    assert tl.failure is not None and "over budget" in tl.failure.message
    assert tl.objective == pytest.approx(whole.makespan) and tl.peak_memory == whole.peak_memory
    assert _drawn_memory(plot_schedule("offload", inst, store_all, budget=budget)) > budget


def test_graph_over_budget_numbers_are_the_simulators():
    from memsched.solvers.graph import generate
    from memsched.solvers.graph.simulator import simulate as graph_simulate

    graph = generate.linear_graph(6)
    order = list(range(graph.n))
    whole = graph_simulate(graph, order)
    budget = int(np.max(whole.memory[:2]))  # a later step goes over it (linear_graph's memory grows)
    assert whole.peak_memory > budget
    tl = timeline_for("graph", graph, order, budget)
    assert tl.failure is not None and "exceeds the budget" in tl.failure.message
    assert tl.objective == pytest.approx(whole.makespan) and tl.peak_memory == whole.peak_memory
    assert _drawn_memory(plot_schedule("graph", graph, order, budget=budget)) > budget


def test_pipeline_over_budget_peak_is_the_simulators():
    from memsched.solvers.pipeline.instance import from_chain
    from memsched.solvers.pipeline.simulator import Partition
    from memsched.solvers.pipeline.simulator import simulate as evaluate

    inst = from_chain(Chain.load(EXAMPLES / "random10.json"))
    part = Partition.from_bounds([(0, 2), (3, 5), (6, 9)])
    ev = evaluate(inst, part)
    budget = int(0.5 * ev.peak_memory)  # stage 0 goes over it before holding its whole stash
    tl = timeline_for("pipeline", inst, part, budget)
    assert tl.failure is not None
    assert tl.objective == pytest.approx(ev.period) and tl.peak_memory == ev.peak_memory
    assert tl.plotted_peak < ev.peak_memory  # the batch drawn stops before it
    assert _drawn_memory(plot_schedule("pipeline", inst, part, budget=budget)) > budget

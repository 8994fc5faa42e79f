"""`memsched plot` fixes (issue 39, plotfix): a pipeline's memory lines charge the simulator's stash
(``saved_extra``, a DAG ``order``); the title's peak is the simulator's also for a 1F1B batch of fewer
micro-batches than stages; a budget below a device's weights and buffers is drawn as a violation at
t = 0 with every line kept; an output name the system refuses, a named pipe, a bad extension."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("memsched.solvers.pipeline.simulator")

from conftest import ROOT, one_line_refusal  # noqa: E402
from memsched.experiments.plotting import plot_schedule, timeline_for  # noqa: E402
from memsched.solvers.pipeline import load  # noqa: E402
from memsched.solvers.pipeline.schedule import Partition, Stage  # noqa: E402
from memsched.solvers.pipeline.simulator import simulate, weights_memory  # noqa: E402

PIPELINES = ROOT / "solvers" / "data" / "pipeline"
MLP7 = PIPELINES / "mlp7.chain.json"

#: a DAG whose two branches (b: small, c: large) may come in either order
DAG = """\
node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=1000.000, parameter_size=0.000
node2 -- Conv -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=20000.000, parameter_size=100.000
node3 -- B -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=3000.000, parameter_size=100.000
node4 -- C -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=500000.000, parameter_size=100.000
node5 -- Add -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=7000.000, parameter_size=0.000
node6 -- Linear -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=10.000, parameter_size=900.000
\tnode1 -- node2
\tnode2 -- node3
\tnode2 -- node4
\tnode3 -- node5
\tnode4 -- node5
\tnode5 -- node6
"""


def _tiny_resnet_with_saved_extra(tmp_path: Path) -> Path:
    """tiny-resnet with ``saved_extra=3000000`` on its two ReLUs (node3, node5), as the hunter's repro."""
    text = (PIPELINES / "tiny-resnet.graph.txt").read_text()
    text = re.sub(r"(node(3|5) -- ReLU\(inplace\) -- .*parameter_size=0.000)", r"\1, saved_extra=3000000", text)
    path = tmp_path / "tre.graph.txt"
    path.write_text(text)
    return path


def _cases(tmp_path: Path) -> list[tuple[object, Partition]]:
    extra = load(str(_tiny_resnet_with_saved_extra(tmp_path)))
    assert extra.saved_extra is not None
    dag_path = tmp_path / "dag.graph.txt"
    dag_path.write_text(DAG)
    dag = load(str(dag_path))
    return [(extra, Partition([Stage(0, 1), Stage(2, 3), Stage(4, 9)], micro_batches=6)),
            (dag, Partition([Stage(0, 1), Stage(2, 2), Stage(3, 4)], micro_batches=4, order=[0, 2, 1, 3, 4]))]


def _weights_and_buffers(inst, part: Partition, s: int) -> int:
    """What stage s holds with no micro-batch in flight, as `simulate` charges it."""
    work = inst.reordered(list(part.order)) if part.order is not None else inst
    st, S = part.stages[s], len(part.stages)
    W = sum(int(work.params[l]) for l in range(st.first, st.last + 1))
    buffers = (work.input_of(st.first) if s > 0 else 0) + (int(work.cut_sizes[st.last]) if s < S - 1 else 0)
    return weights_memory(work, W) + buffers


# ---------------------------------------------------------------------------- 1: the simulator's stash
@pytest.mark.parametrize("case", [0, 1], ids=["saved_extra", "dag-order"])
def test_pipeline_lines_start_at_weights_and_buffers_and_step_by_the_simulators_stash(tmp_path, case):
    inst, part = _cases(tmp_path)[case]
    ev = simulate(inst, part)
    work = inst.reordered(list(part.order)) if part.order is not None else inst
    tl = timeline_for("pipeline", inst, part, None)
    for s, (st, line) in enumerate(zip(part.stages, tl.memory)):
        stash = int(work.stash(st.first)[st.last - st.first])
        assert line.values[0] == _weights_and_buffers(inst, part, s), (s, line.values[0])
        steps = {round(float(d)) for d in np.diff(line.values) if d}
        assert steps == {stash, -stash}, (s, steps, stash)
        assert float(np.max(line.values)) == ev.stage_memory[s]


def test_pipeline_violation_with_saved_extra_is_at_the_simulators_levels(tmp_path):
    inst, part = _cases(tmp_path)[0]
    budget = 25_000_000
    ev = simulate(inst, part, budget)
    tl = timeline_for("pipeline", inst, part, budget)
    assert tl.failure is not None and tl.failure.memory is not None
    [bar] = [b for b in tl.bars if b.failed]
    s = tl.rows.index(bar.row)
    stash = int(inst.stash(part.stages[s].first)[part.stages[s].last - part.stages[s].first])
    line = tl.memory[s]
    assert tl.failure.memory == line.values[-1] + stash > budget  # the failing forward's level
    assert all(float(np.max(other.values)) <= budget for other in tl.memory)  # nothing over it before
    assert tl.peak_memory == ev.peak_memory


# ---------------------------------------------------------------------------- 2: the title's peak
def _short_batch() -> tuple[object, Partition]:
    """mlp7 in three stages, one micro-batch per batch (1F1B: fewer than S - s; the simulator charges min(S - s, m))."""
    inst = load(str(MLP7))
    return inst, Partition([Stage(0, 1), Stage(2, 3), Stage(4, 6)], micro_batches=1)


def _title(fig) -> str:
    return " ".join(ax.get_title(loc="left") for ax in fig.axes)


def _peak_label(fig) -> str:
    peak = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "peak"]
    assert len(peak) == 1
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    return next(t for t in texts if "peak" in t)


def test_pipeline_title_peak_is_the_simulators_with_fewer_micro_batches_than_stages():
    inst, part = _short_batch()
    ev = simulate(inst, part)
    tl = timeline_for("pipeline", inst, part, None)
    assert tl.peak_memory == ev.peak_memory
    assert tl.plotted_peak == ev.peak_memory  # the batch holds what the simulator charges: min(S - s, m) in flight
    fig = plot_schedule("pipeline", inst, part)
    assert f"peak {ev.peak_memory / 2**20:.3g} MiB" in _title(fig)
    assert _peak_label(fig) == f"peak {tl.plotted_peak / 2**20:.3g} MiB"


def test_pipeline_peak_is_memsched_simulates_with_fewer_micro_batches_than_stages(cli, tmp_path):
    inst, part = _short_batch()
    path = tmp_path / "m1.json"
    path.write_text(json.dumps(part.to_json()))
    res = cli("simulate", MLP7, path, "--json")
    assert res.code == 0, res.err
    peak = res.json()["peak_memory"]
    tl = timeline_for("pipeline", inst, part, None)
    assert tl.peak_memory == peak


# ---------------------------------------------------------------------------- 3: weights + buffers over the budget
def test_pipeline_budget_below_weights_and_buffers_is_a_violation_at_zero():
    inst = load(str(MLP7))
    part = Partition([Stage(0, 1), Stage(2, 3), Stage(4, 6)])
    bases = [_weights_and_buffers(inst, part, s) for s in range(3)]
    budget = 7_000_000
    assert bases[1] > budget > max(bases[0], bases[2])
    ev = simulate(inst, part, budget)
    tl = timeline_for("pipeline", inst, part, budget)
    f = tl.failure
    assert f is not None and f.time == 0.0 and f.memory == bases[1]
    assert ev.violation is not None and f.message.startswith(ev.violation)
    assert f"{bases[1]} bytes" in f.message
    assert not [b for b in tl.bars if b.failed]  # no forward has started
    assert [line.values.tolist() for line in tl.memory] == [[float(b)] for b in bases]  # every line kept
    fig = plot_schedule("pipeline", inst, part, budget=budget)
    label = _peak_label(fig)
    assert label == f"peak so far {bases[1] / 2**20:.3g} MiB", label
    failure = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "failure"]
    assert [float(failure[0].get_ydata()[0])] == [float(bases[1])]
    assert f"peak {ev.peak_memory / 2**20:.3g} MiB" in _title(fig)


# ---------------------------------------------------------------------------- 4-6: the output file
def _partition_file(tmp_path: Path) -> Path:
    path = tmp_path / "part.json"
    path.write_text(json.dumps(Partition([Stage(0, 1), Stage(2, 3), Stage(4, 6)]).to_json()))
    return path


@pytest.mark.parametrize("length", [256, 5000])
def test_cli_plot_output_name_too_long_is_one_line(cli, tmp_path, length):
    name = str(tmp_path / ("a" * (length - 4) + ".png"))
    line = one_line_refusal(cli("plot", MLP7, _partition_file(tmp_path), "-o", name), "--output")
    assert "too long" in line


def test_cli_solve_output_name_too_long_is_one_line(cli, tmp_path):
    name = str(tmp_path / ("a" * 300 + ".json"))
    one_line_refusal(cli("solve", ROOT / "solvers" / "data" / "examples" / "random10.json", "--budget", "60%",
                         "-o", name), "--output")


def test_cli_plot_bad_extension_names_the_option(cli, tmp_path):
    out = str(tmp_path / "x.jpg")
    line = one_line_refusal(cli("plot", MLP7, _partition_file(tmp_path), "-o", out), "unknown figure format")
    assert f"{out}: --output: unknown figure format '.jpg'" in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("suffix, head, tail", [(".pdf", b"%PDF", b"%%EOF"), (".png", b"\x89PNG", b"IEND\xaeB`\x82"),
                                                (".svg", b"<?xml", b"</svg>")])
def test_cli_plot_into_a_named_pipe_writes_the_whole_figure(cli, tmp_path, suffix, head, tail):
    fifo = tmp_path / f"f{suffix}"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        res = cli("plot", MLP7, _partition_file(tmp_path), "-o", fifo)
    finally:
        if reader.is_alive() and not got:  # the command never opened the pipe: let the reader go
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        reader.join(10)
    assert res.code == 0, res.err
    assert got and got[0].startswith(head) and got[0].rstrip().endswith(tail), got[0][:40] if got else None

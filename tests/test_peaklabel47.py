"""`memsched plot`: a schedule drawn up to its violation whose failing operation is drawn at the
simulator's peak marks it "peak", not "peak so far" (docs/cli.md: "peak so far" only when the peak
comes after the violation; that case is test_plotfix39's)."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from memsched.experiments.plotting import plot_schedule, timeline_for  # noqa: E402
from memsched.solvers.pipeline import load  # noqa: E402
from memsched.solvers.pipeline.schedule import Partition, Stage  # noqa: E402

#: (fwd_time, bwd_time, out_size) of six layers, in us and KB, with the weights of meta.param_sizes
LAYERS = [(8.0, 2.0, 50), (6.0, 1.0, 61), (5.0, 4.0, 97), (3.0, 16.0, 73), (3.0, 13.0, 63), (1.0, 18.0, 54)]


def _chain(tmp_path: Path) -> str:
    stages = [{"name": f"l{k}", "fwd_time": f, "bwd_time": b, "out_size": x, "tape_size": x, "fwd_overhead": 0,
               "bwd_overhead": 0} for k, (f, b, x) in enumerate(LAYERS)]
    data = {"format": "memsched.chain/1", "name": "six", "input_size": 5, "stages": stages,
            "loss": {"bwd_time": 0.0, "bwd_overhead": 0},
            "meta": {"units": {"time": "us", "memory": "KB"}, "param_sizes": [27000, 46000, 13000, 40000, 33000, 0]}}
    path = tmp_path / "six.json"
    path.write_text(json.dumps(data))
    return str(path)


def _peak_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts if "peak" in t.get_text()]


def test_failing_forward_at_the_peak_is_marked_peak(tmp_path: Path) -> None:
    inst = load(_chain(tmp_path))
    part = Partition([Stage(0, 2), Stage(3, 5)])
    budget = 600_000
    tl = timeline_for("pipeline", inst, part, budget)
    assert tl.failure is not None and tl.failure.memory == tl.peak_memory  # the failing forward holds the peak
    assert not tl.peak_drawn  # the memory line itself stops below it
    texts = _peak_texts(plot_schedule("pipeline", inst, part, budget=budget))
    assert texts == [f"peak {tl.peak_memory / 1024:.3g} KiB"], texts


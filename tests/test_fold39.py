"""Folds (issue 39, fold): one rule gives each line of a figure its own (colour, marker)
(`plotting.styles.distinct_styles`, used by `figures.figure_styles` and `paper_figures`), and one function
gives a pipeline partition's stash per stage (`simulator.stage_stashes`, used by `simulate` and the
pipeline timeline)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from conftest import ROOT  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402
from memsched.experiments import paper_figures as P  # noqa: E402
from memsched.experiments.plotting import timeline_for  # noqa: E402
from memsched.experiments.plotting.styles import SPARE_STYLES, distinct_styles  # noqa: E402
from memsched.solvers.pipeline import load  # noqa: E402
from memsched.solvers.pipeline.schedule import Partition, Stage  # noqa: E402
from memsched.solvers.pipeline.simulator import in_flight_counts, simulate, stage_stashes  # noqa: E402

PIPELINES = ROOT / "solvers" / "data" / "pipeline"


def _pairs(styles: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    return [(to_hex(kw["color"]), kw["marker"]) for kw in styles.values()]


# ---------------------------------------------------------------------------- 1. one style rule
def test_both_figure_modules_use_the_one_rule():
    assert P.distinct_styles is distinct_styles
    labels = ["rotor", "dp", "madpipe P=2", "solver1", "solver2"]
    ranked = sorted(labels, key=lambda s: (list(F.STYLE).index(s) if s in F.STYLE else len(F.STYLE), s))
    assert F.figure_styles(labels) == distinct_styles([(lab, F.style(lab, lab)) for lab in ranked])


def test_wanted_pairs_are_kept_unless_taken_and_colours_compare_as_drawn():
    styles = distinct_styles([("a", {"color": "C0", "marker": "o"}), ("b", {"color": "#1f77b4", "marker": "o"}),
                              ("c", {"color": "C1", "marker": "s", "linestyle": "--"}), ("d", None)])
    assert styles["a"] == {"color": "C0", "marker": "o"}
    assert styles["c"] == {"color": "C1", "marker": "s", "linestyle": "--"}
    assert len(set(_pairs(styles))) == 4  # "C0" and "#1f77b4" are one colour: b moved
    # b and d take the first spare pairs whose colour no line has
    assert (to_hex(styles["b"]["color"]), to_hex(styles["d"]["color"])) == ("#2ca02c", "#d62728")


def test_a_variant_keeps_its_family_colour_and_dash():
    styles = distinct_styles([("madpipe P=2", {"color": "#1f77b4", "marker": "o", "linestyle": ":"}),
                              ("madpipe P=4", {"color": "#1f77b4", "marker": "o", "linestyle": "--"}),
                              ("rotor", {"color": "#1f77b4", "marker": "o"})])
    assert styles["madpipe P=4"] == {"color": "#1f77b4", "marker": "s", "linestyle": "--"}
    assert styles["rotor"]["color"] != "#1f77b4"  # another family: a colour of its own
    assert len(set(_pairs(styles))) == 3


def test_distinct_up_to_the_spare_pairs_and_deterministic():
    wanted = [(f"s{i}", None) for i in range(len(SPARE_STYLES))]
    styles = distinct_styles(wanted)
    assert len(set(_pairs(styles))) == len(SPARE_STYLES)
    assert distinct_styles(wanted) == styles
    assert distinct_styles(wanted + [("s0", {"color": "k", "marker": "x"})]) == styles  # first place counts


# ---------------------------------------------------------------------------- 2. one stash per stage
def _dag() -> tuple[Any, Partition]:
    inst = load(str(PIPELINES / "tiny-resnet.graph.txt"))
    order = list(range(inst.length))
    return inst, Partition([Stage(0, 2), Stage(3, inst.length - 1)], micro_batches=4, order=order)


@pytest.mark.parametrize("ordered", [False, True])
def test_stage_stashes_are_the_simulators(ordered):
    inst, part = _dag()
    if not ordered:
        part = Partition(part.stages, micro_batches=4)
    work = inst.reordered(list(part.order)) if part.order is not None else inst
    stashes = stage_stashes(inst, part)
    assert stashes == [int(work.stash(s.first)[s.last - s.first]) for s in part.stages]
    assert all(isinstance(a, int) and a > 0 for a in stashes)
    ev = simulate(inst, part)
    assert max(ev.stage_memory) == ev.peak_memory and ev.violation is None
    tl = timeline_for("pipeline", inst, part, None)
    for s, line in enumerate(tl.memory):  # the timeline steps by the same stash the simulator charges
        assert max(line.values) - min(line.values) <= in_flight_counts(part)[s] * stashes[s]
        assert {round(float(b - a)) for a, b in zip(line.values, line.values[1:]) if b != a} == \
            {stashes[s], -stashes[s]}


def test_a_non_topological_order_is_a_value_error():
    inst, part = _dag()
    with pytest.raises(ValueError):
        stage_stashes(inst, Partition(part.stages, order=list(reversed(range(inst.length)))))

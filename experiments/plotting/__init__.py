"""Figures of schedules: memory over time above the operations (issue 10).

    from memsched.experiments.plotting import plot_schedule, plot_comparison, plot_to_file
    fig = plot_schedule("chain", chain, schedule, budget=B)        # a matplotlib Figure
    plot_comparison("chain", chain, {"store-all": s1, "rotor": s2}, budget=B, path="cmp.png")
    plot_to_file("chain", chain, schedule, "out.pdf", budget=B)    # PNG, PDF or SVG

The memory drawn is the problem's simulator's (`timeline.timeline_for`); chains, joins, offloading
schedules, graphs and pipeline partitions are built in (`adapters`), and other problems plug in through
`register_timeline` or a ``memory_profile`` in their solvers package (see `timeline`).
Figures never go through pyplot: notebooks show them inline, scripts save them.
"""

from __future__ import annotations

from .adapters import (
    chain_timeline,
    graph_timeline,
    join_timeline,
    offload_timeline,
    pipeline_timeline,
    schedule_from_json,
)
from .draw import (
    STYLE,
    SUFFIXES,
    check_suffix,
    colour_of,
    plot_comparison,
    plot_schedule,
    plot_timeline,
    plot_to_file,
    save_figure,
)
from .timeline import Bar, Failure, MemorySeries, Timeline, register_timeline, timeline_for

__all__ = ["plot_schedule", "plot_comparison", "plot_to_file", "plot_timeline", "save_figure", "check_suffix",
           "timeline_for", "register_timeline", "schedule_from_json", "Timeline", "Bar", "MemorySeries",
           "Failure", "chain_timeline", "join_timeline", "offload_timeline", "graph_timeline",
           "pipeline_timeline", "colour_of", "STYLE", "SUFFIXES"]

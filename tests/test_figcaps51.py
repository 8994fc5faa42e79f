"""`memsched figures`: three caption and marker fixes (drawn from small hand-made tables, not image bytes).

1. Figure (b) drew an infeasible solve (budget below the least the chain needs) with the filled marker of a
   proven-optimal one, its caption naming only hollow markers: now infeasible points have their own marker
   (a cross) and caption entry, and a solver that stops short of the other solvers' sizes because of its
   ``max_length`` is named ("milp (phase model): run up to L = 20 (max_length)").
2. The overhead figures' "missing points: no schedule within the budget" was said also of a solver the sweep
   never ran on an instance (its ``max_length`` below the instance's size: no row) or that answered
   ``unsupported`` there: now a line names those ("not run (max_length 12): ...", "not applicable (...): ...").
3. `mark_coinciding`'s enlarged hollow markers were cut at the panel's edges: a marked line lying within the
   view limits is now drawn unclipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.figure  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402
from memsched.experiments.plotting.coincide import mark_coinciding  # noqa: E402


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[matplotlib.figure.Figure, str]]:
    """Each figure saved (once per figure: its PNG) with its caption (every text of the figure)."""
    seen: list[tuple[matplotlib.figure.Figure, str]] = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if not any(f is fig for f, _ in seen):
            seen.append((fig, " ".join(" ".join(t.get_text() for t in fig.texts).split())))
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    return seen


def _row(sweep: str, instance: str, size: int, solver: str, status: str, *, label: str | None = None,
         budget: str = "60%", objective: float | None = None, overhead: float | None = None,
         time_s: float = 0.01, message: str | None = None) -> dict[str, Any]:
    return {"sweep": sweep, "instance": instance, "size": size, "solver": solver, "solver_label": label or solver,
            "status": status, "budget_spec": budget, "objective": objective, "overhead": overhead,
            "solve_time_s": time_s, "time_limit": 10.0, "message": message, "reference_peak": 100.0}


# ---------------------------------------------------------------------------- 1. figure (b)
def _solve_time_rows() -> pd.DataFrame:
    rows = []
    for size, status in ((6, "infeasible"), (10, "optimal"), (14, "timeout")):
        rows.append(_row("fig_b_solve_time", f"random-L{size}", size, "milp", status, label="milp (phase model)",
                         time_s=0.05 * size))
    for size, status in ((6, "infeasible"), (10, "optimal"), (14, "optimal"), (30, "optimal")):
        rows.append(_row("fig_b_solve_time", f"random-L{size}", size, "rotor", status, time_s=0.001 * size))
    return pd.DataFrame(rows)


def _points(ax: Any, colour: str) -> dict[float, Any]:
    """x -> the marker-only line (no line style) drawn there in `colour` on `ax`."""
    found = {}
    for line in ax.lines:
        if line.get_linestyle() == "None" and to_hex(line.get_markeredgecolor()) == to_hex(colour):
            for x in line.get_xdata():
                found[float(x)] = line
    return found


def test_infeasible_solves_have_their_own_marker_and_caption_entry(tmp_path: Path, drawn: list[Any]) -> None:
    paths, note = F.render("b", _solve_time_rows(), tmp_path)
    assert note is None and paths
    (fig, caption), = drawn
    ax = fig.axes[0]
    colour = F.figure_styles(["milp (phase model)", "rotor"])["milp (phase model)"]["color"]
    points = _points(ax, colour)
    optimal, open_, infeasible = points[10.0], points[14.0], points[6.0]
    assert optimal.get_marker() == "s" and to_hex(optimal.get_markerfacecolor()) == to_hex(colour)
    assert open_.get_marker() == "s" and to_hex(open_.get_markerfacecolor()) == "#ffffff"  # hollow
    assert infeasible.get_marker() not in ("s", optimal.get_marker())  # neither filled nor hollow square
    assert "crosses: proven infeasible" in caption and "filled markers: proven optimal" in caption
    assert "hollow markers: not proven optimal" in caption
    assert "milp (phase model): run up to L = 20 (max_length)" in caption  # experiments/configs/fig_b_solve_time


def test_solve_kind_and_marker_legend() -> None:
    assert F.solve_kind(pd.Series(["infeasible"] * 3)) == "infeasible"
    assert F.solve_kind(pd.Series(["optimal", "optimal"])) == "optimal"
    assert F.solve_kind(pd.Series(["optimal", "timeout"])) == "open"
    assert F.solve_kind(pd.Series(["feasible"])) == "open"
    assert "crosses" not in F.marker_legend(["optimal", "open"])
    assert "crosses: proven infeasible" in F.marker_legend(["infeasible"])


def test_size_limit_note_without_a_max_length_names_the_sizes() -> None:
    rows = _solve_time_rows()
    assert F.size_limit_note(rows, {}, {}) == "\nmilp (phase model): no rows at L = 30"
    assert F.size_limit_note(rows, {}, {"milp (phase model)": 12}) == "\nmilp (phase model): no rows at L = 30"
    assert F.size_limit_note(rows, {}, {"milp (phase model)": 20}) == \
        "\nmilp (phase model): run up to L = 20 (max_length)"
    assert F.size_limit_note(rows[rows["solver"] == "rotor"], {}, {}) == ""


# ---------------------------------------------------------------------------- 2. overhead figures
def _chain_rows() -> pd.DataFrame:
    rows = []
    for inst, size in (("small", 10), ("big", 30)):
        for budget, over in (("50%", 0.2), ("90%", 0.05)):
            rows.append(_row("chain_solvers", inst, size, "rotor", "optimal", budget=budget, objective=1 + over,
                             overhead=over))
            rows.append(_row("chain_solvers", inst, size, "revolve", "unsupported" if inst == "small" else "feasible",
                             budget=budget, objective=None if inst == "small" else 1.5,
                             overhead=None if inst == "small" else 0.5, message="needs a homogeneous chain"))
            if inst == "small":  # milp: max_length 12 in experiments/configs/default.toml, no row on "big"
                rows.append(_row("chain_solvers", inst, size, "milp", "optimal" if budget == "90%" else "infeasible",
                                 label="milp (phase model)", budget=budget, objective=1.05, overhead=0.05))
    return pd.DataFrame(rows)


def test_a_solver_not_run_is_not_said_to_have_no_schedule(tmp_path: Path, drawn: list[Any]) -> None:
    paths, note = F.render("main", _chain_rows(), tmp_path)
    assert note is None and paths
    (_, caption), = drawn
    assert "missing points: no schedule within the budget, or the solver not run or not applicable there" in caption
    assert "not run (max_length 12): milp (phase model) on big (size 30)" in caption
    assert "not applicable (needs a homogeneous chain): revolve" in caption and "on small (size 10)" in caption
    assert "small (size 10) (max_length" not in caption  # milp ran on small: its infeasible budget is "no schedule"


def test_not_run_note_without_a_limit_and_with_none_missing() -> None:
    rows = _chain_rows()
    assert F.not_run_note(rows[rows["solver"] == "rotor"], {}) == ""
    assert "\nnot run (no rows): milp (phase model) on big (size 30)" in F.not_run_note(rows, {})
    assert "not run (no rows)" in F.not_run_note(rows, {}, {"milp (phase model)": 40})  # 30 < 40: not the reason
    assert "\nnot run (max_length 12): milp (exact) on big (size 30)" in F.not_run_note(
        rows, {"milp (phase model)": "milp (exact)"}, {"milp (phase model)": 12})


def test_the_graph_note_keeps_its_time_limit_and_adds_not_run(tmp_path: Path, drawn: list[Any]) -> None:
    rows = _chain_rows().assign(sweep="fig_c_graphs")
    rows = rows[rows["solver"] != "revolve"].assign(solver_label=lambda r: r["solver_label"].replace(
        {"milp (phase model)": "checkmate (file's order)"}))
    F.render("c", rows, tmp_path)
    (_, caption), = drawn
    assert ("missing points: no schedule within the budget (or time limit), or the solver not run or not "
            "applicable there") in caption
    assert "not run (max_length 60): checkmate (file's order) on big (size 30)" not in caption  # 30 <= 60
    assert "not run (no rows): checkmate (file's order) on big (size 30)" in caption


# ---------------------------------------------------------------------------- 3. unclipped enlarged markers
def test_a_marked_line_at_the_edge_is_not_clipped() -> None:
    fig, ax = plt.subplots()
    try:
        (under,) = ax.plot([0, 100], [0, 5], marker="x")
        (over,) = ax.plot([0, 100], [0, 5], marker="o")
        assert [text for text, _ in mark_coinciding([("under", under), ("over", over)])] == ["under"]
        assert under.get_clip_on() is False and over.get_clip_on() is True
        fig2, ax2 = plt.subplots()
        (cut,) = ax2.plot([0, 100], [0, 5], marker="x")
        (top,) = ax2.plot([0, 100], [0, 5], marker="o")
        ax2.set_xlim(0, 50)  # a point outside the view: the line stays clipped
        mark_coinciding([("cut", cut), ("top", top)])
        assert cut.get_clip_on() is True
        plt.close(fig2)
    finally:
        plt.close(fig)

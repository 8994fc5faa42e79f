"""`SweepResult.plot` fixes of hunt 28.

1. Each series keeps one colour and marker in every panel (a solver absent from one panel no longer shifts the
   others' colours), the styles are distinct for many series (11 solvers: no two identical lines), and one
   figure legend names every series drawn.
2. A facade sweep names an exact solver with the model its rows' scope says it is optimal in
   ("cpsat (phase model)"), as the sweep configs label them; a sweep file's own label is kept.
3. Only budgets where the solver found a schedule are drawn, whatever `y` is (a solve time of an infeasible run
   included), and a `y` with nothing to draw is an `InputError`, not an empty figure.
"""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from matplotlib.colors import to_hex  # noqa: E402

import memsched  # noqa: E402
from memsched.results import SweepResult  # noqa: E402

TINY = memsched.data_path("examples", "tiny.json")
PHASE = "phase model: between consecutive backward ops at most one forward per stage; exact sizes; CP-SAT"


def _row(instance: str, solver: str, fraction: float, objective: float | None, **extra: object) -> dict:
    return {"instance": instance, "solver": solver, "budget": int(100 * fraction), "budget_fraction": fraction,
            "status": "optimal" if objective is not None else "infeasible", "objective": objective,
            "overhead": None if objective is None else objective / 10 - 1, **extra}


def _styles(ax: object) -> dict[str, tuple[str, str]]:
    return {line.get_label(): (to_hex(line.get_color()), line.get_marker()) for line in ax.get_lines()}


# ---------------------------------------------------------------------------- 1. one style per series
def test_a_series_keeps_its_style_in_every_panel_and_one_legend_names_every_series():
    rows = [_row(inst, s, f, 10.0 + k + f) for inst in ("a", "b") for k, s in enumerate(("rotor", "cpsat", "sqrt"))
            for f in (0.6, 1.0) if not (inst == "b" and s == "cpsat")]  # cpsat: no row in panel b
    fig = SweepResult(rows).plot()
    first, second = (ax for ax in fig.axes if ax.get_visible())
    assert set(_styles(first)) == {"rotor", "cpsat", "sqrt"} and set(_styles(second)) == {"rotor", "sqrt"}
    for label, style in _styles(second).items():
        assert _styles(first)[label] == style, label
    assert len(set(_styles(first).values())) == 3
    assert first.get_legend() is None and second.get_legend() is None
    assert len(fig.legends) == 1
    legend = fig.legends[0]
    named = {t.get_text(): (to_hex(h.get_color()), h.get_marker()) for h, t in zip(legend.legend_handles,
                                                                                      legend.get_texts())}
    assert named == _styles(first)


@pytest.mark.parametrize("count", [11, 20])
def test_many_series_get_distinct_colour_and_marker_pairs(count: int):
    rows = [_row("x", f"s{k}", f, 10.0 + k + f) for k in range(count) for f in (0.5, 1.0)]
    fig = SweepResult(rows).plot()
    styles = _styles(fig.axes[0])
    assert len(styles) == count and len(set(styles.values())) == count
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [f"s{k}" for k in range(count)]


# ---------------------------------------------------------------------------- 2. exact solvers name their model
def test_model_labels_name_the_model_of_the_optimal_rows_scope():
    import pandas as pd
    from memsched.experiments.plotting.labels import model_labels

    rows = pd.DataFrame([{"solver": "cpsat", "status": "optimal", "scope": PHASE},
                         {"solver": "cpsat", "status": "optimal",
                          "scope": "join phase model (forward phase, loss, ...), exact sizes; CP-SAT"},
                         {"solver": "store-all", "status": "optimal",
                          "scope": "store-all fits the budget: optimal among all schedules"},
                         {"solver": "rotor", "status": "feasible", "scope": "persistent schedules, exact sizes"}])
    assert model_labels(rows) == {"cpsat": "cpsat", "store-all": "store-all", "rotor": "rotor"}  # two models
    assert model_labels(rows.iloc[[0]]) == {"cpsat": "cpsat (phase model)"}
    assert model_labels(rows.iloc[[1]]) == {"cpsat": "cpsat (join phase model)"}
    assert model_labels(rows.iloc[[3]].assign(status="optimal")) == {"rotor": "rotor (persistent)"}


def test_a_facade_sweep_names_an_exact_solver_with_its_model():
    sweep = memsched.sweep(memsched.load(TINY), budgets=["80%", "100%"], solvers=["rotor", "cpsat"], time_limit=20)
    assert {row["solver"] for row in sweep.rows} == {"rotor", "cpsat"}
    fig = sweep.plot()
    assert set(_styles(fig.axes[0])) == {"rotor (persistent)", "cpsat (phase model)"}
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"rotor (persistent)", "cpsat (phase model)"}


def test_a_label_naming_its_model_is_kept_and_a_scope_without_model_changes_nothing():
    # a label's own parenthetical that does not name the model gets it inside (hunt 39: "rotor (no transfer;
    # persistent)"); one that names it is kept
    rows = [_row("x", "cpsat", f, 11.0 + f, solver_label="CP-SAT (12 stages)", scope=PHASE) for f in (0.6, 1.0)]
    rows += [_row("x", "cpsat", f, 11.5 + f, solver_label="cpsat (phase model)", scope=PHASE) for f in (0.6, 1.0)]
    rows += [_row("x", "milp", f, 12.0 + f, solver_label="milp", scope=PHASE) for f in (0.6, 1.0)]
    rows += [_row("x", "sqrt", f, 13.0 + f, solver_label="sqrt", scope="no optimality claim") for f in (0.6, 1.0)]
    labels = set(_styles(SweepResult(rows).plot().axes[0]))
    assert labels == {"CP-SAT (12 stages; phase model)", "cpsat (phase model)", "milp (phase model)", "sqrt"}


def test_budgets_without_a_schedule_are_left_out_whatever_y_is():
    sweep = memsched.sweep(memsched.load(TINY), budgets=["60%", "80%", "100%"], solvers=["store-all", "rotor"])
    found = {(r["solver"], r["budget"]) for r in sweep.rows if r["objective"] is not None}
    store_all = [r for r in sweep.rows if r["solver"] == "store-all"]
    assert any(r["objective"] is None and r["solve_time_s"] is not None for r in store_all)  # a timed infeasible run
    for y in ("solve_time_s", "objective", "peak_memory"):
        lines = {line.get_label().split(" (")[0]: line for line in sweep.plot(y=y).axes[0].get_lines()}
        for solver, line in lines.items():
            expected = sorted(100 * b / store_all[0]["reference_peak"] for s, b in found if s == solver)
            assert sorted(line.get_xdata()) == pytest.approx(expected), (y, solver)
        assert len(lines["store-all"].get_xdata()) == 1  # its 100% budget only


def test_a_y_with_nothing_to_draw_is_an_input_error():
    rows = [_row("x", "rotor", f, 10.0 + f, lower_bound=None, min_budget=None, scope="persistent schedules")
            for f in (0.6, 1.0)]
    rows.append(_row("x", "rotor", 0.3, None, lower_bound=None, min_budget=50, scope="persistent schedules"))
    sweep = SweepResult(rows)
    for y in ("lower_bound", "min_budget", "scope"):
        with pytest.raises(memsched.InputError, match="nothing to draw") as err:
            sweep.plot(y=y)
        assert err.value.field == "y"
    assert sweep.plot(y="objective") is not None

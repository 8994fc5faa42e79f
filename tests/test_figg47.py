"""Figure (g) names its solvers and the rows it cannot draw; an executed row holds the divisors of its ratios.

- every solver label of figure (g) has its own colour and marker, named in the legend (with its model), and
  two solvers at one instance and budget are drawn apart (one hid the other: points were styled by budget and
  problem only);
- a row without a measurement (an execution that failed: status ``error``) is named in the note with why,
  not dropped silently;
- `models.run.execute_schedule`'s ``tracker_predicted_peak`` / ``independent_predicted_peak`` are the
  divisors of ``memory_ratio`` / ``independent_ratio`` (the step's `comparisons`; offloading on CPU: the
  sequential replay's), ``predicted_peak`` the solver's replay: the table reproduces its ratios.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
matplotlib = pytest.importorskip("matplotlib")

from matplotlib.colors import to_hex  # noqa: E402

ROTOR_SCOPE = "persistent schedules, 500-slot discretisation"
CPSAT_SCOPE = "phase model: each stage at most once per phase"


def _rows() -> pd.DataFrame:
    """Two solvers at one instance and budget (the same ratios: drawn at one point before), a second budget,
    and a cell whose execution failed (status error, no measurement)."""
    base: dict[str, Any] = {"problem": "chain", "status": "optimal", "execute": True, "peak_memory": 1000.0,
                            "measured_peak": 950.0, "memory_ratio": 0.95, "independent_ratio": 1.0,
                            "time_ratio": 1.1, "time_ratio_min": 1.0, "time_ratio_max": 1.2, "device": "cpu",
                            "message": None}
    return pd.DataFrame([
        {**base, "instance": "c1", "solver": "rotor", "solver_label": "rotor", "budget_spec": "80%",
         "scope": ROTOR_SCOPE},
        {**base, "instance": "c1", "solver": "cpsat", "solver_label": "cpsat", "budget_spec": "80%",
         "scope": CPSAT_SCOPE},
        {**base, "instance": "c1", "solver": "rotor", "solver_label": "rotor", "budget_spec": "100%",
         "scope": ROTOR_SCOPE},
        {**base, "instance": "flaky", "solver": "rotor", "solver_label": "rotor", "budget_spec": "90%",
         "scope": None, "status": "error", "measured_peak": None, "memory_ratio": None, "peak_memory": None,
         "independent_ratio": None, "time_ratio": None, "time_ratio_min": None, "time_ratio_max": None,
         "message": "execution failed: RuntimeError: boom"},
    ])


def _drawn(monkeypatch, tmp_path, rows: pd.DataFrame) -> tuple[Any, str]:
    """Draw figure (g) of `rows`; (the figure, its note) as `_finish` was given them."""
    from memsched.experiments import figure_g
    from memsched.experiments import figures as F

    got: list[tuple[Any, str]] = []
    monkeypatch.setattr(F, "_finish", lambda fig, rows, out_dir, stem, note="": got.append((fig, note)) or [])
    figure_g.measured_ratios(rows, tmp_path, "g", "(g)")
    (drawn,) = got
    return drawn


def test_figure_g_gives_each_solver_its_style_and_name_and_draws_none_over_another(monkeypatch, tmp_path):
    fig, _ = _drawn(monkeypatch, tmp_path, _rows())
    (legend,) = fig.legends
    entries = {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert set(entries) == {"rotor (persistent)", "cpsat (phase model)"}, list(entries)
    rotor, cpsat = entries["rotor (persistent)"], entries["cpsat (phase model)"]
    assert (to_hex(rotor.get_color()), rotor.get_marker()) != (to_hex(cpsat.get_color()), cpsat.get_marker())
    for ax in fig.axes[:3]:
        points = [(tuple(c.get_offsets()[0]), to_hex(c.get_facecolor()[0])) for c in ax.collections
                  if len(c.get_offsets())]
        assert len(points) == 3, points  # the failed row has no point
        assert len({xy for xy, _ in points}) == 3, points  # rotor and cpsat at 80% drawn apart
        assert {colour for _, colour in points} == {to_hex(rotor.get_color()), to_hex(cpsat.get_color())}


def test_figure_g_note_names_the_rows_it_does_not_draw(monkeypatch, tmp_path):
    fig, note = _drawn(monkeypatch, tmp_path, _rows())
    assert "not drawn, 1 of 4 rows: flaky (rotor, 90%): execution failed: RuntimeError: boom" in note, note
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert not any("flaky" in t for t in ticks), ticks
    _, every = _drawn(monkeypatch, tmp_path, _rows().iloc[:3])
    assert "not drawn" not in every


def _offload_step(**kw: Any) -> Any:
    from memsched.models.offload.executor import OffloadStepResult

    base = dict(loss=0.0, grads={}, input_grad=None, peak_memory=900, time_ms=3.0, device="cpu",
                memory_method="LiveTensorTracker", predicted_peak=1000, predicted_makespan=2.0,
                independent_peak=1100, tracker_predicted_peak=950, sequential_peak=1200, sequential_makespan=4.0,
                tracker_sequential_peak=1150)
    return OffloadStepResult(**{**base, **kw})


@pytest.mark.parametrize("step_kw, tracker, independent", [
    ({}, 1150, 1200),                                      # offloading on CPU: the sequential replay's
    ({"device": "cuda:0", "memory_method": "torch.cuda.max_memory_allocated"}, 950, 1000),  # two-stream
    ({"sequential_peak": None, "tracker_predicted_peak": None}, 1000, 1000),  # no separate tracker overheads
])
def test_execute_schedule_row_holds_the_divisors_of_its_ratios(step_kw, tracker, independent):
    from memsched.models.run import execute_schedule

    step = _offload_step(**step_kw)
    target = SimpleNamespace(step=lambda schedule, **kw: step, time_unit="ms")
    _, row = execute_schedule(target, object(), check=False)  # type: ignore[arg-type]
    assert row["predicted_peak"] == 1000  # the solver's schedule replayed, unchanged
    assert (row["tracker_predicted_peak"], row["independent_predicted_peak"]) == (tracker, independent)
    assert row["measured_peak"] / row["tracker_predicted_peak"] == pytest.approx(row["memory_ratio"])
    assert row["independent_peak"] / row["independent_predicted_peak"] == pytest.approx(row["independent_ratio"])

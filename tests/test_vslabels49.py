"""Issue 49 (vslabels): the duels figure's empty panel and `plotting.labels` on an index with duplicates.

1. `vs_torch_duel.duel_figure`: a panel none of whose duels is drawn (no plan, or a failed gradient check)
   said nothing and made matplotlib warn "No artists with labels found to put in legend"; it now says
   "no duel counted" in the panel, without a warning.
2. `plotting.labels.model_labels` (and `row_labels`) raised on rows whose index has duplicates (two tables
   concatenated without ``ignore_index``); they now read the rows by position, as with a fresh RangeIndex.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

NO_DUEL = "no duel counted"
PHASE = "phase model (forward phase, loss, backward phase), exact sizes; CP-SAT"
PERSISTENT = "persistent schedules, exact sizes"


def _duel(size: str, ratio: str, **extra: str) -> dict[str, str]:
    """One row of the duels CSV (strings, as `vs_torch_report.read_rows` gives them) of gpt2 at `size`."""
    return {"model": "gpt2", "size": size, "tool": "checkpoint-per-block", "setting": "4 blocks",
            "granularity": "block", "their_peak": str(3 * 2**20), "memsched_peak": str(2**20), "peak_ok": "True",
            "ratio": ratio, "ratio_ci": "0.01" if ratio else "", "ratio_of_least": ratio, **extra}


def _drawn(duels: list[dict], monkeypatch: pytest.MonkeyPatch) -> object:
    """The figure `duel_figure` draws of `duels` (not written), drawn with every warning an error."""
    pytest.importorskip("matplotlib")
    from memsched.experiments import vs_torch_report
    from memsched.experiments.vs_torch_duel import duel_figure

    figs: list = []
    monkeypatch.setattr(vs_torch_report, "save_png", lambda fig, path: figs.append(fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        duel_figure(duels, Path("unused.png"))
    (fig,) = figs
    return fig


def _texts(ax: object) -> list[str]:
    return [t.get_text() for t in ax.texts]  # type: ignore[attr-defined]


@pytest.mark.parametrize("empty", [
    _duel("small", ""),                                    # no plan: no ratio
    _duel("small", "0.9", grad_ok="False"),                # memsched's plan failed its check: kept without times
    _duel("small", "0.9", their_grad_ok="False"),          # the point's tool failed its check: left out
])
def test_a_panel_without_a_counted_duel_says_so_without_a_legend_warning(empty, monkeypatch):
    import matplotlib.pyplot as plt

    fig = _drawn([_duel("tiny", "1.01"), empty], monkeypatch)
    try:
        full, bare = fig.axes  # type: ignore[attr-defined]
        assert bare.get_title() == "gpt2 (small)" and bare.get_legend() is None and not bare.containers
        assert _texts(bare) == [NO_DUEL]
        assert full.get_legend() is not None and NO_DUEL not in _texts(full)
        assert [t.get_text() for t in full.get_legend().get_texts()] == ["checkpoint-per-block (block)", "2% allowance"]
    finally:
        plt.close(fig)  # type: ignore[arg-type]


def test_a_figure_of_no_duel_at_all_says_so(monkeypatch):
    import matplotlib.pyplot as plt

    fig = _drawn([], monkeypatch)
    try:
        (ax,) = fig.axes  # type: ignore[attr-defined]
        assert _texts(ax) == [NO_DUEL] and ax.get_legend() is None
    finally:
        plt.close(fig)  # type: ignore[arg-type]


def _table(label: str | None) -> pd.DataFrame:
    """A sweep table of cpsat (optimal in the phase model) and rotor (optimal, then feasible: persistent)."""
    return pd.DataFrame([{"solver": "cpsat", "solver_label": label, "status": "optimal", "scope": PHASE},
                         {"solver": "rotor", "solver_label": None, "status": "optimal", "scope": PERSISTENT},
                         {"solver": "rotor", "solver_label": None, "status": "feasible", "scope": PERSISTENT}])


def test_model_labels_of_rows_whose_index_has_duplicates_are_those_of_a_fresh_index():
    from memsched.experiments.plotting.labels import model_labels, row_labels

    rows = pd.concat([_table(None), _table("cpsat (no transfer)")])  # index 0, 1, 2, 0, 1, 2
    assert rows.index.has_duplicates
    fresh = rows.reset_index(drop=True)
    expected = {"cpsat": "cpsat (phase model)", "rotor": "rotor (persistent)",
                "cpsat (no transfer)": "cpsat (no transfer; phase model)"}
    assert model_labels(fresh) == expected
    assert model_labels(rows) == expected
    texts = row_labels(rows)
    assert list(texts.index) == list(rows.index)  # on the rows' own index
    assert list(texts) == list(row_labels(fresh)) == ["cpsat (phase model)", "rotor (persistent)",
                                                       "rotor (persistent)", "cpsat (no transfer; phase model)",
                                                       "rotor (persistent)", "rotor (persistent)"]


def test_a_duplicate_index_that_mixes_two_solvers_is_read_by_position():
    from memsched.experiments.plotting.labels import model_labels

    # the optimal cpsat row and the heuristic rotor row share label 7: by label, each would take the other's scope
    rows = pd.DataFrame([{"solver": "cpsat", "status": "optimal", "scope": PHASE},
                         {"solver": "rotor", "status": "feasible", "scope": "no claim"}], index=[7, 7])
    assert model_labels(rows) == {"cpsat": "cpsat (phase model)", "rotor": "rotor"}


def test_a_unique_index_in_any_order_is_labelled_as_a_fresh_one():
    from memsched.experiments.plotting.labels import model_labels, row_labels

    fresh = _table("cpsat (no transfer)")
    shuffled = fresh.set_axis([30, 10, 20])
    assert model_labels(shuffled) == model_labels(fresh) == {"cpsat (no transfer)": "cpsat (no transfer; phase model)",
                                                             "rotor": "rotor (persistent)"}
    assert row_labels(shuffled).to_dict() == dict(zip([30, 10, 20], row_labels(fresh)))

"""Notebook 04's panels offer the exact MILP solvers of each problem, and its legends' models:

1. Each panel's solver checkboxes and "timeline of" choices hold the exact solvers of its problem, ``milp``
   included (a join's, an offloading chain's, a contiguous pipeline's; they offered ``cpsat`` alone, and the
   offloading and pipeline dropdowns named "cpsat" by hand, not `SOLVERS`' exact list).
2. The rematerialization panel's "timeline of" choices follow the loaded problem (they were every chain,
   join and graph solver at once: a graph's panel offered ``milp``, which it never runs); a join loaded offers
   ``milp``, solves it and draws its schedule (it showed "no schedule to draw (milp)").
3. A join's exact answer (cpsat, milp) where store-all fits ("dp's schedule; optimal among all schedules ...")
   names the model "all schedules" (`plotting.labels.SCOPE_MODELS`; its legend was the bare label), and a
   series whose other rows are optimal in the join phase model keeps that model.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("IPython")
import matplotlib  # noqa: E402
import pandas as pd  # noqa: E402
from conftest import explorer_chain_file, explorer_load, run_explorer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from memsched.experiments.plotting.labels import model_labels, scope_model  # noqa: E402

import memsched  # noqa: E402

matplotlib.use("Agg")

#: a join's cpsat / milp answer's scope where store-all fits (as `memsched.solve` words it)
JOIN_ALL = "dp's schedule; optimal among all schedules: the makespan is the least possible (every operation once)"
JOIN_PHASE = "join phase model (forward phase, loss, branches back-propagated one after another)"


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The namespace of the explorer's cells, run on the tiny chain."""
    folder = tmp_path_factory.mktemp("explorermilp48")
    return run_explorer(folder, explorer_chain_file(folder, "tiny"))


def pick(explorer: dict, panel: Any, names: set[str], show: str) -> None:
    """Tick exactly `names` among `panel`'s checkboxes and pick `show` as its "timeline of", then redraw once."""
    state = explorer["state"]
    state["loading"] = True  # no redraw per control
    try:
        for name, check in panel.checks.items():
            check.value = name in names
        panel.controls["show"].value = show
    finally:
        state["loading"] = False
    panel.refresh()


def html_shown(panel: Any) -> str:
    return "\n".join(item.data for item in panel.drawn if type(item).__name__ == "HTML")


def offered(panel: Any) -> tuple[list[str], list[str]]:
    """(the panel's solver checkboxes, its "timeline of" choices less "best")."""
    return list(panel.checks), [s for s in panel.controls["show"].options if s != "best"]


@pytest.mark.parametrize(("panel", "problem"), [("remat", "chain"), ("offload", "offload"),
                                                ("pipeline", "pipeline")])
def test_each_panel_of_a_chain_offers_its_exact_solvers_milp_included(explorer: dict, panel: str, problem: str):
    explorer_load(explorer, explorer_chain_file(explorer["folder"], "tiny"))
    fast, exact = explorer["SOLVERS"][problem]
    assert exact[-2:] == ["cpsat", "milp"], exact
    checks, shown = offered(explorer[panel])
    assert checks == [*fast, *exact] and shown == [*fast, *exact], (checks, shown)
    assert explorer[panel].checks["milp"].description == "milp (exact)"
    assert "dag-milp" not in checks  # the pipeline panel cuts contiguous stages


@pytest.mark.parametrize(("panel", "names"), [("offload", {"remat-only", "milp"}),
                                              ("pipeline", {"madpipe", "milp"})])
def test_the_offload_and_pipeline_panels_draw_milp_s_timeline(explorer: dict, panel: str, names: set[str]):
    explorer_load(explorer, explorer_chain_file(explorer["folder"], "tiny"))
    shown = explorer[panel]
    budget = explorer["offload_budget" if panel == "offload" else "memory"]
    explorer["state"]["loading"] = True
    budget.value = budget.max  # 1.2 (offload) or 3 (pipeline) times the reference peak: milp finds a schedule
    pick(explorer, shown, names, "milp")
    assert list(shown.drawn[1]["solver"]) == sorted(names, key=list(shown.checks).index)
    assert isinstance(shown.drawn[2], Figure), html_shown(shown)


def test_a_join_offers_milp_and_draws_its_timeline(explorer: dict):
    explorer_load(explorer, memsched.data_path("join", "tiny.json"))
    state, remat = explorer["state"], explorer["remat"]
    assert state["problem"] == "join"
    fast, exact = explorer["SOLVERS"]["join"]
    assert "milp" in exact and offered(remat) == ([*fast, *exact], [*fast, *exact])
    explorer["remat_budget"].value = explorer["remat_budget"].max  # 1.2 times the reference peak: store-all fits
    pick(explorer, remat, {"dp", "milp"}, "milp")
    assert state["remat"]["milp"].found, state["remat"]["milp"].status
    assert "no schedule to draw" not in html_shown(remat), html_shown(remat)
    assert isinstance(remat.drawn[2], Figure)
    frame = remat.drawn[1].set_index("solver")
    assert state["remat"]["milp"].scope.startswith("dp's schedule; optimal among all schedules")
    assert frame.loc["milp", "scope"] == "all schedules", frame.loc["milp", "scope"]


def test_a_graph_offers_only_its_own_timelines(explorer: dict):
    explorer_load(explorer, memsched.data_path("join", "tiny.json"))
    remat = explorer["remat"]
    pick(explorer, remat, {"dp"}, "milp")
    explorer_load(explorer, memsched.data_path("graphs", "linear10.json"))
    fast, exact = explorer["SOLVERS"]["graph"]
    assert offered(remat) == ([*fast, *exact], [*fast, *exact])
    assert remat.controls["show"].value == "best"  # milp, picked for the join, is no graph solver


def test_an_answer_optimal_among_all_schedules_names_that_model():
    assert scope_model(JOIN_ALL) == "all schedules"
    rows = pd.DataFrame({"solver": ["cpsat", "milp", "milp"], "status": ["optimal"] * 3,
                         "scope": [JOIN_ALL, JOIN_ALL, JOIN_PHASE]})
    assert model_labels(rows) == {"cpsat": "cpsat (all schedules)", "milp": "milp (join phase model)"}
    exact = pd.DataFrame({"solver": ["exact"], "status": ["optimal"], "scope": ["all schedules of the join simulator"]})
    both = pd.concat([rows, exact], ignore_index=True)
    assert model_labels(both) == {**model_labels(rows), "exact": "exact (all schedules)"}

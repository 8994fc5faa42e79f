"""The committed paper-size instances (solvers/data/chains, solvers/data/graphs/*.v100.json): they
load, state their cost model, and their sizes are the networks' (checked by hand at a few layers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from memsched.solvers import chain as chains
from memsched.solvers import graph as graphs
from memsched.solvers.chain.dp import rotor_min_budget

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
CHAINS = sorted((DATA / "chains").glob("*.json"))
GRAPHS = sorted((DATA / "graphs").glob("*.v100.json"))


def test_there_are_paper_instances():
    assert len(CHAINS) >= 5 and len(GRAPHS) >= 2


@pytest.mark.parametrize("path", CHAINS, ids=lambda p: p.stem)
def test_chains_load_and_state_their_cost_model(path):
    c = chains.load(str(path))
    assert c.meta["cost"].startswith("roofline:") and c.meta["units"]["time"] == "ms"
    assert c.meta["shapes"].startswith("fake tensors")
    assert 0 < rotor_min_budget(c) < chains.reference_peak(c)


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_graphs_load_and_state_their_cost_model(path):
    g = graphs.load(str(path))
    assert g.meta["cost"].startswith("roofline:") and g.n > 10 and all(g.cost_ram >= 0)


def test_resnet152_sizes_are_the_networks():
    c = chains.load(str(DATA / "chains" / "resnet152-b32-224.v100.json"))
    f32 = 4
    assert c.x[0] == 32 * 3 * 224 * 224 * f32  # the input batch
    assert c.x[1] == 32 * 64 * 56 * 56 * f32  # stem: 7x7/2 conv then 3x3/2 max-pool
    assert c.x[c.length] == 32 * 1000 * f32  # logits
    assert c.meta["parameter_bytes"] == 60_192_808 * f32


def test_paper_figure_draws_overhead_against_gigabytes(tmp_path):
    from memsched.experiments.paper_figures import draw

    rows = pd.DataFrame([
        {"instance": "a", "solver_label": s, "status": "optimal", "budget": b, "overhead": o, "reference_peak": 3e9}
        for s, pts in (("rotor", ((1e9, 0.3), (2e9, 0.1), (3e9, 0.0))), ("store-all", ((3e9, 0.0),)))
        for b, o in pts])
    paths = draw(rows, {"a": "roofline:v100 (NVIDIA V100)"}, tmp_path, stem="t")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)

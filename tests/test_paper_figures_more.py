"""The paper-size offload and pipeline sweeps, the pipeline panels, weights per stage and the
max-batch figure (issue #15 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from memsched.experiments.sweep.config import load_config
from memsched.solvers.pipeline.instance import load as load_pipeline

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "experiments" / "configs"


@pytest.mark.parametrize("name", ["fig_paper_offload", "fig_paper_pipeline"])
def test_paper_sweeps_parse_and_their_instances_exist(name):
    config = load_config(CONFIGS / f"{name}.toml")
    assert config.instances and config.solvers
    for spec in config.instances:
        assert spec.kind == "file"
        path = (CONFIGS / spec.params["file"]).resolve()
        assert path.exists(), path
        meta = json.loads(path.read_text())["meta"]
        assert meta["cost"] == "roofline:v100"  # the figure's panels state it
        budgets = [int(b) for b in spec.budgets or ()]
        assert budgets == sorted(budgets) and len(budgets) >= 6


@pytest.mark.parametrize("path", sorted((ROOT / "results" / "fig_paper_pipeline").glob("*.v100.json")))
def test_pipeline_instances_carry_the_networks_weights(path):
    data = json.loads(path.read_text())
    sizes = data["meta"]["param_sizes"]
    assert len(sizes) == len(data["stages"]) and sum(sizes) == data["meta"]["parameter_bytes"]
    inst = load_pipeline(str(path))
    assert int(sum(inst.params)) == data["meta"]["parameter_bytes"]


def test_param_sizes_of_a_small_zoo_network_sum_to_its_weights():
    import torch
    from memsched.experiments.paper_instances import param_sizes
    from memsched.models.zoo import build_model

    meta = {"model": "resnet18", "batch": 1, "image_size": 32, "width": 8}
    sizes = param_sizes(meta)
    model = build_model("resnet18", batch=1, image_size=32, width=8)
    assert len(sizes) == len(model.blocks)
    assert sum(sizes) == sum(p.numel() * p.element_size() for p in torch.nn.ModuleList(model.blocks).parameters())
    assert sizes[0] > 0  # the stem holds a convolution


def test_pipeline_figure_has_a_panel_per_instance_and_device_count(tmp_path):
    from memsched.experiments.paper_figures import draw_pipeline

    rows = pd.DataFrame([
        {"instance": inst, "solver_label": f"{s} P={p}", "status": "optimal", "budget": b * 1e9,
         "objective": 10.0 / p + 1 / b, "problem": "pipeline"}
        for inst in ("a", "b") for s in ("madpipe", "pipedream") for p in (2, 4) for b in (1.0, 2.0)])
    paths = draw_pipeline(rows, {"a": "roofline:v100", "b": "roofline:v100"}, tmp_path, stem="t")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)


def _answer(model: str, solver: str, largest: int | None, overhead: float | None) -> dict:
    return {"model": model, "solver": solver, "largest": largest, "memory": 16e9, "cost": "roofline:v100",
            "state_factor": 2.0, "max_overhead": 1.2,
            "result": None if largest is None else {"size": largest, "overhead": overhead}}


def test_max_batch_figure_reads_answers_and_tabulates(tmp_path, capsys):
    from memsched.experiments.max_batch_figure import main

    res = tmp_path / "mb"
    res.mkdir()
    for model, solver, largest, over in (("vgg19", "store-all", 100, 1.0), ("vgg19", "rotor", 150, 1.1),
                                         ("unet", "store-all", None, None), ("unet", "rotor", 4, 1.19)):
        (res / f"{model}-16GB-{solver}.json").write_text(json.dumps(_answer(model, solver, largest, over)))
    (res / "notes.json").write_text("[1, 2]")  # not an answer: skipped
    assert main(["--results", str(res), "--out", str(tmp_path / "fig"), "--stem", "mb"]) == 0
    out = capsys.readouterr().out
    assert "| vgg19 | 100 | 150 | 1.50x | x1.100 |" in out
    assert "| unet | - | 4 | - | x1.190 |" in out
    assert (tmp_path / "fig" / "mb.png").stat().st_size > 1000


def test_max_batch_figure_without_answers_exits_2(tmp_path, capsys):
    from memsched.experiments.max_batch_figure import main

    assert main(["--results", str(tmp_path)]) == 2
    assert "no max-batch answer" in capsys.readouterr().err

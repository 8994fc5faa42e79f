"""`memsched export-graph` / `run --profile-file` write graphs that load and run again:

- a graph beyond the graph format's limits (a node over 1 PiB, or all together) is refused before it
  is written, one line under the sizing options, as `memsched profile` refuses such a chain (it was
  written, exit 0, and no command could load it);
- a ``FILE.py:FUNCTION`` factory is recorded relative to the written file's folder (it was relative to
  the working folder: `cd sub && memsched run g.json` failed `no such file 'hid.py'`);
- ``--ram tape`` leaves BatchNorm's running statistics (resident buffers) out of the tape, so counted and
  measured exports agree on the node sizes (the counted one was 2 x channels x 4 bytes per BatchNorm above);
- every ``--ram tape`` export records each forward node's output bytes (``meta.outputs``), so a run refuses
  a graph of the same factory at another width (a counted export's smaller width ran unrefused).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")

# the width is the file's, not a factory argument (the run rebuilds the network at the recorded arguments)
FACTORY = """import torch
from torch import nn

W = {width}


def build(batch=2, seq_len=4):
    model = nn.Sequential(nn.Sequential(nn.Linear(16, W), nn.Tanh()), nn.Sequential(nn.Linear(W, W),
                          nn.Dropout(0.5)), nn.Linear(W, 4))
    return model, torch.randn(batch, seq_len, 16)
"""
SIZED = FACTORY.replace("def build(batch=2, seq_len=4):", "def build(batch=2, seq_len=4, width=W):").replace(
    "16, W)", "16, width)").replace("Linear(W, W)", "Linear(width, width)").replace("Linear(W, 4)", "Linear(width, 4)")

RUN = ("--problem", "graph", "--budget", "100%", "--threads", "1", "--time-repeats", "1")


def _factory(path: Path, width: int = 8, text: str = FACTORY) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.format(width=width))


@pytest.mark.parametrize("width, what", [(64, "node 0:Sequential: cost_ram = 4294967296000000 bytes exceeds"),
                                         (16, "the graph's node sizes add up to")])
def test_a_graph_beyond_the_format_is_refused_before_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int, what: str) -> None:
    # 2**24 x 10**6 rows on fake tensors: a node of 4.3e15 bytes (width 64), or nodes of 1.07e15 each (width 16)
    _factory(tmp_path / "big.py", text=SIZED)
    monkeypatch.chdir(tmp_path)
    res = run_cli("export-graph", "big.py:build", "--batch", "16777216", "--seq-len", "1000000", "--width", width,
                  "--granularity", "module", "-o", "g.json")
    assert res.code == 2, (res.out, res.err)
    assert not (tmp_path / "g.json").exists()
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and f"--batch 16777216 --seq-len 1000000 --width {width}: {what}" in lines[0], res.err
    assert "the graph format's limit of 1 PiB (1125899906842624 bytes); lower --batch, --seq-len or --width" \
        in lines[0]


def test_export_graph_records_the_factory_beside_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _factory(tmp_path / "hid.py")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    res = run_cli("export-graph", "hid.py:build", "--cost", "flops", "--ram", "tape", "-o", "sub/g.json")
    assert res.code == 0, res.err
    meta = json.loads((tmp_path / "sub" / "g.json").read_text())["graph"]["meta"]
    assert meta["model"] == "../hid.py:build" and meta["factory"] == "../hid.py:build"
    monkeypatch.chdir(tmp_path / "sub")
    res = run_cli("run", "g.json", *RUN)
    assert res.code == 0 and "grad check: ok" in res.out, res.err


@pytest.mark.parametrize("problem", ["graph", "chain"])
def test_run_profile_file_records_the_factory_beside_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str) -> None:
    _factory(tmp_path / "proj" / "net.py")
    (tmp_path / "proj" / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    res = run_cli("run", "proj/net.py:build", "--problem", problem, "--budget", "100%", "--threads", "1",
                  "--time-repeats", "1", "--repeats", "1", "--profile-file", "proj/out/p.json")
    assert res.code == 0, res.err
    data = json.loads((tmp_path / "proj" / "out" / "p.json").read_text())
    meta = data["graph"]["meta"] if problem == "graph" else data["meta"]
    assert meta["model"] == "../net.py:build", meta
    moved = tmp_path / "elsewhere" / "proj"
    shutil.copytree(tmp_path / "proj", moved)
    monkeypatch.chdir(moved / "out")
    res = run_cli("run", "p.json", "--problem", problem, "--budget", "100%", "--threads", "1", "--time-repeats", "1")
    assert res.code == 0 and "grad check: ok" in res.out, res.err


@pytest.mark.parametrize("granularity", ["module", "op"])
def test_counted_tape_leaves_batchnorm_statistics_out(granularity: str) -> None:
    from memsched.models.graph.export import export_training_graph

    sizes = {"batch": 2, "image_size": 32, "width": 8, "depth": 1}
    counted = export_training_graph("resnet18", cost="flops", ram="tape", granularity=granularity, **sizes)
    measured = export_training_graph("resnet18", cost="measured", ram="tape", granularity=granularity, repeats=1,
                                     warmup=0, **sizes)
    assert counted.names == measured.names
    forward = [v for v in range(counted.n) if not counted.backward[v]]
    assert [int(counted.cost_ram[v]) for v in forward] == [int(measured.cost_ram[v]) for v in forward]
    # both record every forward node's output alone, and the measured one's untaped entries agree with it
    assert counted.meta["outputs"] == measured.meta["outputs"]
    assert set(counted.meta["outputs"]) == {counted.names[v] for v in forward if counted.names[v] != "loss"}
    assert all(measured.meta["outputs"][k] == b for k, b in measured.meta["untaped"].items())


def test_a_counted_tape_graph_of_another_width_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _factory(tmp_path / "net.py", width=16)
    monkeypatch.chdir(tmp_path)
    res = run_cli("export-graph", "net.py:build", "--cost", "flops", "--ram", "tape", "-o", "g.json")
    assert res.code == 0, res.err
    data = json.loads((tmp_path / "g.json").read_text())
    outputs = data["graph"]["meta"]["outputs"]
    assert outputs["1._1"] == 2 * 4 * 16 * 4  # dropout's output alone; its mask is the tape, in cost_ram
    dropout = next(node for node in data["nodes"] if node["name"] == "1._1")
    assert dropout["cost_ram"] > outputs["1._1"]
    _factory(tmp_path / "net.py", width=8)  # the factory's width changed since the export
    res = run_cli("run", "g.json", *RUN)
    assert res.code == 2 and "was exported with an output of 512 bytes but" in res.err, (res.out, res.err)
    assert "outputs 256 bytes there" in res.err
    # an older file without the record is read as before: at its own width it runs
    _factory(tmp_path / "net.py", width=16)
    del data["graph"]["meta"]["outputs"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    res = run_cli("run", "old.json", *RUN)
    assert res.code == 0 and "grad check: ok" in res.out, res.err


def test_a_malformed_outputs_record_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _factory(tmp_path / "net.py")
    monkeypatch.chdir(tmp_path)
    assert run_cli("export-graph", "net.py:build", "--ram", "tape", "-o", "g.json").code == 0
    data = json.loads((tmp_path / "g.json").read_text())
    data["graph"]["meta"]["outputs"]["1._1"] = -3
    (tmp_path / "g.json").write_text(json.dumps(data))
    res = run_cli("run", "g.json", *RUN)
    assert res.code == 2 and "g.json: graph.meta.outputs.1._1: must be an integer number of bytes >= 0" in res.err, \
        res.err

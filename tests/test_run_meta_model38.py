"""``memsched run FILE.json`` whose ``meta.model`` names a factory ``FILE.py:FUNCTION`` (hunt 38).

A chain file records the factory as `memsched profile` was given it, relative to the folder it was
profiled in. Before, ``memsched run ../proj/p.json`` from another folder looked for ``net.py`` in the
working folder only and blamed ``MODEL`` (the chain file, which is no factory): ``net.py: MODEL: no
such file 'net.py'``. Now a relative factory file is looked up in the working folder first (as
before), then in the chain file's folder; not found in either, the error names the chain file and
``meta.model``. A ``--model FILE.py:FUNCTION`` given instead is the option's fault, named so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

FACTORY = """
import torch
from torch import nn


def build(batch: int = 2, width: int = 8, depth: int = 3):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(depth)]), \\
        torch.randn(batch, width)
"""
RUN = ("--budget", "90%", "--device", "cpu", "--time-repeats", "1", "--no-independent", "--json")


def _chain_naming(folder: Path, spec: str) -> Path:
    """examples/tiny.json (no torch needed to read it) saved in `folder` with ``meta.model`` `spec`."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data.setdefault("meta", {})["model"] = spec
    path = folder / "p.json"
    path.write_text(json.dumps(data))
    return path


def test_a_factory_found_nowhere_names_the_file_and_meta_model(cli: Any, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``net.py`` in the working folder nor beside the file: the file's field is at fault, not MODEL."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "elsewhere").mkdir()
    _chain_naming(tmp_path / "proj", "net.py:build")
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = cli("run", "../proj/p.json", *RUN)
    assert res.code == 2, res.err
    line = res.err.strip().splitlines()[-1]
    assert line.startswith("memsched run: error: ../proj/p.json: meta.model: no such file 'net.py'"), line
    assert "MODEL" not in line and "../proj" in line.partition("meta.model")[2]  # says where it looked too


def test_a_missing_model_option_factory_names_the_option(cli: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model nothere.py:build`` is the option's fault (and is not looked up beside the file)."""
    (tmp_path / "proj").mkdir()
    _chain_naming(tmp_path / "proj", "net.py:build")
    (tmp_path / "proj" / "nothere.py").write_text(FACTORY)  # beside the file: not where --model is read from
    monkeypatch.chdir(tmp_path)
    res = cli("run", "proj/p.json", "--model", "nothere.py:build", *RUN)
    assert res.code == 2, res.err
    line = res.err.strip().splitlines()[-1]
    assert "--model: no such file 'nothere.py'" in line and "MODEL" not in line, line


def test_a_factory_spec_as_model_still_names_model(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MODEL itself a factory spec of no file: MODEL is at fault, as before."""
    monkeypatch.chdir(tmp_path)
    res = cli("run", "nothere.py:build", *RUN)
    assert res.code == 2 and "nothere.py: MODEL: no such file 'nothere.py'" in res.err, res.err


@pytest.mark.torch
def test_run_finds_the_factory_beside_the_chain_file(cli: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiled in proj/ as ``net.py:build``, run from proj/sub: net.py is found beside the chain
    file, at the sizes the file records (width 4, not the factory's default 8: the run rebuilds the
    network at the file's sizes only while the spec is the file's own text)."""
    pytest.importorskip("torch")
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "net.py").write_text(FACTORY)
    monkeypatch.chdir(proj)
    res = cli("profile", "net.py:build", "--width", "4", "--repeats", "1", "--device", "cpu", "-o", "p.json")
    assert res.code == 0, res.err
    assert json.loads((proj / "p.json").read_text())["meta"]["model"] == "net.py:build"
    monkeypatch.chdir(proj / "sub")
    res = cli("run", "../p.json", *RUN, "--budget", "100%")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["grad_check"] is True and out["model"] == "net.py:build"


@pytest.mark.torch
def test_the_working_folders_factory_comes_first(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``net.py`` in the working folder is the one run (as before), not the one beside the file; and a
    factory found beside the file that fails names the file and meta.model, and the factory's file."""
    pytest.importorskip("torch")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "net.py").write_text("raise RuntimeError('beside the file')\n")
    (tmp_path / "net.py").write_text("raise RuntimeError('in the working folder')\n")
    _chain_naming(proj, "net.py:build")
    monkeypatch.chdir(tmp_path)
    res = cli("run", "proj/p.json", *RUN)
    assert res.code == 2 and "in the working folder" in res.err and "beside the file" not in res.err, res.err
    (tmp_path / "net.py").unlink()
    res = cli("run", "proj/p.json", *RUN)
    line = res.err.strip().splitlines()[-1]
    assert res.code == 2 and "proj/p.json: meta.model: net.py: importing it failed" in line, line
    assert "beside the file" in line

"""`memsched profile FILE.py:F -o sub/net.json` records the factory relative to the chain file's folder,
so `memsched run sub/net.json` finds it from inside that folder, from elsewhere, and after the folder
moved (it recorded the path from the working folder: `no such file 'proj/net.py'` once run elsewhere)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

import memsched

EXAMPLE = Path(memsched.__file__).resolve().parents[1] / "models" / "examples" / "my_network.py"


def test_profile_records_the_factory_beside_the_chain_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proj").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "proj" / "net.py")
    monkeypatch.chdir(tmp_path)
    res = run_cli("profile", "proj/net.py:build", "--threads", "1", "--cost", "flops", "-o", "proj/net.json")
    assert res.code == 0, res.err
    meta = json.loads((tmp_path / "proj" / "net.json").read_text())["meta"]
    assert meta["model"] == "net.py:build" and meta["factory"] == "net.py:build"
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(tmp_path / "proj", moved)
    monkeypatch.chdir(moved)
    res = run_cli("run", "net.json", "--budget", "100%", "--threads", "1", "--time-repeats", "1")
    assert res.code == 0 and "grad check: ok" in res.out, res.err


def test_other_specs_are_kept(tmp_path: Path) -> None:
    from memsched.models.network import spec_beside

    out = tmp_path / "sub" / "c.json"
    assert spec_beside("resnet18", out) == "resnet18"
    assert spec_beside("memsched.models.examples.my_network:build", out) == "memsched.models.examples.my_network:build"
    assert spec_beside(f"{EXAMPLE}:build", out) == f"{EXAMPLE}:build"  # absolute: as given
    assert spec_beside("missing.py:build", out) == "missing.py:build"  # not found: left to the run's error

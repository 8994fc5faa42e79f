"""A sweep file's ``model`` entry whose sizes the zoo refuses: the error names the file and the
entry's own key as the file spells it (``instances[0].depth: lstm takes no depth``), not
``instances[0].model`` and a command-line flag the user never typed (``--depth``). The zoo refuses
these before building anything, so no network is profiled here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import one_line_refusal, sweep_toml

pytest.importorskip("torch")

#: a tiny LSTM entry; each case adds the key at fault
_LSTM: dict[str, Any] = {"model": "lstm", "batch": 2, "seq_len": 3, "width": 8, "repeats": 1}


def _refusal(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any], text: str) -> str:
    """Run ``memsched sweep`` on a file of the one `entry`: exit 2, one line holding `text`, and
    nothing written (neither the file's ``output`` nor anything beside the sweep file)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    Path("swb.toml").write_text(sweep_toml("swb", budgets=["50%"], instances=[entry], solvers=["revolve"],
                                           output=str(out)))
    line = one_line_refusal(cli("sweep", "swb.toml"), text)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["swb.toml"]
    assert "--" not in line, line  # no command-line flag in a sweep file's error
    return line


def test_depth_on_a_fixed_network_names_the_depth_key(cli, tmp_path, monkeypatch):
    line = _refusal(cli, tmp_path, monkeypatch, {**_LSTM, "depth": 2},
                    "swb.toml: instances[0].depth: lstm takes no depth (its layers are fixed)")
    assert "instances[0].model" not in line


def test_unknown_device_names_the_device_key(cli, tmp_path, monkeypatch):
    line = _refusal(cli, tmp_path, monkeypatch, {**_LSTM, "device": "tpu"},
                    "swb.toml: instances[0].device: unknown device 'tpu' (cpu or cuda)")
    assert "instances[0].model" not in line


def test_underscored_key_keeps_the_files_spelling(cli, tmp_path, monkeypatch):
    """``seq_len`` (the command line's ``--seq-len``) on an image network: the key as written."""
    entry = {"model": "resnet18", "batch": 1, "image_size": 32, "seq_len": 4, "repeats": 1}
    _refusal(cli, tmp_path, monkeypatch, entry,
             "swb.toml: instances[0].seq_len: resnet18 takes no seq_len (an image model)")


def test_unknown_model_names_the_model_key_once(cli, tmp_path, monkeypatch):
    """An error about the network name itself names ``model``, without the command line's ``MODEL``."""
    line = _refusal(cli, tmp_path, monkeypatch, {**_LSTM, "model": "nope"},
                    "swb.toml: instances[0].model: unknown model 'nope'")
    assert "MODEL" not in line

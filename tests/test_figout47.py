"""The figure a script writes beside its output never replaces that output: ``gpu_check --out x.png`` and
``vs_torch_duel --out x.png`` are refused in one line (exit 2) before any work, and ``gpu_check --replot``
on a missing, damaged or foreign JSON is one line naming the file and --out (exit 2), not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _no_work(*args: object, **kwargs: object) -> None:
    raise AssertionError("the work started: the refusal must come before it")


def _one_error_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])


def _check_doc() -> dict:
    row = {"model": "gpt2", "problem": "chain", "solver": "rotor", "budget_fraction": 0.7, "measured_peak": 10,
           "memory_ratio": 1.0, "independent_ratio": 1.01, "time_ratio": 1.1, "memory_method": "tracker"}
    return {"format": "memsched.gpu_check/2", "device": "cpu (x86_64)", "torch": "2", "date": "2026-01-01T00:00",
            "rows": [row]}


@pytest.fixture
def gpu_check(monkeypatch):
    pytest.importorskip("torch")
    from memsched.experiments import gpu_check

    monkeypatch.setattr(gpu_check, "run_check", _no_work)
    monkeypatch.setattr(gpu_check, "evaluate_model", _no_work)
    return gpu_check


def test_gpu_check_refuses_an_out_its_figure_would_replace(gpu_check, tmp_path, capsys):
    out = tmp_path / "t.png"
    code = gpu_check.main(["--device", "cpu", "--tiny", "--models", "gpt2", "--problems", "chain", "--repeats", "1",
                           "--time-repeats", "1", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    _one_error_line(captured.err, "--out", str(out), "figure")
    assert captured.out == ""  # nothing measured
    assert list(tmp_path.iterdir()) == []


def test_gpu_check_replot_keeps_a_json_named_like_its_figure(gpu_check, tmp_path, capsys):
    out = tmp_path / "g.png"
    text = json.dumps(_check_doc())
    out.write_text(text)
    assert gpu_check.main(["--replot", "--out", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, "--out", str(out))
    assert out.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["g.png"]


@pytest.mark.parametrize("content", [None, '{"format": "memsched.gpu_check/2", "rows": [', "[1, 2]", "{}"],
                         ids=["missing", "damaged", "not-an-object", "no-format"])
def test_gpu_check_replot_of_a_bad_json_is_one_line(gpu_check, tmp_path, capsys, content):
    out = tmp_path / "r.json"
    if content is not None:
        out.write_text(content)
    assert gpu_check.main(["--replot", "--out", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, "gpu_check: error:", str(out), "--out")
    assert not (tmp_path / "r.png").exists()


def test_gpu_check_replot_draws_the_figure_beside_the_json(gpu_check, tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text(json.dumps(_check_doc()))
    assert gpu_check.main(["--replot", "--out", str(out)]) == 0
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")
    assert capsys.readouterr().err == ""


def test_vs_torch_duel_refuses_an_out_its_figure_would_replace(tmp_path, capsys, monkeypatch):
    from memsched.experiments import vs_torch_duel

    monkeypatch.setattr(vs_torch_duel, "duel", _no_work)
    monkeypatch.setattr(vs_torch_duel, "duel_figure", _no_work)
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("model,size\n")
    out = tmp_path / "duels.png"
    assert vs_torch_duel.main(["--csv", str(csv_path), "--out", str(out), "--replot"]) == 2
    _one_error_line(capsys.readouterr().err, "vs_torch_duel: error:", str(out), "--out", "figure")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.csv"]
    assert not Path(out).exists()

"""max_batch_figure and max-batch on inputs that mixed or broke silently:

1. max_batch_figure on a folder mixing protocols (memory, cost, max_overhead, state_factor, problem, vary,
   tolerance): one line naming both files and the field, exit 2, nothing printed or drawn (the 32 GB answer
   overwrote the 16 GB one of the same network and solver, under the first answer's 16 GB title); two answers of
   one network, solver and protocol: one line naming both files (the later one won silently). Answers of
   ``--vary image-size`` are drawn as the largest image side.
2. max_batch_figure on an answer (``largest`` and ``solver``) without ``model``: one line naming the file and
   the field, exit 2 (was a KeyError traceback); files that are no answers are still skipped.
3. max-batch on your own function without the argument varied (``image_size`` with ``--vary image-size``,
   ``batch``): refused up front, one line naming the function and the argument, no "raise --limit" hint (it tried
   every size first); a ``**kwargs`` function is accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import one_line, one_line_refusal, run_cli


def _answer(model: str, solver: str, largest: int | None, **protocol: Any) -> dict[str, Any]:
    """A max-batch answer (`memsched max-batch --json`'s shape, its probes left out) at 16 GB, roofline:v100."""
    return {"model": model, "vary": "batch", "memory": 16000000000, "max_overhead": 1.2, "tolerance": 0.05,
            "solver": solver, "cost": "roofline:v100", "state_factor": 2.0, "largest": largest,
            "result": None if largest is None else {"size": largest, "overhead": 1.0}, "probes": [], **protocol}


def _folder(tmp_path: Path, answers: dict[str, dict[str, Any]]) -> Path:
    folder = tmp_path / "answers"
    folder.mkdir()
    for name, data in answers.items():
        (folder / name).write_text(json.dumps(data))
    return folder


def _figure(capsys: pytest.CaptureFixture[str], folder: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    from memsched.experiments.max_batch_figure import main

    code = main(["--results", str(folder), "--out", str(out), "--stem", "mb", *extra])
    got = capsys.readouterr()
    return code, got.out, got.err


# ------------------------------------------------------------------------------ 1. one protocol per figure
@pytest.mark.parametrize("field, value", [
    ("memory", 32000000000), ("cost", "flops"), ("max_overhead", "forward"), ("state_factor", 4.0),
    ("problem", "graph"), ("vary", "image-size"), ("tolerance", 0.01),
])
def test_answers_of_another_protocol_are_refused_naming_both_files(tmp_path, capsys, field, value):
    folder = _folder(tmp_path, {
        "vgg16-16GB-rotor.json": _answer("vgg16", "rotor", 500),
        "vgg16-16GB-store-all.json": _answer("vgg16", "store-all", 192),
        "vgg16-x-store-all.json": _answer("vgg16", "store-all", 400, **{field: value}),
    })
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 2
    line = one_line(err, "vgg16-16GB-rotor.json", "vgg16-x-store-all.json", f"{field}:")
    assert line.startswith("max_batch_figure: error: ")
    assert out == "" and not (tmp_path / "fig").exists()


def test_an_answer_without_problem_or_vary_is_a_chain_batch_answer(tmp_path, capsys):
    old = {k: v for k, v in _answer("vgg16", "store-all", 192).items() if k not in ("problem", "vary")}
    folder = _folder(tmp_path, {"a.json": old, "b.json": _answer("vgg16", "rotor", 500, problem="chain")})
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 0, err
    assert "| vgg16 | 192 | 500 | 2.60x | x1.000 |" in out


def test_a_largest_size_with_a_larger_one_timed_out_is_a_lower_bound(tmp_path, capsys):
    """A larger batch that timed out (or a search that stopped) makes the answer "at least": the
    table writes ">=", as `memsched max-batch` prints "at least"."""
    folder = _folder(tmp_path, {"a.json": _answer("vgg16", "store-all", 192),
                                "b.json": _answer("vgg16", "rotor", 500, timed_out=[520])})
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 0, err
    assert "| vgg16 | 192 | >=500 | 2.60x | x1.000 |" in out


def test_two_answers_of_one_network_and_solver_are_refused(tmp_path, capsys):
    folder = _folder(tmp_path, {"a.json": _answer("vgg16", "store-all", 192),
                                "b.json": _answer("vgg16", "store-all", 200)})
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 2
    one_line(err, str(folder / "a.json"), str(folder / "b.json"), "vgg16", "store-all")
    assert out == ""


def test_image_side_answers_are_drawn_as_image_sides(tmp_path, capsys, monkeypatch):
    import memsched.experiments.max_batch_figure as fig

    labels: list[str] = []
    real = fig.plt.subplots

    def subplots(*args: Any, **kwargs: Any) -> Any:
        made, ax = real(*args, **kwargs)
        monkeypatch.setattr(ax, "set_title", lambda text, **kw: labels.append(text))
        monkeypatch.setattr(ax, "set_ylabel", lambda text, **kw: labels.append(text))
        return made, ax

    monkeypatch.setattr(fig.plt, "subplots", subplots)
    folder = _folder(tmp_path, {"a.json": _answer("vgg16", "store-all", 224, vary="image-size"),
                                "b.json": _answer("vgg16", "rotor", 448, vary="image-size")})
    code, _, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 0, err
    assert any(t.startswith("largest image side within 16 GB") for t in labels), labels
    assert "largest image side (px)" in labels and not any("largest batch" in t for t in labels), labels
    assert (tmp_path / "fig" / "mb.png").stat().st_size > 1000


# ------------------------------------------------------------------------------ 2. an answer without model
def test_an_answer_without_model_is_one_line_naming_the_file(tmp_path, capsys):
    bad = {k: v for k, v in _answer("vgg16", "rotor", 500).items() if k != "model"}
    folder = _folder(tmp_path, {"a.json": _answer("vgg16", "store-all", 192), "b.json": bad,
                                "notes.json": {"largest": 3}})  # no solver: no answer, skipped
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 2
    one_line(err, str(folder / "b.json"), "model")
    assert out == ""


def test_files_that_are_no_answers_are_skipped(tmp_path, capsys):
    folder = _folder(tmp_path, {"a.json": _answer("vgg16", "store-all", 192), "list.json": [1, 2],
                                "notes.json": {"largest": 3}, "other.json": {"model": "x", "solver": "rotor"}})
    (folder / "broken.json").write_text("{not json")
    code, out, err = _figure(capsys, folder, tmp_path / "fig")
    assert code == 0, err
    assert "| vgg16 | 192 | - | - | - |" in out


# ------------------------------------------------------------------------------ 3. a function without the size
NET = '''
import torch
from torch import nn


def noimage(batch=2):
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(batch, 4)


def nobatch(image_size=(8, 8)):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size[0] * image_size[1], 4)), torch.randn(2, 3, *image_size)


def anything(**kwargs):
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(kwargs.get("batch", 2), 4)
'''


@pytest.fixture
def net(tmp_path, monkeypatch):
    (tmp_path / "net.py").write_text(NET)
    monkeypatch.chdir(tmp_path)
    return "net.py"


def test_a_function_without_image_size_is_refused_up_front(net):
    res = run_cli("max-batch", f"{net}:noimage", "--memory", "1MB", "--vary", "image-size", "--limit", "64")
    line = one_line_refusal(res, "--vary image-size: net.py:noimage takes no argument 'image_size'")
    assert "raise --limit" not in line and "runs at none" not in line
    assert res.out == ""


def test_a_function_without_batch_is_refused_up_front(net):
    res = run_cli("max-batch", f"{net}:nobatch", "--memory", "1MB", "--limit", "8")
    line = one_line_refusal(res, "MODEL: net.py:nobatch takes no argument 'batch'")
    assert "runs at none" not in line
    assert res.out == ""


def test_a_function_with_kwargs_takes_either_size(net):
    res = run_cli("max-batch", f"{net}:anything", "--memory", "1MB", "--vary", "image-size", "--limit", "32",
                  "--json")
    assert res.code == 0, res.err
    assert res.json()["largest"] == 32

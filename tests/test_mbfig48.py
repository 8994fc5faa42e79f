"""max_batch_figure (Checkmate's maximum-batch figure) on the answers a hunt found drawn wrong:

1. an interrupted answer (``status`` "interrupted"), or one with sizes ``untried``, is a lower bound: ">= N" in
   the table and over its bar, and the title and table say what ">=" means (was drawn as exact);
2. checkmate's legend names its model when every answer drawn is ``optimal`` ("checkmate (file's order)"), and
   chain milp's likewise ("milp (phase model)") (was the bare solver);
3. chain cpsat is labelled with the chain's phase model, not the graph model "<= 2 computations per node";
4. the title's memory is exact: "2 MB" (was "0 GB"), "16 GiB" for 2**34 bytes (was "17 GB"), "16 GB" for 16e9;
5. bad input is one line, exit 2: a ``largest`` of 10**400 (was an OverflowError traceback, exit 1), a
   --published CSV without a column it needs or a JSON file (were silently ignored);
6. each solver's bars have a hatch of their own, the same in the chain and the graph figure;
7. docs/cli.md quotes the exit-1 line `memsched max-batch resnet18 --memory 400MB --solver sqrt --limit 8` prints.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from conftest import one_line, run_cli  # noqa: E402
from memsched.experiments import max_batch_figure as MB  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "results" / "published_checkmate.csv"


def _answer(model: str, solver: str, largest: int | None, *, problem: str = "chain",
            result_status: str = "feasible", memory: float = 16e9, **extra: Any) -> dict[str, Any]:
    """A max-batch answer (`memsched max-batch --json`'s shape, probes left out), its result's status
    `result_status`."""
    result = None if largest is None else {"size": largest, "fits": True, "status": result_status, "overhead": 1.05}
    return {"model": model, "vary": "batch", "memory": memory, "max_overhead": 1.2, "problem": problem,
            "tolerance": 0.05, "solver": solver, "cost": "flops", "state_factor": 2.0, "status": "complete",
            "largest": largest, "smallest_not_fitting": None, "result": result, "probes": [], "timed_out": [],
            "refused": [], "stopped": None, "untried": None, **extra}


def _folder(tmp_path: Path, answers: list[dict[str, Any]], name: str = "answers") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for a in answers:
        (folder / f"{a['model']}-{a['solver']}.json").write_text(json.dumps(a))
    return folder


def _drawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: list[dict[str, Any]]) -> Any:
    """The figure `draw` makes of `answers` (written under `tmp_path`, kept open for inspection)."""
    figs: list[Any] = []
    save = MB.save_figure
    monkeypatch.setattr(MB, "save_figure", lambda fig, out, stem: figs.append(fig) or save(fig, out, stem))
    by: MB.Answers = {}
    for a in answers:
        by.setdefault(a["model"], {})[a["solver"]] = a
    written = MB.draw(by, tmp_path, stem="mb")
    assert written and all(p.exists() for p in written)
    (fig,) = figs
    return fig


def _legend(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = MB.main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


# ------------------------------------------------------------------------------ 1. lower bounds
@pytest.mark.parametrize("extra", [{"status": "interrupted"}, {"status": "stopped"},
                                   {"untried": {"from": 3, "to": 8}}], ids=["interrupted", "stopped", "untried"])
def test_an_interrupted_or_untried_answer_is_a_lower_bound(tmp_path, capsys, monkeypatch, extra):
    answers = [_answer("resnet18", "rotor", 2, result_status="optimal", **extra),
               _answer("resnet18", "store-all", 1)]
    code, out, err = _main(capsys, "--results", str(_folder(tmp_path, answers)), "--out", str(tmp_path / "fig"))
    assert code == 0, err
    assert "| resnet18 | 1 | >=2 |" in out and MB.LOWER_BOUND_NOTE in out
    fig = _drawn(monkeypatch, tmp_path / "draw", answers)
    assert ">=2\nx1.05" in [t.get_text() for t in fig.axes[0].texts]
    assert MB.LOWER_BOUND_NOTE in fig.axes[0].get_title()
    plt.close(fig)


def test_a_complete_answer_and_an_old_file_stay_exact(tmp_path, monkeypatch):
    old = {k: v for k, v in _answer("vgg16", "rotor", 300).items() if k not in ("status", "untried")}
    answers = [_answer("vgg16", "store-all", 192), old]
    by = {"vgg16": {a["solver"]: a for a in answers}}
    assert "| vgg16 | 192 | 300 |" in MB.table(by) and MB.LOWER_BOUND_NOTE not in MB.table(by)
    assert MB.size_text({**old, "timed_out": [301]}) == ">=300"  # without status: the old rules
    fig = _drawn(monkeypatch, tmp_path, answers)
    assert MB.LOWER_BOUND_NOTE not in fig.axes[0].get_title()
    plt.close(fig)


# ------------------------------------------------------------------------------ 2. checkmate's and milp's model
def test_checkmate_and_chain_milp_name_their_model(tmp_path, monkeypatch):
    graph = [_answer("vgg19", "checkpoint-all", 100, problem="graph"),
             _answer("vgg19", "greedy", 150, problem="graph"),
             _answer("vgg19", "checkmate", 200, problem="graph", result_status="optimal")]
    fig = _drawn(monkeypatch, tmp_path / "g", graph)
    assert _legend(fig) == ["checkpoint-all", "greedy", "checkmate (file's order)"]
    plt.close(fig)
    chain = [_answer("vgg19", "store-all", 100), _answer("vgg19", "milp", 180, result_status="optimal")]
    fig = _drawn(monkeypatch, tmp_path / "c", chain)
    assert _legend(fig) == ["store-all", "milp (phase model)"]
    plt.close(fig)


# ------------------------------------------------------------------------------ 3. cpsat's model by problem
def test_chain_cpsat_is_labelled_with_the_phase_model(tmp_path, monkeypatch):
    fig = _drawn(monkeypatch, tmp_path / "c", [_answer("tiny", "cpsat", 448, result_status="optimal")])
    assert _legend(fig) == ["cpsat (phase model)"]
    plt.close(fig)
    graph = [_answer("tiny", "cpsat", 448, problem="graph", result_status="optimal")]
    fig = _drawn(monkeypatch, tmp_path / "g", graph)
    assert _legend(fig) == ["cpsat (<= 2 computations per node)"]
    plt.close(fig)


# ------------------------------------------------------------------------------ 4. the title's memory
@pytest.mark.parametrize("memory, text", [(2e6, "within 2 MB,"), (2**34, "within 16 GiB,"),
                                          (16e9, "within 16 GB,"), (2000123, "within 1.91 MiB,")])
def test_the_title_states_the_memory_exactly(tmp_path, monkeypatch, memory, text):
    fig = _drawn(monkeypatch, tmp_path, [_answer("vgg16", "rotor", 64, memory=memory)])
    assert fig.axes[0].get_title().startswith(f"largest batch {text}"), fig.axes[0].get_title()
    plt.close(fig)


# ------------------------------------------------------------------------------ 5. bad input: one line, exit 2
def test_a_huge_largest_isone_line(tmp_path, capsys):
    folder = _folder(tmp_path, [_answer("tiny", "greedy", 10**400, problem="graph")])
    code, out, err = _main(capsys, "--results", str(folder), "--out", str(tmp_path / "fig"))
    assert code == 2 and out == ""
    line = one_line(err, "tiny-greedy.json", "largest:")
    assert len(line) < 300 and not (tmp_path / "fig").exists()


@pytest.mark.parametrize("drop", ["network", "figure", "quantity", "strategy", "value", "json"])
def test_published_without_a_needed_column_isone_line(tmp_path, capsys, drop):
    folder = _folder(tmp_path, [_answer("vgg19", "checkpoint-all", 100, problem="graph"),
                                _answer("vgg19", "checkmate", 200, problem="graph")])
    if drop == "json":
        bad = tmp_path / "published.json"
        bad.write_text(json.dumps({"network": "VGG19", "value": 167}))
        drop = "network"
    else:
        rows = list(csv.DictReader(PUBLISHED.open(newline="")))
        bad = tmp_path / "published.csv"
        with bad.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, [c for c in rows[0] if c != drop], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    code, out, err = _main(capsys, "--results", str(folder), "--out", str(tmp_path / "fig"), "--published", str(bad))
    assert code == 2 and out == ""
    one_line(err, str(bad), "--published", f"no column {drop!r}")
    assert not (tmp_path / "fig").exists()


# ------------------------------------------------------------------------------ 6. a hatch per solver
def _hatches(fig: Any) -> dict[str, set[str]]:
    """Legend text -> the hatches of that solver's bars (and its legend handle)."""
    ax = fig.axes[0]
    out: dict[str, set[str]] = {}
    for container in ax.containers:
        out[str(container.get_label())] = {str(bar.get_hatch()) for bar in container}
    for handle, text in zip(ax.get_legend().legend_handles, _legend(fig)):
        out[text].add(str(handle.get_hatch()))
    return out


def test_each_solver_has_its_own_hatch_in_both_figures(tmp_path, monkeypatch):
    chain = [_answer(m, s, n) for m in ("vgg16", "resnet50") for s, n in (("store-all", 64), ("rotor", 90),
                                                                           ("sqrt", 70), ("cpsat", 95))]
    graph = [_answer(m, s, n, problem="graph") for m in ("vgg16", "resnet50")
             for s, n in (("checkpoint-all", 60), ("sqrt", 70), ("greedy", 80), ("dtr", 75), ("checkmate", 99),
                          ("cpsat", 95), ("my-solver", 50))]
    seen: dict[str, str] = {}
    for name, answers in (("chain", chain), ("graph", graph)):
        fig = _drawn(monkeypatch, tmp_path / name, answers)
        hatches = _hatches(fig)
        assert all(len(h) == 1 and "None" not in h and "" not in h for h in hatches.values()), hatches
        one = {solver: h.pop() for solver, h in hatches.items()}
        assert len(set(one.values())) == len(one), one  # distinct within the figure
        for solver, hatch in one.items():
            assert seen.setdefault(solver, hatch) == hatch, solver  # the same in both figures (sqrt, cpsat)
        plt.close(fig)
    assert {"sqrt", "cpsat"} <= set(seen)


# ------------------------------------------------------------------------------ 7. the doc's exit-1 line
@pytest.mark.slow
@pytest.mark.torch
def test_the_doc_quotes_the_overhead_line_max_batch_prints():
    pytest.importorskip("torch")
    res = run_cli("max-batch", "resnet18", "--memory", "400MB", "--solver", "sqrt", "--limit", "8")
    assert res.code == 1, res.err
    (line,) = [ln for ln in res.err.splitlines() if "memsched max-batch: infeasible:" in ln]
    said = line[line.index("sqrt's schedule"):]
    doc = re.sub(r"\s+", " ", (ROOT / "docs" / "cli.md").read_text())
    assert said in doc, said

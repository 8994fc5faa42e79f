"""Figures name solvers with their model, and output folders are probed (fix 48).

1. `memsched plot`'s default labels and `memsched solve --plot`'s title name each solver with the model its
   answer is optimal in, as the sweep figures' legends do (`plotting.labels`): "rotor (persistent)", "cpsat
   (phase model)"; a heuristic's or a feasible answer keeps the bare name, a ``--label`` is kept as given,
   two files of one solver still get distinct labels (the second with "'").
2. An output folder is writable only when a file can be made in it (`os.access` says yes to root everywhere,
   ``/proc`` included): ``solve -o ok.json --plot /proc/x.png`` exits 2 before solving, nothing written;
   the probe leaves no file behind; a figure that fails leaves no ``-o`` either (drawn first)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from memsched.experiments import plotting
from memsched.experiments.commands import solve as solve_cmd
from memsched.experiments.commands._checks import check_output_dir, check_output_file
from memsched.solvers.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ROOT / "examples" / "cnn12.json"


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`memsched solve --json` of cnn12 by rotor, cpsat (both optimal, at 60%) and sqrt (a heuristic, 90%)."""
    folder = tmp_path_factory.mktemp("answers")
    out: dict[str, Path] = {}
    for solver, budget in (("rotor", "60%"), ("cpsat", "60%"), ("sqrt", "90%")):
        res = run_cli("solve", CHAIN, "--budget", budget, "--solver", solver, "--time-limit", "60", "--json")
        assert res.code == 0, res.err
        out[solver] = folder / f"{solver}.json"
        out[solver].write_text(res.out)
    assert json.loads(out["cpsat"].read_text())["status"] == "optimal"
    return out


def _panel_titles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: object) -> list[str]:
    """The memory panels' titles (left) of `memsched plot CHAIN ARGS -o fig.png`, the figure caught unsaved."""
    figures: list[Any] = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path, dpi=150: figures.append(fig))
    res = run_cli("plot", CHAIN, *args, "-o", tmp_path / "fig.png")
    assert res.code == 0, res.err
    return [t for ax in figures[0].axes if (t := ax.get_title(loc="left"))]


def test_plot_labels_name_each_solver_with_its_model(answers, monkeypatch, tmp_path) -> None:
    titles = _panel_titles(monkeypatch, tmp_path, answers["rotor"], answers["cpsat"], answers["sqrt"],
                           answers["rotor"])
    labels = [t.split(": makespan")[0] for t in titles]
    assert labels == ["rotor (persistent)", "cpsat (phase model)", "sqrt", "rotor (persistent)'"], titles


def test_plot_explicit_labels_stay_as_given(answers, monkeypatch, tmp_path) -> None:
    titles = _panel_titles(monkeypatch, tmp_path, answers["rotor"], answers["cpsat"],
                           "--label", "A", "--label", "A")
    assert [t.split(": makespan")[0] for t in titles] == ["A", "A'"], titles


def test_solver_text_follows_the_legends_rule() -> None:
    from memsched.experiments.commands.plot import solver_text

    pofo = {"status": "feasible", "scope": "persistent schedules with offloaded checkpoints at 4 slots"}
    assert solver_text("pofo", pofo) == "pofo (persistent, offloaded checkpoints)"
    assert solver_text("pofo", {**pofo, "skipped": [3]}) == "pofo"  # cut short: no class claim
    assert solver_text("rotor", {"status": "feasible", "scope": "persistent schedules, 500 slots"}) == "rotor"
    assert solver_text("rotor", {"status": "optimal", "scope": "persistent schedules, 500 slots"}) \
        == "rotor (persistent)"
    assert solver_text("sqrt", {"status": "feasible", "scope": "sqrt baseline (no optimality claim)"}) == "sqrt"
    assert solver_text("rotor", {}) == "rotor"  # a plain schedule file


def test_solve_plot_title_names_the_model(monkeypatch, tmp_path) -> None:
    seen: list[str] = []

    def fake(problem, instance, schedule, path, *, budget=None, title=None, dpi=150):
        seen.append(title)
        return Path(path)

    monkeypatch.setattr(plotting, "plot_to_file", fake)
    res = run_cli("solve", CHAIN, "--budget", "60%", "--solver", "rotor", "--plot", tmp_path / "f.png")
    assert res.code == 0, res.err
    assert len(seen) == 1 and seen[0].endswith(" — rotor (persistent)"), seen


# --------------------------------------------------------------------------- 2: output folders probed
def test_plot_into_proc_is_refused_before_solving(monkeypatch, tmp_path) -> None:
    solved: list[str] = []
    monkeypatch.setattr(solve_cmd, "run_solver", lambda *a, **k: solved.append("ran"))
    ok = tmp_path / "ok2.json"
    res = run_cli("solve", CHAIN, "--solver", "rotor", "--budget", "60%", "-o", ok, "--plot", "/proc/x.png")
    assert res.code == 2 and not solved and not ok.exists(), res.err
    assert "--plot" in res.err and "not writable" in res.err and len(res.err.strip().splitlines()) == 1


def test_probe_leaves_nothing_and_refuses_what_cannot_be_made(monkeypatch, tmp_path) -> None:
    check_output_file(str(tmp_path / "a.json"), "--output")
    assert list(tmp_path.iterdir()) == []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(InputError, match="is not writable") as info:
        check_output_file(str(tmp_path / "a.json"), "--output")
    assert "--output" in str(info.value)


def test_failing_figure_leaves_no_schedule_file(monkeypatch, tmp_path) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise InputError("cannot write (disk full)", path=str(tmp_path / "f.png"))

    monkeypatch.setattr(plotting, "plot_to_file", fail)
    out = tmp_path / "s.json"
    res = run_cli("solve", CHAIN, "--budget", "60%", "--solver", "rotor", "-o", out, "--plot", tmp_path / "f.png")
    assert res.code == 2 and not out.exists(), res.err


def test_an_output_folder_where_nothing_can_be_made_is_refused(tmp_path: Path) -> None:
    """`check_output_dir` (folder outputs: `sweep --output`, figures' --out) probes the folder as
    `check_output_file` does: `os.access` says yes to root everywhere, and to anyone for /proc."""
    with pytest.raises(InputError, match="not writable"):
        check_output_dir("/proc/memsched-out", "--out")
    check_output_dir(str(tmp_path / "new" / "out"), "--out")  # made later by the command: fine
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind

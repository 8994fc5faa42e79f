"""`memsched simulate`'s text output on a schedule that breaks a rule other than the budget: the replay ends at that
op, so the makespan and peak it prints are the prefix's and say so ("(up to the violation)"); over the budget only,
the replay is whole and the numbers are not marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memsched.experiments.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "examples" / "tiny.json")
#: F_n(1) frees a_1, which the second F_all(1) needs: "a_1 is not resident" at op #7
BROKEN = [{"op": "CF", "stage": 0}, {"op": "Fn", "stage": 1}, {"op": "Fe", "stage": 2}, {"op": "Fe", "stage": 3},
          {"op": "Loss"}, {"op": "Bwd", "stage": 3}, {"op": "Bwd", "stage": 2}, {"op": "Fe", "stage": 1},
          {"op": "Bwd", "stage": 1}, {"op": "Bwd", "stage": 0}]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(args)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_replay_ended_by_a_broken_rule_is_marked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sched = tmp_path / "broken.json"
    sched.write_text(json.dumps({"format": "memsched.schedule/1", "problem": "chain", "length": 4, "ops": BROKEN}))
    rc, out, err = _run(["simulate", TINY, str(sched)], capsys)
    assert rc == 2 and "a_1 is not resident" in err
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert lines["makespan"].endswith("(up to the violation)")
    assert lines["peak"].endswith("(up to the violation)")


def test_over_the_budget_only_the_numbers_are_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sched = tmp_path / "rotor.json"
    rc, out, _ = _run(["solve", TINY, "--budget", "100%", "--solver", "rotor", "--json"], capsys)
    assert rc == 0
    sched.write_text(out)
    rc, out, err = _run(["simulate", TINY, str(sched), "--budget", "60%"], capsys)
    assert rc == 2 and "over budget" in err
    assert "up to the violation" not in out and "makespan" in out

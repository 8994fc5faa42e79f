"""Hunt 27 (units): sizes that `memsched` reports in the instance's memory unit were labelled bytes.

1. docs/cli.md said the JSON ``peak_memory``, ``budget`` and ``min_budget`` of ``memsched solve``
   (and ``simulate``'s ``peak_memory``, ``budget``, ``mem_during``, ``mem_after``) are bytes; they
   are in the file's ``meta.units.memory`` (``"budget": 17`` for 17MB in a file in MB).
2. The smallest-budget search (`experiments.commands._infeasible`) wrote "a schedule at 16 bytes"
   for 16 MB in a file in MB, and "2000 bytes" for 2000 KiB; its notes now name the file's unit
   (bytes files keep "bytes").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from memsched.experiments.commands import _infeasible
from memsched.solvers import registry
from memsched.solvers.result import INFEASIBLE, SolveResult

ROOT = Path(__file__).resolve().parent.parent
CLI_MD = ROOT / "docs" / "cli.md"
JOIN_MB = ROOT / "solvers" / "data" / "join" / "tiny.json"  # meta.units.memory = "MB"
#: a 4-stage chain with sizes in KiB (pofo at 1000 finds 2000 first and cannot scan below it)
CHAIN_KIB = {
    "format": "memsched.chain/1", "name": "tiny", "input_size": 400,
    "stages": [
        {"name": "conv1", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 400, "tape_size": 800,
         "fwd_overhead": 0, "bwd_overhead": 0},
        {"name": "conv2", "fwd_time": 2.0, "bwd_time": 4.0, "out_size": 200, "tape_size": 600,
         "fwd_overhead": 100, "bwd_overhead": 100},
        {"name": "conv3", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 200, "tape_size": 400,
         "fwd_overhead": 0, "bwd_overhead": 200},
        {"name": "fc", "fwd_time": 0.5, "bwd_time": 1.0, "out_size": 100, "tape_size": 200,
         "fwd_overhead": 0, "bwd_overhead": 0},
    ],
    "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
    "meta": {"units": {"time": "ms", "memory": "KiB"}},
}


# --------------------------------------------------------------------------- 1. docs/cli.md
def _row(text: str, key: str) -> str:
    """The row of `key` in the result-object table of docs/cli.md's "JSON outputs"."""
    match = re.search(rf"^\| `{key}` \|(.*)$", text, re.M)
    assert match, key
    return match.group(1)


def test_json_outputs_table_gives_the_memory_unit_not_bytes():
    text = CLI_MD.read_text(encoding="utf-8")
    for key in ("peak_memory", "budget", "min_budget"):
        row = _row(text, key)
        assert "in bytes" not in row, (key, row)
        assert "memory unit" in row, (key, row)
    assert "](#conventions-shared-by-the-commands)" in _row(text, "peak_memory")
    assert "**Memory units.**" in text.split("## Conventions shared by the commands", 1)[1].split("\n## ", 1)[0]


def test_simulate_json_keys_give_the_memory_unit_not_bytes():
    text = CLI_MD.read_text(encoding="utf-8")
    section = text.split("## `memsched simulate`", 1)[1].split("\n## ", 1)[0]
    keys = " ".join(section.split("**JSON** keys:", 1)[1].split("\n\n", 1)[0].split())
    for stale in ("`peak_memory` (bytes)", "`budget` (bytes or `null`)", "`mem_after` (bytes)"):
        assert stale not in keys, stale
    assert "memory unit" in keys and "(#conventions-shared-by-the-commands)" in keys


def test_json_values_are_in_the_file_unit():
    """What the docs now say: ``--budget 17MB`` on a file in MB gives ``"budget": 17``."""
    code, out, _ = run_cli("solve", JOIN_MB, "--budget", "17MB", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["budget"] == 17 and res["peak_memory"] == 17


# --------------------------------------------------------------------------- 2. the search's notes
def test_min_budget_method_names_the_file_unit(monkeypatch):
    from memsched.experiments.commands import _infeasible

    monkeypatch.setattr(_infeasible, "PROBE_SECONDS", 10.0)  # a 1 s probe of cpsat can time out under CI load
    code, out, err = run_cli("solve", JOIN_MB, "--budget", "10", "--solver", "cpsat", "--json")
    assert code == 1
    res = json.loads(out)
    assert res["min_budget"] == 16
    assert res["min_budget_method"] == "checked: a schedule at 16 MB, none at 15"  # was "16 bytes"
    assert "smallest feasible budget: 16 MB (15.26 MiB)" in err


def test_upper_bound_note_names_the_file_unit(tmp_path: Path):
    path = tmp_path / "kib.json"
    path.write_text(json.dumps(CHAIN_KIB), encoding="utf-8")
    code, _, err = run_cli("solve", path, "--budget", "1000", "--bandwidth", "12GB/s", "--solver", "pofo")
    assert code == 1
    assert "pofo finds a schedule at 2000 KiB, an upper bound only" in err, err  # was "2000 bytes"
    assert "bytes" not in err.split("smallest feasible budget unknown:", 1)[1]


def _join_mb() -> Any:
    return registry.get_problem("join").load(JOIN_MB)


def _infeasible_at(budget: int) -> SolveResult:
    return SolveResult(problem="join", solver="cpsat", status=INFEASIBLE, budget=budget)


def test_bracket_and_bisection_notes_name_the_file_unit(monkeypatch: pytest.MonkeyPatch):
    """The notes for a search that found no schedule, or stopped between two budgets."""
    join = _join_mb()
    monkeypatch.setattr(_infeasible, "_floor", lambda *a: None)
    monkeypatch.setattr(_infeasible, "_bracket", lambda probe, low, ref, guess: (40, None))
    res = _infeasible_at(10)
    _infeasible.find_min_budget("join", join, res, {})
    assert res.details["min_budget_note"].startswith("cpsat finds no schedule up to 40 MB;"), res.details
    monkeypatch.setattr(_infeasible, "_bracket", lambda probe, low, ref, guess: (10, 40))
    monkeypatch.setattr(_infeasible, "_bisect", lambda probe, low, high: (15, 16, "stopped"))
    res = _infeasible_at(10)
    _infeasible.find_min_budget("join", join, res, {})
    assert res.details["min_budget_note"] == "the smallest feasible budget of cpsat is between 16 and 16 MB (stopped)"


def test_probe_verdict_note_names_the_file_unit():
    probe = _infeasible._Probe("join", _join_mb(), "cpsat", {}, float("inf"), True)
    assert probe.why_stopped(15).startswith("no verdict at 15 MB within")


def test_bytes_files_keep_bytes(tmp_path: Path):
    """A file without ``meta.units.memory`` keeps the old wording."""
    path = tmp_path / "bytes.json"
    path.write_text(json.dumps(dict(CHAIN_KIB, meta={})), encoding="utf-8")
    probe = _infeasible._Probe("chain", registry.get_problem("chain").load(path), "rotor", {}, float("inf"), False)
    assert probe.why_stopped(15).startswith("no verdict at 15 bytes within")

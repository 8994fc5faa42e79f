"""`memsched sweep --verify`: a stale row is found, a current table passes, nothing is written."""

from __future__ import annotations

import io
import json

from conftest import EXAMPLES, sweep_toml
from memsched.experiments.sweep import journal_path, run_sweep
from memsched.experiments.sweep.verify import judge, summary, verify_sweep


def _sweep(tmp_path):
    cfg = tmp_path / "v.toml"
    cfg.write_text(sweep_toml("v", budgets=["40%", "70%"], defaults={"slots": 100},
                              instances=[{"file": EXAMPLES / "cnn12.json"}, {"generate": "chain", "L": 7, "seed": 2}],
                              solvers=["rotor", "periodic", "revolve"]))
    out = tmp_path / "out"
    run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    return cfg, out


def _tamper(out, factor: float) -> None:
    """Scale the objective of the journal's first rotor row by `factor`."""
    path = journal_path(out, "v")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    first = next(r for r in rows if r["solver"] == "rotor")
    first["objective"] *= factor
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_current_table_verifies_and_nothing_is_written(tmp_path, cli):
    cfg, out = _sweep(tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    checks = verify_sweep(cfg, output=out, progress=False)
    counts = summary(checks)
    assert counts["same"] == len(checks) == 12
    assert any(c.stored_status == "unsupported" for c in checks)  # revolve on heterogeneous chains
    res = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 0 and "12 same, 0 differs" in res.out
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_changed_objective_is_reported_and_exits_1(tmp_path, cli):
    cfg, out = _sweep(tmp_path)
    _tamper(out, 1.01)
    res = cli("sweep", cfg, "--output", out, "--verify", "--no-progress", "--solvers", "rotor")
    assert res.code == 1
    assert res.out.startswith("differs") and "1 differs" in res.out and "(of 4 rows)" in res.out


def test_a_missing_row_and_a_bad_label(tmp_path, cli):
    cfg, out = _sweep(tmp_path)
    path = journal_path(out, "v")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[1:]) + "\n")
    assert summary(verify_sweep(cfg, output=out, progress=False))["missing"] == 1
    res = cli("sweep", cfg, "--output", out, "--verify", "--solvers", "nope")
    assert res.code == 2 and "--solvers" in res.err and "Traceback" not in res.err
    assert cli("sweep", cfg, "--output", out, "--solvers", "rotor").code == 2  # only with --verify


def test_time_limited_runs_are_not_called_stale():
    stored = {"status": "feasible", "objective": 10.0, "time_limit": 5.0, "solve_time_s": 5.01}
    assert judge(stored, {"status": "optimal", "objective": 9.5, "time_limit": 5.0, "solve_time_s": 1.0}) == \
        "time-limited"
    quick = {**stored, "solve_time_s": 0.2}
    assert judge(quick, {"status": "feasible", "objective": 9.5, "time_limit": 5.0, "solve_time_s": 0.3}) == \
        "differs"
    assert judge(quick, {**quick, "objective": 10.0 * (1 + 1e-12)}) == "same"


def test_update_replaces_only_the_stale_row(tmp_path, cli):
    cfg, out = _sweep(tmp_path)
    table = (out / "v.csv").read_text()
    _tamper(out, 1.5)
    assert cli("sweep", cfg, "--output", out, "--verify", "--solvers", "rotor", "--no-progress").code == 1
    res = cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 1 rows" in res.out
    assert summary(verify_sweep(cfg, output=out, progress=False))["same"] == 12
    import pandas as pd

    old, new = pd.read_csv(io.StringIO(table)), pd.read_csv(out / "v.csv")
    assert list(old["key"]) == list(new["key"])
    pd.testing.assert_series_equal(old["objective"], new["objective"])
    assert cli("sweep", cfg, "--output", out, "--update").code == 2  # only with --verify


def test_update_takes_a_time_limited_row_only_when_head_does_better():
    from memsched.experiments.sweep.verify import _better, _settled

    assert _better(9.5, 10.0) and _better(1.0, None)
    assert not _better(10.0, 10.0) and not _better(None, 1.0) and not _better(10.5, 10.0)
    assert _settled("timeout", "infeasible") and _settled("timeout", "feasible")
    assert not _settled("timeout", "timeout") and not _settled("feasible", "infeasible")


def test_update_drops_an_infeasible_that_head_no_longer_proves():
    """A stored `infeasible` that HEAD answers `timeout` (e.g. the rounded model was infeasible and
    HEAD retries at exact sizes) is replaced: the table keeps no claim the code does not back."""
    from memsched.experiments.sweep.verify import _unbacked

    assert _unbacked("infeasible", "timeout")
    assert not _unbacked("infeasible", "infeasible") and not _unbacked("timeout", "infeasible")
    assert not _unbacked("feasible", "timeout")


def test_without_a_journal_the_committed_table_is_verified_and_updated(tmp_path, cli):
    import pandas as pd

    cfg, out = _sweep(tmp_path)
    journal_path(out, "v").unlink()  # journals are not committed: a fresh clone has the table only
    assert summary(verify_sweep(cfg, output=out, progress=False))["same"] == 12
    table = pd.read_csv(out / "v.csv")
    good = table["objective"].copy()
    rotor = (table["solver"] == "rotor") & table["objective"].notna()
    table.loc[rotor, "objective"] *= 1.2
    table.to_csv(out / "v.csv", index=False)
    assert summary(verify_sweep(cfg, output=out, progress=False))["differs"] == rotor.sum() >= 3
    assert cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress").code == 0
    pd.testing.assert_series_equal(pd.read_csv(out / "v.csv")["objective"], good)
    assert not journal_path(out, "v").exists()


def test_rows_keyed_with_an_absolute_source_are_found_and_rekeyed(tmp_path, cli):
    """Tables written when a file's source was its absolute path: same cells, other keys."""
    import pandas as pd

    cfg, out = _sweep(tmp_path)
    journal_path(out, "v").unlink()
    table = pd.read_csv(out / "v.csv")
    current = list(table["key"])
    files = table["source"].str.endswith(".json")  # the generated chain's rows keep their keys (never rekeyed)
    table.loc[files, "key"] = [f"old{i}" for i in range(int(files.sum()))]
    table["source"] = table["source"].map(lambda s: "/elsewhere/" + s if s.endswith(".json") else s)
    table.to_csv(out / "v.csv", index=False)
    assert summary(verify_sweep(cfg, output=out, progress=False))["same"] == 12
    assert cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress").code == 0
    again = pd.read_csv(out / "v.csv")
    assert list(again["key"]) == current and not again["source"].str.startswith("/elsewhere").any()


def test_update_refreshes_the_scope_of_a_same_row(tmp_path, cli):
    """A row with the answer HEAD computes but a scope HEAD words otherwise (rotor's answers before its
    DP named a slot discretisation they do not use) is `same`, and --update refreshes its text."""
    cfg, out = _sweep(tmp_path)
    path = journal_path(out, "v")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    first = next(r for r in rows if r["solver"] == "rotor")
    first["scope"] = "persistent schedules, an older wording"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checks = verify_sweep(cfg, output=out, progress=False)
    assert summary(checks)["same"] == 12 and sum(c.scope_changed for c in checks) == 1
    res = cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 1 rows" in res.out
    assert not any(c.scope_changed for c in verify_sweep(cfg, output=out, progress=False))

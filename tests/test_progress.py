"""Progress of long solves (`solvers.progress`) and its line in `memsched solve` (`--progress`)."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.progress import Progress, current_reporter, report, watching
from memsched.solvers.registry import solve


def test_merged_state_keeps_the_best_and_the_largest_bound():
    seen: list[Progress] = []
    with watching(seen.append):
        report("a", best=10.0)
        report(best=12.0, bound=7.0)  # a worse schedule and a first bound
        report("b", bound=6.0)  # a weaker bound
        report(best=9.0, bound=8.0)
    assert [p.stage for p in seen] == ["a", "a", "b", "b"]
    assert [p.best for p in seen] == [10.0, 10.0, 10.0, 9.0]
    assert [p.bound for p in seen] == [None, 7.0, 7.0, 8.0]
    assert seen[-1].gap == pytest.approx(1 / 9)
    assert Progress(best=5.0, bound=5.5).gap == 0.0  # a bound past the best (tolerances) is no negative gap


def test_nobody_watching_and_after_the_block():
    report("nobody", best=1.0)  # no watcher: nothing happens
    seen: list[Progress] = []
    with watching(seen.append):
        send = current_reporter()
    send(best=1.0)  # the reporter keeps its watcher (backend threads call it during the block)
    report(best=0.5)  # the context's watcher ended with the block
    assert [p.best for p in seen] == [1.0]


def _report_in_child() -> None:
    report("child", best=1.0)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_does_not_report_to_the_parent_watcher(tmp_path):
    log = tmp_path / "log"

    def write(p: Progress) -> None:  # what a display would do: write to a shared file
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {p.stage}\n")

    with watching(write):
        proc = multiprocessing.get_context("fork").Process(target=_report_in_child)
        proc.start()
        proc.join()
        report("parent")
    assert log.read_text().split() == [str(os.getpid()), "parent"]


@pytest.mark.parametrize("solver, options", [("milp", {}), ("milp", {"workers": 2}), ("cpsat", {})])
def test_exact_chain_solvers_report_stages_best_and_bound(solver, options):
    seen: list[Progress] = []
    with watching(seen.append):
        res = solve("chain", random_chain(10, 0), solver, 50, slots=0, time_limit=30, **options)
    assert res.status == "optimal"
    stages = [p.stage for p in seen]
    assert stages[0].startswith(f"{solver}: warm start")
    assert "root LP and tape cuts" in stages and any(s.startswith("search") for s in stages)
    for before, after in zip(seen, seen[1:]):  # merged: best never rises, bound never falls
        if before.best is not None:
            assert after.best is not None and after.best <= before.best
        if before.bound is not None:
            assert after.bound is not None and after.bound >= before.bound
    for p in seen:
        if p.best is not None and p.bound is not None:
            assert p.bound <= p.best * (1 + 1e-6)
    assert seen[-1].best == pytest.approx(res.objective, rel=1e-6)
    assert seen[-1].bound == pytest.approx(res.objective, rel=1e-6)  # the proof shows as a closed gap


@pytest.mark.parametrize("solver", ["cpsat", "checkmate"])
def test_graph_exact_solvers_report_their_model(solver):
    from memsched.solvers.graph import generate
    from memsched.solvers.graph.milp import _necessary_budget

    g = generate.random_dag(6, 1)
    seen: list[Progress] = []
    with watching(seen.append):
        res = solve("graph", g, solver, _necessary_budget(g, g.cost_ram), slots=0, time_limit=20)
    assert res.schedule is not None
    assert any(p.stage.startswith("search (") for p in seen), [p.stage for p in seen]
    assert all(p.bound is None or p.best is None or p.bound <= p.best * (1 + 1e-6) for p in seen)


def test_cli_progress_line_on_stderr_only_when_asked(cli, examples):
    args = ("solve", examples / "random10.json", "--budget", "40%", "--solver", "milp", "--time-limit", "20", "--json")
    shown = cli(*args, "--progress")
    assert shown.code == 0, shown.err
    assert shown.json()["status"] in ("optimal", "feasible")  # stdout stays one JSON object
    assert "milp:" in shown.err and "search (" in shown.err
    quiet = cli(*args)  # not a terminal: no line by default
    assert quiet.code == 0 and quiet.err == ""
    assert cli(*args, "--no-progress").err == ""


def test_api_progress_line_and_its_time_limit(capsys, examples):
    from memsched.solvers import registry

    import memsched
    from memsched.live import line_limit

    milp = registry.get_solver("chain", "milp")
    assert line_limit(milp, None, {}) == milp.default_time_limit
    assert line_limit(milp, 7.0, {"time_limit": 3}) == 7.0 and line_limit(milp, None, {"time_limit": 3}) == 3.0
    assert line_limit(registry.get_solver("chain", "rotor"), None, {}) is None
    chain = memsched.load(examples / "random10.json")
    res = memsched.solve(chain, "40%", ["rotor", "milp"], time_limit=20, progress=True)
    err = capsys.readouterr().err
    assert "rotor:" in err and "milp:" in err and "search (" in err
    assert all(r.status in ("optimal", "feasible") for r in res)
    memsched.solve(chain, "40%", "milp", time_limit=20)
    assert capsys.readouterr().err == ""  # off by default


def test_offload_exact_reports_its_search():
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.chain.dp import rotor_min_budget
    from memsched.solvers.offload import OffloadInstance

    inst = OffloadInstance(random_chain(4, 1, integer_times=True, size_range=(1, 8)), 2000.0)
    budget = (rotor_min_budget(inst.chain) + reference_peak(inst.chain)) // 2
    seen: list[Progress] = []
    with watching(seen.append):
        res = solve("offload", inst, "offload-exact", budget, slots=0, time_limit=20)
    assert res.schedule is not None
    stages = [p.stage for p in seen]
    assert stages[0].startswith("offload-exact: warm start")
    assert all(p.bound is None or p.best is None or p.bound <= p.best * (1 + 1e-6) for p in seen)
    if "search (cp-sat)" in stages and res.status == "optimal":  # the model's proof closes the line's gap
        assert seen[-1].gap == pytest.approx(0.0, abs=1e-6)


def test_partition_has_the_same_line(cli, examples):
    args = ("partition", examples / "cnn12.json", "--devices", "2", "--memory", "600MiB", "--solver", "cpsat",
            "--time-limit", "20", "--json")
    shown = cli(*args, "--progress")
    assert shown.code == 0, shown.err
    assert shown.json()["stages"] and "cpsat:" in shown.err and "search (cp-sat)" in shown.err
    assert cli(*args).err == ""

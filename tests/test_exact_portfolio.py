"""The MILP portfolio (`solvers.exact.portfolio`): SCIP and HiGHS raced in two processes. The
merge of their answers (a proof may be split between them), the race against the phase model's
brute force and SCIP alone, the default with two workers, and the fallback without processes."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
from conftest import brute_force, check_replay
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact import highs_runner, portfolio
from memsched.solvers.exact.milp_runner import BackendRun
from memsched.solvers.exact.options import Deadline
from memsched.solvers.registry import solve


def _run(status: str, objective: float | None = None, bound: float | None = None, wall: float = 1.0) -> BackendRun:
    values = None if objective is None else [objective]
    return BackendRun(status, values=values, objective=objective, bound=bound, wall=wall, backend_status=status,
                      log=[(wall, objective, bound)])



def test_a_proof_split_between_two_backends_is_a_proof():
    """SCIP holds the best schedule (10) with bound 9, HiGHS a worse one (10.5) with bound 10:
    together they prove 10."""
    merged = portfolio.merge_runs({"scip": _run("feasible", 10.0, 9.0), "highs": _run("feasible", 10.5, 10.0)},
                                  2.0)
    assert merged.status == "optimal" and merged.objective == 10.0 and merged.bound == 10.0
    assert merged.backend_status.startswith("best from scip")


def test_the_merge_keeps_the_best_schedule_and_the_largest_bound():
    merged = portfolio.merge_runs({"scip": _run("feasible", 12.0, 9.0), "highs": _run("feasible", 11.0, 9.5)},
                                  2.0)
    assert merged.status == "feasible" and merged.objective == 11.0 and merged.bound == 9.5
    assert merged.values == [11.0]


def test_the_bound_never_exceeds_the_schedule():
    merged = portfolio.merge_runs({"scip": _run("optimal", 10.0, 10.0), "highs": _run("timeout")}, 2.0)
    assert merged.status == "optimal" and merged.bound == 10.0


def test_infeasible_only_as_a_backends_proof():
    proof = {"scip": _run("infeasible"), "highs": _run("timeout")}
    assert portfolio.merge_runs(proof, 1.0).status == "infeasible"
    assert portfolio.merge_runs({"scip": _run("timeout"), "highs": _run("timeout")}, 1.0).status == "timeout"


def test_a_backend_stopped_by_the_others_proof_says_so():
    """HiGHS proves; SCIP, still searching, is stopped because of that proof, not for a limit."""
    ctx = multiprocessing.get_context("fork")
    proving, proved = ctx.Pipe(duplex=False)
    silent, _keep_open = ctx.Pipe(duplex=False)
    proved.send(_run("optimal", 10.0, 10.0))
    children = {proving: ("highs", None), silent: ("scip", None)}
    runs = portfolio._collect(children, Deadline(60.0), grace=0.1)  # type: ignore[arg-type]
    assert runs["highs"].status == "optimal"
    assert runs["scip"].backend_status == "stopped: highs proved first"
    merged = portfolio.merge_runs(runs, 1.0)
    assert "scip: timeout (stopped: highs proved first)" in merged.backend_status


@settings(max_examples=6, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10_000), st.floats(0.0, 1.0))
def test_the_portfolio_proves_the_phase_optimum(L, seed, fraction):
    """Its answer is the phase model's optimum (brute force over phase-form sequences), replayed."""
    chain = random_chain(L, seed, size_range=(1, 6), integer_times=True, overhead=0.5)
    lo, hi = rotor_min_budget(chain), reference_peak(chain) - 1
    assume(hi >= lo)
    budget = lo + int(fraction * (hi - lo))
    best, _ = brute_force(chain, budget, phase=True)
    res = solve("chain", chain, "milp", budget, slots=0, backend="portfolio", time_limit=30, warm_start=False)
    assert res.status == "optimal" and res.objective == pytest.approx(best)
    assert res.lower_bound <= res.objective + 1e-9
    check_replay(chain, budget, res)


@pytest.mark.skipif(not highs_runner.available(), reason="highspy is not installed")
def test_two_workers_race_scip_and_highs():
    chain = random_chain(15, 0)
    res = solve("chain", chain, "milp", 68, slots=100, workers=2, time_limit=60)
    assert res.details["backend"] == "portfolio" and res.status == "optimal"
    assert not multiprocessing.active_children()  # the loser was stopped when the winner proved it
    assert res.objective == pytest.approx(solve("chain", chain, "milp", 68, slots=100, time_limit=60).objective)
    assert "scip:" in res.details["backend_status"] and "highs:" in res.details["backend_status"]
    check_replay(chain, 68, res)
    assert solve("chain", chain, "milp", 68, slots=100, time_limit=60).details["backend"] == "scip"


def test_without_child_processes_the_first_backend_runs_alone(monkeypatch):
    """A daemonic worker may not start processes: SCIP then runs here, and says so."""
    monkeypatch.setattr(portfolio, "can_fork", lambda: False)
    chain = random_chain(6, 3)
    budget = rotor_min_budget(chain) + 3
    res = solve("chain", chain, "milp", budget, slots=0, backend="portfolio", time_limit=20)
    assert res.status == "optimal" and "scip alone" in res.details["backend_status"]
    assert res.objective == pytest.approx(solve("chain", chain, "milp", budget, slots=0, time_limit=20).objective)


def test_a_script_piped_to_python_races_both_backends():
    """A ``__main__`` without a file (``python -`` reading stdin; a notebook is alike): the
    children are forked, so nothing re-imports it (``spawn`` failed here and both backends
    ended without an answer)."""
    script = (
        "from memsched.solvers.chain.generate import random_chain\n"
        "from memsched.solvers.registry import solve\n"
        "res = solve('chain', random_chain(8, 2), 'milp', 60, slots=0, backend='portfolio', time_limit=30)\n"
        "print(res.status, res.details['backend_status'])\n")
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("optimal") and "without an answer" not in out.stdout
    assert "scip: " in out.stdout and "highs: " in out.stdout


def test_an_isolated_backend_is_killed_after_the_deadline(monkeypatch):
    """SCIP's presolve and HiGHS's first root LP may not look at the clock (results/bench_model_memory.csv:
    still running 30 s after a 30 s limit): `run_isolated` kills the child GRACE_S after the limit."""
    import time

    from memsched.solvers.exact.linear import LinearModel
    from memsched.solvers.exact.options import Deadline, ExactOptions

    def deaf_backend(*args, **kwargs):  # a backend that ignores its limit (inherited by the forked child)
        time.sleep(60)

    monkeypatch.setattr(portfolio, "run_milp", deaf_backend)
    model = LinearModel()
    model.var(0, 1, True)
    t0 = time.perf_counter()
    run = portfolio.run_isolated(model, "scip", Deadline(0.5), ExactOptions())
    assert time.perf_counter() - t0 < 0.5 + portfolio.GRACE_S + 10  # not the backend's 60 s
    assert run.status == "timeout" and run.values is None and run.backend_status.startswith("stopped")


def test_what_an_isolated_backend_started_is_stopped_with_it(monkeypatch, tmp_path):
    """The CBC program runs as the child's own child: killed alone, the child would leave it
    running, orphaned, to its own limit. The child leads a process group, and the group is stopped."""
    import os
    import time

    from memsched.solvers.exact.linear import LinearModel
    from memsched.solvers.exact.options import Deadline, ExactOptions

    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    pid_file = tmp_path / "program.pid"

    def backend_with_a_program(*args, **kwargs):  # starts a program that outlives its limit, then hangs
        program = subprocess.Popen(["sleep", "60"])
        pid_file.write_text(str(program.pid))
        time.sleep(60)

    monkeypatch.setattr(portfolio, "run_milp", backend_with_a_program)
    model = LinearModel()
    model.var(0, 1, True)
    run = portfolio.run_isolated(model, "cbc", Deadline(1.0), ExactOptions())
    assert run.status == "timeout" and run.backend_status.startswith("stopped")
    pid = int(pid_file.read_text())

    def running() -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    end = time.monotonic() + 3.0
    while running() and time.monotonic() < end:
        time.sleep(0.05)
    assert not running()


def test_an_isolated_backend_answers_as_in_this_process():
    from memsched.solvers.exact.milp_runner import run_milp
    from memsched.solvers.exact.options import Deadline, ExactOptions
    from memsched.solvers.graph import generate
    from memsched.solvers.graph import reference_peak as graph_peak
    from memsched.solvers.graph.milp import CheckmateModel

    g = generate.random_layered(12, 0)
    cm = CheckmateModel(g, g.cost_ram, int(0.8 * graph_peak(g)))
    here = run_milp(cm.model, "scip", Deadline(60), ExactOptions())
    there = portfolio.run_isolated(cm.model, "scip", Deadline(60), ExactOptions())
    assert here.status == there.status == "optimal"
    assert there.objective == pytest.approx(here.objective) and cm.model.violated(there.values) == 0

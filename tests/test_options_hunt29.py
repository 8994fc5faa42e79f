"""Hunt 29, solver options (repros in the hunt's solveopts/ folder):

1. ``--option workers`` took up to 10^6 while CP-SAT refuses num_workers > 10000 ("internal error:
   RuntimeError: CP-SAT rejects the model", exit 3), and SCIP given more than 64 threads printed
   C-level errors and silently dropped them: workers is now 1..10000 (exit 2 naming --option
   workers; ``ExactOptions`` too), SCIP gets 64 and ``backend_status`` says so, and a CP-SAT
   ``MODEL_INVALID`` caused by the parameters set from an option is an `InputError` naming it;
2. ``seed`` was -2^31..10^6 (lopsided; checkmate-approx then refused negatives): 0..2^31-1 everywhere;
3. ``parameters=num_workers:3`` silently won over ``workers=2`` (``random_seed`` over ``seed``,
   ``max_time_in_seconds`` over the time limit): refused, pointing to the option;
4. a ``timeout`` that was not the clock's (join `exact`'s max_states, a model not built) was
   reported "within the time limit": the result's message is printed;
5. rotor-offload's ``grid`` took up to 10^6 (an hour) and ignored ``--time-limit``: at most
   `MAX_GRID`, and the time limit cuts the grid short (as pofo's optional stages).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import one_line_refusal
from memsched.experiments.commands import _checks
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import ExactOptions

import memsched

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
CHAIN = DATA / "examples" / "tiny.json"  # 4 stages
JOIN = DATA / "join" / "tiny.json"


def refused(res: Any, field: str) -> str:
    """Exit 2, one line on stderr naming `field`, no traceback: that line."""
    return one_line_refusal(res, f"error: {field}:")


# ---------------------------------------------------------------- 1. workers
@pytest.mark.parametrize("args", [
    (CHAIN, "--budget", "80%", "--solver", "cpsat"),
    (JOIN, "--budget", "80%", "--solver", "cpsat"),
    (CHAIN, "--budget", "80%", "--solver", "milp", "--option", "backend=cp-sat"),
])
def test_workers_above_cpsat_range_are_refused(cli, args):
    line = refused(cli("solve", *args, "--time-limit", "5", "--option", "workers=10001"), "--option workers")
    assert "1..10000" in line


def test_workers_above_cpsat_range_are_refused_for_offload_exact(cli, offload):
    refused(cli("solve", offload, "--budget", "80%", "--solver", "offload-exact", "--time-limit", "5",
                "--option", "workers=10001"), "--option workers")


def test_workers_at_cpsat_limit_still_run(cli):
    res = cli("solve", CHAIN, "--budget", "80%", "--solver", "cpsat", "--time-limit", "5", "--option", "workers=10000")
    assert res.code == 0, res.err


def test_exact_options_cap_workers_in_python():
    with pytest.raises(InputError, match=r"1\.\.10000"):
        ExactOptions(workers=10001).validated()
    with pytest.raises(InputError) as err:
        memsched.solve(str(CHAIN), 22, "cpsat", workers=10001, time_limit=5)
    assert err.value.field == "workers"


def test_cpsat_rejecting_num_workers_names_the_workers_option():
    """A ``MODEL_INVALID`` on a sound model caused by ``num_workers`` (set from ``workers``) is
    bad input naming it, not a RuntimeError (an internal error, exit 3)."""
    from memsched.solvers.exact.cpsat_runner import run_cpsat
    from memsched.solvers.exact.options import Deadline
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    model.minimize(x)
    with pytest.raises(InputError) as err:
        run_cpsat(model, Deadline(5.0), ExactOptions(workers=10001))  # not validated: as a caller could build it
    assert err.value.field == "--option workers" and "num_workers" in str(err.value)


def test_scip_gets_at_most_64_threads_and_says_so(cli, capfd):
    from memsched.solvers.exact.milp_runner import SCIP_MAX_THREADS, backend_threads

    assert SCIP_MAX_THREADS == 64
    threads, note = backend_threads("scip", 65)
    assert threads == 64 and "at most 64" in note
    assert backend_threads("scip", 64) == (64, "") and backend_threads("highs", 65) == (65, "")
    res = cli("solve", CHAIN, "--budget", "80%", "--solver", "milp", "--option", "backend=scip",
              "--option", "workers=65", "--time-limit", "5", "--json")
    assert res.code == 0, res.err
    assert "at most 64 threads" in res.json()["backend_status"]
    assert "Invalid value <65>" not in capfd.readouterr().err  # SCIP's C-level error


# ---------------------------------------------------------------- 2. seed
def test_seed_range_is_one_for_every_solver():
    want = "an integer in 0..2147483647"
    for value in (-1, -(2**31), 2**31):
        assert _checks.option_type_error("int", "seed", value) == want
        assert _checks.option_type_error("int", "random_seed", value) == want
    for value in (0, 2_000_000, 2**31 - 1):
        assert _checks.option_type_error("int", "seed", value) is None


def test_seed_cli_messages_agree(cli, tmp_path):
    graph = DATA / "graphs" / "linear10.json"
    first = refused(cli("solve", graph, "--budget", "90%", "--solver", "checkmate-approx", "--option", "seed=-5"),
                    "--option seed")
    second = refused(cli("solve", CHAIN, "--budget", "80%", "--solver", "cpsat", "--time-limit", "5",
                         "--option", "seed=-2000000000"), "--option seed")
    assert "0..2147483647" in first and "0..2147483647" in second
    res = cli("solve", CHAIN, "--budget", "80%", "--solver", "cpsat", "--time-limit", "5", "--option", "seed=2000000")
    assert res.code == 0, res.err


def test_exact_options_check_the_seed_in_python():
    with pytest.raises(InputError, match=r"0\.\.2147483647"):
        ExactOptions(seed=-1).validated()
    with pytest.raises(InputError, match=r"0\.\.2147483647"):
        ExactOptions(seed=2**31).validated()
    assert ExactOptions(seed=2**31 - 1).validated().seed == 2**31 - 1


# ---------------------------------------------------------------- 3. parameters that an option sets
@pytest.mark.parametrize("given, option", [
    (("--option", "workers=2", "--option", "parameters=num_workers:3"), "--option workers"),
    (("--option", "seed=5", "--option", "parameters=random_seed:9"), "--option seed"),
    (("--option", "parameters=random_seed:9"), "--option seed"),
    (("--option", "parameters=linearization_level:1,max_time_in_seconds:1000"), "--time-limit"),
])
def test_parameters_may_not_set_what_an_option_sets(cli, given, option):
    line = refused(cli("solve", CHAIN, "--budget", "80%", "--solver", "cpsat", "--time-limit", "5", *given),
                   "--option parameters")
    assert option in line, line


def test_offload_exact_parameters_may_not_set_workers(cli, offload):
    refused(cli("solve", offload, "--budget", "80%", "--solver", "offload-exact", "--time-limit", "5",
                "--option", "workers=2", "--option", "parameters=num_workers:3"), "--option parameters")


def test_parse_parameters_refuses_them_from_python():
    from memsched.solvers.errors import python_spelling
    from memsched.solvers.exact.cpsat_runner import parse_parameters

    with python_spelling(), pytest.raises(InputError, match="set with workers") as err:
        parse_parameters("num_workers:3")
    assert err.value.field == "parameters"
    assert parse_parameters("linearization_level:1").linearization_level == 1


# ---------------------------------------------------------------- 4. why a timeout
def test_timeout_of_a_search_limit_says_so(cli):
    res = cli("solve", JOIN, "--budget", "80%", "--solver", "exact", "--option", "max_states=5",
              "--option", "warm_start=false", "--json")
    assert res.code == 1, res.err
    assert res.json()["status"] == "timeout"
    assert "search limit reached before a proof" in res.err, res.err
    assert "within the time limit" not in res.err


def test_why_none_uses_the_message_of_a_timeout():
    from memsched.experiments.commands.solve import _why_none
    from memsched.solvers.result import TIMEOUT, SolveResult

    told = SolveResult(problem="graph", solver="checkmate", status=TIMEOUT, message="the model was not built: big")
    assert _why_none(told) == "timeout: checkmate found no schedule: the model was not built: big"
    silent = SolveResult(problem="graph", solver="checkmate", status=TIMEOUT)
    assert _why_none(silent) == "timeout: checkmate found no schedule within the time limit"


# ---------------------------------------------------------------- 5. rotor-offload's grid
def _instance() -> tuple[Any, int]:
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.offload.generate import random_offload

    inst = random_offload(6, 3, bandwidth=50.0)
    return inst, int(0.8 * reference_peak(inst.chain))


def test_grid_is_capped(cli, offload):
    from memsched.solvers.offload.combined import MAX_GRID, solve_rotor_offload

    assert MAX_GRID == _checks.MAX_GRID == _checks.MAX_INT_OPTION["grid"]
    refused(cli("solve", offload, "--budget", "80%", "--solver", "rotor-offload", "--option", "grid=1000000"),
            "--option grid")
    inst, budget = _instance()
    with pytest.raises(InputError, match="grid"):
        solve_rotor_offload(inst, budget, grid=MAX_GRID + 1)


def _slow_inner(monkeypatch: Any, *, schedule: bool) -> list[int]:
    """rotor-offload's chain solver made slow (0.05 s a call; without `schedule`: never a schedule);
    the list gets one entry per call."""
    from memsched.solvers.offload import combined

    calls: list[int] = []
    real = combined.registry_solve

    def slow(problem: str, instance: Any, name: str, budget: int, **kw: Any) -> Any:
        calls.append(budget)
        time.sleep(0.05)
        res = real(problem, instance, name, budget, **kw)
        if not schedule:
            res.schedule = None
        return res

    monkeypatch.setattr(combined, "registry_solve", slow)
    return calls


def test_rotor_offload_honours_the_time_limit(monkeypatch):
    from memsched.solvers.offload.combined import solve_rotor_offload

    inst, budget = _instance()
    calls = _slow_inner(monkeypatch, schedule=True)
    res = solve_rotor_offload(inst, budget, grid=200, time_limit=0.2)
    assert 1 <= len(calls) < 200
    assert res.details["grid_tried"] == len(calls)
    assert "time limit of 0.2 s reached" in res.message


def test_rotor_offload_cut_short_without_a_fit_is_a_timeout(monkeypatch):
    from memsched.solvers.offload.combined import solve_rotor_offload

    inst, budget = _instance()
    calls = _slow_inner(monkeypatch, schedule=False)
    res = solve_rotor_offload(inst, budget, grid=200, time_limit=0.2)
    assert res.status == "timeout" and res.schedule is None, res
    assert 1 <= len(calls) < 200 and "time limit" in res.message


def test_rotor_offload_without_a_limit_tries_the_whole_grid(monkeypatch):
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.offload.combined import solve_rotor_offload

    inst, budget = _instance()
    calls = _slow_inner(monkeypatch, schedule=False)
    res = solve_rotor_offload(inst, budget, grid=5)
    assert res.status == "infeasible" and "grid_tried" not in res.details
    top = max(reference_peak(inst.chain), budget)
    assert sorted(calls) == sorted({int(b) for b in np.linspace(budget, top, 5).astype(np.int64)})


def test_the_seed_reaches_scip_and_cbc(capfd):
    """`seed` was set for CP-SAT and HiGHS only: SCIP gets ``randomization/randomseedshift`` (a setting it
    accepts) and the CBC program ``-randomSeed``/``-randomCbcSeed``."""
    from memsched.solvers.exact.milp_runner import scip_settings
    from memsched.solvers.exact.options import ExactOptions
    from ortools.linear_solver import pywraplp

    text = scip_settings(ExactOptions(seed=7))
    assert "randomization/randomseedshift = 7" in text
    assert "randomseedshift" not in scip_settings(ExactOptions(seed=0))
    assert pywraplp.Solver.CreateSolver("SCIP").SetSolverSpecificParametersAsString(text)
    res = memsched.solve(memsched.data_path("examples", "tiny.json"), 22, "milp", backend="cbc", seed=7,
                         verbose=True)
    assert res.status == "optimal"
    assert "-randomSeed 7" in capfd.readouterr().err


def test_checkmate_approx_takes_the_seed_range_in_python_too():
    graph = memsched.data_path("graphs", "linear10.json")
    from memsched.solvers.registry import get_problem, solve

    inst = get_problem("graph").load(graph)
    with pytest.raises(memsched.InputError, match=r"0\.\.2147483647") as err:
        solve("graph", inst, "checkmate-approx", int(0.8 * get_problem("graph").reference_peak(inst)), seed=2**31)
    assert err.value.field == "--option seed"
    assert memsched.solve(graph, "80%", "checkmate-approx", seed=2**31 - 1).found

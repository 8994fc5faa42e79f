"""Solver options with bad values (docs/cli.md, *Errors*): `--option KEY=VALUE` of the right type
but out of range or of the wrong content is bad input, exit 2 with one line on stderr naming the
option (``--option KEY``), never an internal error (exit 3) nor a search that ignores the time
limit; a documented default is accepted. The solvers check these values themselves, before any
long work (the exact solvers before their warm start), so `memsched.solve` refuses them too.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import GRAPH_EXAMPLE, one_line_refusal
from memsched.solvers.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data"
CHAIN = DATA / "examples" / "tiny.json"  # 4 stages
JOIN = DATA / "join" / "tiny.json"  # 2 branches
@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH_EXAMPLE))
    return path


def refused(res: Any, option: str) -> None:
    """Exit 2, one line on stderr naming ``--option <option>``, no traceback."""
    one_line_refusal(res, f"--option {option}:")


def solved(res: Any) -> None:
    assert res.code == 0, (res.code, res.err)
    assert "Traceback" not in res.err


# ---------------------------------------------------------------- 1. chain cpsat: parameters
@pytest.mark.parametrize("value", ["max_time_in_seconds:abc",  # not a number (was ValueError, exit 3)
                                   "num_workers:-5",  # out of CP-SAT's range (was RuntimeError, exit 3)
                                   "max_time_in_seconds:-1", "max_time_in_seconds:nan", "num_workers:1.5",
                                   "num_workers:99999999999", "log_search_progress:maybe",
                                   "search_branching:NO_SUCH_SEARCH", "foo:1", "num_workers", "subsolver_params:x"])
def test_chain_cpsat_bad_parameters(cli, value):
    refused(cli("solve", CHAIN, "--budget", "25", "--solver", "cpsat", "--time-limit", "5",
                "--option", f"parameters={value}"), "parameters")


@pytest.mark.parametrize("value", ["linearization_level:1 symmetry_level:0", "linearization_level:1,symmetry_level:0",
                                   "search_branching:FIXED_SEARCH", "log_search_progress:false"])
def test_chain_cpsat_good_parameters(cli, value):
    solved(cli("solve", CHAIN, "--budget", "25", "--solver", "cpsat", "--time-limit", "5",
               "--option", f"parameters={value}"))


def test_parameters_are_read_as_cpsat_reads_them():
    from memsched.solvers.exact.cpsat_runner import parse_parameters, set_parameters
    from ortools.sat.python import cp_model

    msg = parse_parameters("linearization_level:1, search_branching:FIXED_SEARCH log_search_progress:yes")
    assert msg.linearization_level == 1 and msg.log_search_progress is True
    assert {f.name for f, _ in msg.ListFields()} == {"linearization_level", "search_branching",
                                                      "log_search_progress"}
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 3
    set_parameters(solver.parameters, "linearization_level:0 symmetry_level:0")
    assert solver.parameters.linearization_level == 0 and solver.parameters.symmetry_level == 0
    assert solver.parameters.num_workers == 3  # the others are kept
    assert not parse_parameters("").ListFields() and not parse_parameters(None).ListFields()


def test_offload_exact_checks_parameters_too(cli, offload):
    refused(cli("solve", offload, "--budget", "25", "--solver", "offload-exact", "--time-limit", "5",
                "--option", "parameters=num_workers:-5"), "parameters")


# ---------------------------------------------------------------- 2. join cpsat: orders
@pytest.mark.parametrize("value", ["zz", "-1", "1000000", "[[0,5]]", "[[0,0]]", "[[0]]", "[]", "[1,0]",
                                   "[[1,0],[1,0]]", '[["1","0"]]', "[[true,false]]"])
def test_join_cpsat_bad_orders(cli, value):
    refused(cli("solve", JOIN, "--budget", "90%", "--solver", "cpsat", "--time-limit", "5",
                "--option", f"orders={value}"), "orders")


@pytest.mark.parametrize("value", ["all", "[[1,0]]", "[[0,1],[1,0]]"])
def test_join_cpsat_good_orders(cli, value):
    res = cli("solve", JOIN, "--budget", "90%", "--solver", "cpsat", "--time-limit", "5", "--json",
              "--option", f"orders={value}")
    solved(res)


def test_join_orders_default_is_every_order():
    from memsched.solvers.join.cpsat import iter_orders
    from memsched.solvers.registry import get_problem

    join = get_problem("join").load(str(JOIN))
    assert list(iter_orders(join)) == list(iter_orders(join, "all")) == [[0, 1], [1, 0]]
    assert list(iter_orders(join, ((1, 0),))) == [[1, 0]]


# ---------------------------------------------------------------- 3. offload CP-SAT solvers: scale
@pytest.mark.parametrize("solver", ["cpsat", "exact-combined", "offload-exact"])
@pytest.mark.parametrize("value", ["0",  # was ZeroDivisionError, exit 3
                                   "1e15"])  # ticks beyond int64 (was "CP-SAT rejects the model", exit 3)
def test_offload_bad_scale(cli, offload, solver, value):
    refused(cli("solve", offload, "--budget", "25", "--solver", solver, "--time-limit", "5",
                "--option", f"scale={value}"), "scale")


@pytest.mark.parametrize("solver", ["cpsat", "exact-combined", "offload-exact"])
def test_offload_good_scale(cli, offload, solver):
    solved(cli("solve", offload, "--budget", "25", "--solver", solver, "--time-limit", "5", "--option", "scale=10"))


# ---------------------------------------------------------------- 4. vdnn: lookahead
def test_vdnn_lookahead_zero(cli, offload):
    refused(cli("solve", offload, "--budget", "28", "--solver", "vdnn", "--option", "lookahead=0"), "lookahead")
    solved(cli("solve", offload, "--budget", "28", "--solver", "vdnn", "--option", "lookahead=1"))


# ---------------------------------------------------------------- 5. offload-prefix: max_lookahead
def _alarm(*_: Any) -> None:
    raise TimeoutError("offload-prefix ran past 30 s")


def test_offload_prefix_max_lookahead_is_capped_at_the_chain(cli, offload):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)  # it ran for minutes (a million lookaheads on a 4-stage chain)
    try:
        start = time.perf_counter()
        res = cli("solve", offload, "--budget", "25", "--solver", "offload-prefix", "--json",
                  "--option", "max_lookahead=1000000")
        took = time.perf_counter() - start
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    solved(res)
    assert took < 10
    same = cli("solve", offload, "--budget", "25", "--solver", "offload-prefix", "--json",
               "--option", "max_lookahead=5")  # L + 1: every larger lookahead gives its schedule
    assert res.json()["makespan"] == same.json()["makespan"]
    refused(cli("solve", offload, "--budget", "25", "--solver", "offload-prefix", "--option", "max_lookahead=0"),
            "max_lookahead")


# ---------------------------------------------------------------- 6. checkmate-approx: seed
def test_checkmate_approx_negative_seed(cli, graph):
    refused(cli("solve", graph, "--budget", "90%", "--solver", "checkmate-approx", "--time-limit", "10",
                "--option", "seed=-1"), "seed")  # was "expected non-negative integer", exit 3
    solved(cli("solve", graph, "--budget", "100%", "--solver", "checkmate-approx", "--time-limit", "10",
               "--option", "seed=3"))


# ---------------------------------------------------------------- 7. join exact: max_states
def test_join_exact_accepts_its_documented_default(cli):
    solved(cli("solve", JOIN, "--budget", "90%", "--solver", "exact", "--time-limit", "10",
               "--option", "max_states=2000000"))  # docs/cli.md's default; was refused (0..1000000)
    refused(cli("solve", JOIN, "--budget", "90%", "--solver", "exact", "--option", "max_states=10000001"),
            "max_states")


def test_sweep_files_take_the_default_max_states():
    from memsched.experiments.commands._checks import option_type_error, solver_parameters

    kind = solver_parameters("join", "exact")["max_states"]
    assert option_type_error(kind, "max_states", 2_000_000) is None
    assert option_type_error(kind, "max_states", 10**7 + 1) is not None
    assert option_type_error("int", "samples", 10**6 + 1) is not None  # other options keep 0..10^6


# ---------------------------------------------------------------- from Python, and before any work
@pytest.mark.parametrize("path, solver, options", [
    (CHAIN, "cpsat", {"parameters": "num_workers:-5"}),
    (JOIN, "cpsat", {"orders": [[0, 5]]}),
    ("offload", "cpsat", {"scale": 0}),
    ("offload", "exact-combined", {"scale": float("nan")}),
    ("offload", "offload-exact", {"scale": -1.0}),
])
def test_exact_solvers_refuse_before_their_warm_start(monkeypatch, offload, path, solver, options):
    from memsched.solvers.exact import layer

    import memsched

    def no_warm_start(*_: Any, **__: Any) -> None:
        raise AssertionError("the fast solvers ran before the options were checked")

    monkeypatch.setattr(layer, "run_fast", no_warm_start)
    name = next(iter(options))
    with pytest.raises(InputError, match=f"^{name}: "):
        memsched.solve(str(offload if path == "offload" else path), budget="90%", solver=solver, time_limit=5,
                       **options)


@pytest.mark.parametrize("solver, options", [("vdnn", {"lookahead": 0}), ("vdnn", {"lookahead": "2"}),
                                             ("offload-prefix", {"max_lookahead": -3})])
def test_offload_heuristics_refuse_from_python(offload, solver, options):
    import memsched

    with pytest.raises(InputError, match=f"^{next(iter(options))}: "):
        memsched.solve(str(offload), budget="90%", solver=solver, **options)

"""`memory_gb` is taken only where it holds, and the join `cpsat`'s ``orders`` takes numpy values.

1. The exact layer's ``memory_gb`` was accepted by every exact solver and read only by graph ``checkmate``,
   ``checkmate-approx`` and SCIP (``limits/memory``): every CP-SAT model and chain ``milp`` with HiGHS, CBC
   or CP-SAT ignored it (``--option memory_gb=1e-9`` answered ``optimal``, exit 0). They now refuse it
   (exit 2 naming ``--option memory_gb``; `InputError` in Python), as join ``exact`` refused it.
2. ``orders=np.array([[1, 0]])`` was a ValueError traceback (``orders == "all"`` on an array) and
   ``orders=[[np.int64(1), np.int64(0)]]`` was refused.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError

import memsched

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "solvers" / "data"
MEMSCHED = "/work/main/.venv/bin/memsched"
CHAIN = str(DATA / "examples" / "tiny.json")
GRAPH = str(DATA / "graphs" / "linear10.json")
JOIN = str(DATA / "join" / "tiny.json")
PIPELINE = str(DATA / "pipeline" / "mlp7.chain.json")

#: (problem, instance path, solver, memsched.solve's instance keywords) of every CP-SAT-based exact solver
CPSAT_SOLVERS = [
    ("chain", CHAIN, "cpsat", {}),
    ("graph", GRAPH, "cpsat", {}),
    ("join", JOIN, "cpsat", {}),
    ("offload", CHAIN, "cpsat", {"bandwidth": "1GB/s"}),
    ("offload", CHAIN, "offload-exact", {"bandwidth": "1GB/s"}),
    ("offload", CHAIN, "exact-combined", {"bandwidth": "1GB/s"}),
    ("pipeline", PIPELINE, "cpsat", {"devices": 2}),
    ("pipeline", PIPELINE, "dag-cpsat", {"devices": 2}),
    ("pipeline", PIPELINE, "interleave-cpsat", {"devices": 2}),
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MEMSCHED, *args], capture_output=True, text=True, timeout=120, env=os.environ.copy())


# --------------------------------------------------------------------------- 1. the command line
def test_graph_cpsat_refuses_memory_gb_on_the_command_line() -> None:
    proc = _cli("solve", GRAPH, "--budget", "60%", "--solver", "cpsat", "--option", "memory_gb=1e-9",
                "--option", "warm_start=false", "--time-limit", "5")
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "--option memory_gb" in lines[0] and "max_computations" in lines[0], lines  # the options it takes
    assert "memory_gb" not in lines[0].split("its options:")[1], lines


def test_checkmate_still_takes_memory_gb_on_the_command_line() -> None:
    proc = _cli("solve", GRAPH, "--budget", "60%", "--solver", "checkmate", "--option", "memory_gb=0",
                "--time-limit", "20")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("backend", ["highs", "cbc", "cp-sat"])
def test_chain_milp_refuses_memory_gb_with_a_backend_without_a_memory_limit(backend: str) -> None:
    proc = _cli("solve", CHAIN, "--budget", "90%", "--solver", "milp", "--option", f"backend={backend}",
                "--option", "memory_gb=1", "--time-limit", "5")
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--option memory_gb" in lines[0] and backend in lines[0], lines
    with pytest.raises(InputError) as err:
        memsched.solve(CHAIN, "90%", "milp", backend=backend, memory_gb=1.0, time_limit=2)
    assert err.value.field == "memory_gb" and backend in str(err.value)


@pytest.mark.parametrize("backend", [None, "scip", "portfolio", "SCIP"])
def test_chain_milp_takes_memory_gb_with_scip(backend: str | None) -> None:
    res = memsched.solve(CHAIN, "90%", "milp", backend=backend, memory_gb=4.0, time_limit=20)
    assert res.status == "optimal"


# --------------------------------------------------------------------------- 1. Python, every CP-SAT model
@pytest.mark.parametrize("problem, path, solver, where", CPSAT_SOLVERS,
                         ids=[f"{p}-{s}" for p, _, s, _ in CPSAT_SOLVERS])
def test_cpsat_models_refuse_memory_gb(problem: str, path: str, solver: str, where: dict[str, Any]) -> None:
    from memsched.experiments.commands._checks import solver_parameters

    taken = solver_parameters(problem, solver)
    assert "memory_gb" not in taken and "workers" in taken
    with pytest.raises(InputError) as err:  # memsched.solve: not an option of this solver
        memsched.solve(path, "90%", solver, problem=problem, memory_gb=1.0, time_limit=1, warm_start=False, **where)
    assert err.value.field == "memory_gb"
    # the solver itself (the registry, a sweep's cell): refused before anything runs
    raw = memsched.load(path, problem=problem, **({"bandwidth": where["bandwidth"]} if "bandwidth" in where else {}))
    extra = {"devices": where["devices"]} if "devices" in where else {}
    with pytest.raises(InputError, match="not taken by .*memory limit") as err:
        registry.solve(problem, raw, solver, 10**12, memory_gb=1.0, time_limit=0.5, warm_start=False, **extra)
    assert err.value.field is not None and err.value.field.endswith("memory_gb")


def test_a_shared_memory_gb_goes_only_to_the_solvers_that_take_it() -> None:
    res = memsched.solve(GRAPH, "80%", ["checkmate", "cpsat"], memory_gb=0, time_limit=20)
    assert [r.status for r in res] == ["optimal", "optimal"], [(r.solver, r.status, r.message) for r in res]


def test_the_solver_listing_says_which_solvers_take_memory_gb() -> None:
    from memsched.experiments.commands.solvers import fast_solver_table

    takes = {(p, n) for p, n, summary in fast_solver_table() if "memory_gb" in summary}
    assert takes == {("chain", "milp"), ("graph", "checkmate"), ("graph", "checkmate-approx"), ("join", "milp"),
                     ("offload", "milp")}
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "which only\nthe solvers that honour it take" in docs


# --------------------------------------------------------------------------- 2. join cpsat orders
@pytest.mark.parametrize("orders", [np.array([[1, 0]]), [[np.int64(1), np.int64(0)]], [np.array([1, 0])],
                                    ((np.int32(1), 0),)], ids=["array", "np.int64", "row-array", "tuple"])
def test_join_cpsat_orders_take_numpy_values(orders: Any) -> None:
    res = memsched.solve(JOIN, "75%", "cpsat", orders=orders, time_limit=2)
    assert res.status == "optimal"
    assert [d["order"] for d in res.raw.details["orders"]] == [[1, 0]]
    assert all(type(b) is int for d in res.raw.details["orders"] for b in d["order"])


@pytest.mark.parametrize("orders", [np.array([[True, False]]), [[True, False]], np.array([[1.0, 0.0]]), "ALL",
                                    np.array([1, 0]), np.array([[1, 0], [1, 0]])])
def test_join_cpsat_orders_refuse_what_is_no_list_of_orders(orders: Any) -> None:
    with pytest.raises(InputError) as err:
        memsched.solve(JOIN, "75%", "cpsat", orders=orders, time_limit=2)
    assert err.value.field == "orders"

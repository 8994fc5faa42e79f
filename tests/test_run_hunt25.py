"""Hunt 25 (`memsched run`, factory files, checkmate-approx):

1. A solver timeout without a schedule was reported as "infeasible" ("checkmate finds no schedule
   within budget 9907 bytes", stderr ``memsched run: infeasible: ...``) though its status was
   ``timeout``: the message is now built from the status (`models.run.no_schedule_message`) and
   the stderr line starts with the status; the exit code stays 1.
2. A graph or chain file made from a factory that takes no ``batch`` could not be run again: the
   batch its meta records (the example input's) was forwarded to the factory ("--batch:
   seqnet.py:make takes no argument 'batch'") though the user gave none. A recorded size the
   factory takes no argument for is no longer passed to it; a ``--batch`` given to it stays an
   error, and an input of other bytes is still refused.
3. ``checkmate-approx`` set ``min_budget`` to the least peak of this budget's roundings, which is
   not a budget it meets (at 89 it said 90; at 90 it found nothing and said 92), and that stopped
   `memsched solve`'s search for the real smallest budget. It is now ``details["least_rounding_peak"]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import memsched.models.run  # noqa: E402
from memsched.solvers.result import INFEASIBLE, TIMEOUT, SolveResult  # noqa: E402

torch.set_num_threads(1)

CPU = ["--device", "cpu", "--threads", "1", "--time-repeats", "1", "--no-independent"]
SEQNET = """import torch, torch.nn as nn
def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)), \\
        torch.randn({batch}, 16)
"""


def _factory(tmp_path: Path, batch: int = 8) -> str:
    """A factory file whose function takes no argument (its example input has `batch` rows)."""
    (tmp_path / "seqnet.py").write_text(SEQNET.format(batch=batch))
    return str(tmp_path / "seqnet.py") + ":make"


# ---------------------------------------------------------------------------- 1. a timeout is not "infeasible"
@pytest.fixture
def solver_times_out(monkeypatch):
    """Every solve of `memsched.models.run` ends at its time limit without a schedule."""
    def fake(problem: str, instance: Any, solver: str, budget: int, **kw: Any) -> SolveResult:
        return SolveResult(problem=problem, solver=solver, status=TIMEOUT, budget=budget, solve_time_s=0.1)

    monkeypatch.setattr(memsched.models.run.registry, "solve", fake)


def test_cli_run_reports_a_timeout_as_a_timeout(cli, tmp_path, solver_times_out):
    """The hunter's repro (checkmate, --time-limit 5, a graph) with the timeout made certain."""
    res = cli("run", _factory(tmp_path), "--budget", "60%", "--solver", "rotor", "--time-limit", "5", "--json", *CPU)
    assert res.code == 1, (res.code, res.err)
    out = res.json()
    assert out["status"] == "timeout"
    assert "time limit (5 s)" in out["message"] and "budget" not in out["message"], out["message"]
    assert res.err.startswith("memsched run: timeout: rotor found no schedule within the time limit"), res.err
    assert "infeasible" not in res.err


def test_run_describe_prints_the_status_without_a_schedule(tmp_path, solver_times_out):
    out = memsched.models.run.run(_factory(tmp_path), "60%", solver="rotor", time_limit=2.0,
                                  sizes={"device": "cpu"}, time_repeats=1, profile_repeats=1)
    text = memsched.models.run.describe(out)
    assert "\n  timeout: rotor found no schedule within the time limit (2 s)" in text, text
    assert "infeasible" not in text


def test_no_schedule_message_by_status():
    from memsched.models.run import no_schedule_message

    timeout = SolveResult(problem="graph", solver="checkmate", status=TIMEOUT, budget=9907)
    assert no_schedule_message(timeout, 9907) == "checkmate found no schedule within the time limit"
    infeasible = SolveResult(problem="graph", solver="checkmate", status=INFEASIBLE, budget=9907, min_budget=12000)
    assert no_schedule_message(infeasible, 9907, 5.0) == ("checkmate finds no schedule within budget 9907 bytes "
                                                          "(smallest feasible budget: 12000 bytes)")


# ---------------------------------------------------------------------------- 2. a factory without `batch`
def test_graph_file_of_a_factory_without_batch_runs_again(cli, tmp_path):
    spec = _factory(tmp_path)
    graph = tmp_path / "seq_graph.json"
    assert cli("export-graph", spec, "--threads", "1", "--device", "cpu", "--ram", "tape", "-o", graph).code == 0
    assert json.loads(graph.read_text())["graph"]["meta"].get("batch") == 8  # the example's batch, recorded
    res = cli("run", graph, "--solver", "dtr", "--budget", "90%", "--json", *CPU)
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True


def _profiled_chain(cli, tmp_path):
    """The chain file `memsched profile` writes for the batch-less factory."""
    chain = tmp_path / "seq_chain.json"
    assert cli("profile", _factory(tmp_path), "--threads", "1", "--device", "cpu", "--repeats", "1",
               "-o", chain).code == 0
    return chain


def test_chain_file_of_a_factory_without_batch_runs_again(cli, tmp_path):
    res = cli("run", _profiled_chain(cli, tmp_path), "--budget", "90%", "--json", *CPU)
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True


def test_factory_without_batch_still_refuses_a_given_batch_and_other_inputs(cli, tmp_path):
    chain = _profiled_chain(cli, tmp_path)
    res = cli("run", chain, "--budget", "90%", "--batch", "8", *CPU)
    assert res.code == 2 and "--batch" in res.err and "takes no argument 'batch'" in res.err, res.err
    _factory(tmp_path, batch=4)  # the factory changed since: its input has other bytes
    res = cli("run", chain, "--budget", "90%", *CPU)
    assert res.code == 2 and "profiled on an input of" in res.err, res.err


def test_instance_sizes_keeps_a_recorded_size_the_factory_takes(tmp_path):
    (tmp_path / "sized.py").write_text("import torch, torch.nn as nn\n"
                                       "def make(batch=3):\n    return nn.Sequential(nn.Linear(4, 4)), "
                                       "torch.randn(batch, 4)\n")
    spec = str(tmp_path / "sized.py") + ":make"

    class Inst:
        meta = {"model": spec, "batch": 2}

    assert memsched.models.run.instance_sizes(Inst(), spec, None, "graph") == {"batch": 2}
    no_batch = _factory(tmp_path)
    Inst.meta = {"model": no_batch, "batch": 8}
    assert memsched.models.run.instance_sizes(Inst(), no_batch, None, "graph") == {}


# ---------------------------------------------------------------------------- 3. checkmate-approx min_budget
def test_checkmate_approx_claims_no_smallest_budget():
    """The hunter's graph: 89 is below its necessary budget (90: the proof), at 90 nothing fits (92). The
    solver itself claims no smallest budget (`memsched.solve`, like the command line, then searches
    for one: `test_cli_solve_searches_checkmate_approx_smallest_budget`)."""
    from memsched.solvers import registry
    from memsched.solvers.graph.generate import random_dag

    graph = random_dag(6, 20, edge_prob=0.3, ram_range=(1, 40))
    raw = registry.solve("graph", graph, "checkmate-approx", 89, slots=0)  # below the necessary budget: the proof
    assert raw.status == "infeasible" and raw.min_budget is None and raw.details["necessary_budget"] == 90
    raw = registry.solve("graph", graph, "checkmate-approx", 90, slots=0)
    assert raw.status == "infeasible" and raw.min_budget is None, raw.min_budget
    assert raw.details["least_rounding_peak"] == 92


def test_cli_solve_searches_checkmate_approx_smallest_budget(cli, tmp_path):
    from memsched.solvers.graph.generate import random_dag

    import memsched.api as api

    graph = random_dag(6, 20, edge_prob=0.3, ram_range=(1, 40))
    path = tmp_path / "g.json"
    graph.save(str(path))
    res = cli("solve", path, "--budget", "89", "--solver", "checkmate-approx", "--slots", "0", "--json")
    assert res.code == 1
    need = res.json()["min_budget"]
    assert need is not None and "smallest feasible budget: " + str(need) in res.err, res.err
    assert api.solve(graph, need, "checkmate-approx", slots=0).raw.status == "feasible"
    assert api.solve(graph, need - 1, "checkmate-approx", slots=0).raw.status == "infeasible"

"""The memory guard: a model that would not fit is not built, and the answer says why."""

from __future__ import annotations

import numpy as np
import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact import memory
from memsched.solvers.exact.milp_runner import run_milp
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.graph import generate, reference_peak
from memsched.solvers.graph.milp import CheckmateModel, checkmate_size
from memsched.solvers.result import FEASIBLE, TIMEOUT


def built_size(graph, W=None):
    cm = CheckmateModel(graph, graph.cost_ram, float(graph.cost_ram.sum()), W=W)
    return cm.model.num_vars, len(cm.model.rows), sum(len(row[0]) for row in cm.model.rows)


@pytest.mark.parametrize("graph", [generate.linear_graph(9), generate.vgg16(), generate.random_layered(40, 1),
                                   generate.random_dag(25, 2), generate.resnet((1, 1, 1, 1))],
                         ids=["linear9", "vgg16", "rl40", "dag25", "resnet"])
def test_checkmate_size_counts_the_built_model(graph):
    size = checkmate_size(graph)
    assert (size.variables, size.rows, size.nonzeros) == built_size(graph)


def test_checkmate_size_counts_workspace_rows():
    g = generate.random_dag(20, 3)
    W = np.zeros(g.n)
    W[::3] = 2.0
    size = checkmate_size(g, W)
    assert (size.variables, size.rows, size.nonzeros) == built_size(g, W)
    assert size.rows > checkmate_size(g, np.zeros(g.n)).rows


def test_too_big_compares_the_estimate_with_the_memory():
    size = memory.ModelSize(variables=10, rows=10, nonzeros=10**6)
    need = size.bytes_needed("scip")
    assert memory.too_big(size, "scip", memory_gb=need / memory.GB) is not None  # only 80% may be used
    assert memory.too_big(size, "scip", memory_gb=2 * need / memory.GB) is None
    assert memory.too_big(size, "scip", memory_gb=0) is None  # the check is off
    why = memory.too_big(size, "scip", memory_gb=0.01)
    assert why is not None and "1,000,000 nonzeros" in why and "10 MB available" in why
    assert size.bytes_needed("highs") < size.bytes_needed("scip")


def test_without_known_memory_nothing_is_refused(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    size = memory.ModelSize(variables=1, rows=1, nonzeros=10**12)
    assert memory.too_big(size, "scip") is None
    assert memory.limit_mb() is None
    monkeypatch.setattr(memory, "available_bytes", lambda: 1e9)
    assert memory.too_big(size, "scip") is not None
    assert memory.limit_mb() == int(0.8 * 1e9 / 2**20)


def test_memory_option_is_validated():
    with pytest.raises(InputError, match="memory_gb"):
        ExactOptions(memory_gb=-1).validated()
    assert ExactOptions(memory_gb=2).validated().memory_gb == 2.0


def _hard_cell():
    g = generate.random_layered(30, 0)
    return g, int(0.7 * reference_peak(g))


def test_checkmate_not_built_answers_with_the_seed():
    g, budget = _hard_cell()
    res = registry.solve("graph", g, "checkmate", budget, time_limit=20, memory_gb=0.001)
    assert res.status == FEASIBLE and res.schedule is not None
    assert res.details["not_built"].startswith("the model (")
    assert res.details["solution_from"] == res.seeded_by
    assert res.message.startswith("Checkmate's model was not built: the model (")
    assert res.message.endswith(f"returned {res.seeded_by}'s schedule (replayed at exact sizes)")
    assert res.scope.startswith(f"{res.seeded_by}'s schedule")  # not the model's scope: no model ran
    assert res.objective == pytest.approx(res.details["fast"][res.seeded_by])


def test_checkmate_approx_not_built_says_why():
    g, budget = _hard_cell()
    res = registry.solve("graph", g, "checkmate-approx", budget, time_limit=20, memory_gb=0.001)
    assert res.status == TIMEOUT and res.schedule is None
    assert "the LP was not built" in res.message and "not_built" in res.details


def test_scip_stops_at_its_memory_limit():
    g = generate.random_layered(60, 0)
    cm = CheckmateModel(g, g.cost_ram, int(0.8 * reference_peak(g)))
    run = run_milp(cm.model, "scip", Deadline(30), ExactOptions(memory_gb=1e-5))  # 64 MB: SCIP's floor
    assert run.status == TIMEOUT and run.backend_status == "ABNORMAL"


def test_the_memory_bench_measures_and_reestimates(tmp_path):
    import csv

    from memsched.experiments import bench_model_memory

    out = tmp_path / "mem.csv"
    assert bench_model_memory.main(["--sizes", "20", "--backends", "scip", "lp", "--time-limit", "2",
                                    "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    g = generate.random_layered(20, 0)
    assert [r["backend"] for r in rows] == ["scip", "lp"]
    assert all(int(r["nonzeros"]) == checkmate_size(g).nonzeros for r in rows)
    assert all(float(r["measured_gb"]) > 0 and r["estimate_covers"] == "True" for r in rows)
    rows[0]["measured_gb"] = "999"  # a peak the guard does not plan for is reported
    bench_model_memory.write_csv(rows, out, bench_model_memory.FIELDS)
    assert bench_model_memory.main(["--reestimate", "--out", str(out)]) == 0
    assert [r["estimate_covers"] for r in csv.DictReader(out.open())] == ["False", "True"]
    assert bench_model_memory.main(["--reestimate", "--out", str(tmp_path / "missing.csv")]) == 2
    # --resume measures only the pairs --out lacks
    assert bench_model_memory.main(["--sizes", "20", "--backends", "scip", "cbc", "--time-limit", "2", "--resume",
                                    "--out", str(out)]) == 0
    assert [r["backend"] for r in csv.DictReader(out.open())] == ["scip", "lp", "cbc"]


def test_the_command_line_prints_why(tmp_path):
    from conftest import run_cli

    g, budget = _hard_cell()
    path = tmp_path / "rl30.json"
    g.save(path)
    out = run_cli("solve", path, "--solver", "checkmate", "--budget", budget, "--time-limit", 20,
                  "--option", "memory_gb=0.001")
    assert out.code == 0
    note = [line for line in out.out.splitlines() if line.startswith("note ")]
    assert len(note) == 1 and "Checkmate's model was not built" in note[0]

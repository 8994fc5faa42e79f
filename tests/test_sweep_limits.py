"""Limits of a sweep checked before any work: a Dask scheduler that cannot be reached (before
``--fresh`` discards the journal), instances read from files held to the sizes generated ones
are held to, bounds on ``workers`` and ``[measure]``, and checkmate-approx's random roundings
drawn one at a time (memory that does not grow with ``samples``)."""

from __future__ import annotations

import json
import socket
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, sweep_toml
from memsched.experiments.sweep import journal_path, load_config, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.solvers.errors import InputError

import memsched

TINY = EXAMPLES / "tiny.json"
MLP7 = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"


def one_line_error(res: Any, *mentions: str) -> str:
    """`res` (a `run_cli` result) is exit 2 with one stderr line naming each of `mentions`."""
    assert res.code == 2, (res.code, res.err)
    assert "Traceback" not in res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    for m in mentions:
        assert m in lines[0], (m, lines[0])
    return lines[0]


def write_sweep(tmp_path: Path, name: str = "lim", *, instances: list[dict[str, Any]] | None = None,
                solvers: list[Any] | None = None, **top: Any) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(sweep_toml(name, budgets=["90%"], instances=instances or [{"file": TINY}],
                               solvers=solvers or ["store-all"], **top))
    return path


def closed_port() -> int:
    """A localhost port that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ 1. an unreachable scheduler
def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def journaled(tmp_path, monkeypatch) -> tuple[Path, Path, dict[str, bytes]]:
    """A sweep file, its output folder with a finished journal, and the folder's files; a Dask
    scheduler gets 2 s to answer."""
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT_S", 2)
    cfg = write_sweep(tmp_path)
    out = tmp_path / "out"
    assert run_sweep(cfg, output=out, workers=1, isolate=False, progress=False).ran == 1
    files = snapshot(out)
    assert journal_path(out, "lim").name in files
    return cfg, out, files


def test_unreachable_scheduler_with_fresh_keeps_the_journal(cli, journaled):
    cfg, out, before = journaled
    address = f"tcp://127.0.0.1:{closed_port()}"
    line = one_line_error(cli("sweep", cfg, "--output", out, "--scheduler", address, "--fresh", "--no-progress"),
                          "--scheduler", address, "cannot reach the Dask scheduler")
    assert "after 2 s" in line
    assert snapshot(out) == before  # the journal's finished rows kept, nothing written


def test_unreachable_scheduler_makes_no_output_folder(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT_S", 2)
    cfg = write_sweep(tmp_path)
    out = tmp_path / "never"
    one_line_error(cli("sweep", cfg, "--output", out, "--scheduler", f"127.0.0.1:{closed_port()}", "--no-progress"),
                   "--scheduler")
    assert not out.exists()


def test_run_sweep_connects_before_building_or_discarding(journaled, monkeypatch):
    cfg, out, before = journaled

    def never(*_: Any, **__: Any) -> None:
        raise AssertionError("the grid was built before the scheduler was reached")

    monkeypatch.setattr(sweep_run, "build_tasks", never)
    with pytest.raises(InputError, match="cannot reach the Dask scheduler") as err:
        run_sweep(cfg, output=out, scheduler=f"tcp://127.0.0.1:{closed_port()}", fresh=True, progress=False)
    assert err.value.field == "--scheduler"
    assert snapshot(out) == before


def test_a_reachable_scheduler_address_runs_the_sweep(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    cfg = write_sweep(tmp_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        outcome = run_sweep(cfg, output=tmp_path / "out", scheduler=cluster.scheduler_address, progress=False,
                            fresh=True)
    assert outcome.ran == 1 and outcome.rows[0]["status"] == "infeasible"  # store-all at 90% of its own peak


# ------------------------------------------------------------------ 2. instances read from files
def long_chain(tmp_path: Path) -> Path:
    """tiny.json's 4 stages 1250 times: 5000 stages, above the 1000 of `memsched solve`."""
    data = json.loads(TINY.read_text())
    data["stages"] = data["stages"] * 1250
    path = tmp_path / "long.json"
    path.write_text(json.dumps(data))
    return path


def big_graph(tmp_path: Path) -> Path:
    """Checkmate's linear graph of 500 forward nodes: 1001 nodes, above the 1000 of checkmate."""
    from memsched.solvers.graph.generate import linear_graph

    path = tmp_path / "big-graph.json"
    path.write_text(json.dumps(linear_graph(500).to_dict()))
    return path


def test_a_file_chain_is_held_to_solves_stage_limit(cli, tmp_path):
    solve = cli("solve", long_chain(tmp_path), "--budget", "90%", "--solver", "rotor")
    assert solve.code == 2 and "1000" in solve.err  # memsched solve refuses the file ...
    cfg = write_sweep(tmp_path, instances=[{"file": long_chain(tmp_path)}], solvers=["rotor"])
    out = tmp_path / "out"
    line = one_line_error(cli("sweep", cfg, "--output", out, "--no-progress"), str(cfg), "instances[0].file",
                          "5000 stages", "1000", "rotor")  # ... and so does the sweep, before any cell
    assert "Traceback" not in line
    assert not journal_path(out, "lim").exists()
    one_line_error(cli("sweep", cfg, "--output", out, "--list"), "instances[0].file")


def test_a_file_chain_is_fine_for_store_all_or_with_a_max_length(cli, tmp_path):
    cfg = write_sweep(tmp_path, instances=[{"file": long_chain(tmp_path)}],
                      solvers=["store-all", {"name": "rotor", "max_length": 100}])
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--list")
    assert res.code == 0, res.err
    assert "store-all" in res.out and "skipped on" in res.out


def test_a_file_graph_is_held_to_the_model_solvers_node_limit(cli, tmp_path):
    graph = big_graph(tmp_path)
    cfg = write_sweep(tmp_path, instances=[{"file": graph}], solvers=["checkmate"])
    one_line_error(cli("sweep", cfg, "--output", tmp_path / "out", "--list"), str(cfg), "instances[0].file",
                   "1001 graph nodes", "checkmate")
    ok = write_sweep(tmp_path, "ok", instances=[{"file": graph}], solvers=["dtr"])  # 2000 for the heuristics
    assert cli("sweep", ok, "--output", tmp_path / "out", "--list").code == 0


def test_a_file_pipeline_is_held_to_the_dp_steps_on_its_devices(cli, tmp_path):
    cfg = write_sweep(tmp_path, instances=[{"file": MLP7, "problem": "pipeline"}],
                      solvers=[{"name": "madpipe", "options": {"devices": 10**6, "replication": True}}])
    one_line_error(cli("sweep", cfg, "--output", tmp_path / "out", "--list"), "instances[0].file",
                   "pipeline layers", "devices", "replication")  # straight: 7 layers use at most 7 devices


def test_a_file_pipeline_on_many_devices_uses_at_most_one_per_layer(cli, tmp_path):
    cfg = write_sweep(tmp_path, instances=[{"file": MLP7, "problem": "pipeline"}],
                      solvers=[{"name": "madpipe", "options": {"devices": 10**6}}])
    assert cli("sweep", cfg, "--output", tmp_path / "out", "--list").code == 0


def test_the_file_check_names_the_sweep_file_in_python(tmp_path):
    cfg = write_sweep(tmp_path, instances=[{"file": long_chain(tmp_path)}], solvers=["rotor"])
    with pytest.raises(InputError) as err:
        run_sweep(cfg, output=tmp_path / "out", progress=False)
    assert err.value.path == str(cfg) and err.value.field == "instances[0].file"


def test_a_profiled_model_is_held_to_the_limits_too(tmp_path):
    """A ``model`` instance is known in size only once profiled: it is checked then, before any
    cell, as a file is (a graph of 1001 nodes for checkmate, here standing in for a profile)."""
    from memsched.experiments.sweep.config import InstanceSpec
    from memsched.experiments.sweep.grid import check_file_sizes
    from memsched.experiments.sweep.instances import LoadedInstance
    from memsched.solvers.graph.generate import linear_graph

    cfg = load_config(write_sweep(tmp_path, instances=[{"file": big_graph(tmp_path)}], solvers=["checkmate", "dtr"]))
    spec = InstanceSpec(index=0, kind="model", params={"model": "resnet18"}, problem="graph")
    li = LoadedInstance(spec, "resnet18", "graph", linear_graph(500), "model resnet18", 1001, None, None)
    with pytest.raises(InputError, match="1001 graph nodes.*coarser granularity") as err:
        check_file_sizes(cfg, li, list(cfg.solvers))
    assert err.value.field == "instances[0].model"
    check_file_sizes(cfg, li, [s for s in cfg.solvers if s.name == "dtr"])  # 2000 for the heuristics


# ------------------------------------------------------------------ 3. workers, [measure], samples
@pytest.mark.parametrize("table, field, bound", [
    ({"time_repeats": 10**4 + 1}, "measure.time_repeats", "1..10000"), ({"warmup": 10**4 + 1}, "measure.warmup",
                                                                        "0..10000"),
    ({"threads": 1025}, "measure.threads", "1..1024"), ({"time_repeats": 10**100}, "measure.time_repeats", "1..10000"),
])
def test_measure_settings_have_upper_bounds(tmp_path, table, field, bound):
    cfg = write_sweep(tmp_path, tables={"measure": table})
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.path == str(cfg) and err.value.field == field
    assert bound in str(err.value) and len(str(err.value).splitlines()) == 1


def test_measure_settings_at_their_bounds(tmp_path):
    cfg = write_sweep(tmp_path, tables={"measure": {"time_repeats": 10**4, "warmup": 10**4, "threads": 1024}})
    assert load_config(cfg).measure == {"time_repeats": 10**4, "warmup": 10**4, "threads": 1024}


def test_a_sweep_files_workers_are_bounded(tmp_path):
    with pytest.raises(InputError) as err:
        load_config(write_sweep(tmp_path, workers=513))
    assert err.value.field == "workers" and "1..512" in str(err.value)
    assert load_config(write_sweep(tmp_path, "ok", workers=512)).workers == 512


def test_workers_on_the_command_line_and_in_python_are_bounded(cli, tmp_path):
    cfg = write_sweep(tmp_path)
    one_line_error(cli("sweep", cfg, "--workers", "513", "--list"), "--workers", "1..512")
    assert cli("sweep", cfg, "--workers", "512", "--list", "--output", tmp_path / "out").code == 0
    with pytest.raises(memsched.InputError, match="workers") as err:
        memsched.sweep(cfg, output=tmp_path / "out", workers=513)
    assert "1..512" in str(err.value)
    assert not journal_path(tmp_path / "out", "lim").exists()


def _tiny_relaxation() -> np.ndarray:
    rng = np.random.default_rng(7)
    return np.tril(rng.random((12, 12)), -1)


def test_roundings_are_drawn_one_at_a_time_and_as_before():
    from memsched.solvers.graph.lp_bounds import THRESHOLDS, roundings

    Sstar = _tiny_relaxation()
    lazy = roundings(Sstar, 10**6, seed=3)
    assert isinstance(lazy, Iterator)  # not a list of 10^6 matrices
    first = [next(lazy) for _ in range(len(THRESHOLDS) + 3)]
    rng = np.random.default_rng(3)  # the drawing of the whole list, as it was: same matrices, same order
    eager = [Sstar > t for t in THRESHOLDS] + [rng.random(Sstar.shape) < Sstar for _ in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(first, eager, strict=True))
    assert len(list(roundings(Sstar, 4, seed=3))) == len(THRESHOLDS) + 4


def test_checkmate_approx_memory_does_not_grow_with_samples():
    """10^6 samples under a 3 s limit: the roundings not reached are never drawn (all drawn up
    front, they took over 100 MB on this 21-node graph, and seconds before the first was tried).
    (A 1 s limit was too short under tracemalloc on a loaded machine: the LP itself had not ended.)"""
    graph = memsched.load(ROOT / "solvers" / "data" / "graphs" / "linear10.json")
    budget = memsched.budget(graph, "90%")
    tracemalloc.start()
    try:
        result = memsched.solve(graph, budget, "checkmate-approx", samples=10**6, time_limit=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 2**20, peak
    tried, total = result.raw.details["roundings_tried"].split(" of ")
    assert int(total) == 10**6 + 6 and int(tried) < int(total)
    assert result.found


def test_checkmate_approx_gives_the_same_answer_for_the_same_seed():
    graph = memsched.load(ROOT / "solvers" / "data" / "graphs" / "linear10.json")
    a, b = (memsched.solve(graph, "70%", "checkmate-approx", samples=30, seed=5) for _ in range(2))
    assert a.status == b.status and a.objective == b.objective
    assert a.raw.details["roundings_tried"] == "36 of 36"

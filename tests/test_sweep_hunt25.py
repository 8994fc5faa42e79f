"""Fixes from hunt 25 on sweeps: executing cells on Dask one at a time, generator failures and
instance names, non-string and duplicate YAML keys, unusable names and outputs, scheduler
schemes, solver entries that run no cell, shared_table on other solvers, generated offload chains."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import EXAMPLES, run_cli, sweep_toml
from memsched.experiments.sweep import load_config, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.solvers.errors import InputError

TINY = EXAMPLES / "tiny.json"


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(path: Path) -> InputError:
    """The `InputError` of reading sweep file `path`."""
    with pytest.raises(InputError) as err:
        load_config(path)
    assert "\n" not in str(err.value)
    return err.value


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes); {} when it does not exist."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} \
        if folder.exists() else {}


# ------------------------------------------------------------------ 6. executing cells on Dask: one at a time
class CountingFuture:
    def __init__(self, client: CountingClient, task: Any) -> None:
        self.client, self.task, self.status = client, task, "finished"

    def result(self) -> dict[str, Any]:
        from memsched.experiments.sweep.cell import failed_row

        self.client.waiting.discard(id(self))
        return failed_row(self.task, "not run (a fake Dask cell)")


class CountingClient:
    """A Dask client that records how many cells were submitted and not yet waited for."""

    def __init__(self) -> None:
        self.waiting: set[int] = set()
        self.most = 0
        self.futures: list[CountingFuture] = []

    def submit(self, fn: Any, task: Any, **kwargs: Any) -> CountingFuture:
        fut = CountingFuture(self, task)
        self.futures.append(fut)
        self.waiting.add(id(fut))
        self.most = max(self.most, len(self.waiting))
        return fut

    def cancel(self, futures: Any) -> None:
        pass


def test_executing_cells_run_one_at_a_time_on_dask(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(list(futures)))
    real = sweep_run.build_tasks

    def executing(*args: Any, **kwargs: Any) -> list[Any]:  # executing cells without profiling a network
        return [dataclasses.replace(t, execute=True) for t in real(*args, **kwargs)]

    monkeypatch.setattr(sweep_run, "build_tasks", executing)
    cfg = write(tmp_path, sweep_toml("ex", budgets=["90%", "100%"], instances=[{"file": TINY}],
                                     solvers=["rotor", "store-all"]))
    client = CountingClient()
    outcome = run_sweep(cfg, output=tmp_path / "out", scheduler=client, workers=4, progress=False)
    assert outcome.ran == len(client.futures) == 4
    assert client.most == 1  # each cell submitted once the one before has finished
    assert not any("one worker instead of" in n for n in outcome.notes), outcome.notes
    assert any("one cell at a time on the Dask cluster" in n for n in outcome.notes), outcome.notes


# ------------------------------------------------------------------ 1. generator failures, instance names
def test_any_generator_failure_is_bad_input_and_the_store_is_restored(tmp_path):
    out = tmp_path / "out"
    good = write(tmp_path, sweep_toml("g", budgets=["50%"], instances=[{"generate": "chain", "L": 5, "seed": 1}],
                                      solvers=["store-all"]), "g.toml")
    run_sweep(good, output=out, progress=False)
    before = tree(out / "instances")
    assert "index.json" in before
    bad = write(tmp_path, sweep_toml("g", budgets=["50%"], solvers=["checkpoint-all"],
                                     instances=[{"generate": "chain", "L": 5, "seed": 1},
                                                {"generate": "chain", "L": 7, "seed": 4},
                                                {"generate": "graph", "n": 6, "width": "x"}]), "g.toml")
    with pytest.raises(InputError) as err:  # an IndexError inside the generator
        run_sweep(bad, output=out, progress=False)
    assert err.value.field == "instances[2]" and "cannot generate" in str(err.value), err.value
    assert tree(out / "instances") == before  # the L=7 chain is not left, index.json as it was
    assert not (out / ".sweep.lock").read_bytes()


def test_a_generated_instance_name_must_be_a_non_empty_string(tmp_path):
    for name in (5, ""):
        cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6, "name": name}],
                                         solvers=["rotor"]))
        assert refused(cfg).field == "instances[0].name"
    from memsched.experiments.sweep import instances

    spec = load_config(write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6}],
                                                  solvers=["rotor"]))).instances[0]
    with pytest.raises(InputError) as err:  # a generator whose instance has no usable name
        instances._generated_name(type("Odd", (), {"name": 7})(), spec, "s.toml")
    assert err.value.field == "instances[0]"


def test_cli_generator_type_error_is_exit_2_and_leaves_nothing(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6, "name": 5}],
                                     solvers=["rotor"]))
    res = run_cli("sweep", cfg, "--output", tmp_path / "o", "--no-progress")
    assert res.code == 2, res.err
    assert "instances[0].name" in res.err and not (tmp_path / "o").exists()


# ------------------------------------------------------------------ 2, 7. YAML keys
def test_yaml_non_string_key_is_refused_naming_it(tmp_path):
    cfg = write(tmp_path, 'budgets: ["50%"]\ninstances:\n  - generate: chain\n    L: 6\n    1: 2\n'
                          'solvers:\n  - name: rotor\n', "s.yaml")
    err = refused(cfg)
    assert err.field == "instances[0].1" and "string" in err.message


def test_yaml_duplicate_key_is_refused_with_its_line(tmp_path):
    cfg = write(tmp_path, 'budgets: ["50%", "70%"]\nbudgets: ["100%"]\ninstances:\n  - generate: chain\n'
                          '    L: 6\nsolvers:\n  - name: rotor\n', "s.yaml")
    assert "invalid YAML at line 2: duplicate key 'budgets'" in str(refused(cfg))
    merged = write(tmp_path, 'budgets: ["50%"]\ninstances:\n  - &i {generate: chain, L: 6}\n  - {<<: *i, L: 7}\n'
                   'solvers:\n  - name: rotor\n', "m.yaml")
    assert [s.params["L"] for s in load_config(merged).instances] == [6, 7]  # a merge key may be overridden


# ------------------------------------------------------------------ 3. name and output
@pytest.mark.parametrize("top, field", [({"name": "a\u0000b"}, "name"), ({"name": "a" * 300}, "name"),
                                        ({"output": "x\u0000y"}, "output")])
def test_unusable_name_or_output_is_refused(tmp_path, top, field):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6}], solvers=["rotor"],
                                     **top))
    assert refused(cfg).field == field


def test_an_output_path_with_a_nul_is_bad_input(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"file": TINY}], solvers=["rotor"]))
    with pytest.raises(InputError) as err:
        run_sweep(cfg, output=str(tmp_path / "x\u0000y"), progress=False)
    assert err.value.field == "output"
    with pytest.raises(InputError) as err:
        run_sweep(cfg, output=str(tmp_path / ("d" * 300) / "o"), progress=False)
    assert err.value.field == "output"


# ------------------------------------------------------------------ 4. scheduler schemes
@pytest.mark.parametrize("address", ["inproc://x", "tls://127.0.0.1:1"])
def test_a_scheduler_scheme_that_cannot_connect_is_bad_input(address):
    pytest.importorskip("dask.distributed")
    with pytest.raises(InputError) as err:
        with sweep_run.scheduler_client(address):
            pass
    assert err.value.field == "--scheduler" and "\n" not in str(err.value)


# ------------------------------------------------------------------ 5. problems that run no cell
@pytest.mark.parametrize("problems", [["graph"], []])
def test_solver_problems_that_never_match_are_refused(tmp_path, problems):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"example": "tiny"}],
                                     solvers=[{"name": "rotor", "problems": problems}]))
    assert refused(cfg).field == "solvers[0].problems"


def test_solver_problems_that_match_are_kept(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"example": "tiny"}],
                                     solvers=[{"name": "rotor", "problems": ["chain", "graph"]}]))
    assert load_config(cfg).solvers[0].problems == ("chain", "graph")


# ------------------------------------------------------------------ 8. shared_table on other solvers
def test_shared_table_on_a_solver_without_one_is_refused_in_its_entry(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6}],
                                     solvers=[{"name": "revolve", "shared_table": True}]))
    assert refused(cfg).field == "solvers[0].shared_table"
    ok = write(tmp_path, sweep_toml(budgets=["50%"], instances=[{"generate": "chain", "L": 6}],
                                    defaults={"shared_table": True}, solvers=["rotor", "revolve"]))
    assert [s.shared_table for s in load_config(ok).solvers] == [True, True]  # [defaults] stays accepted


# ------------------------------------------------------------------ 9. generated chains as offload instances
def test_a_generated_chain_takes_the_entrys_host_link(tmp_path):
    cfg = write(tmp_path, sweep_toml("off", budgets=["50%", "100%"], solvers=["vdnn"],
                                     instances=[{"generate": "chain", "L": 6, "problem": "offload",
                                                 "bandwidth": "10GB/s"}]), "off.toml")
    outcome = run_sweep(cfg, output=tmp_path / "out", progress=False)
    assert outcome.errors == 0 and outcome.ran == 2
    rows = pd.read_csv(tmp_path / "out" / "off.csv")
    assert set(rows["problem"]) == {"offload"} and "error" not in set(rows["status"])
    stored = [p for p in (tmp_path / "out" / "instances").glob("*.json") if p.name != "index.json"]
    assert json.loads(stored[0].read_text())["host_link"]["bandwidth"] == 1e10
    again = run_sweep(cfg, output=tmp_path / "out", progress=False)  # resumed from the stored file
    assert again.resumed == 2 and again.ran == 0


def test_a_generated_offload_chain_without_bandwidth_is_refused_up_front(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["50%"], solvers=["vdnn"],
                                     instances=[{"generate": "chain", "L": 6, "problem": "offload"}]))
    err = refused(cfg)
    assert err.field == "instances[0].bandwidth" and "offload.random_offload" in err.message
    graph = write(tmp_path, sweep_toml(budgets=["50%"], solvers=["vdnn"],
                                       instances=[{"generate": "graph", "n": 6, "problem": "offload",
                                                   "bandwidth": "1GB/s"}]))
    assert refused(graph).field == "instances[0].problem"

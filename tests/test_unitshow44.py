"""The rich display names the time unit, as the command line prints it (hunt: units).

- `Result.summary` and `_repr_html_` showed the makespan, the period and the lower bound bare ("0.0195" where
  `memsched solve` prints "0.0195 s"; a pipeline timed in us showed "7600" where `memsched partition` prints
  "0.0076 s"); `Comparison._repr_html_` likewise.
- Figure (f)'s period axis read "period (time per micro-batch, instance unit)" though the instances' unit is known.
"""

from __future__ import annotations

import copy

import pandas as pd
from conftest import EXAMPLES, run_cli, write_file

import memsched

#: a 3-stage chain: forward times 1..3, backward 2..4 (the file's unit), sizes in bytes
CHAIN = {
    "format": "memsched.chain/1", "name": "u3", "input_size": 4,
    "stages": [{"name": f"s{i}", "fwd_time": 1.0 + i, "bwd_time": 2.0 + i, "out_size": 8, "tape_size": 8,
                "fwd_overhead": 0, "bwd_overhead": 0} for i in range(3)],
    "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
}


def _chain(tmp_path, time_unit: str | None, name: str = "c.json"):
    data = copy.deepcopy(CHAIN)
    if time_unit is not None:
        data["meta"] = {"units": {"time": time_unit, "memory": "bytes"}}
    return write_file(tmp_path, name, data)


def _cli_value(out: str, key: str) -> str:
    """The text after `key` on its line of a command's "key  value" output."""
    line = next(line for line in out.splitlines() if line.startswith(key))
    return line[len(key):].strip()


def test_chain_in_seconds_shows_seconds_as_memsched_solve(tmp_path):
    path = _chain(tmp_path, "s")
    r = memsched.solve(path, "100%", solver="rotor")
    shown = dict(r.summary())
    cli = run_cli("solve", path, "--budget", "100%", "--solver", "rotor")
    assert cli.code == 0, cli.err
    assert shown["makespan"] == _cli_value(cli.out, "makespan") == f"{r.makespan:.6g} s"
    assert f"{r.makespan:.6g} s" in r._repr_html_().split("<img")[0]


def test_chain_without_unit_shows_ms_and_comparison_too(tmp_path):
    path = _chain(tmp_path, None)
    r = memsched.solve(path, "100%", solver="milp", time_limit=10)
    shown = dict(r.summary())
    assert shown["makespan"] == f"{r.makespan:.6g} ms"
    if r.lower_bound is not None:
        assert shown["lower bound"] == f"{r.lower_bound:.6g} ms"
    cmp = memsched.solve(path, "100%", solver=["rotor", "store-all"])
    table = cmp._repr_html_().split("<img")[0]
    assert f"<td>{cmp['rotor'].makespan:.6g} ms</td>" in table


def test_pipeline_in_us_shows_seconds_as_memsched_partition_and_its_file_unit(tmp_path):
    data = copy.deepcopy(CHAIN)
    for stage in data["stages"]:
        stage["fwd_time"] *= 1000
        stage["bwd_time"] *= 1000
    data["meta"] = {"units": {"time": "us", "memory": "bytes"}}
    path = write_file(tmp_path, "p.json", data)
    r = memsched.solve(path, "1MB", problem="pipeline", devices=2)
    assert r.found and r.period is not None
    seconds = f"{r.period * 1e-6:.6g} s"
    cli = run_cli("partition", path, "--memory", "1MB", "--devices", "2")
    assert cli.code == 0, cli.err
    assert _cli_value(cli.out, "period").startswith(seconds + " per micro-batch")
    period = dict(r.summary())["period"]
    assert period.startswith(seconds) and f"{r.period:.6g} us in the file's time unit" in period
    assert seconds in r._repr_html_() and "us in the file" in dict(r.summary())["lower bound"]


def test_figure_f_period_axis_names_the_unit():
    from memsched.experiments import figures as F

    label = getattr(F, "period_label", None)
    assert label is not None, "no period_label in experiments.figures"
    col = F.TIME_UNIT_COLUMN
    assert label(pd.DataFrame({col: ["ms", "ms"]})) == "period (ms per micro-batch)"
    assert label(pd.DataFrame({col: ["us"]})) == "period (us per micro-batch)"
    generic = "period (time per micro-batch, instance unit)"
    assert label(pd.DataFrame({col: ["ms", "us"]})) == generic  # units differ
    assert label(pd.DataFrame({col: ["ms", None]})) == generic  # one not known
    assert label(pd.DataFrame({"instance": ["x"]})) == generic  # rows not read with units
    # the units of the rows' files: a PipeDream profile's period is in ms, a chain's by its meta
    profile = EXAMPLES.parent / "pipeline" / "resnet50-b32.graph.txt"
    rows = pd.DataFrame({"instance_hash": ["", ""], "source": [str(profile), str(EXAMPLES / "tiny.json")]})
    assert list(F.with_memory_units(rows)[col]) == ["ms", "ms"]

"""`memsched solve` and `memsched simulate` name the time unit of the objective they print.

The makespan (a pipeline's period) and the lower bound are in the instance's time unit: the one its file
states (``meta.units.time``; an offloading instance's chain's, a join's), else the documented default, ms for
chains, joins and offloading (docs/chain.md, join.md, offload.md), a pipeline's own unit by name; a graph that
states none prints the bare number (its costs are "the file's unit", docs/graph.md), as its schedule figure's
title does (`experiments.plotting.timeline.units_of`). ``--json`` is unchanged: the objective stays a number.

Self-contained (no conftest fixtures): the commands run in-process from whichever ``memsched`` is imported.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
RESNET = DATA / "chains" / "resnet152-b32-224.v100.json"
TINY = DATA / "examples" / "tiny.json"  # meta.units.time "ms"
HOMOGENEOUS = DATA / "examples" / "homogeneous20.json"  # no meta at all
LINEAR = DATA / "graphs" / "linear10.json"  # a graph without meta.units
VGG_LIKE = DATA / "graphs" / "vgg16_like.json"  # a graph in MFLOP
JOIN = DATA / "join" / "tiny.json"
MLP = DATA / "pipeline" / "mlp7.chain.json"


def _run(*argv: Any) -> tuple[int, str, str]:
    """`memsched ARGV` in-process: (exit code, stdout, stderr)."""
    from memsched.experiments.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _line(text: str, key: str) -> str:
    """The one output line that starts with `key` ("makespan", "lower bound"), without the key."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith(key + " ")]
    return line[len(key):].strip()


def _value_and_unit(text: str, key: str) -> tuple[float, str]:
    """(number, what follows it up to a double space) of the line `key`: "184.444 ms" -> (184.444, "ms")."""
    match = re.fullmatch(r"(\S+)(?: (\S+))?(?:  .*)?", _line(text, key))
    assert match, _line(text, key)
    return float(match.group(1)), match.group(2) or ""


def _with_time_unit(src: Path, dst: Path, unit: str | None) -> Path:
    """A copy of chain or join file `src` whose ``meta.units.time`` is `unit` (None: no time unit stated)."""
    data = json.loads(src.read_text())
    units = data.setdefault("meta", {}).setdefault("units", {})
    units.pop("time", None)
    if unit is not None:
        units["time"] = unit
    dst.write_text(json.dumps(data))
    return dst


def _solve_json(path: Path, tmp_path: Path, *args: Any) -> tuple[Path, dict[str, Any]]:
    code, out, err = _run("solve", path, *args, "--json")
    assert code == 0, err
    saved = tmp_path / f"{path.stem}.sched.json"
    saved.write_text(out)
    return saved, json.loads(out)


def test_solve_prints_the_files_time_unit_after_the_makespan() -> None:
    """The brief's case: resnet152 (``meta.units.time`` "ms") prints "makespan  <number> ms", the number the
    JSON output gives (6 significant digits)."""
    code, out, err = _run("solve", RESNET, "--budget", "50%")
    assert code == 0, err
    value, unit = _value_and_unit(out, "makespan")
    assert unit == "ms", out
    code, text, _ = _run("solve", RESNET, "--budget", "50%", "--json")
    assert value == pytest.approx(json.loads(text)["makespan"], rel=1e-5)


@pytest.mark.parametrize("unit", ["s", "us", "ns", "MFLOP"])
def test_solve_names_each_declared_unit(tmp_path: Path, unit: str) -> None:
    """Whatever the file declares is what follows the number; not ms, the default."""
    path = _with_time_unit(TINY, tmp_path / "tiny.json", unit)
    code, out, err = _run("solve", path, "--budget", "30")
    assert code == 0, err
    assert _value_and_unit(out, "makespan") == (14.0, unit)


def test_chain_without_a_time_unit_is_in_ms_the_documented_default(tmp_path: Path) -> None:
    """A chain file stating no time unit is in ms (docs/chain.md: ``meta.units.time`` default ``ms``)."""
    code, out, err = _run("solve", HOMOGENEOUS, "--budget", "60%")
    assert code == 0, err
    assert _value_and_unit(out, "makespan")[1] == "ms"
    path = _with_time_unit(TINY, tmp_path / "bare.json", None)
    code, out, err = _run("solve", path, "--budget", "30")
    assert code == 0, err
    assert _value_and_unit(out, "makespan") == (14.0, "ms")


def test_lower_bound_is_in_the_same_unit(tmp_path: Path) -> None:
    """An exact solver's lower bound is a makespan too: the same unit, then the gap."""
    path = _with_time_unit(TINY, tmp_path / "tiny_s.json", "s")
    code, out, err = _run("solve", path, "--budget", "30", "--solver", "cpsat")
    assert code == 0, err
    assert _value_and_unit(out, "lower bound") == (14.0, "s")
    assert _line(out, "lower bound").startswith("14 s  (gap ")


def test_graph_states_its_unit_or_prints_the_bare_number() -> None:
    """A graph in MFLOP says MFLOP; one without ``meta.units`` prints the number alone (no default unit
    for a graph's costs), as its figure's title does."""
    code, out, err = _run("solve", VGG_LIKE, "--budget", "80%")
    assert code == 0, err
    assert _value_and_unit(out, "makespan")[1] == "MFLOP"
    assert _value_and_unit(out, "lower bound")[1] == "MFLOP"
    code, out, err = _run("solve", LINEAR, "--budget", "60%")
    assert code == 0, err
    assert re.fullmatch(r"[0-9.e+]+", _line(out, "makespan")), out


def test_json_output_is_unchanged(tmp_path: Path) -> None:
    """``--json`` keeps the objective a plain number (no unit appended, no unit key replacing it)."""
    _, data = _solve_json(TINY, tmp_path, "--budget", "30")
    assert isinstance(data["makespan"], (int, float)) and data["makespan"] == pytest.approx(14.0)
    saved, _ = _solve_json(TINY, tmp_path, "--budget", "30")
    code, out, err = _run("simulate", TINY, saved, "--json")
    assert code == 0, err
    assert json.loads(out)["makespan"] == pytest.approx(14.0)


@pytest.mark.parametrize("unit", ["s", None])
def test_simulate_prints_the_unit(tmp_path: Path, unit: str | None) -> None:
    """`simulate` replays a chain schedule and names its unit: the file's, else ms."""
    path = _with_time_unit(TINY, tmp_path / "tiny.json", unit)
    saved, _ = _solve_json(path, tmp_path, "--budget", "30")
    code, out, err = _run("simulate", path, saved)
    assert code == 0, err
    assert _value_and_unit(out, "makespan") == (14.0, unit or "ms")


def test_simulate_offload_and_join(tmp_path: Path) -> None:
    """An offloading instance uses its chain's unit; a join its file's."""
    path = _with_time_unit(TINY, tmp_path / "tiny_us.json", "us")
    saved, data = _solve_json(path, tmp_path, "--budget", "30", "--bandwidth", "1GB/s")
    assert data["problem"] == "offload"
    code, out, err = _run("solve", path, "--budget", "30", "--bandwidth", "1GB/s")
    assert code == 0, err
    assert _value_and_unit(out, "makespan")[1] == "us"
    code, out, err = _run("simulate", path, saved, "--bandwidth", "1GB/s")
    assert code == 0, err
    assert _value_and_unit(out, "makespan")[1] == "us"

    join = _with_time_unit(JOIN, tmp_path / "join_s.json", "s")
    saved, data = _solve_json(join, tmp_path, "--budget", "20")
    code, out, err = _run("simulate", join, saved)
    assert code == 0, err
    assert _value_and_unit(out, "makespan") == (pytest.approx(data["makespan"], rel=1e-5), "s")


@pytest.mark.parametrize("unit", ["ms", "s"])
def test_simulate_pipeline_period_in_the_pipelines_unit(tmp_path: Path, unit: str) -> None:
    """A partition's period is replayed in seconds, as `partition --json` gives it as ``period``, and named
    ("s"); the file's unit follows it on the line when it is not the second."""
    path = _with_time_unit(MLP, tmp_path / "mlp.json", unit)
    code, out, err = _run("partition", path, "--devices", "2", "--memory", "1GB", "--json")
    assert code == 0, err
    period, in_file = json.loads(out)["period"], json.loads(out)["period_file_units"]
    saved = tmp_path / "part.json"
    saved.write_text(out)
    code, out, err = _run("simulate", path, saved)
    assert code == 0, err
    value, shown = _value_and_unit(out, "period")
    assert shown == "s" and value == pytest.approx(period, rel=1e-5)
    assert unit == "s" or f"({in_file:.6g} {unit} in the file's time unit)" in _line(out, "period")


def test_time_unit_agrees_with_the_schedule_figures(tmp_path: Path) -> None:
    """`units.time_unit` names what the plots' `units_of` names, problem by problem."""
    from memsched.experiments.plotting.timeline import units_of
    from memsched.solvers.formats import load_instance
    from memsched.solvers.units import time_unit

    bare = _with_time_unit(TINY, tmp_path / "bare.json", None)
    for problem, path in (("chain", TINY), ("chain", bare), ("graph", LINEAR), ("graph", VGG_LIKE),
                          ("join", JOIN)):
        _, instance = load_instance(str(path), problem)
        assert time_unit(problem, instance) == units_of(instance)[0], (problem, path)
    from memsched.solvers.offload import OffloadInstance

    offload = OffloadInstance.load(str(_with_time_unit(TINY, tmp_path / "ns.json", "ns")), 1e9, None)
    assert time_unit("offload", offload) == "ns" == units_of(offload.chain)[0]

"""Bad and extreme CLI input (hunt 32).

1. Times of about 1e-300 units: `discretize.integer_costs` scaled them by 10^309 (an ``OverflowError``,
   ``memsched solve`` exit 3 for chain and graph ``cpsat``); its powers now start at the largest cost's
   magnitude, as `tick_scale`'s do, so the integer objective (and the schedule CP-SAT picks) does not
   depend on the time unit, and the scale stops at the largest finite power of ten.
2. ``memsched run FILE`` whose ``meta.model`` names no known network blamed ``--model``, which was not
   given: the message names the file and the field, and lists the known networks.
3. A float option's bad value read "expected a number of number" (``--weight-factor``, ``--uf``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import memsched.solvers
import pytest
from conftest import run_cli
from memsched.solvers.discretize import integer_costs, rounding_error

import memsched.api as api

TINY = Path(memsched.solvers.__file__).resolve().parent / "data" / "examples" / "tiny.json"


def _cli(*argv: object) -> tuple[int, str, str]:
    """`memsched ARGV` in-process (conftest's `run_cli`): (exit code, stdout, stderr)."""
    res = run_cli(*(str(a) for a in argv))
    return res.code, res.out, res.err


def _tiny_chain(tmp_path: Path, factor: float, **meta: Any) -> Path:
    """tiny.json with every time (stages and loss) multiplied by `factor`, `meta` merged into its meta."""
    data = json.loads(TINY.read_text())
    for stage in data["stages"]:
        stage["fwd_time"] *= factor
        stage["bwd_time"] *= factor
    data["loss"]["bwd_time"] *= factor
    data["meta"].update(meta)
    path = tmp_path / f"tiny_{factor:g}.json"
    path.write_text(json.dumps(data))
    return path


def _tiny_stage_times(tmp_path: Path, time: float) -> Path:
    """tiny.json with every stage's forward and backward time `time` (the loss's unchanged)."""
    data = json.loads(TINY.read_text())
    for stage in data["stages"]:
        stage["fwd_time"] = stage["bwd_time"] = time
    path = tmp_path / f"tiny_stage_times_{time:g}.json"
    path.write_text(json.dumps(data))
    return path


def _ops(schedule: Any) -> list[str]:
    """A schedule's operations as text (chain or graph), for comparing schedules."""
    return [str(op) for op in getattr(schedule, "ops", schedule)]


# ---------------------------------------------------------------- 1. integer_costs at any magnitude
COSTS = [1.0, 2.0, 0.5, 4.0, 1.5]


@pytest.mark.parametrize("factor", [1e-12, 1e-100, 1e-300, 1e-305])
def test_integer_costs_of_costs_times_factor_are_the_same_ints(factor: float) -> None:
    ints, scale, exact = integer_costs(COSTS, digits=9)
    tiny_ints, tiny_scale, tiny_exact = integer_costs([c * factor for c in COSTS], digits=9)
    assert (ints, exact) == ([10, 20, 5, 40, 15], True)
    assert tiny_ints == ints and tiny_exact
    assert math.isfinite(tiny_scale) and tiny_scale == pytest.approx(scale / factor, rel=1e-12)


@pytest.mark.parametrize("costs", [
    [1e-308, 2e-308, 0.5e-308],  # subnormal (below 2.2e-308)
    [1e-308 / 3, 2e-308 / 7],
    [5e-324, 1e-323],  # the least subnormals
    [1e-320, 3e-320, 0.0],
])
def test_integer_costs_of_subnormal_costs_never_overflow(costs: list[float]) -> None:
    ints, scale, exact = integer_costs(costs, digits=9)
    assert math.isfinite(scale) and scale > 0 and len(ints) == len(costs)
    assert max(rounding_error(costs, ints, scale)) <= 0.5 / scale * (1 + 1e-9)
    if any(c != 0 and i == 0 for c, i in zip(costs, ints)):
        assert not exact  # a cost rounded to 0 is never exact


def test_integer_costs_of_mixed_magnitudes_and_zeros() -> None:
    ints, scale, exact = integer_costs([1e-300, 1.0, 0.5], digits=9)
    assert ints[1:] == [10**9, 5 * 10**8] and ints[0] == 0 and not exact  # 1e-300 is lost beside 1
    assert integer_costs([0.0, 1e-300, 2e-300, 0.0], digits=9) == ([0, 1, 2, 0], 1e300, True)
    assert integer_costs([0.0, 0.0]) == ([0, 0], 1.0, True)


# ---------------------------------------------------------------- 1. cpsat on tiny times
@pytest.mark.parametrize("factor", [1e-300, 1e-305])
def test_chain_cpsat_cli_solves_times_of_1e_300(tmp_path: Path, factor: float) -> None:
    pytest.importorskip("ortools")
    answers = {}
    for f in (1.0, factor):
        code, out, err = _cli("solve", _tiny_chain(tmp_path, f), "--budget", 25, "--solver", "cpsat",
                              "--time-limit", 20, "--json")
        assert code == 0, err
        answers[f] = json.loads(out)
    unit, tiny = answers[1.0], answers[factor]
    assert tiny["status"] == unit["status"] == "optimal"
    assert tiny["schedule"]["ops"] == unit["schedule"]["ops"]
    assert tiny["makespan"] / factor == pytest.approx(unit["makespan"], rel=1e-9)


def test_chain_cpsat_cli_solves_the_hunters_instance(tmp_path: Path) -> None:
    """Every stage time 1e-300, the loss 0.5 (a constant of the objective): exit 0, optimal. (Every plan
    takes 0.5 + 9e-300 = 0.5 in floats, so the plan is not compared: the tests above and below do that.)"""
    pytest.importorskip("ortools")
    path = _tiny_stage_times(tmp_path, 1e-300)
    code, out, err = _cli("solve", path, "--budget", 25, "--solver", "cpsat", "--time-limit", 20, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["status"] == "optimal" and answer["makespan"] == pytest.approx(0.5)


@pytest.mark.parametrize("factor", [1e-300, 1e-305])
def test_chain_cpsat_model_alone_picks_the_unit_times_schedule(tmp_path: Path, factor: float) -> None:
    """Without a warm start CP-SAT's own optimum: the same plan at any time unit."""
    pytest.importorskip("ortools")
    unit = api.solve(api.load(str(_tiny_chain(tmp_path, 1.0))), 25, "cpsat", time_limit=20, warm_start=False)
    tiny = api.solve(api.load(str(_tiny_chain(tmp_path, factor))), 25, "cpsat", time_limit=20, warm_start=False)
    assert tiny.raw.status == unit.raw.status == "optimal"
    assert _ops(tiny.raw.schedule) == _ops(unit.raw.schedule)
    assert tiny.makespan / factor == pytest.approx(unit.makespan, rel=1e-9)


@pytest.mark.parametrize("factor", [0.5e-308, 1e-310])
def test_chain_cpsat_subnormal_times_answer_honestly(tmp_path: Path, factor: float) -> None:
    """Below ~1e-299 units the scale (a float) keeps fewer digits: an answer, never a false proof."""
    pytest.importorskip("ortools")
    unit = api.solve(api.load(str(_tiny_chain(tmp_path, 1.0))), 25, "cpsat", time_limit=20)
    res = api.solve(api.load(str(_tiny_chain(tmp_path, factor))), 25, "cpsat", time_limit=20)
    assert res.raw.status in ("optimal", "feasible") and res.makespan is not None
    assert res.makespan / factor >= unit.makespan * (1 - 1e-6)
    assert res.raw.lower_bound is None or res.raw.lower_bound <= res.makespan * (1 + 1e-9)
    if res.raw.status == "optimal":
        assert res.makespan / factor == pytest.approx(unit.makespan, rel=1e-6)


def _graph(factor: float) -> Any:
    from memsched.solvers.graph.generate import training_graph

    f = factor
    return training_graph([3 * f, f, 5 * f, 2 * f, 4 * f, f], [40, 10, 30, 20, 50, 10],
                          [(i, i + 1) for i in range(5)], bwd_cpu=[2 * f, 3 * f, f, 4 * f, 2 * f, f],
                          loss_cpu=f, input_size=8)


@pytest.mark.parametrize("factor", [1e-300, 1e-308])
def test_graph_cpsat_times_of_1e_300_same_as_unit_times(factor: float) -> None:
    pytest.importorskip("ortools")
    unit = api.solve(_graph(1.0), "90%", "cpsat", time_limit=20, warm_start=False)
    tiny = api.solve(_graph(factor), "90%", "cpsat", time_limit=20, warm_start=False)
    assert tiny.raw.status == unit.raw.status == "optimal"
    assert tiny.makespan / factor == pytest.approx(unit.makespan, rel=1e-9)


def test_graph_cpsat_cli_solves_times_of_1e_300(tmp_path: Path) -> None:
    """The hunter's linear10 at 100% (no model built, but the costs were scaled first) and a linear
    graph at 80% (CP-SAT proves it in about 0.5 s): optimal, the makespan of unit costs x 1e-300."""
    pytest.importorskip("ortools")
    from memsched.solvers.graph.generate import linear_graph

    for n, budget in ((10, "100%"), (6, "80%")):
        makespans = []
        for cost in (1.0, 1e-300):
            path = tmp_path / f"linear{n}_{cost:g}.json"
            linear_graph(n, cost_cpu=cost).save(path)
            code, out, err = _cli("solve", path, "--budget", budget, "--solver", "cpsat", "--time-limit", 30, "--json")
            assert code == 0, err
            answer = json.loads(out)
            assert answer["status"] == "optimal", (n, budget, cost)
            makespans.append(answer["makespan"])
        assert makespans[1] == pytest.approx(makespans[0] * 1e-300, rel=1e-9)


# ---------------------------------------------------------------- 2. run: meta.model names no network
@pytest.mark.parametrize("model", ["resnet_18", 5])
def test_run_blames_the_files_meta_model_not_the_option(tmp_path: Path, model: Any) -> None:
    path = _tiny_chain(tmp_path, 1.0, model=model)
    code, out, err = _cli("run", path, "--budget", "60%")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert str(path) in line and "meta.model" in line and repr(model) in line
    assert "resnet18" in line and "gpt2" in line  # the known networks
    assert "error: --model:" not in line


def test_run_join_file_blames_its_meta_model(tmp_path: Path) -> None:
    """A join file's meta.model must name a join network: a chain network there is the file's fault."""
    stage = {"fwd_time": 1, "bwd_time": 2, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0}
    data = {"format": "memsched.join/1", "name": "j", "loss": {"bwd_time": 1, "bwd_overhead": 0},
            "branches": [{"input_size": 2, "stages": [stage]}, {"input_size": 3, "stages": [stage]}],
            "meta": {"model": "resnet18"}}
    path = tmp_path / "join.json"
    path.write_text(json.dumps(data))
    code, _, err = _cli("run", path, "--budget", "60%")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{path}: meta.model: unknown join network 'resnet18'" in err and "siamese" in err


def test_run_without_meta_model_still_asks_for_model(tmp_path: Path) -> None:
    code, _, err = _cli("run", _tiny_chain(tmp_path, 1.0), "--budget", "60%")
    assert code == 2 and "--model NAME" in err


# ---------------------------------------------------------------- 3. "expected a number"
@pytest.mark.parametrize("argv", [
    ("simulate", "x.txt", "y.json", "--weight-factor", "abc"),
    ("partition", "x.txt", "--devices", "2", "--weight-factor", "abc"),
    ("hrevolve", "5", "--uf", "abc"),
    ("hrevolve", "5", "--ub", "abc"),
])
def test_float_option_says_expected_a_number(argv: tuple[str, ...]) -> None:
    code, _, err = _cli(*argv)
    assert code == 2
    assert "expected a number, got 'abc'" in err and "of number" not in err


def test_seconds_option_still_names_its_unit() -> None:
    code, _, err = _cli("hrevolve", "5", "--time-limit", "abc")
    assert code == 2 and "expected a number of seconds, got 'abc'" in err


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_chain_exact_solvers_take_times_of_the_least_float(tmp_path: Path, solver: str) -> None:
    """Every time 5e-324 (the least subnormal): the tape cuts' objective unit was 10.0 ** -324 = 0, a
    division by zero (exit 3, `solvers.chain.phase_cuts.objective_unit`); now a schedule, exit 0."""
    pytest.importorskip("ortools")
    path = _tiny_stage_times(tmp_path, 5e-324)
    code, out, err = _cli("solve", path, "--budget", "25", "--solver", solver, "--time-limit", "20")
    assert code == 0 and "internal error" not in err, err
    assert "status       optimal" in out or "status       feasible" in out, out

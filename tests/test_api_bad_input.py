"""Bad input to the facade (`memsched.api`, `memsched.results`): always a one-line `memsched.InputError`
naming the argument, never another exception type, never silently ignored; good values still work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import memsched

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data"
TINY = DATA / "examples" / "tiny.json"
CNN12 = DATA / "examples" / "cnn12.json"
GRAPH = DATA / "graphs" / "linear10.json"


@pytest.fixture(scope="module")
def tiny():
    return memsched.load(TINY)


@pytest.fixture(scope="module")
def cnn():
    return memsched.load(CNN12)


@pytest.fixture(scope="module")
def result(cnn):
    return memsched.solve(cnn, "50%", solver="rotor")


@pytest.fixture(scope="module")
def comparison(cnn):
    return memsched.solve(cnn, "50%", solver=["rotor", "periodic"])


@pytest.fixture(scope="module")
def swept(cnn):
    return memsched.sweep(cnn, budgets=["50%", "80%"], solvers=["rotor"])


def one_line(err: pytest.ExceptionInfo) -> None:
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- 1. data_path
@pytest.mark.parametrize("part", [None, 1, 2.5, ["examples"]])
def test_data_path_parts_must_be_strings(part):
    with pytest.raises(memsched.InputError, match="parts") as err:
        memsched.data_path(part)
    one_line(err)
    with pytest.raises(memsched.InputError, match="parts"):
        memsched.data_path("examples", part)


def test_data_path_takes_strings_and_paths():
    assert memsched.data_path("examples", "tiny.json") == TINY.resolve()
    assert memsched.data_path(Path("examples"), "tiny.json") == TINY.resolve()


# ---------------------------------------------------------------- 2. budgets beyond float range
@pytest.mark.parametrize("spec", [10**400, -(10**400), 10**5000, math.inf, "1e400%", "inf%"],
                         ids=["1e400", "-1e400", "1e5000", "inf", "1e400%", "inf%"])
def test_huge_budgets_are_input_errors(tiny, spec):
    with pytest.raises(memsched.InputError, match="budget") as err:
        memsched.solve(tiny, spec, solver="rotor")
    one_line(err)
    with pytest.raises(memsched.InputError, match="budget"):
        memsched.budget(tiny, spec)


def test_a_huge_percentage_is_too_large_not_negative(tiny):
    with pytest.raises(memsched.InputError, match="too large"):
        memsched.budget(tiny, "1e400%")
    with pytest.raises(memsched.InputError, match="non-negative"):
        memsched.budget(tiny, "-5%")
    with pytest.raises(memsched.InputError, match="percentage"):
        memsched.budget(tiny, "nan%")


def test_parse_size_of_a_huge_integer():
    from memsched.solvers.units import parse_budget, parse_size

    with pytest.raises(memsched.InputError, match="too large"):
        parse_size(10**400)
    with pytest.raises(memsched.InputError, match="non-negative"):
        parse_size(-(10**400))
    assert parse_size(2**50) == 2**50
    assert parse_budget("50%", 1000) == 500


@pytest.mark.parametrize("spec", [None, [1], object(), b"50%"])
def test_a_budget_of_another_type(tiny, spec):
    with pytest.raises(memsched.InputError, match="budget"):
        memsched.budget(tiny, spec)


# ---------------------------------------------------------------- 3. budget / reference_peak: problem, paths
@pytest.mark.parametrize("problem", ["graph", "join", "bogus", 5])
def test_budget_and_reference_peak_check_the_problem(tiny, problem):
    with pytest.raises(memsched.InputError, match="problem") as err:
        memsched.budget(tiny, "50%", problem=problem)
    one_line(err)
    with pytest.raises(memsched.InputError, match="problem"):
        memsched.reference_peak(tiny, problem=problem)


def test_budget_and_reference_peak_read_paths_and_problems(tiny):
    peak = memsched.reference_peak(tiny)
    assert memsched.reference_peak(TINY) == memsched.reference_peak(str(TINY)) == peak
    assert memsched.budget(TINY, "50%") == memsched.budget(tiny, "50%") == peak // 2
    pipe_peak = memsched.reference_peak(tiny, problem="pipeline")
    assert memsched.budget(tiny, "50%", problem="pipeline") == pipe_peak // 2
    assert memsched.budget(tiny, 1000) == 1000


# ---------------------------------------------------------------- 4. devices
@pytest.mark.parametrize("devices", ["abc", "2", float("nan"), 2.7, 2.0, True, 0, -1, 10**30, None])
def test_pipeline_devices_must_be_an_int_in_range(tiny, devices):
    with pytest.raises(memsched.InputError, match="devices") as err:
        memsched.solve(tiny, "80%", problem="pipeline", devices=devices)
    one_line(err)
    with pytest.raises(memsched.InputError, match="devices"):
        memsched.sweep(tiny, budgets=["80%"], problem="pipeline", devices=devices)


def test_pipeline_devices_good_values(tiny):
    assert memsched.solve(tiny, "100%", problem="pipeline", devices=2).problem == "pipeline"
    rows = memsched.sweep(tiny, budgets=["100%"], problem="pipeline", devices=1).rows
    assert rows and rows[0]["devices"] == 1 and rows[0]["status"] != "unsupported"


# ---------------------------------------------------------------- 5. latency
@pytest.mark.parametrize("latency", ["x", [1], True, -1.0, math.nan, 1e9])
def test_latency_must_be_a_number_of_seconds(cnn, latency):
    with pytest.raises(memsched.InputError, match="latency") as err:
        memsched.solve(cnn, "80%", bandwidth="12GB/s", latency=latency)
    one_line(err)
    with pytest.raises(memsched.InputError, match="latency"):
        memsched.load(CNN12, bandwidth="12GB/s", latency=latency)


@pytest.mark.parametrize("latency", ["x", [1], True, None])
def test_offload_instance_checks_the_types_of_its_link(cnn, latency):
    from memsched.solvers.offload import OffloadInstance

    with pytest.raises(memsched.InputError, match="latency"):
        OffloadInstance(cnn, 12e9, latency)
    with pytest.raises(memsched.InputError, match="bandwidth"):
        OffloadInstance(cnn, "12GB/s", 0.0)


def test_latency_good_values(cnn):
    r = memsched.solve(cnn, "80%", bandwidth="12GB/s", latency=0.001)
    assert r.problem == "offload" and r.instance.latency == 0.001
    inst = memsched.load(CNN12, bandwidth="12GB/s", latency=2)
    assert inst.latency == 2
    again = memsched.solve(inst, "80%", latency=0.5)  # an offloading instance: the latency replaces its link's
    assert again.instance.latency == 0.5 and again.instance.bandwidth == inst.bandwidth


# ---------------------------------------------------------------- 6. table_budget
@pytest.mark.parametrize("value", ["x", math.nan, 2.5, True, 0, -5, 2**60])
def test_rotor_table_budget_is_checked(cnn, value):
    with pytest.raises(memsched.InputError, match="table_budget") as err:
        memsched.solve(cnn, "80%", solver="rotor", table_budget=value)
    one_line(err)


def test_rotor_table_budget_good_value(cnn):
    budget = memsched.budget(cnn, "80%")
    r = memsched.solve(cnn, budget, solver="rotor", table_budget=budget * 2)
    assert r.found


# ---------------------------------------------------------------- 7. simulate: schedule of another problem
def test_simulate_refuses_a_schedule_of_another_problem(cnn, result):
    with pytest.raises(memsched.InputError, match="chain schedule cannot be simulated as offload") as err:
        memsched.simulate(cnn, result.schedule, bandwidth="12GB/s")
    one_line(err)
    with pytest.raises(memsched.InputError, match="chain schedule cannot be simulated as pipeline"):
        memsched.simulate(cnn, result.schedule, problem="pipeline")
    with pytest.raises(memsched.InputError, match="chain schedule cannot be simulated as graph"):
        memsched.simulate(GRAPH, result.schedule)
    with pytest.raises(memsched.InputError, match="schedule: a chain result cannot be simulated"):
        memsched.simulate(GRAPH, result)
    with pytest.raises(memsched.InputError, match="chain result cannot be simulated as graph"):
        memsched.simulate(memsched.load(GRAPH), result, problem="graph")


def test_simulate_good_forms(cnn, result):
    for form in (result, result.schedule, result.to_json(), result.to_json()["schedule"]):
        assert memsched.simulate(cnn, form).status == "valid"
    assert memsched.simulate(None, result).status == "valid"


# ---------------------------------------------------------------- 8. plot
@pytest.mark.parametrize("schedule", [5, "no-such-file.json", {"a": 5}, 2.5, object()])
def test_plot_refuses_what_is_not_a_schedule(cnn, schedule):
    with pytest.raises(memsched.InputError) as err:
        memsched.plot(cnn, schedule)
    one_line(err)


def test_plot_refuses_a_schedule_of_another_problem(cnn, result):
    with pytest.raises(memsched.InputError, match="cannot be drawn as pipeline"):
        memsched.plot(cnn, result, problem="pipeline")
    with pytest.raises(memsched.InputError, match="chain schedule cannot be drawn as graph"):
        memsched.plot(GRAPH, result.schedule)


def test_plot_takes_the_schedule_forms_of_simulate(cnn, result, comparison):
    pytest.importorskip("matplotlib")
    for form in (result, result.schedule, result.to_json(), result.to_json()["schedule"]):
        assert memsched.plot(cnn, form) is not None
    assert memsched.plot(cnn, {"rotor": result, "periodic": comparison["periodic"].to_json()}) is not None
    assert memsched.plot(cnn, result, budget="60%", title="t", figsize=(6, 4)) is not None


def test_plot_checks_its_keyword_arguments(cnn, result, comparison, swept):
    for obj in (result, comparison, swept):
        with pytest.raises(memsched.InputError, match="bogus"):
            memsched.plot(obj, bogus=1)
        with pytest.raises(memsched.InputError, match="budget"):
            memsched.plot(obj, budget="abc")
        with pytest.raises(memsched.InputError, match="budget"):
            memsched.plot(obj, budget="50%")
        with pytest.raises(memsched.InputError, match="problem"):
            memsched.plot(obj, problem="chain")
    with pytest.raises(memsched.InputError, match="schedule"):
        memsched.plot(result, result.schedule)
    with pytest.raises(memsched.InputError, match="bogus"):
        memsched.plot(cnn, result, bogus=1)
    with pytest.raises(memsched.InputError, match="budget"):
        memsched.plot(cnn, result, budget="abc")
    with pytest.raises(memsched.InputError, match="figsize"):
        memsched.plot(cnn, result, figsize="big")
    with pytest.raises(memsched.InputError, match="title"):
        memsched.plot(cnn, result, title=5)


# ---------------------------------------------------------------- 9. results
@pytest.mark.parametrize("figsize", ["big", (-1, 2), (0, 3), (1, 2, 3), (math.nan, 2), (True, 2), (1e6, 2)])
def test_result_plots_check_figsize(result, comparison, swept, figsize):
    for obj in (result, comparison, swept):
        with pytest.raises(memsched.InputError, match="figsize") as err:
            obj.plot(figsize=figsize)
        one_line(err)


def test_result_plots_refuse_unknown_keywords(result, comparison, swept):
    for obj in (result, comparison, swept):
        with pytest.raises(memsched.InputError, match="bogus"):
            obj.plot(bogus=1)
        with pytest.raises(memsched.InputError, match="title"):
            obj.plot(title=["x"])
    run = memsched.RunResult({"model": "m", "solver": "rotor"})
    with pytest.raises(memsched.InputError, match="bogus"):
        run.plot(bogus=1)


def test_result_plots_good_values(result, comparison, swept):
    pytest.importorskip("matplotlib")
    assert result.plot(figsize=(6, 3), title="x") is not None
    assert comparison.plot(figsize=[6, 3]) is not None
    assert swept.plot(y="objective", figsize=(5, 3)) is not None


def test_comparison_indexing(comparison):
    with pytest.raises(memsched.InputError, match="nope") as err:
        comparison["nope"]  # noqa: B018
    assert isinstance(err.value, KeyError)
    assert str(err.value) == "key: no result of solver 'nope' (solvers: rotor, periodic)"  # one line, not quoted
    with pytest.raises(KeyError):
        comparison["nope"]  # noqa: B018
    with pytest.raises(memsched.InputError, match="position 10") as err:
        comparison[10]  # noqa: B018
    assert isinstance(err.value, IndexError)
    with pytest.raises(IndexError):
        comparison[-3]  # noqa: B018
    # good keys, iteration and `in` work as before
    assert comparison["rotor"].solver == "rotor" and comparison[1].solver == "periodic"
    assert comparison[-1].solver == "periodic"
    assert [r.solver for r in comparison] == ["rotor", "periodic"]
    assert comparison[0] in comparison and len(comparison) == 2


def test_sweep_result_columns(swept):
    with pytest.raises(memsched.InputError, match="values.*bogus"):
        swept.pivot("bogus")
    with pytest.raises(memsched.InputError, match="y.*bogus"):
        swept.plot(y="bogus")
    with pytest.raises(memsched.InputError, match="y"):
        swept.plot(y=5)
    assert list(swept.pivot("objective").columns) == ["rotor"]


# ---------------------------------------------------------------- 10. sweep of a sweep file
@pytest.mark.parametrize("kwargs, field", [
    ({"workers": "x"}, "workers"), ({"workers": 0}, "workers"), ({"workers": 2.5}, "workers"),
    ({"output": 5}, "output"), ({"fresh": "yes"}, "fresh"),
    ({"budgets": ["50%"]}, "budgets"), ({"solvers": ["rotor"]}, "solvers"), ({"slots": -1}, "slots"),
    ({"slots": 500}, "slots"), ({"time_limit": 5}, "time_limit"), ({"bandwidth": "1GB/s"}, "bandwidth"),
    ({"devices": 2}, "devices"), ({"problem": "chain"}, "problem"), ({"bogus": 1}, "bogus"),
])
def test_a_sweep_file_refuses_bad_and_instance_arguments(tmp_path, kwargs, field):
    from memsched.experiments.sweep import run as sweep_run

    def never(*_, **__):
        raise AssertionError("the sweep ran")

    target = tmp_path / "mini.toml"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sweep_run, "run_sweep", never)
        with pytest.raises(memsched.InputError, match=field) as err:
            memsched.sweep(target, **kwargs)
    one_line(err)


@pytest.mark.parametrize("kwargs, field", [({"output": "out"}, "output"), ({"workers": 2}, "workers"),
                                           ({"fresh": True}, "fresh")])
def test_an_instance_sweep_refuses_the_sweep_file_arguments(cnn, kwargs, field):
    with pytest.raises(memsched.InputError, match=field):
        memsched.sweep(cnn, budgets=["50%"], **kwargs)


# ---------------------------------------------------------------- 11. instance sweeps check up front
@pytest.mark.parametrize("kwargs, field", [
    ({"slots": -1}, "slots"), ({"slots": "x"}, "slots"), ({"slots": 2.5}, "slots"),
    ({"solvers": ["milp"], "time_limit": -1}, "time_limit"), ({"time_limit": "abc"}, "time_limit"),
    ({"solvers": ["periodic"], "segments": -3}, "segments"), ({"solvers": ["periodic"], "segments": "x"}, "segments"),
    ({"problem": "pipeline"}, "devices"), ({"problem": "pipeline", "devices": 0}, "devices"),
    ({"devices": 2}, "devices"), ({"bandwidth": "fast"}, "bandwidth"), ({"budgets": ["50%", "x"]}, "budget"),
])
def test_instance_sweep_checks_shared_arguments_before_solving(monkeypatch, cnn, kwargs, field):
    from memsched import api

    def never(*_, **__):
        raise AssertionError("a solver ran before the arguments were checked")

    monkeypatch.setattr(api, "solve", never)
    kwargs = {"budgets": ["50%"], **kwargs}
    with pytest.raises(memsched.InputError, match=field) as err:
        memsched.sweep(cnn, **kwargs)
    one_line(err)


def test_instance_sweep_still_records_unsupported_solvers():
    homogeneous = memsched.load(DATA / "examples" / "cnn12.json")
    sw = memsched.sweep(homogeneous, budgets=["50%"], solvers=["rotor", "revolve"], slots=100)
    statuses = {r["solver"]: r["status"] for r in sw.rows}
    assert statuses["rotor"] != "unsupported" and set(statuses) == {"rotor", "revolve"}


# ---------------------------------------------------------------- 12. time_limit, progress, devices everywhere
@pytest.mark.parametrize("time_limit", ["abc", -1, 0, math.nan, math.inf, [1], True, 8 * 86400, 10**400])
def test_time_limit_is_checked_for_every_solver(tiny, time_limit):
    with pytest.raises(memsched.InputError, match="time_limit") as err:
        memsched.solve(tiny, "80%", solver="rotor", time_limit=time_limit)
    one_line(err)


@pytest.mark.parametrize("progress", ["yes", 1, None])
def test_progress_must_be_a_bool(tiny, progress):
    with pytest.raises(memsched.InputError, match="progress"):
        memsched.solve(tiny, "80%", progress=progress)


@pytest.mark.parametrize("devices", ["abc", 2, 1])
def test_devices_apply_to_pipelines_only(tiny, devices):
    with pytest.raises(memsched.InputError, match="applies to pipelines") as info:
        memsched.solve(tiny, "80%", devices=devices)
    assert info.value.field == "devices"


def test_time_limit_and_progress_good_values(tiny):
    assert memsched.solve(tiny, "80%", solver="rotor", time_limit=5, progress=False).found
    assert memsched.solve(tiny, "80%", solver="rotor", time_limit=None).found
    assert memsched.solve(tiny, "80%", solver="rotor", time_limit=7 * 86400).found


# ---------------------------------------------------------------- 13. bandwidth / latency where they do not apply
def test_bandwidth_applies_to_chains_only(tiny):
    graph = memsched.load(GRAPH)
    with pytest.raises(memsched.InputError, match="bandwidth"):
        memsched.solve(graph, "100%", bandwidth="1GB/s")
    with pytest.raises(memsched.InputError, match="bandwidth"):
        memsched.simulate(graph, [0], bandwidth="1GB/s")
    with pytest.raises(memsched.InputError, match="bandwidth"):
        memsched.sweep(graph, budgets=["100%"], bandwidth="1GB/s")
    # a pipeline's link (`memsched partition --bandwidth`), not a host link
    assert memsched.solve(tiny, "80%", problem="pipeline", devices=2, bandwidth="1GB/s").instance.bandwidth == 1e9
    assert memsched.load(TINY, problem="pipeline", bandwidth="1GB/s").bandwidth == 1e9  # as `solve` takes it


def test_latency_needs_a_bandwidth(tiny):
    with pytest.raises(memsched.InputError, match="latency.*needs a bandwidth") as err:
        memsched.load(TINY, latency=5)
    one_line(err)
    with pytest.raises(memsched.InputError, match="latency.*needs a bandwidth"):
        memsched.solve(tiny, "80%", latency=5)
    with pytest.raises(memsched.InputError, match="latency.*needs a bandwidth"):
        memsched.solve(TINY, "80%", latency=5)


def test_a_host_link_file_takes_a_latency(tmp_path):
    data = json.loads(CNN12.read_text())
    data["host_link"] = {"bandwidth": 12e9, "latency": 0.0}
    (tmp_path / "linked.json").write_text(json.dumps(data))
    assert memsched.load(tmp_path / "linked.json", latency=0.25).latency == 0.25


# ---------------------------------------------------------------- 14. option values
@pytest.mark.parametrize("options, field", [({"warm_start": "x"}, "warm_start"), ({"dominance": "x"}, "dominance"),
                                            ({"workers": "2"}, "workers"), ({"seed": 1.5}, "seed"),
                                            ({"memory_gb": "x"}, "memory_gb")])
def test_option_values_have_the_solvers_types(monkeypatch, tiny, options, field):
    from memsched.solvers import registry

    def never(*_, **__):
        raise AssertionError("the solver ran")

    monkeypatch.setattr(registry, "solve", never)
    with pytest.raises(memsched.InputError, match=field) as err:
        memsched.solve(tiny, "80%", solver="milp", **options)
    one_line(err)


def test_option_values_none_keeps_a_default():
    from memsched.api import _check_options

    _check_options("chain", ["milp"], {"seed": None, "warm_start": True, "workers": 1})
    _check_options("chain", ["periodic"], {"segments": None})
    _check_options("chain", ["rotor"], {"table_budget": 2**40})  # bytes: checked by the solver, not as a count


# ---------------------------------------------------------------- 15. run
@pytest.mark.parametrize("kwargs, field", [
    ({"solver": ["rotor", "periodic"]}, "solver"), ({"solver": 5}, "solver"),
    ({"slots": "x"}, "slots"), ({"slots": -1}, "slots"),
    ({"time_repeats": "x"}, "time_repeats"), ({"time_repeats": 0}, "time_repeats"),
    ({"repeats": "x"}, "repeats"), ({"repeats": 2.5}, "repeats"),
    ({"seed": "x"}, "seed"), ({"seed": -1}, "seed"), ({"seed": True}, "seed"),
    ({"time_limit": -1}, "time_limit"), ({"time_limit": "x"}, "time_limit"),
    ({"problem": "pipeline"}, "problem"), ({"problem": 5}, "problem"),
])
def test_run_checks_its_arguments_before_anything(monkeypatch, kwargs, field):
    from memsched import api

    def never():
        raise AssertionError("run went on past its argument checks")

    monkeypatch.setattr(api, "_need_torch", never)
    with pytest.raises(memsched.InputError, match=field) as err:
        memsched.run("resnet18", "50%", **kwargs)
    one_line(err)

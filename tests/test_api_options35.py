"""The Python facade and the command line agree on solver options and infeasible answers:

1. one exact-solver option given in two spellings (``seed`` and ``random_seed``, ``workers`` and
   ``num_workers``) is refused by `memsched.solve`, `memsched.sweep`, `memsched.run`, the exact layer
   itself (`ExactOptions.from_kwargs`) and a sweep file, as ``--option`` refuses it;
2. `memsched.solve`'s infeasible answer carries the smallest feasible budget that ``memsched solve
   --json`` reports (the same search);
3. numpy booleans are booleans (``warm_start=np.True_``, ``progress=np.True_``);
4. `memsched.sweep(instance, workers=...)` says how the exact solvers' workers option is spelt there.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, one_line_refusal, sweep_toml
from memsched.solvers.errors import InputError

import memsched

TINY = EXAMPLES / "tiny.json"
TWICE = [("seed", "random_seed"), ("workers", "num_workers"), ("threads", "workers")]


def _canonical(key: str) -> str:
    return {"random_seed": "seed", "num_workers": "workers", "threads": "workers"}.get(key, key)


# ---------------------------------------------------------------------------- 1. one option, two spellings
@pytest.mark.parametrize("first, second", TWICE)
def test_solve_refuses_one_option_in_two_spellings_as_the_cli_does(cli, first, second):
    with pytest.raises(InputError) as err:
        memsched.solve(TINY, "90%", solver="cpsat", time_limit=2, **{first: 1, second: 2})
    name = _canonical(first)
    assert err.value.field == name
    res = cli("solve", TINY, "--budget", "90%", "--solver", "cpsat", "--option", f"{first}=1",
              "--option", f"{second}=2")
    line = one_line_refusal(res, f"--option {name}: ")
    assert line.endswith(err.value.message), (line, err.value.message)
    assert err.value.message == f"given twice (as {first!r} and {second!r}): give each option once"


def test_a_comparison_and_an_instance_sweep_refuse_it_too():
    with pytest.raises(InputError) as err:
        memsched.solve(TINY, "90%", solver=["cpsat", "rotor"], time_limit=2, seed=1, random_seed=5)
    assert err.value.field == "seed" and "given twice" in err.value.message
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, budgets=["90%"], solvers=["cpsat"], time_limit=2, num_workers=1, threads=2)
    assert err.value.field == "workers" and "given twice (as 'num_workers' and 'threads')" in err.value.message


def test_run_refuses_it_before_anything_else():
    """`memsched.run`'s options are checked with its other arguments, before any network is built: the
    options' error comes before the one of ``repeats=0`` (checked after them)."""
    with pytest.raises(InputError) as err:
        memsched.run("resnet18", "50%", "cpsat", chain=TINY, options={"workers": 1, "num_workers": 2}, repeats=0)
    assert err.value.field == "workers" and "given twice (as 'workers' and 'num_workers')" in err.value.message


def test_the_exact_layer_refuses_it_whoever_calls_it():
    from memsched.solvers.exact.options import ExactOptions
    from memsched.solvers.formats import load_instance
    from memsched.solvers.registry import get_solver

    with pytest.raises(InputError, match="given twice"):
        ExactOptions.from_kwargs(workers=1, num_workers=2)
    options, rest = ExactOptions.from_kwargs(num_workers=3, random_seed=4, other=5)  # one spelling each: mapped
    assert (options.workers, options.seed, rest) == (3, 4, {"other": 5})
    _, chain = load_instance(TINY)
    with pytest.raises(InputError) as err:
        get_solver("chain", "cpsat")(chain, 10**6, seed=1, random_seed=2, time_limit=2)
    assert "seed" in str(err.value.field) and "given twice" in err.value.message


def _sweep_file(tmp_path: Path, solver: dict, defaults: dict | None = None) -> Path:
    path = tmp_path / "twice.toml"
    path.write_text(sweep_toml("twice", budgets=["90%"], instances=[{"file": str(TINY)}], solvers=[solver],
                               defaults=defaults))
    return path


def test_a_sweep_file_with_one_option_in_two_spellings_is_bad_input(cli, tmp_path):
    from memsched.experiments.sweep import load_config

    cfg = _sweep_file(tmp_path, {"name": "cpsat", "time_limit": 2, "options": {"workers": 1, "num_workers": 2}})
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == "solvers[0].options.workers" and err.value.path == str(cfg)
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress", "--workers", "1")
    line = one_line_refusal(res, "solvers[0].options.workers")
    assert str(cfg) in line and "given twice (as 'workers' and 'num_workers')" in line
    assert not (tmp_path / "out").exists()
    cfg = _sweep_file(tmp_path, {"name": "cpsat"}, defaults={"options": {"seed": 1, "random_seed": 2}})
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == "defaults.options.seed"


def test_a_solver_entry_sets_a_default_option_in_another_spelling(tmp_path):
    """``[defaults] options = {workers = 1}`` and a solver's ``options = {num_workers = 2}``: the entry's
    option replaces the default (one option, not two spellings of it for the solver to choose from)."""
    from memsched.experiments.sweep import load_config

    cfg = _sweep_file(tmp_path, {"name": "cpsat", "options": {"num_workers": 2}},
                      defaults={"options": {"workers": 1, "warm_start": False}})
    assert load_config(cfg).solvers[0].options == {"warm_start": False, "num_workers": 2}


# ---------------------------------------------------------------------------- 2. smallest feasible budget
def test_an_infeasible_answer_has_the_smallest_budget_of_solve_json(cli):
    res = cli("solve", TINY, "--budget", "50%", "--solver", "milp", "--time-limit", "5", "--json")
    assert res.code == 1, res.err
    want = res.json()
    assert want["status"] == "infeasible" and want["min_budget"] is not None
    result = memsched.solve(TINY, "50%", solver="milp", time_limit=5)
    assert result.status == "infeasible"
    assert result.min_budget == want["min_budget"]
    got = result.to_json()
    for key in ("min_budget", "min_budget_method", "budget", "status"):
        assert got.get(key) == want.get(key), key
    comparison = memsched.solve(TINY, "50%", solver=["milp", "cpsat"], time_limit=5)
    assert [r.min_budget for r in comparison] == [want["min_budget"]] * 2


def test_an_instance_sweep_searches_no_smallest_budget_as_a_sweep_file_does():
    rows = memsched.sweep(TINY, budgets=["50%"], solvers=["milp"], time_limit=5).rows
    assert rows[0]["status"] == "infeasible" and rows[0]["min_budget"] is None


# ---------------------------------------------------------------------------- 3. numpy booleans
@pytest.mark.parametrize("value, seeded", [(np.bool_(True), "rotor"), (np.bool_(False), None)])
def test_a_numpy_bool_is_a_bool_option(value, seeded):
    result = memsched.solve(TINY, "90%", solver="cpsat", warm_start=value, time_limit=2)
    assert result.found and result.to_json()["seeded_by"] == seeded


def test_a_numpy_bool_is_a_bool_argument_and_no_number():
    result = memsched.solve(TINY, "90%", solver="rotor", progress=np.True_)
    assert result.found
    with pytest.raises(InputError, match="must be True or False"):
        memsched.solve(TINY, "90%", solver="rotor", progress=1)
    with pytest.raises(InputError) as err:
        memsched.solve(TINY, "90%", solver="cpsat", workers=np.True_, time_limit=2)
    assert err.value.field == "workers"


def test_plain_option_gives_the_solver_a_python_bool():
    from memsched.experiments.commands._checks import option_type_error, plain_option

    assert option_type_error("bool", "warm_start", np.False_) is None
    assert option_type_error("bool", "warm_start", 0) == "true or false"
    plain = plain_option("bool", np.True_)
    assert plain is True


# ---------------------------------------------------------------------------- 4. an instance sweep's workers
def test_instance_sweep_workers_names_num_workers(monkeypatch):
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, budgets=["40%"], solvers=["cpsat"], workers=1)
    assert err.value.field == "workers" and "num_workers=" in err.value.message
    from memsched.solvers import registry

    seen: list[tuple] = []
    real = registry.solve

    def spy(problem, instance, solver, budget, **kw):
        out = real(problem, instance, solver, budget, **kw)
        if solver == "cpsat":  # (not its warm start's fast solvers)
            seen.append((kw.get("num_workers"), out.details.get("workers")))  # given, and what CP-SAT ran with
        return out

    monkeypatch.setattr(registry, "solve", spy)
    rows = memsched.sweep(TINY, budgets=["90%"], solvers=["cpsat"], time_limit=2, num_workers=2).rows
    assert rows[0]["status"] == "optimal"
    assert seen == [(2, 2)]

"""Options in sweep files: values the solvers refuse for every instance are refused when the file
is read (the offload CP-SAT models' ``scale``, the MILP ``backend`` of chain milp and graph
checkmate; before, every cell of such a file ended ``unsupported``), and an option of
``[defaults]`` is ignored by the solvers that do not take it."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, sweep_toml
from memsched.experiments.sweep import load_config
from memsched.experiments.sweep.config import check_option_value
from memsched.solvers.errors import InputError

TINY = EXAMPLES / "tiny.json"


def sweep_file(tmp_path: Path, solver: dict, problem: str | None = None) -> Path:
    instance = {"file": str(TINY), **({"problem": problem} if problem else {})}
    path = tmp_path / "sweep.toml"
    path.write_text(sweep_toml("opt", budgets=["50%"], instances=[instance], solvers=[solver]))
    return path


@pytest.mark.parametrize("solver, key, value, problem", [
    ("cpsat", "scale", 0, "offload"), ("exact-combined", "scale", -1.5, "offload"),
    ("offload-exact", "scale", 0.0, "offload"), ("milp", "backend", "gurobi", None),
    ("checkmate", "backend", "glpk", None)])
def test_a_value_no_instance_takes_is_refused_at_read(cli, tmp_path, solver, key, value, problem):
    cfg = sweep_file(tmp_path, {"name": solver, "options": {key: value}}, problem)
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == f"solvers[0].options.{key}"
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress", "--workers", "1")
    assert res.code == 2 and f"solvers[0].options.{key}" in res.err and "Traceback" not in res.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("problem, solver, key, value", [
    ("offload", "cpsat", "scale", 1000.0), ("offload", "cpsat", "scale", None), ("chain", "milp", "backend", "HiGHS"),
    ("chain", "milp", "backend", None), ("graph", "checkmate", "backend", "auto")])
def test_good_values_pass(problem, solver, key, value):
    check_option_value(problem, solver, key, value)


def test_the_solver_refuses_a_bad_backend_before_its_warm_start():
    """The check runs first (`check_first`): no fast solver is run for an answer that cannot come."""
    from memsched.solvers.formats import load_instance
    from memsched.solvers.registry import get_solver

    _, chain = load_instance(TINY)
    with pytest.raises(InputError, match="unknown MILP backend"):
        get_solver("chain", "milp")(chain, 10**12, backend="gurobi")


def test_every_solver_ignores_options_it_does_not_take():
    """docs/CONVENTIONS.md: a solver accepts and ignores unknown keyword options (``**_``), so an
    option of ``[defaults]`` meant for another solver of the file reaches it harmlessly."""
    import inspect

    from memsched.solvers.registry import available_problems, get_solver, solver_table

    for problem in available_problems():
        for _, name, _ in solver_table(problem):
            params = inspect.signature(get_solver(problem, name)).parameters.values()
            assert any(p.kind is p.VAR_KEYWORD for p in params), f"{problem} {name}"


def test_a_default_option_of_milp_leaves_cpsat_alone(tmp_path):
    from memsched.experiments.sweep import run_sweep

    path = tmp_path / "sweep.toml"
    path.write_text(sweep_toml("opt", budgets=["80%"], instances=[{"file": str(TINY)}],
                               solvers=[{"name": "milp", "time_limit": 10}, {"name": "cpsat", "time_limit": 10}],
                               defaults={"options": {"backend": "scip"}}))
    out = run_sweep(path, output=tmp_path / "out", workers=1, progress=False, isolate=False)
    assert sorted(r["status"] for r in out.rows) == ["optimal", "optimal"], [r.get("message") for r in out.rows]

"""`dag` and `dag-cpsat` on a coarsened ideal lattice (``max_states`` below the number of ideals):
their ``infeasible`` is proven for that lattice's DAG partitions only, so the message, the
``min_budget`` details and `memsched partition`'s error line say "on this lattice" (and suggest a
larger ``max_states``), while the full lattice keeps the plain wording; every scope names the lattice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from memsched.solvers import registry
from memsched.solvers.exact.options import DeadlineExceeded
from memsched.solvers.pipeline import Pipeline, dag_dp, from_graph_txt
from memsched.solvers.pipeline.dag_dp import lattice_for

#: (layers, seed, devices) of `_dag` for which the one-ideal-cap lattice (the linearised chain)
#: needs more memory than the full lattice
CASES = [(6, 1, 2), (7, 0, 3)]


def _dag(L: int, seed: int) -> Pipeline:
    """A random layer DAG whose index order is not forced (no edge l -> l + 1 by construction):
    each layer after the first reads one or two earlier ones, every layer but the last feeds one."""
    rng = np.random.default_rng(seed)
    succ: list[list[int]] = [[] for _ in range(L)]
    for v in range(1, L):
        for u in rng.choice(v, size=int(rng.integers(1, min(2, v) + 1)), replace=False):
            succ[int(u)].append(v)
    for u in range(L - 1):
        if not succ[u]:
            succ[u].append(L - 1)
    return Pipeline(fwd=rng.uniform(1, 10, L), bwd=rng.uniform(1, 20, L), act=rng.integers(1, 100, L) * 1000,
                    params=rng.integers(0, 50, L) * 1000, input_size=5000, succ=succ, name=f"dag{seed}")


def _least(inst: Pipeline, P: int, max_states: int | None) -> int:
    """`dag`'s ``min_budget`` (bytes) on the lattice of `max_states`."""
    res = registry.solve("pipeline", inst, "dag", 1, devices=P, max_states=max_states)
    assert res.status == "infeasible" and res.min_budget is not None
    return int(res.min_budget)


@pytest.mark.parametrize("solver", ["dag", "dag-cpsat"])
@pytest.mark.parametrize(("L", "seed", "P"), CASES)
def test_coarse_lattice_infeasible_is_worded_for_its_lattice(solver: str, L: int, seed: int, P: int) -> None:
    inst = _dag(L, seed)
    full, coarse = lattice_for(inst, None), lattice_for(inst, 1)
    assert full.granularity == "all antichain splits" and coarse.granularity != full.granularity
    need = _least(inst, P, None)
    assert _least(inst, P, 1) > need  # the premise: the coarse lattice misses partitions that fit `need`
    assert registry.solve("pipeline", inst, solver, need, devices=P).status == "optimal"
    res = registry.solve("pipeline", inst, solver, need, devices=P, max_states=1)
    assert res.status == "infeasible" and res.min_budget is not None and res.min_budget > need
    assert res.message.startswith(f"no DAG partition on this lattice ({coarse.granularity}, {coarse.n} ideals) "
                                  f"fits {need} bytes per device")
    assert "more than 1 ideals" in res.message and "a larger --option max_states" in res.message
    assert f"({coarse.granularity}, {coarse.n} ideals)" in res.scope
    assert res.details.get("coarse_lattice") is True
    assert res.to_json()["coarse_lattice"] is True
    plain = registry.solve("pipeline", inst, solver, need - 1, devices=P)  # the full lattice: wording as before
    assert plain.status == "infeasible" and plain.min_budget == need
    assert plain.message == f"no DAG partition fits {need - 1} bytes per device"
    assert f"({full.granularity}, {full.n} ideals)" in plain.scope
    assert "coarse_lattice" not in plain.details


def test_python_spelling_of_the_option_in_the_facade() -> None:
    import memsched

    L, seed, P = CASES[0]
    inst = _dag(L, seed)
    need = _least(inst, P, None)
    res = memsched.solve(inst, need, "dag", devices=P, max_states=1)
    assert res.status == "infeasible"
    assert "a larger max_states searches a finer one" in res.message and "--option" not in res.message


@pytest.mark.parametrize("solver", ["dag", "dag-cpsat"])
def test_partition_cli_says_on_this_lattice(tmp_path: Path, solver: str) -> None:
    L, seed, P = CASES[0]
    path = tmp_path / "d.graph.txt"
    path.write_text(_dag(L, seed).to_graph_txt())
    inst = from_graph_txt(path.read_text())
    need, coarse_need = _least(inst, P, None), _least(inst, P, 1)
    assert coarse_need > need
    code, _, err = run_cli("partition", path, "--devices", P, "--memory", need, "--solver", solver,
                           "--option", "max_states=1")
    assert code == 1
    assert f"smallest feasible memory on this lattice: {coarse_need} bytes" in err
    assert "a larger --option max_states" in err
    code, _, err = run_cli("partition", path, "--devices", P, "--memory", need - 1, "--solver", solver)
    assert code == 1
    assert f"smallest feasible memory: {need} bytes" in err and "on this lattice" not in err


def test_deadline_before_least_memory_keeps_the_lattice_in_the_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    L, seed, P = CASES[0]
    inst = _dag(L, seed)
    need = _least(inst, P, None)
    coarse = lattice_for(inst, 1)

    def spent(*_: object, **__: object) -> None:
        raise DeadlineExceeded

    monkeypatch.setattr(dag_dp, "least_memory", spent)  # the time limit comes while the least memory is sought
    res = dag_dp.solve_dag(inst, need, devices=P, max_states=1)
    assert res.status == "infeasible" and res.min_budget is None
    assert f"({coarse.granularity}, {coarse.n} ideals)" in res.scope
    assert res.message.startswith(f"no DAG partition on this lattice ({coarse.granularity}, {coarse.n} ideals) "
                                  f"fits {need} bytes per device (the time limit came before the least memory")
    assert res.details["min_budget_note"] == dag_dp.LEAST_MEMORY_TIMED_OUT  # why min_budget is unknown


def test_partition_says_why_the_least_memory_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The time limit before the least memory: the error line gives that reason, not "this solver does
    not compute it" (which dag and dag-cpsat do)."""
    from memsched.experiments.cli import main

    L, seed, P = CASES[0]
    path = tmp_path / "d.graph.txt"
    path.write_text(_dag(L, seed).to_graph_txt())
    need = _least(from_graph_txt(path.read_text()), P, None)

    def spent(*_: object, **__: object) -> None:
        raise DeadlineExceeded

    monkeypatch.setattr(dag_dp, "least_memory", spent)
    for solver in ("dag", "dag-cpsat"):
        code = main(["partition", str(path), "--devices", str(P), "--memory", str(need - 1), "--solver", solver])
        err = capsys.readouterr().err
        assert code == 1, err
        assert f"smallest feasible budget unknown: {dag_dp.LEAST_MEMORY_TIMED_OUT}" in err, err
        assert "does not compute it" not in err

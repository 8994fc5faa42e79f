"""`memsched run` / `memsched.run` refuse bad input alike, naming what was given:

1. a join network (siamese) with another problem is ``problem``'s error in Python too (was "model: unknown
   model 'siamese'"), as ``--problem``'s on the command line;
2. an instance file of another problem names the file and the argument given (``chain=`` or ``instance=``;
   was "instance: ..." without the file, whichever argument gave it);
3. a chain file too long for exact-combined is refused by ``run`` before any work, naming the file, as
   ``solve`` refuses it (was the solver's "stages: chain '...' has L = 10 stages" without the file).

Nothing is built or executed: `captured_run` / `run_stub` stand in for `models.run.run`.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, one_line_refusal, run_cli

import memsched

pytest.importorskip("torch")

TINY = {"batch": 2, "image_size": 32, "width": 4, "depth": 1}
GRAPH = ROOT / "solvers" / "data" / "graphs" / "linear10.json"


def _too_long(tmp_path: Path) -> Path:
    """An offloading chain file (with its host link) one stage over exact-combined's `MAX_LENGTH`."""
    from memsched.solvers.offload.exact_combined import MAX_LENGTH
    from memsched.solvers.offload.generate import random_offload

    path = tmp_path / "long.json"
    random_offload(MAX_LENGTH + 1, 1).save(str(path))
    return path


# ---------------------------------------------------------------------------- 1. a join network, another problem
@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_python_run_of_a_join_network_as_another_problem_names_problem(captured_run, problem: str) -> None:
    with pytest.raises(memsched.InputError) as err:
        memsched.run("siamese", 1, problem=problem, threads=1, **TINY)
    assert err.value.field == "problem", str(err.value)
    assert "siamese is a join network" in err.value.message and "problem='join'" in err.value.message
    assert "unknown model" not in str(err.value) and "--problem" not in str(err.value)
    assert captured_run == []


def test_cli_run_of_a_join_network_says_so_as_before(run_stub) -> None:
    res = run_cli("run", "siamese", "--budget", "1", "--problem", "chain")
    one_line_refusal(res, "--problem: siamese is a join network, not run as chain: use --problem join or leave "
                          "--problem out")
    assert run_stub == []


# ---------------------------------------------------------------------------- 2. an instance of another problem
@pytest.mark.parametrize("argument", ["chain", "instance"])
def test_an_instance_file_of_another_problem_names_the_file_and_the_argument(captured_run, argument: str) -> None:
    with pytest.raises(memsched.InputError) as err:
        memsched.run("resnet18", "80%", problem="chain", **{argument: str(GRAPH)}, **TINY)
    assert err.value.path == str(GRAPH) and err.value.field == argument, str(err.value)
    assert "a graph instance cannot be run as chain" in err.value.message
    chain = EXAMPLES / "tiny.json"
    with pytest.raises(memsched.InputError) as err:
        memsched.run("resnet18", "80%", problem="graph", **{argument: chain}, **TINY)
    assert err.value.path == str(chain) and err.value.field == argument, str(err.value)
    assert "a chain instance cannot be run as graph" in err.value.message
    assert captured_run == []


def test_an_instance_object_of_another_problem_names_the_argument(captured_run) -> None:
    with pytest.raises(memsched.InputError) as err:
        memsched.run("resnet18", "80%", problem="chain", chain=memsched.load(GRAPH), **TINY)
    assert err.value.path is None and err.value.field == "chain", str(err.value)
    assert captured_run == []


# ---------------------------------------------------------------------------- 3. exact-combined's length
@pytest.mark.parametrize("how", ["model", "chain"])
def test_cli_run_refuses_a_chain_file_too_long_for_exact_combined_naming_it(run_stub, tmp_path: Path,
                                                                           how: str) -> None:
    path = _too_long(tmp_path)
    given = [str(path), "--model", "resnet18"] if how == "model" else ["resnet18", "--chain", str(path)]
    res = run_cli("run", *given, "--solver", "exact-combined", "--budget", "75%")
    line = one_line_refusal(res, f"{path}: stages: the chain has ")
    assert "exact-combined enumerates compute sequences" in line
    assert run_stub == [] and res.out == ""


def test_python_run_refuses_a_chain_file_too_long_for_exact_combined_naming_it(captured_run, tmp_path: Path) -> None:
    path = _too_long(tmp_path)
    with pytest.raises(memsched.InputError) as err:
        memsched.run("resnet18", "75%", solver="exact-combined", chain=str(path), **TINY)
    assert err.value.path == str(path) and err.value.field == "stages", str(err.value)
    assert captured_run == []


def test_a_short_chain_file_still_reaches_the_run(run_stub, tmp_path: Path) -> None:
    from memsched.solvers.offload.exact_combined import MAX_LENGTH
    from memsched.solvers.offload.generate import random_offload

    path = tmp_path / "short.json"
    random_offload(MAX_LENGTH, 1).save(str(path))
    res = run_cli("run", str(path), "--model", "resnet18", "--solver", "exact-combined", "--budget", "75%")
    assert res.code == 1 and "stub" in res.err, res.err  # the stand-in's "infeasible: stub"
    assert len(run_stub) == 1 and run_stub[0]["problem"] == "offload"

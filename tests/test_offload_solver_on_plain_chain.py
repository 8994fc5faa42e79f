"""An offloading solver named on a chain without a host link: the answer says the chain needs a
bandwidth (it said "unknown solver 'pofo' for chain", as if pofo did not exist), in Python and
on the command line, for `solve` and `run`."""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.experiments.cli import main
from memsched.solvers.errors import InputError

import memsched

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "random10.json"


@pytest.mark.parametrize("solver", ["pofo", ["rotor", "pofo"]])
def test_python_solve_names_the_missing_bandwidth(solver: object) -> None:
    with pytest.raises(InputError, match="offloading solver.*bandwidth") as err:
        memsched.solve(str(EXAMPLE), "50%", solver=solver)
    assert err.value.field == ("solver" if isinstance(solver, str) else "solver[1]")


def test_a_chain_solver_still_unknown_as_before() -> None:
    with pytest.raises(InputError, match="unknown solver 'nosuch' for chain"):
        memsched.solve(str(EXAMPLE), "50%", solver="nosuch")


def test_cli_run_of_a_model_name_names_the_missing_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "lstm", "--solver", "pofo", "--budget", "50%"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--solver" in err[0] and "--bandwidth" in err[0]


def test_with_a_bandwidth_pofo_solves() -> None:
    res = memsched.solve(str(EXAMPLE), "50%", solver="pofo", bandwidth="12GB/s")
    assert res.problem == "offload" and res.status in ("optimal", "feasible")

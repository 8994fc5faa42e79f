"""`memsched.solve` / `sweep` with problem="chain" on a chain file with a host link: an offloading
solver named is refused by saying the named chain problem sets the link aside (as ``memsched run
--problem chain`` says), not by asking for a link the file has."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import memsched
from memsched import InputError


@pytest.fixture
def linked_chain(tmp_path: Path) -> Path:
    data = json.loads(memsched.data_path("examples", "cnn12.json").read_text())
    data["host_link"] = {"bandwidth": 1e9}
    path = tmp_path / "linked.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("solver, field", [("pofo", "solver"), (["rotor", "pofo"], "solver[1]")])
def test_solve_says_the_chain_problem_sets_the_link_aside(linked_chain: Path, solver: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        memsched.solve(linked_chain, problem="chain", solver=solver, budget="50%")
    assert err.value.field == field
    assert "sets this chain's host link aside" in err.value.message and "problem='offload'" in err.value.message
    assert "no host link" not in err.value.message


def test_sweep_says_the_chain_problem_sets_the_link_aside(linked_chain: Path) -> None:
    with pytest.raises(InputError) as err:
        memsched.sweep(linked_chain, ["50%"], problem="chain", solvers=["rotor", "pofo"])
    assert err.value.field == "solvers[1]" and "sets this chain's host link aside" in err.value.message


def test_without_a_link_the_message_still_asks_for_one() -> None:
    with pytest.raises(InputError, match="no host link") as err:
        memsched.solve(memsched.data_path("examples", "cnn12.json"), problem="chain", solver="pofo", budget="50%")
    assert "bandwidth" in err.value.message


def test_the_file_itself_is_offloading_without_the_chain_problem(linked_chain: Path) -> None:
    result = memsched.solve(linked_chain, solver="pofo", budget="50%")
    assert result.status in ("optimal", "feasible")

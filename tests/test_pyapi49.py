"""The Python API names the argument that is wrong: something that is no instance (``solve(42, ...)``)
names ``instance`` (``target`` in `sweep`, ``obj`` in `plot`); a `Result` replayed on a missing file or on
an instance with a bad cost raises that error (the file, the field), not one blamed on ``schedule``; `run`
with both `chain` and `instance` is refused (one was ignored without a word)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import memsched
from memsched import InputError

CNN12 = memsched.data_path("examples", "cnn12.json")


@pytest.mark.parametrize("call, field", [
    (lambda: memsched.solve(42, "50%"), "instance"),
    (lambda: memsched.solve(None, "50%"), "instance"),
    (lambda: memsched.sweep(None, budgets=["50%"]), "target"),
    (lambda: memsched.budget(42, "50%"), "instance"),
    (lambda: memsched.reference_peak(None), "instance"),
])
def test_no_instance_names_the_argument(call, field: str) -> None:
    with pytest.raises(InputError, match="not a memsched instance") as err:
        call()
    assert err.value.field == field


def test_simulate_and_plot_name_their_argument() -> None:
    result = memsched.solve(CNN12, "50%", solver="rotor")
    with pytest.raises(InputError) as err:
        memsched.simulate(42, result.schedule)
    assert err.value.field == "instance"
    with pytest.raises(InputError) as err:
        memsched.plot(42, result.schedule)
    assert err.value.field == "obj"


def test_a_result_on_a_missing_file_names_the_file(tmp_path: Path) -> None:
    result = memsched.solve(CNN12, "50%", solver="rotor")
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError) as plain:
        memsched.simulate(missing, result.schedule)
    with pytest.raises(InputError) as err:
        memsched.simulate(missing, result)
    assert err.value.field != "schedule" and err.value.path == str(missing)
    assert err.value.message == plain.value.message


def test_a_result_on_an_instance_with_a_bad_cost_names_the_cost() -> None:
    chain = memsched.load(CNN12)
    result = memsched.solve(chain, "50%", solver="rotor")
    chain.u_f[0] = math.nan
    with pytest.raises(InputError) as err:
        memsched.simulate(chain, result)
    assert err.value.field == "u_f[0]"


def test_a_result_on_another_problem_is_still_the_schedule_s_error() -> None:
    result = memsched.solve(CNN12, "50%", solver="rotor")
    graph = memsched.data_path("graphs", "gpt2_tiny.json")
    with pytest.raises(InputError, match="a chain result cannot be simulated on this instance") as err:
        memsched.simulate(graph, result)
    assert err.value.field == "schedule"


def test_run_refuses_chain_and_instance_together() -> None:
    pytest.importorskip("torch")
    with pytest.raises(InputError, match="not both") as err:
        memsched.run("resnet18", "70%", solver="rotor", chain=CNN12, instance="/nonexistent/nope.json")
    assert err.value.field == "instance"

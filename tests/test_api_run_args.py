"""`memsched.run`'s arguments are never silently ignored: a latency without a bandwidth, a bandwidth
for the graph or join problem, and solver `options` the solver does not take are one-line
`InputError`s naming the argument; a budget follows the same rule and messages as in `memsched.solve`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import RunReached

import memsched

torch = pytest.importorskip("torch")

TINY = Path(__file__).resolve().parent.parent / "solvers" / "data" / "examples" / "tiny.json"


def _net() -> tuple[torch.nn.Module, torch.Tensor]:
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)), torch.randn(4, 8)


def _refused(field: str, match: str, *args, **kwargs) -> str:
    with pytest.raises(memsched.InputError, match=match) as err:
        memsched.run(*args, **kwargs)
    assert err.value.field == field and "\n" not in str(err.value)
    return str(err.value)


ZOO = {"batch": 2, "image_size": 32, "width": 8}


@pytest.mark.torch
@pytest.mark.parametrize("spec, match", [
    (math.nan, "must be positive"), (-5, "must be positive"), (0, "must be positive"), (0.0, "must be positive"),
    (-math.inf, "must be positive"), ("0", "must be positive"), (0.5, "less than one byte"), (True, "not a budget"),
    ([1], "must be bytes"), ("x%", "percentage"), ("-5%", "non-negative"),
])
def test_a_budget_has_one_rule_in_run_and_solve(captured_run, spec, match):
    with pytest.raises(memsched.InputError, match=match) as solved:
        memsched.solve(memsched.load(TINY), spec, solver="rotor")
    assert _refused("budget", match, "resnet18", spec, **ZOO) == str(solved.value)
    assert not captured_run  # refused before anything ran


@pytest.mark.torch
def test_a_budget_in_bytes_reaches_the_run_as_bytes(captured_run):
    with pytest.raises(RunReached):
        memsched.run("resnet18", 2e6, **ZOO)
    with pytest.raises(RunReached):
        memsched.run("resnet18", "2MB", **ZOO)
    assert [c["budget"] for c in captured_run] == [2_000_000, 2_000_000]


@pytest.mark.torch
def test_a_latency_needs_a_bandwidth(captured_run):
    _refused("latency", "needs a bandwidth", "resnet18", "90%", latency=0.1, **ZOO)
    net, x = _net()
    _refused("latency", "needs a bandwidth", net, "90%", latency=0.1, example_input=x)
    _refused("latency", "seconds", "resnet18", "90%", bandwidth="1GB/s", latency=-1, **ZOO)
    assert not captured_run


@pytest.mark.torch
@pytest.mark.parametrize("model, problem", [("resnet18", "graph"), ("resnet18", "chain"), ("siamese", None),
                                            ("siamese", "join")])
def test_a_bandwidth_is_only_for_offloading(captured_run, model, problem):
    _refused("bandwidth", f"not a {problem or 'join'} one", model, "90%", problem=problem, bandwidth="1GB/s", **ZOO)
    assert not captured_run


@pytest.mark.torch
def test_an_offloading_instance_gives_its_link_and_a_latency_replaces_its_own(captured_run):
    inst = memsched.load(TINY, bandwidth="2GB/s", latency=0.25)
    for latency, want in ((None, 0.25), (0.5, 0.5)):
        with pytest.raises(RunReached):
            memsched.run("resnet18", "90%", instance=inst, latency=latency, **ZOO)
        assert captured_run[-1]["problem"] == "offload" and captured_run[-1]["bandwidth"] == 2e9
        assert captured_run[-1]["latency"] == want and captured_run[-1]["instance"] is inst.chain


@pytest.mark.torch
@pytest.mark.parametrize("options, field, match", [
    ({"nosuch": 1}, "nosuch", "no option 'nosuch' for rotor"),
    ({"slots": 3}, "options", "argument of run"), ({"time_limit": 3}, "options", "argument of run"),
    ({"devices": 2}, "devices", "pipelines"), ([("segments", 2)], "options", "dict"), ({1: 2}, "options", "dict"),
])
def test_solver_options_are_checked_for_zoo_names(captured_run, options, field, match):
    _refused(field, match, "resnet18", "90%", options=options, **ZOO)
    assert not captured_run


@pytest.mark.torch
def test_solver_options_are_checked_against_the_solver_run(captured_run):
    _refused("segments", "must be", "resnet18", "90%", solver="periodic", options={"segments": "two"}, **ZOO)
    _refused("segments", "no option 'segments' for dp", "siamese", "90%", options={"segments": 2}, **ZOO)
    with pytest.raises(RunReached):
        memsched.run("resnet18", "90%", solver="periodic", options={"segments": 2}, **ZOO)
    assert captured_run[-1]["options"] == {"segments": 2} and captured_run[-1]["slots"] == memsched.api.DEFAULT_SLOTS


@pytest.mark.torch
def test_solver_options_for_your_own_network(captured_run):
    net, x = _net()
    message = _refused("nosuch", "no option 'nosuch'", net, "90%", options={"nosuch": 1}, example_input=x)
    assert "sizes" not in message
    with pytest.raises(RunReached):
        memsched.run(net, "90%", solver="periodic", options={"segments": 2}, timing="in_step", example_input=x)
    assert captured_run[-1]["options"] == {"segments": 2} and captured_run[-1]["timing"] == "in_step"
    _refused("batch", "apply to zoo names", net, "90%", batch=2, example_input=x)  # sizes still are refused

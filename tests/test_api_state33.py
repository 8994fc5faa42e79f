"""The facade leaves the caller's state alone and stops where asked (hunt 33): an instance sweep ends at
a Ctrl-C as `solve`'s comparison does; `run` and `profile` put torch's RNG and the modules' ``.grad``
back; a zero reference peak gives no budget fraction; `plot` draws a `RunResult`."""

from __future__ import annotations

import json
import math

import pytest
from memsched.solvers import registry
from memsched.solvers.exact.interrupt import answering

import memsched

torch = pytest.importorskip("torch")
nn = torch.nn


def _net_args() -> tuple[object, dict[str, object]]:
    """A tiny MLP and the keyword arguments of `memsched.run` / `memsched.profile` for it."""
    gen = torch.Generator().manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(4, 8, generator=gen)
    y = torch.randint(0, 4, (4,), generator=gen)
    return net, {"example_input": x, "target": y, "loss_fn": nn.functional.cross_entropy}


RUN = {"repeats": 1, "time_repeats": 1}


# ---------------------------------------------------------------------------- 1: Ctrl-C ends an instance sweep
def _interrupting_solve(monkeypatch: pytest.MonkeyPatch, at_call: int) -> list[tuple[str, int]]:
    """Make the `at_call`-th solve (1-based) answer as the exact layer does after a Ctrl-C inside
    `answer_on_interrupt` (``details["interrupted"]``); returns the (solver, budget) of every call."""
    calls: list[tuple[str, int]] = []
    original = registry.solve

    def solve(problem, instance, name, budget, **kw):
        calls.append((name, int(budget)))
        res = original(problem, instance, name, budget, **kw)
        if len(calls) == at_call:
            assert answering()  # the facade asks for an answer, not a KeyboardInterrupt
            res.details["interrupted"] = True
            res.message = "interrupted after 0.0 s"
        return res

    monkeypatch.setattr(registry, "solve", solve)
    return calls


def test_sweep_of_an_instance_stops_at_an_interrupted_cell(monkeypatch):
    inst = memsched.load(memsched.data_path("graphs", "linear10.json"))
    calls = _interrupting_solve(monkeypatch, at_call=3)
    out = memsched.sweep(inst, ["60%", "80%", "100%"], ["greedy", "checkpoint-all"])
    assert len(calls) == 3  # the cells after the interrupted one never ran
    frame = out.to_pandas()
    assert list(frame["solver"]) == ["greedy", "checkpoint-all", "greedy"]
    assert list(frame["budget_spec"]) == ["60%", "60%", "80%"]
    assert frame["message"].iloc[-1].startswith("interrupted")  # the interrupted cell last, as in a comparison


def test_sweep_agrees_with_solve_comparison_on_an_interrupt(monkeypatch):
    inst = memsched.load(memsched.data_path("graphs", "linear10.json"))
    calls = _interrupting_solve(monkeypatch, at_call=1)
    cmp = memsched.solve(inst, "80%", ["greedy", "checkpoint-all"])
    assert len(calls) == 1 and len(cmp) == 1
    calls.clear()
    out = memsched.sweep(inst, ["80%"], ["greedy", "checkpoint-all"])
    assert len(calls) == 1 and len(out.to_pandas()) == 1


def test_sweep_raises_a_ctrl_c_outside_a_solver_search(monkeypatch):
    inst = memsched.load(memsched.data_path("graphs", "linear10.json"))
    calls = []

    def solve(problem, instance, name, budget, **kw):
        calls.append(name)
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "solve", solve)
    with pytest.raises(KeyboardInterrupt):
        memsched.sweep(inst, ["60%", "80%"], ["greedy"])
    assert calls == ["greedy"]


# ---------------------------------------------------------------------------- 3: zero reference peak
def test_sweep_budget_fraction_of_a_zero_reference_peak(tmp_path, monkeypatch):
    original = registry.solve

    def solve(problem, instance, name, budget, **kw):
        if name == "sqrt":
            raise memsched.InputError("refuses this instance")  # as revolve refuses a heterogeneous chain
        return original(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", solve)
    data = json.loads(memsched.data_path("graphs", "linear10.json").read_text())
    for node in data["nodes"]:
        node["cost_ram"] = 0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(data))
    inst = memsched.load(path)
    assert memsched.reference_peak(inst) == 0
    frame = memsched.sweep(inst, [10, 20], ["greedy", "sqrt"]).to_pandas()
    assert list(frame["status"] == "unsupported") == [False, True, False, True]  # a refusal's row: no fraction too
    assert all(v is None or (isinstance(v, float) and math.isnan(v)) for v in frame["budget_fraction"])


# ---------------------------------------------------------------------------- 2: torch's RNG kept
def _rand_after(seed: int, call) -> torch.Tensor:
    torch.manual_seed(seed)
    call()
    return torch.rand(4)


def test_run_keeps_the_callers_rng():
    net, args = _net_args()
    after = _rand_after(1, lambda: memsched.run(net, "100%", seed=0, **args, **RUN))  # the run seeds torch with 0
    assert torch.equal(after, _rand_after(1, lambda: None))


FACTORY = """
import torch
from torch import nn


def build(batch=2, device="cpu"):
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).to(device), torch.randn(batch, 8)
"""


@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_profile_of_a_named_network_keeps_the_callers_rng(tmp_path, monkeypatch, problem):
    (tmp_path / "tiny33.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)

    def call():  # a factory spec is built as a zoo name is (`build_model` seeds torch)
        memsched.profile("tiny33.py:build", batch=2, repeats=1, problem=problem)

    assert torch.equal(_rand_after(1, call), _rand_after(1, lambda: None))


def test_rng_kept_when_run_raises(monkeypatch):
    from memsched.models import run as run_module

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    net, args = _net_args()
    monkeypatch.setattr(run_module, "execute_schedule", fail)  # after profiling and solving (seeded)
    torch.manual_seed(5)
    with pytest.raises(KeyboardInterrupt):
        memsched.run(net, "100%", **args, **RUN)
    after = torch.rand(4)
    assert torch.equal(after, _rand_after(5, lambda: None))


# ---------------------------------------------------------------------------- 4: .grad kept by run
def test_run_keeps_the_callers_grads():
    net, args = _net_args()
    grad = torch.full_like(net[0].weight, 3.0)
    net[0].weight.grad = grad
    memsched.run(net, "100%", **args, **RUN)
    assert net[0].weight.grad is grad and torch.equal(grad, torch.full_like(grad, 3.0))
    assert all(p.grad is None for p in list(net.parameters())[1:])  # None stays None


def test_run_puts_grads_back_after_a_ctrl_c(monkeypatch):
    from memsched.models.chain import executor

    original = executor.reference_step

    def interrupted(*args, **kwargs):
        original(*args, **kwargs)  # plain autograd's step has run: its gradients are on the parameters
        raise KeyboardInterrupt

    net, args = _net_args()
    grad = torch.full_like(net[2].bias, 3.0)
    net[2].bias.grad = grad
    monkeypatch.setattr(executor, "reference_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        memsched.run(net, "100%", **args, **RUN)
    assert net[2].bias.grad is grad and torch.equal(grad, torch.full_like(grad, 3.0))
    assert all(p.grad is None for p in [net[0].weight, net[0].bias, net[2].weight])


# ---------------------------------------------------------------------------- 5: plot(run result)
def test_plot_of_a_run_result():
    pytest.importorskip("matplotlib")
    net, args = _net_args()
    result = memsched.run(net, "100%", **args, **RUN)
    fig = memsched.plot(result)
    assert len(fig.axes) >= 2
    assert tuple(fig.get_size_inches()) == (7.0, 3.0)  # RunResult.plot's own default size
    with pytest.raises(memsched.InputError):
        memsched.plot(result, budget="50%")

"""A ``loss_fn`` that is an ``nn.Module`` with parameters (a learnable head, session 50 hunt): the
executors give its parameters gradients (``loss.backward()`` does), so a step returns them (named
``"loss.<name>"``), each run starts them from zero as it does the blocks' (the chain executor used to
accumulate them over its runs: 25x plain autograd's), the plain-autograd reference computes them from
None (the graph step's used to hold the reference's added to its own), and the gradient check of
``memsched run`` / `memsched.run` compares them: a wrong head gradient fails it (it used to report
``grad_check: true`` without looking at them). The caller's ``.grad`` is put back after the run."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from memsched.models import measure  # noqa: E402
from memsched.models.chain import executor as chain_executor  # noqa: E402
from memsched.models.chain.executor import ChainExecutor, reference_step, with_loss_parameters  # noqa: E402
from memsched.models.join import executor as join_executor  # noqa: E402
from memsched.models.join.executor import execute_join  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.join import JOp  # noqa: E402

import memsched  # noqa: E402


class _Tripled(torch.autograd.Function):
    """Identity whose backward triples the gradient: a deliberately wrong head gradient."""

    @staticmethod
    def forward(ctx: Any, w: Any) -> Any:  # noqa: D102
        return w.view_as(w)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # noqa: D102
        return 3 * g


class Head(nn.Module):
    """A learnable classifier head inside the loss; `wrong`: its weight's gradient tripled."""

    def __init__(self, width: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.lin = nn.Linear(width, classes)
        self.wrong = False

    def forward(self, out: Any, target: Any) -> Any:
        w = _Tripled.apply(self.lin.weight) if self.wrong else self.lin.weight
        return F.cross_entropy(F.linear(out, w, self.lin.bias), target)


class JoinHead(Head):
    """The head of a join: the branches' outputs side by side."""

    def forward(self, outs: Any, target: Any) -> Any:  # type: ignore[override]
        return super().forward(torch.cat(list(outs), dim=1), target)


def _network() -> tuple[Any, Any, Any, Head]:
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(5)])
    return net, torch.randn(4, 8), torch.randint(0, 5, (4,)), Head()


def _plain_head_grads(net: Any, head: Head, x: Any, y: Any) -> dict[str, Any]:
    """The head's gradients of one plain forward/backward from None (every .grad None again after)."""
    params = [*net.parameters(), *head.parameters()]
    for p in params:
        p.grad = None
    head(net(x), y).backward()
    out = {f"loss.{n}": p.grad.detach().clone() for n, p in head.named_parameters()}
    for p in params:
        p.grad = None
    return out


def _spy(monkeypatch: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Record the (step's, reference's) parameter gradients every gradient check of a run compares."""
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []
    original = measure.gradients_match

    def spy(grads: Any, input_grad: Any, ref_grads: Any, ref_input: Any, **kw: Any) -> Any:
        seen.append((dict(grads), dict(ref_grads)))
        return original(grads, input_grad, ref_grads, ref_input, **kw)

    monkeypatch.setattr(measure, "gradients_match", spy)
    return seen


_RUN = {"threads": 1, "time_repeats": 1, "repeats": 1}
_PROBLEMS = [("chain", {}), ("graph", {}), ("offload", {"bandwidth": "1GB/s"})]


@pytest.mark.parametrize("problem, extra", _PROBLEMS)
def test_run_compares_the_heads_gradients(monkeypatch: Any, problem: str, extra: dict[str, Any]) -> None:
    """`memsched.run` checks the head's gradients: each step's equals plain autograd's (no run of a step
    adds to another's, nor the reference to a step's), and the caller's .grad is put back."""
    net, x, y, head = _network()
    expected = _plain_head_grads(net, head, x, y)
    mine = torch.full_like(head.lin.weight, 7.0)
    head.lin.weight.grad = mine
    seen = _spy(monkeypatch)
    r = memsched.run(net, "85%", example_input=x, target=y, loss_fn=head, problem=problem, **extra, **_RUN)
    assert r["grad_check"] is True
    assert seen  # the schedule's step and store-all's
    for grads, ref in seen:
        for name, g in expected.items():
            torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-7)
            torch.testing.assert_close(ref[name], g, rtol=1e-5, atol=1e-7)
    assert head.lin.weight.grad is mine and bool((mine == 7.0).all())
    assert head.lin.bias.grad is None


def _wrong_except_in_reference(monkeypatch: Any, head: Any, module: Any, reference: str) -> None:
    """From now on `head` computes a wrong gradient (``head.wrong``) everywhere but inside `module`.`reference`
    (the plain-autograd reference step)."""
    original = getattr(module, reference)

    def honest_reference(*args: Any, **kw: Any) -> Any:
        head.wrong = False
        try:
            return original(*args, **kw)
        finally:
            head.wrong = True

    monkeypatch.setattr(module, reference, honest_reference)
    head.wrong = True


@pytest.mark.parametrize("problem, extra", _PROBLEMS)
def test_run_catches_a_wrong_head_gradient(monkeypatch: Any, problem: str, extra: dict[str, Any]) -> None:
    """The executed steps triple the head's weight gradient, the plain reference does not: the check
    fails and names it."""
    net, x, y, head = _network()
    _wrong_except_in_reference(monkeypatch, head, chain_executor, "reference_step")
    r = memsched.run(net, "85%", example_input=x, target=y, loss_fn=head, problem=problem, **extra, **_RUN)
    assert r["grad_check"] is False
    assert "loss.lin.weight" in r["grad_message"]


def test_chain_steps_start_the_head_from_zero() -> None:
    """Several measured runs of one step, then a second step: the head's gradient is one step's, and
    `reference_step` returns it and leaves it None."""
    net, x, y, head = _network()
    expected = _plain_head_grads(net, head, x, y)
    executor = ChainExecutor(net, head)
    ops = store_all_schedule(executor.length)
    for _ in range(2):
        res = executor.step(ops, x, y, time_repeats=3)
        for name, g in expected.items():
            torch.testing.assert_close(res.grads[name], g, rtol=1e-5, atol=1e-7)
    _, ref, _ = reference_step(net, head, x, y)
    for name, g in expected.items():
        torch.testing.assert_close(ref[name], g, rtol=1e-5, atol=1e-7)
    assert head.lin.weight.grad is None and head.lin.bias.grad is None


def test_join_checks_the_heads_gradients(monkeypatch: Any) -> None:
    """A join whose loss is a head over both (shared) branches: the step's head gradients are plain
    autograd's, and a wrong one fails the check."""
    torch.manual_seed(0)
    enc = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Sequential(nn.Linear(4, 4), nn.Tanh())]
    xs, y, head = [torch.randn(3, 4), torch.randn(3, 4)], torch.randint(0, 5, (3,)), JoinHead(8, 5)
    ops = [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("F_all", 1, 0), JOp("F_all", 1, 1), JOp("Loss"),
           JOp("B", 0, 1), JOp("B", 0, 0), JOp("B", 1, 1), JOp("B", 1, 0)]
    for p in head.parameters():
        p.grad = None
    head([nn.Sequential(*enc)(x) for x in xs], y).backward()
    expected = {f"loss.{n}": p.grad.detach().clone() for n, p in head.named_parameters()}
    for p in [*head.parameters(), *(q for b in enc for q in b.parameters())]:
        p.grad = None
    res, ok = execute_join([enc, enc], head, ops, xs, y, measure_time=False)
    assert ok is True
    for name, g in expected.items():
        torch.testing.assert_close(res.grads[name], g, rtol=1e-5, atol=1e-7)
    _wrong_except_in_reference(monkeypatch, head, join_executor, "reference_join_step")
    assert execute_join([enc, enc], head, ops, xs, y, measure_time=False)[1] is False


def test_a_parameter_the_loss_shares_with_a_block_is_named_once() -> None:
    """A projection tied to a block's weight keeps its block's name; the loss's own are "loss.<name>";
    a frozen one and a plain loss function add none."""
    block = nn.Linear(8, 8)
    head = Head()
    head.tied = block.weight  # type: ignore[assignment]
    head.lin.bias.requires_grad_(False)
    params = with_loss_parameters({"0.weight": block.weight, "0.bias": block.bias}, head)
    assert list(params) == ["0.weight", "0.bias", "loss.lin.weight"]
    assert list(with_loss_parameters({"0.weight": block.weight}, F.cross_entropy)) == ["0.weight"]

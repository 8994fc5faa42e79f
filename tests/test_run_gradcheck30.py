"""Hunt 30 (`memsched run`'s gradient check and solver names):

1. A vacuous gradient check: ``memsched run siamese --batch 2 --image-size 32 --width 8`` at seed 0
   had loss exactly 0 (both contrastive labels "different", the distance above the margin), so every
   reference gradient was 0 and ``grad_check`` was true whatever the executor computed (doubled or
   negated zeros match within ``atol``). The siamese target now has at least one "same" pair for
   any seed and batch (a nonzero loss and gradients), and a check whose reference gradients are
   all zero is ``None`` (JSON null) with a message saying so, never a claimed match.
2. Graph runs never compared the input gradient: `GraphExecutor.step` returned ``input_grad=None``
   and `gradients_match` skipped the input when either side had none. The graph executor now
   computes delta_0 as plain autograd does, and a step without one (where the reference has one)
   fails the check.
3. ``memsched run siamese --solver rotor`` silently ran the join DP (a leftover of the days when
   run's default solver was 'rotor' for every problem), while ``memsched solve`` and the facade
   refuse 'rotor' for a join: refused now too (exit 2); without ``--solver`` the join's default
   (dp) still runs.
"""

from __future__ import annotations

import argparse
import json

import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402
from memsched.models.join.executor import reference_join_step  # noqa: E402
from memsched.models.join.zoo import build_join_model  # noqa: E402
from memsched.models.measure import compare_gradients, gradients_match  # noqa: E402

TINY_SIAMESE = {"batch": 2, "image_size": 32, "width": 8}


@pytest.fixture(autouse=True)
def threads_kept():
    """Each test may set torch's threads (``--threads``): put them back afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------- 1. vacuous check
@pytest.mark.parametrize("batch, seed", [(2, 0), (2, 2), (1, 1), (1, 3)])
def test_siamese_loss_and_gradients_nonzero(seed: int, batch: int) -> None:
    """These seeds drew only "different" labels ([0, 0] at batch 2 and 32 px, [0] at batch 1 and
    64 px: loss 0.0 at 32 px, every gradient 0): now one pair is "same", so the loss and the
    gradients are nonzero; the same seed gives the same target. (The labels are drawn after the
    images, so they depend on the image size, not on the width.)"""
    sizes = {"batch": batch, "image_size": 64 if batch == 1 else 32, "width": 4}  # BatchNorm: > 1 value per channel
    model = build_join_model("siamese", seed=seed, **sizes)
    again = build_join_model("siamese", seed=seed, **sizes)
    assert bool(model.target.any()) and torch.equal(model.target, again.target)
    loss, grads, input_grads = reference_join_step(model.branches, model.loss_fn, model.inputs, model.target,
                                                   seed=seed)
    assert loss > 0
    assert any(bool(g.any()) for g in grads.values())
    assert all(g is not None and bool(g.any()) for g in input_grads)


def test_all_zero_reference_is_not_a_match() -> None:
    """An all-zero reference: doubled or negated zeros are no evidence, so ok is None with a message."""
    zero = {"w": torch.zeros(3, 4), "b": torch.zeros(4)}
    ok, msg = compare_gradients({n: g * 2 for n, g in zero.items()}, zero)
    assert ok is None and "not checked" in msg
    ok, msg = gradients_match(zero, -torch.zeros(2, 3), zero, torch.zeros(2, 3))
    assert ok is None and "not checked" in msg
    # a wrong (nonzero) gradient against the zero reference is still a failure
    assert compare_gradients({"w": torch.ones(3, 4), "b": torch.zeros(4)}, zero)[0] is False
    # zero parameter gradients but a nonzero input gradient: the input was tested
    ref_in = torch.ones(2, 3)
    assert gradients_match(zero, ref_in.clone(), zero, ref_in) == (True, "")
    assert gradients_match(zero, -ref_in, zero, ref_in)[0] is False
    # a usual reference still matches
    ref = {"w": torch.randn(3, 4)}
    assert compare_gradients({"w": ref["w"].clone()}, ref) == (True, "")


def test_run_zero_loss_join_grad_check_null() -> None:
    """A built siamese whose labels are all "different" and far apart (loss 0.0): the run's
    grad_check is None with the message, not true (run's join path: parameters and inputs)."""
    from memsched.models.run import run

    torch.set_num_threads(1)  # (two threads on two cores: several times slower)
    model = build_join_model("siamese", seed=0, **TINY_SIAMESE)
    model.target = torch.zeros_like(model.target)
    # (100%: the store-all schedule always fits; the smallest feasible share depends on the CPU's
    # convolution scratch, 78% of the store-all peak on an AVX2-only CPU where 70% fitted elsewhere)
    out = run(model, "100%", problem="join", seed=0, time_repeats=1, profile_repeats=1, independent=False,
              store_all=False)
    assert out["status"] in ("optimal", "feasible"), out.get("message")
    assert out["loss"] == 0.0
    assert out["grad_check"] is None and "not checked" in out["grad_message"]


def test_run_zero_loss_chain_grad_check_null() -> None:
    """A chain network whose loss ignores the output (every gradient zero): grad_check None."""
    from memsched.models.run import run

    torch.manual_seed(0)
    blocks = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)]
    out = run((blocks, torch.randn(2, 4), lambda y, t: (y * 0).sum(), None), "100%", seed=0, time_repeats=1,
              profile_repeats=1, independent=False, store_all=False)
    assert out["grad_check"] is None and "not checked" in out["grad_message"]


def test_cli_siamese_seed0_checks_real_gradients() -> None:
    """The hunter's command: loss nonzero now, and the check is a real (passing) one."""
    res = run_cli("run", "siamese", "--budget", "100%", "--batch", "2", "--image-size", "32", "--width", "8",
                  "--threads", "1", "--repeats", "1", "--time-repeats", "1", "--no-independent", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["solver"] == "dp" and out["loss"] > 0 and out["grad_check"] is True


# ----------------------------------------------------------------- 2. graph input gradient
def test_graph_runs_compare_the_parameters_gradients() -> None:
    """Graph runs compare the parameters' gradients (the training graph computes no input gradient: an
    input read first by a parameter-free op, as in the lstm, has no backward node); a wrong parameter
    gradient still fails, and an input gradient is compared where a step returns one."""
    from memsched.models.run import prepare

    torch.set_num_threads(1)
    target = prepare("graph", "lstm", sizes={"batch": 2, "seq_len": 8, "width": 16}, profile_repeats=1)
    step = target.step(target.store_all, seed=0, time_repeats=1, independent=False)
    ref_grads, ref_input = target.reference(0)
    assert step.input_grad is None
    assert gradients_match(step.grads, step.input_grad, ref_grads, ref_input) == (True, "")
    wrong = {name: 2 * g for name, g in step.grads.items()}
    assert gradients_match(wrong, None, ref_grads, ref_input)[0] is False
    if ref_input is not None:
        assert gradients_match(step.grads, ref_input + 1, ref_grads, ref_input)[0] is False


# ----------------------------------------------------------------- 3. --solver rotor on a join
def test_cli_run_join_refuses_rotor() -> None:
    """An explicit ``--solver rotor`` on a join network is refused as `memsched solve` refuses it."""
    res = run_cli("run", "siamese", "--budget", "70%", "--solver", "rotor", "--batch", "2", "--image-size", "16",
                  "--width", "4", "--threads", "1", "--repeats", "1", "--time-repeats", "1", "--no-independent")
    assert res.code == 2
    assert "unknown solver 'rotor' for join" in res.err and "--solver" in res.err


def test_run_join_default_solver_kept() -> None:
    """Without ``--solver`` the join's default (None here, dp in `models.run`) is used; other names pass."""
    from memsched.experiments.commands.run import _solver_and_options

    args = argparse.Namespace(solver=None, option=None)
    assert _solver_and_options(args, "join") == (None, {})
    assert _solver_and_options(argparse.Namespace(solver="sequential", option=None), "join") == ("sequential", {})
    assert _solver_and_options(argparse.Namespace(solver="rotor", option=None), "chain") == ("rotor", {})

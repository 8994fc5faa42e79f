"""Finer stages (`models.zoo.split`, `--granularity layer`): the split chain computes the same
function and gradients as the whole blocks, seed for seed; the profiler gives its stages per-mode
forward overheads; the executor runs rotor's schedules on it with autograd's gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor, compare_gradients, reference_step  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.models.zoo.split import AttentionHalf, MLPHalf, ProjectedLMLoss, split_model  # noqa: E402
from memsched.solvers.chain import reference_peak, simulate  # noqa: E402
from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

torch.set_num_threads(1)

TINY = {"gpt2": dict(batch=2, seq_len=8, width=16, depth=2, vocab=32),
        "vit_b16": dict(batch=2, image_size=32, width=16, depth=2, classes=5)}


def _grads(blocks, model, seed, loss_fn=None):
    for b in blocks:
        b.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    a = model.example_input
    for b in blocks:
        a = b(a)
    loss = (loss_fn or model.loss_fn)(a, model.target)
    loss.backward()
    params = {id(p): p for b in blocks for p in b.parameters()}
    return float(loss.detach()), {k: p.grad.clone() for k, p in params.items()}


@pytest.mark.parametrize("name", sorted(TINY))
def test_split_chain_is_the_same_network(name):
    model = build_model(name, **TINY[name])  # training mode, dropout on (gpt2 0.1)
    parts, loss_fn = split_model(model.blocks, model.loss_fn, "layer")
    assert sum(isinstance(p, AttentionHalf) for p in parts) == sum(isinstance(p, MLPHalf) for p in parts) == 2
    assert isinstance(loss_fn, ProjectedLMLoss) == (name == "gpt2")
    loss_a, grads_a = _grads(model.blocks, model, seed=5)
    loss_b, grads_b = _grads(parts, model, seed=5, loss_fn=loss_fn)
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    assert grads_a.keys() == grads_b.keys()
    for k in grads_a:
        assert torch.allclose(grads_a[k], grads_b[k], rtol=1e-5, atol=1e-7)


def test_granularity_in_build_model_and_bad_value():
    whole = build_model("gpt2", **TINY["gpt2"])
    fine = build_model("gpt2", granularity="layer", **TINY["gpt2"])
    assert (len(whole.blocks), len(fine.blocks)) == (4, 6)  # embedding, 2 blocks / 4 halves, head / its norm
    assert isinstance(fine.loss_fn, ProjectedLMLoss)  # the tied projection is in the loss stage
    assert fine.config["granularity"] == "layer" and "granularity" not in whole.config
    with pytest.raises(InputError, match="granularity"):
        build_model("gpt2", granularity="op", **TINY["gpt2"])


def test_layer_chain_has_mode_overheads_and_runs_rotor_schedules():
    model = build_model("gpt2", granularity="layer", **TINY["gpt2"])
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1, warmup=0)
    assert chain.length == len(model.blocks)
    halves = [i for i, b in enumerate(model.blocks) if isinstance(b, (AttentionHalf, MLPHalf))]
    # autograd keeps in its tape what a no-grad forward holds as transients: F_all's overhead is smaller
    for i in halves:
        assert chain.o_fa[i] < chain.o_fn[i] == chain.o_f[i]
    _, ref, _ = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=3)
    executor = ChainExecutor(model.blocks, model.loss_fn)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    for budget in (lo, (lo + hi) // 2):
        res = solve_rotor(chain, budget, slots=0 if hi < 10**6 else 500)
        assert res.schedule is not None
        simulate(chain, res.schedule, budget).raise_if_invalid()
        result = executor.step(res.schedule, model.example_input, model.target, chain=chain, seed=3,
                               measure_memory=True, measure_time=False)
        ok, msg = compare_gradients(result.grads, ref)
        assert ok, msg
        assert result.peak_memory <= 1.01 * (result.tracker_predicted_peak or result.predicted_peak) + 4096


def test_executor_without_input_gradient_matches_parameter_gradients():
    model = build_model("vit_b16", **TINY["vit_b16"])  # a float input: delta_0 exists unless skipped
    _, ref, ref_input = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=3)
    executor = ChainExecutor(model.blocks, model.loss_fn, input_grad=False)
    from memsched.solvers.chain.baselines import store_all_schedule

    result = executor.step(store_all_schedule(len(model.blocks)), model.example_input, model.target, seed=3,
                           measure_memory=False, measure_time=True)
    ok, msg = compare_gradients(result.grads, ref)
    assert ok, msg
    assert ref_input is not None and result.input_grad is None


def test_gpt_layer_chain_goes_below_torch_checkpoint_per_block():
    """With the projection in the loss stage the logits (the largest tensor) are charged only while
    the loss runs: rotor's smallest budget on the layer chain is at most the peak torch measures
    with checkpoint around every block (same tracker), and the executor stays within it."""
    from memsched.models.chain.overheads import tracker_chain
    from memsched.models.memory import LiveTensorTracker
    from torch.utils.checkpoint import checkpoint

    sizes = dict(batch=2, seq_len=32, width=32, depth=2, vocab=512, dropout=0.0)
    whole = build_model("gpt2", **sizes)
    for p in {id(p): p for b in whole.blocks for p in b.parameters()}.values():
        p.grad = torch.zeros_like(p)

    def per_block_loss():  # the logits are dropped on return, before the backward
        a = whole.example_input.clone()
        for b in whole.blocks:
            a = checkpoint(b, a, use_reentrant=False)
        return whole.loss_fn(a, whole.target)

    with LiveTensorTracker() as mem:
        per_block_loss().backward()
    torch_peak = mem.peak
    # one stage per block: the logits are a_L, charged in the head's tape and while the loss runs
    # in the tracker's units (a CPU profile charges the allocator's overheads; torch_peak is the tracker's)
    block_chain = tracker_chain(profile_chain(whole.blocks, whole.loss_fn, whole.example_input, whole.target,
                                              repeats=1, warmup=0))
    assert rotor_min_budget(block_chain) > torch_peak
    model = build_model("gpt2", granularity="layer", **sizes)
    chain = tracker_chain(profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1,
                                        warmup=0))
    logits = 4 * sizes["batch"] * sizes["seq_len"] * sizes["vocab"]
    assert chain.x[chain.length] < logits // 8  # a_L is the hidden state, not the logits
    lo = rotor_min_budget(chain)
    assert lo <= torch_peak, (lo, torch_peak)
    res = solve_rotor(chain, lo, slots=0)
    step = ChainExecutor(model.blocks, model.loss_fn, input_grad=False).step(
        res.schedule, model.example_input, model.target, chain=chain, seed=0, measure_memory=True,
        measure_time=False)
    assert step.peak_memory <= torch_peak
    _, ref, _ = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=0)
    ok, msg = compare_gradients(step.grads, ref)
    assert ok, msg

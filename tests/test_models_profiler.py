"""The profiler turns a network into a valid chain file with sane fields."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.profiler import profile_chain, profile_model  # noqa: E402
from memsched.solvers.chain import Chain, reference_peak  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def resnet_chain():
    chain, model = profile_model("resnet18", batch=2, image_size=32, width=4, depth=1, repeats=2, warmup=1)
    return chain, model


def test_fields_are_sane(resnet_chain):
    chain, model = resnet_chain
    assert chain.length == len(model.blocks)
    assert chain.x[0] == model.example_input.numel() * 4
    for i in range(chain.length):
        assert chain.u_f[i] > 0 and chain.u_b[i] > 0
        assert chain.xbar[i + 1] >= chain.x[i + 1] > 0
        assert chain.o_f[i] >= 0 and chain.o_b[i] >= 0
    assert chain.u_b[chain.length] > 0  # the loss
    # a residual block saves several feature maps: its tape is larger than its output
    assert chain.xbar[2] > chain.x[2]


def test_out_size_is_the_output_bytes(resnet_chain):
    chain, model = resnet_chain
    a = model.example_input
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            a = block(a)
            assert chain.x[i + 1] == a.numel() * a.element_size()


def test_meta_and_file_round_trip(resnet_chain, tmp_path):
    chain, _ = resnet_chain
    meta = chain.meta
    assert meta["units"] == {"time": "ms", "memory": "bytes"}
    for key in ("device", "dtype", "torch", "date", "model", "batch", "image_size", "width"):
        assert key in meta, key
    assert meta["model"] == "resnet18" and meta["dtype"] == "float32"
    path = tmp_path / "r.json"
    chain.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "memsched.chain/1"
    again = Chain.load(path)
    assert again.length == chain.length and list(again.xbar) == list(chain.xbar)
    assert reference_peak(again) == reference_peak(chain)


@pytest.mark.parametrize("timing", ["isolated", "in_step"])
def test_tape_of_a_linear_relu_block(timing):
    # Linear saves its input (a_i, excluded) and weight (a parameter); ReLU saves its output.
    block = torch.nn.Sequential(torch.nn.Linear(50, 60), torch.nn.ReLU())
    x = torch.randn(7, 50)
    chain = profile_chain([block], lambda y, t: y.square().mean(), x, None, repeats=1, warmup=0, timing=timing)
    assert chain.meta["timing"] == timing
    assert chain.u_f[0] > 0 and chain.u_b[0] > 0 and chain.u_b[1] > 0
    out = 7 * 60 * 4
    assert chain.x[1] == out
    assert chain.xbar[1] == out  # only the output
    assert chain.o_f[0] == out  # the linear's output before ReLU is transient
    assert chain.x[0] == 7 * 50 * 4


def test_tape_counts_saved_intermediates():
    # tanh saves its output; the second linear saves that (an intermediate) as its input
    block = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Linear(20, 5))
    chain = profile_chain([block], lambda y, t: y.sum(), torch.randn(4, 10), None, repeats=1, warmup=0)
    assert chain.xbar[1] == 4 * 20 * 4 + 4 * 5 * 4  # tanh output + block output


def test_gpt2_integer_input():
    chain, model = profile_model("gpt2", batch=2, seq_len=8, width=16, depth=2, vocab=32, repeats=1, warmup=0)
    assert chain.x[0] == 2 * 8 * 8  # int64 token ids
    assert chain.length == 4
    assert all(chain.xbar[1:-1] >= chain.x[1:-1])


@pytest.mark.parametrize("timing", ["isolated", "in_step"])
def test_per_mode_forward_times(timing, tmp_path):
    """Both timing paths write u_fa (autograd) and u_fn (no grad) per stage, u_f their max, and keep
    meta.per_mode for older readers; the file round-trips them."""
    blocks = [torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.GELU()) for _ in range(3)]
    chain = profile_chain(blocks, lambda y, t: y.square().mean(), torch.randn(16, 40), None, repeats=2, warmup=1,
                          timing=timing)
    L = chain.length
    assert (chain.u_fa[:L] > 0).all() and (chain.u_fn[:L] > 0).all() and chain.u_fa[L] == chain.u_fn[L] == 0
    assert list(chain.u_f) == [max(a, n) for a, n in zip(chain.u_fa, chain.u_fn)]
    assert chain.meta["per_mode"]["fwd_time_no_grad"] == list(chain.u_fn[:L])
    path = tmp_path / "c.json"
    chain.save(path)
    again = Chain.load(path)
    assert list(again.u_fa) == list(chain.u_fa) and list(again.u_fn) == list(chain.u_fn)


def test_counted_costs_give_one_forward_time():
    """A FLOP count is the same with and without autograd: u_fa = u_fn = u_f, no per-mode fields."""
    blocks = [torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.GELU()) for _ in range(2)]
    chain = profile_chain(blocks, lambda y, t: y.square().mean(), torch.randn(16, 40), None, cost="flops")
    assert not chain.has_mode_times() and list(chain.u_fa) == list(chain.u_fn) == list(chain.u_f)
    assert "fwd_time_all" not in chain.to_dict()["stages"][0]

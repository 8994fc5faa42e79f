"""Profile fixes: counted costs in half precision, --depth refused where ignored, memsched.profile keeps
the caller's module state, a factory's half-precision chain named -bf16."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.profiler import profile_model  # noqa: E402
from memsched.models.costs import shape_exact_model  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from torch import nn  # noqa: E402

import memsched  # noqa: E402

SIZES = {"lstm": {"batch": 2, "seq_len": 3, "width": 8},
         "resnet18": {"batch": 2, "image_size": 32, "width": 4, "depth": 1}}


def _sizes(chain) -> list[tuple[int, int]]:
    d = chain.to_dict()
    return [(d["input_size"], 0)] + [(st["out_size"], st["tape_size"]) for st in d["stages"]]


@pytest.mark.parametrize("name", sorted(SIZES))
def test_counted_bfloat16_chain_has_the_measured_bfloat16_sizes(name: str) -> None:
    counted, _ = profile_model(name, cost="flops", dtype="bfloat16", **SIZES[name])
    measured, _ = profile_model(name, dtype="bfloat16", device="cpu", repeats=1, warmup=0, timing="isolated",
                                **SIZES[name])
    assert counted.name == measured.name and counted.name.endswith("-bf16")
    assert counted.meta["dtype"] == "bfloat16"
    assert _sizes(counted) == _sizes(measured)
    assert counted.meta["parameter_bytes"] == measured.meta["parameter_bytes"]


def test_counted_float16_keeps_tied_weights_tied() -> None:
    sizes = {"batch": 1, "seq_len": 4, "width": 8, "depth": 1, "vocab": 16}
    half, _ = profile_model("gpt2", cost="flops", dtype="float16", **sizes)
    full, _ = profile_model("gpt2", cost="flops", **sizes)
    assert half.meta["parameter_bytes"] * 2 == full.meta["parameter_bytes"]


@pytest.mark.parametrize("name", ["vgg16", "vgg19", "inception_v3", "mobilenet_v2", "fcn8", "lstm"])
def test_depth_refused_by_models_that_ignore_it(name: str) -> None:
    with pytest.raises(InputError, match=f"{name} takes no .*depth") as err, shape_exact_model():
        build_model(name, batch=1, width=4, depth=2)
    assert "depth" in str(err.value.field)


@pytest.mark.parametrize("name, sizes", [("resnet18", {"image_size": 32}), ("densenet121", {"image_size": 32}),
                                         ("vit_b16", {"image_size": 32}), ("unet", {"image_size": 32}),
                                         ("gpt2", {"seq_len": 4, "vocab": 16})])
def test_depth_taken_changes_the_network(name: str, sizes: dict) -> None:
    with shape_exact_model():
        counts = [sum(p.numel() for b in build_model(name, batch=1, width=8, depth=d, **sizes).blocks
                      for p in b.parameters()) for d in (1, 2)]
    assert counts[0] < counts[1]


def test_profile_keeps_buffers_and_grads_of_your_module() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 4))
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    grads = [p.grad for p in net.parameters()]
    before = {k: v.clone() for k, v in net.state_dict().items()}
    memsched.profile(net, example_input=torch.randn(4, 8), repeats=1)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert int(net[1].num_batches_tracked) == 0
    assert all(p.grad is g and torch.equal(g, torch.ones_like(g)) for p, g in zip(net.parameters(), grads))


def test_factory_in_half_precision_is_named_bf16(tmp_path, monkeypatch) -> None:
    (tmp_path / "tinynet.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        def build(batch=2):
            return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(batch, 4)
    """))
    monkeypatch.chdir(tmp_path)
    assert build_model("tinynet.py:build", dtype="bfloat16").label.endswith("-bf16")
    chain, _ = profile_model("tinynet.py:build", cost="flops", dtype="bfloat16")
    assert chain.name == "tinynet.build-bf16" and chain.meta["dtype"] == "bfloat16"
    assert not build_model("tinynet.py:build").label.endswith("-bf16")

"""The zoo: every network builds tiny, its blocks chain, and the loss runs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import as_blocks  # noqa: E402
from memsched.models.costs import shape_exact_model  # noqa: E402
from memsched.models.zoo import MODELS, build_model, count_parameters, resolve_device  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

torch.set_num_threads(1)

TINY = {
    "resnet18": dict(batch=2, image_size=32, width=4),
    "resnet34": dict(batch=2, image_size=32, width=2, depth=1),
    "resnet50": dict(batch=2, image_size=32, width=2, depth=1),
    "resnet101": dict(batch=2, image_size=32, width=2, depth=2),
    "resnet152": dict(batch=2, image_size=32, width=2, depth=2),
    "densenet121": dict(batch=2, image_size=32, width=8, depth=2),
    "inception_v3": dict(batch=2, image_size=75, width=4),
    "vgg16": dict(batch=2, image_size=32, width=4),
    "gpt2": dict(batch=2, seq_len=8, width=16, depth=2, vocab=32),
    "unet": dict(batch=2, image_size=16, width=4, depth=2),
    "vgg19": dict(batch=2, image_size=32, width=4),
    "mobilenet_v2": dict(batch=2, image_size=32, width=8),
    "vit_b16": dict(batch=2, image_size=32, width=32, depth=2),
    "gpt2_medium": dict(batch=2, seq_len=8, width=16, depth=2, vocab=32),
    "fcn8": dict(batch=2, image_size=(32, 64), width=4, classes=3),
    "lstm": dict(batch=2, seq_len=4, width=8),
}


def test_every_registered_model_has_a_tiny_size():
    assert set(TINY) == set(MODELS)


@pytest.mark.parametrize("name", sorted(TINY))
def test_blocks_chain_to_a_loss(name):
    blocks, x, loss_fn, target = build_model(name, **TINY[name])
    assert len(blocks) >= 3
    a = x
    with torch.no_grad():
        for block in blocks:
            a = block(a)
            assert isinstance(a, torch.Tensor)
        loss = loss_fn(a, target)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert count_parameters(blocks) > 0


def test_full_size_block_counts():
    # the chains of the real networks (built on CPU without running them)
    assert len(build_model("resnet18", batch=1).blocks) == 10
    assert len(build_model("resnet50", batch=1).blocks) == 18
    assert len(build_model("vgg16", batch=1, width=8).blocks) == 16
    gpt = build_model("gpt2", batch=1, seq_len=8, vocab=100)
    assert len(gpt.blocks) == 14


@pytest.mark.parametrize("name,count", [
    ("resnet18", 11_689_512), ("resnet50", 25_557_032), ("densenet121", 7_978_856),
    ("inception_v3", 23_834_568),  # torchvision's 27_161_264 less the auxiliary classifier
])
def test_full_size_parameter_counts_match_torchvision(name, count):
    assert count_parameters(build_model(name, batch=1).blocks) == count


# the papers' networks at full size, built on fake tensors (nothing allocated), against the
# published counts: torchvision's vgg19 and mobilenet_v2, vit_b_16; Hugging Face's gpt2-medium;
# FCN-8s 134M (Long et al. 2015, Table 1; 21 classes); U-Net 31.0M (Ronneberger et al. 2015;
# ours has batch norm, +0.14%)
@pytest.mark.parametrize("name,count,rel", [
    ("vgg16", 138_357_544, 0), ("vgg19", 143_667_240, 0), ("mobilenet_v2", 3_504_872, 0),
    ("vit_b16", 86_567_656, 0), ("gpt2", 124_439_808, 0), ("gpt2_medium", 354_823_168, 0),
    ("fcn8", 134e6, 0.005), ("unet", 31.03e6, 0.005), ("resnet152", 60_192_808, 0),
])
def test_papers_networks_have_the_published_parameter_counts(name, count, rel):
    with shape_exact_model():
        blocks = build_model(name, batch=1).blocks
    assert count_parameters(blocks) == pytest.approx(count, rel=rel, abs=0)


def test_paper_sizes_and_non_square_images():
    with shape_exact_model():
        m = build_model("unet", batch=32, image_size="416x608")
        assert tuple(m.example_input.shape) == (32, 3, 416, 608) and m.label == "unet-b32-416x608-w64-d4"
        assert tuple(m.target.shape) == (32, 416, 608)
        fcn = build_model("fcn8")
        assert tuple(fcn.example_input.shape) == (32, 3, 416, 608)
        lstm = build_model("lstm", seq_len=50)
        assert len(lstm.blocks) == 51  # one block per time step and the head
        assert count_parameters(lstm.blocks) == 4 * 512 * (512 + 512) + 8 * 512 + 512 * 10 + 10  # as nn.LSTM
        assert build_model("gpt2_medium").example_input.shape[1] == 1024


def test_lstm_steps_share_one_cell():
    blocks = build_model("lstm", **TINY["lstm"]).blocks
    assert blocks[0].cell is blocks[-2].cell and blocks[0].data is blocks[1].data


def test_gpt2_ties_embedding_and_head():
    blocks = build_model("gpt2", **TINY["gpt2"]).blocks
    assert blocks[-1].embedding.weight is blocks[0].wte.weight


def test_sequential_and_list_are_chains():
    seq = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    assert len(as_blocks(seq)) == 3
    assert len(as_blocks(list(seq))) == 3


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError):
        build_model("alexnet")
    with pytest.raises(InputError):
        build_model("unet", image_size=30, depth=2)
    with pytest.raises(InputError):
        build_model("resnet18", batch=0)
    with pytest.raises(InputError, match="--image-size"):
        build_model("fcn8", image_size="416x600")
    with pytest.raises(InputError, match="--image-size"):
        build_model("unet", image_size="big")
    with pytest.raises(InputError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError):
            resolve_device("cuda")


def test_label_names_sizes():
    m = build_model("resnet18", **TINY["resnet18"])
    assert m.label == "resnet18-b2-32-w4"

"""Shape-exact profiles: built on fake tensors, their sizes equal a real CPU run's to the byte;
their times come from the cost model stated in the meta (counted FLOP or a roofline)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.overheads import tracker_chain  # noqa: E402
from memsched.models.chain.profiler import profile_chain, profile_model  # noqa: E402
from memsched.models.costs import DEVICES, OpCounter, parse_cost, shape_exact_model  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

torch.set_num_threads(1)

SMALL = {
    "resnet18": dict(batch=2, image_size=32, width=4),
    "gpt2": dict(batch=2, seq_len=8, width=16, depth=2, vocab=32),
    "mobilenet_v2": dict(batch=2, image_size=32, width=8),
    "vit_b16": dict(batch=2, image_size=32, width=32, depth=2),
    "fcn8": dict(batch=1, image_size=(64, 96), width=4, classes=3),
    "unet": dict(batch=1, image_size=(32, 48), width=4, depth=2),
    "lstm": dict(batch=3, seq_len=5, width=8),
    "densenet121": dict(batch=2, image_size=32, width=8, depth=1),
}
SIZES = ("out_size", "tape_size", "fwd_overhead", "bwd_overhead")


@pytest.mark.parametrize("name", sorted(SMALL))
def test_fake_sizes_equal_a_real_cpu_run(name):
    measured, _ = profile_model(name, cost="measured", repeats=1, warmup=0, timing="isolated", **SMALL[name])
    # a fake tensor allocates nothing, so a shape-exact profile sees what the live-tensor tracker
    # sees (no kernel scratch): compare with the real run's tracker overheads (meta.overheads.tracker)
    real = tracker_chain(measured)
    fake, model = profile_model(name, cost="flops", **SMALL[name])
    assert type(model.example_input).__name__ == "FakeTensor"  # nothing was allocated
    r, f = real.to_dict(), fake.to_dict()
    assert f["input_size"] == r["input_size"]
    assert [{k: s[k] for k in SIZES} for s in f["stages"]] == [{k: s[k] for k in SIZES} for s in r["stages"]]
    assert f["loss"]["bwd_overhead"] == r["loss"]["bwd_overhead"]
    assert fake.o_fa.tolist() == real.o_fa.tolist() and fake.o_fn.tolist() == real.o_fn.tolist()  # per mode
    assert f["meta"]["parameter_bytes"] == r["meta"]["parameter_bytes"]
    assert f["meta"]["cost"] == "flops" and r["meta"]["cost"] == "measured"
    assert f["meta"]["units"]["time"] == "MFLOP" and r["meta"]["units"]["time"] == "ms"


def test_flops_of_a_linear_chain_follow_the_formulas():
    blocks = [torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)]
    chain = profile_chain(blocks, lambda y, t: (y - t).pow(2).mean(), torch.randn(8, 16), torch.zeros(8, 4),
                          cost="flops")
    # forward: addmm 2*N*in*out; backward: two mm of the same size, the bias gradient's sum (32
    # outputs) and the accumulation of both parameter gradients into .grad (16*32 + 32 additions)
    assert chain.u_f[0] == pytest.approx(2 * 8 * 16 * 32 / 1e6)
    assert chain.u_b[0] == pytest.approx((2 * 2 * 8 * 16 * 32 + 32 + 16 * 32 + 32) / 1e6)
    assert chain.u_f[1] == pytest.approx(2 * 8 * 32 * 4 / 1e6)


def test_roofline_is_the_max_of_compute_and_memory_time():
    a100 = DEVICES["a100"]
    with shape_exact_model():
        x, w = torch.randn(4096, 4096), torch.randn(4096, 4096)
        with OpCounter(a100) as big:
            x @ w
        v = torch.randn(1 << 20)
        with OpCounter(a100) as small:
            torch.relu(v)
    assert big.flops == 2 * 4096**3 and big.bytes == 3 * 4096 * 4096 * 4
    assert big.roofline_s == pytest.approx(2 * 4096**3 / a100.fp32_flops)  # compute bound
    assert small.bytes == 2 * 4 * (1 << 20)
    assert small.roofline_s == pytest.approx(small.bytes / a100.bandwidth)  # memory bound
    half = torch.randn(256, 256, dtype=torch.float16)
    with OpCounter(a100) as h:
        half @ half
    assert h.roofline_s == pytest.approx(max(2 * 256**3 / a100.fp16_flops, 3 * 256 * 256 * 2 / a100.bandwidth))


def test_roofline_chain_meta_names_the_device():
    chain, _ = profile_model("resnet18", cost="roofline:h100", **SMALL["resnet18"])
    assert chain.meta["cost"] == "roofline:h100" and chain.meta["units"]["time"] == "ms"
    assert chain.meta["cost_model"]["bandwidth_bytes_per_s"] == DEVICES["h100"].bandwidth
    assert all(t > 0 for t in chain.u_f[:-1]) and all(t > 0 for t in chain.u_b)


def test_cost_models_parse_and_reject():
    assert parse_cost("roofline:A100").device == DEVICES["a100"]
    assert parse_cost("flops").unit == "MFLOP"
    for bad in ("roofline:tpu", "fast", "roofline"):
        with pytest.raises(InputError, match="--cost"):
            parse_cost(bad)


def test_fake_graph_equals_a_real_trace():
    kw = dict(batch=2, image_size=32, width=4)
    fake = export_training_graph("resnet18", cost="flops", **kw)
    real = export_training_graph(build_model("resnet18", **kw), cost="flops")
    assert fake.n == real.n and fake.edges == real.edges and fake.names == real.names
    assert fake.cost_ram.tolist() == real.cost_ram.tolist()
    assert fake.cost_cpu.tolist() == pytest.approx(real.cost_cpu.tolist())
    assert fake.meta["shapes"].startswith("fake tensors")
    roof = export_training_graph("resnet18", cost="roofline:v100", **kw)
    assert roof.meta["units"]["time"] == "ms" and roof.cost_ram.tolist() == real.cost_ram.tolist()


def test_cli_profile_and_export_with_counted_costs(cli, tmp_path):
    out = tmp_path / "r.json"
    r = cli("profile", "resnet18", "--batch", "2", "--image-size", "32", "--width", "4", "--cost", "roofline:a100",
            "-o", str(out))
    assert r.code == 0 and "roofline:a100" in r.out
    assert json.loads(out.read_text())["meta"]["cost"] == "roofline:a100"
    r = cli("profile", "resnet18", "--cost", "guess", "-o", str(out))
    assert r.code == 2 and "--cost" in r.err and "Traceback" not in r.err
    r = cli("profile", "unet", "--image-size", "32y48", "--cost", "flops", "-o", str(out))
    assert r.code == 2 and "--image-size" in r.err
    g = tmp_path / "g.json"
    r = cli("export-graph", "unet", "--batch", "1", "--image-size", "32x48", "--width", "4", "--depth", "2",
            "--cost", "flops", "-o", str(g))
    assert r.code == 0 and json.loads(g.read_text())["graph"]["meta"]["image_size"] == "32x48"

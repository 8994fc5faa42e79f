"""Training graphs of real networks (models.graph.export): DAGs with forward and backward nodes
that load from their JSON, replay store-all and are solvable by the graph solvers."""

from __future__ import annotations

import functools
import json

import pytest

torch = pytest.importorskip("torch")

from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.graph import Graph, load, reference_peak, simulate  # noqa: E402
from memsched.solvers.result import FEASIBLE, OPTIMAL  # noqa: E402

torch.set_num_threads(1)

SIZES = {
    "resnet18": {"batch": 2, "image_size": 32, "width": 8, "depth": 1},
    "gpt2": {"batch": 2, "seq_len": 16, "width": 32, "depth": 2, "vocab": 64},
    "vgg16": {"batch": 2, "image_size": 32, "width": 4},
}


@functools.cache
def _export(name: str) -> Graph:
    return export_training_graph(name, **SIZES[name])


@pytest.fixture(params=list(SIZES))
def exported(request):
    return request.param, _export(request.param)


def _forward(g: Graph) -> list[int]:
    return [v for v in range(g.n) if not g.backward[v]]


def test_graph_is_a_training_dag(exported, tmp_path):
    name, g = exported
    fwd = _forward(g)
    bwd = [v for v in range(g.n) if g.backward[v]]
    assert fwd == list(range(len(fwd)))  # forward nodes first, then the loss and the backward
    assert g.names[len(fwd)] == "loss"
    assert len(bwd) - 1 >= len(fwd) - 1  # a backward node per forward node (arange-like ops excepted)
    assert all(i < k for i, k in g.edges)
    assert all(g.cost_ram[v] > 0 for v in fwd) and all(g.cost_cpu[v] >= 0 for v in range(g.n))
    assert g.total_cpu() > 0 and reference_peak(g) > 0
    assert g.meta["units"] == {"time": "MFLOP", "memory": "bytes"} and g.meta["model"] == name
    # every backward node named after its forward node, which it reads (Checkmate's deps)
    index = {g.names[v]: v for v in fwd}
    for b in bwd[1:]:
        v = index[g.names[b].removeprefix("grad_")]
        assert v in g.preds[b]
        assert g.cost_cpu[b] > 0
    # the JSON round trip through the loader validates it (acyclic, order topological)
    path = tmp_path / f"{name}.json"
    g.save(path)
    h = load(str(path))
    assert h.n == g.n and h.edges == g.edges and h.names == g.names and h.backward == g.backward
    assert reference_peak(h) == reference_peak(g)
    assert json.loads(path.read_text())["graph"]["meta"]["source"].startswith("memsched.models.graph.export")


def test_checkpoint_all_replays(exported):
    _, g = exported
    ref = reference_peak(g)
    res = registry.solve("graph", g, "checkpoint-all", ref)
    assert res.peak_memory == ref and res.objective == pytest.approx(g.total_cpu())


@pytest.mark.parametrize("name", ["resnet18", "gpt2"])
def test_cpsat_fits_ninety_percent(name):
    g = _export(name)
    budget = int(0.9 * reference_peak(g))
    res = registry.solve("graph", g, "cpsat", budget, time_limit=10)  # replays, raises on mismatch
    assert res.status in (OPTIMAL, FEASIBLE)
    sim = simulate(g, res.schedule, budget)
    assert sim.valid and sim.peak_memory <= budget
    assert res.objective >= g.total_cpu() - 1e-9


def test_resnet_skip_connections_are_edges():
    g = _export("resnet18")
    adds = [v for v in _forward(g) if g.names[v].endswith(".add")]
    assert len(adds) == 4  # one residual addition per block (depth 1: 4 blocks)
    for v in adds:
        assert len(g.preds[v]) == 2
        # the shortcut comes from further back than the previous op (identity or projection)
        assert min(g.preds[v]) < v - 1
    # the first block's identity shortcut: the stem's output feeds its conv1 and its add
    stem_out = g.preds[adds[0]][0]
    assert g.names[stem_out] == "0.max_pool2d"
    assert len([w for w in g.succs[stem_out] if not g.backward[w]]) == 2


def test_gpt2_views_are_folded():
    g = _export("gpt2")
    names = [g.names[v] for v in _forward(g)]
    assert not any(k in nm for nm in names for k in ("view", "transpose", "split", "getitem", "size"))
    attn = [v for v in _forward(g) if "scaled_dot_product_attention" in g.names[v]]
    assert len(attn) == 2
    for v in attn:  # q, k and v are views of the qkv projection: one producer
        assert [g.names[u] for u in g.preds[v]] == [g.names[v].split(".")[0] + ".qkv"]


def test_flops_match_formulas():
    """A linear layer costs 2*N*in*out FLOP forward and twice that backward (input grad + weight grad)."""
    blocks = [torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)]
    x = torch.randn(8, 16)
    g = export_training_graph(blocks, example_input=x, loss_fn=lambda y, t: (y - t).pow(2).mean(),
                              target=torch.zeros(8, 4))
    assert g.names[:3] == ["0.linear", "1.tanh", "2.linear"]  # "<block>.<fx node name>"
    assert g.cost_cpu[0] == pytest.approx(2 * 8 * 16 * 32 / 1e6)
    assert g.cost_cpu[2] == pytest.approx(2 * 8 * 32 * 4 / 1e6)
    grad2 = g.names.index("grad_2.linear")
    assert g.cost_cpu[grad2] == pytest.approx(2 * g.cost_cpu[2] + 4 / 1e6)  # + the bias gradient's sum
    assert list(g.cost_ram[:3]) == [8 * 32 * 4, 8 * 32 * 4, 8 * 4 * 4]
    assert g.cost_ram[grad2] == 8 * 32 * 4  # the gradient of its input
    assert g.cost_ram[g.names.index("grad_0.linear")] == 0  # the input is not a node
    assert g.n == 7


def test_saved_deps_are_a_subset():
    model = build_model("resnet18", **SIZES["resnet18"])
    full = export_training_graph(model, deps="checkmate")
    saved = export_training_graph(model, deps="saved")
    assert full.n == saved.n and set(saved.edges) <= set(full.edges) and len(saved.edges) < len(full.edges)
    assert reference_peak(saved) <= reference_peak(full)


def test_module_granularity_is_a_chain():
    model = build_model("resnet18", **SIZES["resnet18"])
    g = export_training_graph(model, granularity="module")
    L = len(model.blocks)
    assert len(_forward(g)) == L and g.n == 2 * L + 1
    assert [g.preds[v] for v in range(L)] == [[]] + [[v - 1] for v in range(1, L)]
    assert g.names[:2] == ["0:ResNetStem", "1:BasicBlock"]
    ref = reference_peak(g)
    registry.solve("graph", g, "checkpoint-all", ref)
    res = registry.solve("graph", g, "checkmate", int(0.9 * ref), time_limit=10)
    assert res.status in (OPTIMAL, FEASIBLE) and res.objective >= g.total_cpu() - 1e-9


def test_measured_costs_are_times():
    g = export_training_graph("vgg16", **SIZES["vgg16"], cost="measured", repeats=1, warmup=0,
                              granularity="module")
    assert g.meta["units"]["time"] == "ms" and all(c > 0 for c in g.cost_cpu)


def test_bad_options():
    with pytest.raises(InputError):
        export_training_graph("resnet18", cost="guess")
    with pytest.raises(InputError):
        export_training_graph("nonet")


def test_tape_sizes_include_internal_saved_tensors():
    model = build_model("resnet18", **SIZES["resnet18"])
    out = export_training_graph(model)
    tape = export_training_graph(model, ram="tape")
    assert out.edges == tape.edges and tape.meta["ram"] == "tape"
    fwd = _forward(out)
    assert all(tape.cost_ram[v] >= out.cost_ram[v] for v in fwd)
    pool = out.names.index("0.max_pool2d")  # saves int64 indices: twice its float32 output
    assert tape.cost_ram[pool] == 3 * out.cost_ram[pool]
    assert reference_peak(tape) > reference_peak(out)


def test_export_graph_command(tmp_path):
    from memsched.experiments.cli import main

    out = tmp_path / "g.json"
    assert main(["export-graph", "vgg16", "-o", str(out), "--batch", "1", "--image-size", "32", "--width", "4",
                 "--threads", "1", "--granularity", "module"]) == 0
    from memsched.solvers.graph import load

    assert load(str(out)).n > 0

"""Seeded graph generators: training graphs, random layered DAGs, chains as graphs, example nets.

Training graphs (`training_graph`) are built from a forward DAG the way Checkmate's linear
graphs are: forward nodes F_v, one loss node, and one backward node B_v per forward node, with

- F_u -> F_v for each forward edge (u, v);
- F_v -> loss for each forward sink v (the loss's output is the gradient of that output);
- the gradient of v's output flows into B_v: B_w -> B_v for each forward successor w of v,
  loss -> B_v when v is a forward sink;
- B_v needs what it differentiates: F_v -> B_v (its output, the "tape") and F_u -> B_v for
  each input u of v.

B_v outputs the gradient with respect to v's inputs (size: the sum of their sizes; for a
source node, ``input_size``). Costs: B_v costs ``bwd_factor`` times F_v unless given.

`from_chain` maps a rotor chain (docs/chain.md) to such a graph. The chain's tapes are
represented by the stage outputs: F_i has cost_cpu u_f[i] and cost_ram x[i+1] (tape = output,
i.e. xbar is taken equal to x; overheads o_f, o_b are dropped), the loss has cost u_b[L] and
size x[L], B_i has cost u_b[i] and size x[i] and needs F_i (a_{i+1}), F_{i-1} (a_i; for i = 0
the input a_0, which is not a node: it is resident throughout and costs x[0], so a chain budget
M corresponds to the graph budget M - x[0]) and B_{i+1} (the gradient of a_{i+1}; the loss for
i = L-1). With xbar = x and no overheads the graph charges exactly what the chain simulator
charges the same operations (minus the constant x[0]); the graph model is more general than
the persistent rotor schedules, so its optimum is at most the rotor DP's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .instance import Graph


def training_graph(
    fwd_cpu: Sequence[float],
    fwd_ram: Sequence[int],
    fwd_edges: Sequence[tuple[int, int]],
    *,
    names: Sequence[str] | None = None,
    bwd_cpu: Sequence[float] | None = None,
    bwd_factor: float = 2.0,
    loss_cpu: float = 1.0,
    input_size: int = 1,
    needs: Sequence[str] | None = None,
    name: str = "training-graph",
    meta: dict | None = None,
) -> Graph:
    """Forward DAG (nodes 0..m-1, edges forward) -> forward + loss + backward graph (see module doc).

    ``needs[v]`` says which forward tensors B_v reads: "both" (default: its inputs and its
    output), "input" (e.g. a convolution), "output" (e.g. a ReLU) or "none" (e.g. an addition).
    Node order: F_0..F_{m-1}, loss, B_{m-1}..B_0 (a topological order).
    """
    m = len(fwd_cpu)
    names = list(names or [f"f{v}" for v in range(m)])
    fpred: list[list[int]] = [[] for _ in range(m)]
    fsucc: list[list[int]] = [[] for _ in range(m)]
    for u, v in fwd_edges:
        if not 0 <= u < v < m:
            raise ValueError(f"forward edge ({u}, {v}) must go forward")
        fpred[v].append(u)
        fsucc[u].append(v)
    loss = m
    bidx = {v: m + 1 + (m - 1 - v) for v in range(m)}  # B_{m-1} first
    cpu = list(map(float, fwd_cpu)) + [float(loss_cpu)] + [0.0] * m
    ram = list(map(int, fwd_ram)) + [0] + [0] * m
    label = names + ["loss"] + [""] * m
    back = [False] * m + [True] * (m + 1)
    edges = list(fwd_edges)
    sinks = [v for v in range(m) if not fsucc[v]]
    ram[loss] = int(sum(fwd_ram[v] for v in sinks))
    edges += [(v, loss) for v in sinks]
    for v in range(m):
        b = bidx[v]
        cpu[b] = float(bwd_cpu[v]) if bwd_cpu is not None else bwd_factor * float(fwd_cpu[v])
        ram[b] = int(sum(fwd_ram[u] for u in fpred[v])) if fpred[v] else int(input_size)
        label[b] = f"grad_{names[v]}"
        edges += [(bidx[w], b) for w in fsucc[v]]
        if not fsucc[v]:
            edges.append((loss, b))
        need = needs[v] if needs is not None else "both"
        if need in ("both", "output"):
            edges.append((v, b))
        if need in ("both", "input"):
            edges += [(u, b) for u in fpred[v]]
    return Graph.from_lists(cpu, ram, edges, name=name, names=label, backward=back, meta=meta)


def linear_graph(L: int, *, cost_cpu: float = 1.0, cost_ram: int = 1, bwd_factor: float = 1.0,
                 name: str | None = None) -> Graph:
    """Checkmate's linear training graph of L forward nodes (2L + 1 nodes; unit costs by default)."""
    return training_graph([cost_cpu] * L, [cost_ram] * L, [(i, i + 1) for i in range(L - 1)],
                          bwd_factor=bwd_factor, loss_cpu=cost_cpu, input_size=cost_ram,
                          name=name or f"linear-{L}", meta={"source": f"solvers.graph.generate.linear_graph({L})"})


def from_chain(chain) -> Graph:  # noqa: ANN001 (solvers.chain.Chain; imported lazily)
    """A rotor chain as a training graph (see the module docstring for the mapping of tapes)."""
    L = chain.length
    x = [int(v) for v in chain.x]
    return training_graph(
        [float(chain.u_f[i]) for i in range(L)], [x[i + 1] for i in range(L)], [(i, i + 1) for i in range(L - 1)],
        names=list(chain.stage_names), bwd_cpu=[float(chain.u_b[i]) for i in range(L)],
        loss_cpu=float(chain.u_b[L]), input_size=x[0], name=f"{chain.name}-graph",
        meta={"source": "solvers.graph.generate.from_chain", "input_size": x[0]},
    )


def random_layered(
    n: int,
    seed: int = 0,
    *,
    width: tuple[int, int] = (1, 5),
    extra_edge_prob: float = 0.2,
    reach: int = 3,
    cpu_range: tuple[int, int] = (1, 10),
    ram_range: tuple[int, int] = (1, 10),
    name: str | None = None,
) -> Graph:
    """A random layered DAG in the spirit of Gagrani et al. 2022 (appendix A), used by Moccasin.

    Nodes are placed in consecutive layers whose widths are uniform in `width`; every node of a
    layer gets one predecessor drawn from the previous layer, and one more from each of the
    `reach` previous layers' nodes with probability `extra_edge_prob` each; nodes of the
    previous layer left without successor are linked to a random node of the next layer so
    that only the last layer holds sinks. Costs are integers uniform in `cpu_range` and
    `ram_range`. The same (n, seed, options) always gives the same graph.
    """
    rng = np.random.default_rng(seed)
    layers: list[list[int]] = []
    v = 0
    while v < n:
        w = min(n - v, int(rng.integers(width[0], width[1] + 1)))
        layers.append(list(range(v, v + w)))
        v += w
    edges: set[tuple[int, int]] = set()
    for li in range(1, len(layers)):
        for k in layers[li]:
            edges.add((int(rng.choice(layers[li - 1])), k))
            for back in range(1, min(reach, li) + 1):
                for u in layers[li - back]:
                    if rng.random() < extra_edge_prob / len(layers[li - back]):
                        edges.add((u, k))
        has_succ = {u for u, _ in edges}
        for u in layers[li - 1]:
            if u not in has_succ:
                edges.add((u, int(rng.choice(layers[li]))))
    cpu = rng.integers(cpu_range[0], cpu_range[1] + 1, size=n).astype(float)
    ram = rng.integers(ram_range[0], ram_range[1] + 1, size=n)
    return Graph.from_lists(cpu, ram, sorted(edges), name=name or f"random-layered-{n}-s{seed}",
                            meta={"source": f"solvers.graph.generate.random_layered(n={n}, seed={seed})"})


def random_dag(n: int, seed: int = 0, *, edge_prob: float = 0.4, cpu_range: tuple[int, int] = (1, 5),
               ram_range: tuple[int, int] = (1, 5)) -> Graph:
    """A small random DAG (each pair i < k an edge with `edge_prob`; node k > 0 gets at least one
    predecessor) with integer costs, for exhaustive tests."""
    rng = np.random.default_rng(seed)
    edges = set()
    for k in range(1, n):
        edges.add((int(rng.integers(0, k)), k))
        for i in range(k):
            if rng.random() < edge_prob:
                edges.add((i, k))
    cpu = rng.integers(cpu_range[0], cpu_range[1] + 1, size=n).astype(float)
    ram = rng.integers(ram_range[0], ram_range[1] + 1, size=n)
    return Graph.from_lists(cpu, ram, sorted(edges), name=f"random-dag-{n}-s{seed}")


# --------------------------------------------------------------------------- example networks
def _conv(h: int, cin: int, cout: int, k: int = 3) -> tuple[float, int]:
    """(MFLOP, output size in KiB of float32) of a k x k convolution on an h x h map."""
    return 2.0 * h * h * cin * cout * k * k / 1e6, math.ceil(h * h * cout * 4 / 1024)


def vgg16(batch: int = 1) -> Graph:
    """A VGG-16-like training graph (224 x 224 input): 21 forward ops (13 conv+ReLU, 5 pools,
    3 fully connected), the loss and 21 backward ops: 43 nodes. cost_cpu in MFLOP, cost_ram in
    KiB of float32 activations, both times `batch`. Each backward reads its op's input only
    (the ReLU masks are folded into the convolutions and not modelled)."""
    cfg: list[int | str] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    cpu: list[float] = []
    ram: list[int] = []
    names: list[str] = []
    h, c = 224, 3
    for item in cfg:
        if isinstance(item, str):  # "M": a max-pool
            h //= 2
            cpu.append(h * h * c * 4 / 1e6)
            ram.append(math.ceil(h * h * c * 4 / 1024))
            names.append(f"pool{len(names)}")
        else:
            f, r = _conv(h, c, int(item))
            cpu.append(f)
            ram.append(r)
            c = int(item)
            names.append(f"conv{len(names)}")
    for i, (fin, fout) in enumerate([(512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)]):
        cpu.append(2.0 * fin * fout / 1e6)
        ram.append(math.ceil(fout * 4 / 1024))
        names.append(f"fc{i + 1}")
    m = len(cpu)
    return training_graph([batch * v for v in cpu], [batch * v for v in ram], [(i, i + 1) for i in range(m - 1)],
                          names=names, loss_cpu=0.01, needs=["input"] * m,
                          input_size=batch * math.ceil(224 * 224 * 3 * 4 / 1024),
                          name="vgg16-like", meta={"source": "solvers.graph.generate.vgg16", "units":
                                                   {"time": "MFLOP", "memory": "KiB"}})


def resnet(blocks: Sequence[int] = (3, 4, 6, 3), batch: int = 1, *, name: str = "resnet50-like") -> Graph:
    """A ResNet-like training graph with bottleneck blocks and skip connections (224 x 224).

    Forward ops: stem conv, bn, relu, maxpool; per bottleneck block conv1x1, bn, relu, conv3x3,
    bn, relu, conv1x1, bn, (downsample conv, bn in the first block of a stage), add, relu; then
    avgpool and fc. With the default (3, 4, 6, 3) (ResNet-50): 174 forward ops, 349 nodes.
    Backward ops read their op's input (conv, bn, pools, fc), its output (ReLU) or nothing (add).
    """
    cpu: list[float] = []
    ram: list[int] = []
    names: list[str] = []
    edges: list[tuple[int, int]] = []
    needs: list[str] = []

    def add(nm: str, f: float, r: int, inputs: Sequence[int], need: str = "input") -> int:
        needs.append(need)
        cpu.append(f)
        ram.append(r)
        names.append(nm)
        v = len(cpu) - 1
        edges.extend((u, v) for u in inputs)
        return v

    def elementwise(nm: str, h: int, c: int, inputs: Sequence[int]) -> int:
        kind = nm.rsplit(".", 1)[-1]
        need = "output" if kind.startswith("relu") else "none" if kind == "add" else "input"
        return add(nm, h * h * c * 2 / 1e6, math.ceil(h * h * c * 4 / 1024), inputs, need)

    f, r = _conv(112, 3, 64, 7)
    v = add("conv1", f, r, [])
    v = elementwise("bn1", 112, 64, [v])
    v = elementwise("relu1", 112, 64, [v])
    v = elementwise("maxpool", 56, 64, [v])
    h, c = 56, 64
    for s, (nb, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        out = 4 * width
        for b in range(nb):
            stride = 2 if (s > 0 and b == 0) else 1
            ho = h // stride
            x = v
            p = f"l{s + 1}.{b}"
            f, r = _conv(h, c, width, 1)
            y = add(f"{p}.conv1", f, r, [x])
            y = elementwise(f"{p}.bn1", h, width, [y])
            y = elementwise(f"{p}.relu1", h, width, [y])
            f, r = _conv(ho, width, width, 3)
            y = add(f"{p}.conv2", f, r, [y])
            y = elementwise(f"{p}.bn2", ho, width, [y])
            y = elementwise(f"{p}.relu2", ho, width, [y])
            f, r = _conv(ho, width, out, 1)
            y = add(f"{p}.conv3", f, r, [y])
            y = elementwise(f"{p}.bn3", ho, out, [y])
            if b == 0:
                f, r = _conv(ho, c, out, 1)
                x = add(f"{p}.down", f, r, [x])
                x = elementwise(f"{p}.downbn", ho, out, [x])
            y = elementwise(f"{p}.add", ho, out, [x, y])
            v = elementwise(f"{p}.relu3", ho, out, [y])
            h, c = ho, out
    v = add("avgpool", h * h * c / 1e6, math.ceil(c * 4 / 1024), [v], "none")
    add("fc", 2.0 * c * 1000 / 1e6, math.ceil(1000 * 4 / 1024), [v])
    return training_graph([batch * x for x in cpu], [batch * x for x in ram], edges, names=names, loss_cpu=0.01,
                          needs=needs,
                          input_size=batch * math.ceil(224 * 224 * 3 * 4 / 1024), name=name,
                          meta={"source": f"solvers.graph.generate.resnet({tuple(blocks)})",
                                "units": {"time": "MFLOP", "memory": "KiB"}})

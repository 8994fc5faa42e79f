"""Graph executor, session 37: a recomputed forward node copies only the buffers its op changes
(not a fixed buffer it only reads, such as a projection matrix), and the prediction charges that
copy (BatchNorm's running statistics) so that it stays exact to the byte; a graph missing a link
that a backward node needs (a saved producer, a consumer's gradient) is refused when the executor
is built: bad input naming the file for `memsched run`, not an internal error mid-step."""

from __future__ import annotations

import copy
import textwrap

import pytest

torch = pytest.importorskip("torch")

from conftest import graph_file_without_link, run_cli  # noqa: E402
from memsched.models.chain.executor import reference_step  # noqa: E402
from memsched.models.graph.executor import GraphExecutor, execute_graph  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.solvers.graph import Graph  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

#: the hunter's network: a fixed random projection buffer read by a matmul, then elementwise ops
BUFNET = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self, width=256):
            super().__init__()
            self.l1 = nn.Linear(16, width); self.l3 = nn.Linear(width, 4)
            self.register_buffer("proj", torch.randn(width, width) / width ** 0.5)
        def forward(self, x):
            h = torch.tanh(self.l1(x))
            z = h @ self.proj
            a = torch.sin(z); b = torch.cos(a); c = torch.sin(b); d = torch.cos(c); e = torch.sin(d)
            return self.l3(e * z)

    def build(batch=16, width=256, seed=0):
        torch.manual_seed(seed)
        return Net(width), torch.randn(batch, 16), torch.randint(0, 4, (batch,)), F.cross_entropy
''')


class _BufNet(nn.Module):
    """`BUFNET`'s network, in process: a 256 KiB projection buffer the matmul only reads."""

    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.l1, self.l3 = nn.Linear(16, width), nn.Linear(width, 4)
        self.register_buffer("proj", torch.randn(width, width) / width ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.l1(x))
        z = h @ self.proj
        a = torch.sin(z)
        b = torch.cos(a)
        return self.l3(torch.sin(b) * z)


class _BNNet(nn.Module):
    """A BatchNorm1d module and a functional batch norm on registered buffers (16 channels)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.bn, self.l2 = nn.Linear(16, 16), nn.BatchNorm1d(16), nn.Linear(16, 4)
        self.register_buffer("rm", torch.zeros(16))
        self.register_buffer("rv", torch.ones(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sin(self.bn(self.l1(x)))
        h = F.batch_norm(h, self.rm, self.rv, training=True)
        return self.l2(torch.cos(h))


def _measured(net: nn.Module, x: torch.Tensor, y: torch.Tensor, **kw) -> Graph:
    """`net`'s graph with measured costs and tapes (its temporaries: the prediction is exact)."""
    return export_training_graph([net], example_input=x, loss_fn=F.cross_entropy, target=y, cost="measured",
                                 ram="tape", repeats=1, warmup=0, **kw)


def _every_forward_twice(graph: Graph) -> list[int]:
    """Every forward node, then every forward node again (each a recomputation), the loss, the backward."""
    forward = [v for v in range(graph.n) if not graph.backward[v]]
    backward = [v for v in range(graph.n) if graph.backward[v]]
    return forward + forward + backward


def _recomputations(seq: list[int], graph: Graph) -> list[int]:
    """The steps of `seq` that compute a forward node again."""
    seen: set[int] = set()
    out = []
    for s, v in enumerate(seq):
        if v in seen and not graph.backward[v]:
            out.append(s)
        seen.add(v)
    return out


def test_a_recomputed_matmul_does_not_copy_the_buffer_it_only_reads():
    torch.manual_seed(0)
    net, x, y = _BufNet(), torch.randn(16, 16), torch.randint(0, 4, (16,))
    graph = _measured(net, x, y)
    seq = _every_forward_twice(graph)
    executor = GraphExecutor(net, F.cross_entropy, graph, x)
    proj = net.proj.clone()
    result = executor.step(seq, x, y, seed=0, measure_time=False, trace=True)
    matmul = graph.names.index("0.matmul")
    again = [s for s in _recomputations(seq, graph) if seq[s] == matmul]
    assert again
    for s in again:  # before: 262,144 B (the projection's copy) above the prediction
        assert result.trace[s].measured_during == result.trace[s].predicted_during
    assert result.peak_memory == result.tracker_predicted_peak
    assert torch.equal(net.proj, proj)


def test_batchnorm_recomputations_are_charged_and_their_statistics_advance_once():
    torch.manual_seed(0)
    net, x, y = _BNNet(), torch.randn(32, 16), torch.randint(0, 4, (32,))
    graph = _measured(net, x, y)
    seq = _every_forward_twice(graph)
    executor = GraphExecutor(net, F.cross_entropy, graph, x)
    plain = copy.deepcopy(net)
    result = executor.step(seq, x, y, seed=0, measure_time=False, trace=True)
    reference_step([plain], F.cross_entropy, x, y, seed=0)
    for a, b in zip(net.buffers(), plain.buffers()):  # advanced once, as by plain autograd
        assert torch.equal(a, b)
    steps = _recomputations(seq, graph)
    by_name = {graph.names[seq[s]]: s for s in steps}
    # before: a recomputed BatchNorm1d(16) measured 136 B (its running statistics and batch count)
    # and the functional batch norm 128 B above their predictions
    for name in ("0.bn", "0.batch_norm"):
        s = by_name[name]
        assert result.trace[s].measured_during == result.trace[s].predicted_during, name
    assert all(result.trace[s].measured_during == result.trace[s].predicted_during for s in steps)
    assert result.peak_memory == result.tracker_predicted_peak


def test_run_on_a_graph_missing_a_saved_producer_link_is_bad_input_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bufnet2.py").write_text(BUFNET)
    r = run_cli("export-graph", "bufnet2.py:build", "-o", "graph.json", "--ram", "tape", "--threads", "1")
    assert r.code == 0, r.err
    # cos saves its input
    graph_file_without_link(tmp_path / "graph.json", tmp_path / "nolink.json", "0.sin", "grad_0.cos")
    r = run_cli("run", "nolink.json", "--budget", "60%", "--threads", "1", "--time-repeats", "1",
                "--no-independent")
    assert r.code == 2, r.err  # before: exit 3, "internal error: RuntimeError: node '0.sin' is not resident"
    assert "nolink.json" in r.err and "no link 0.sin -> grad_0.cos" in r.err and "internal error" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_graph_missing_a_consumers_gradient_link_is_refused(tmp_path):
    torch.manual_seed(0)
    net, x, y = _BufNet(), torch.randn(16, 16), torch.randint(0, 4, (16,))
    export_training_graph([net], example_input=x, loss_fn=F.cross_entropy, target=y, ram="tape",
                          out=tmp_path / "g.json")
    graph_file_without_link(tmp_path / "g.json", tmp_path / "drop.json", "grad_0.cos", "grad_0.sin")
    with pytest.raises(ValueError, match="no link grad_0.cos -> grad_0.sin.*edges are not the network's"):
        GraphExecutor(net, F.cross_entropy, Graph.load(tmp_path / "drop.json"), x)


@pytest.mark.parametrize("make", [_BufNet, _BNNet])
def test_a_saved_deps_graph_is_accepted_and_runs(make, monkeypatch):
    """An export's ``deps="saved"`` graph lacks links a Checkmate graph has (what the op does not
    save): the backward check runs its dry forward and accepts it; a step's gradients are autograd's."""
    torch.manual_seed(0)
    net, x, y = make(), torch.randn(32, 16), torch.randint(0, 4, (32,))
    graph = export_training_graph([net], example_input=x, loss_fn=F.cross_entropy, target=y, ram="tape",
                                  deps="saved")
    dry = []
    real = GraphExecutor._dry_forward
    monkeypatch.setattr(GraphExecutor, "_dry_forward", lambda self, x: dry.append(1) or real(self, x))
    seq = _every_forward_twice(graph)
    _, same = execute_graph([net], F.cross_entropy, graph, seq, x, y, measure_time=False)
    assert dry and same

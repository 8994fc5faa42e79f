"""Random nodes of the graph executor (models.graph.executor.FileOrderRng): every computation of
a dropout node runs under the RNG state it sees in a plain forward in file (torch.fx) order, so
a schedule that computes a later branch first (DTR, ``dtr-orders`` and CP-SAT do) still gives
plain autograd's gradients. Before, first computations drew from the global stream in schedule
order: swapped masks, ``grad_check: false``. CPU, a two-branch net of width 8.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from memsched.models.chain.executor import reference_step  # noqa: E402
from memsched.models.graph.executor import GraphExecutor, execute_graph  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.measure import compare_gradients  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.graph import simulate  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(1)


class _TwoDrop(nn.Module):
    """Two dropouts on parallel branches (the hunter's network): ``da`` comes first in the file."""

    def __init__(self, width: int, poisson: bool = False) -> None:
        super().__init__()
        self.big, self.small = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.b, self.out = nn.Linear(width, width), nn.Linear(2 * width, 4)
        self.da, self.db = nn.Dropout(0.5), nn.Dropout(0.5)
        self.poisson = poisson

    def forward(self, x):
        h = self.da(torch.relu(self.big(x)))
        yb = self.db(self.b(x))
        if self.poisson:  # draws as many numbers as its rates ask for: data-dependent randomness
            yb = yb * torch.poisson(torch.relu(yb.detach()) * 3.0)
        ya = self.small(h)
        return self.out(torch.cat([ya, yb], dim=1))


def _setup(poisson: bool = False, width: int = 8):
    torch.manual_seed(0)
    net = _TwoDrop(width, poisson)
    x, y = torch.randn(4, width), torch.randint(0, 4, (4,))
    graph = export_training_graph(net, example_input=x, loss_fn=F.cross_entropy, target=y)
    return net, x, y, graph


def _ix(graph, *names: str) -> list[int]:
    return [graph.names.index(n) for n in names]


def _branch_b_first(graph) -> list[int]:
    """The forward of branch b (``b``, ``db``) before branch a, then the file order: valid."""
    first = _ix(graph, "0.b", "0.db")
    seq = first + [v for v in range(graph.n) if v not in first]
    assert simulate(graph, seq).valid
    return seq


def _with_recomputations(graph) -> list[int]:
    """Branch b first, then after the loss both dropouts dropped and recomputed before their backward."""
    fwd = _ix(graph, "0.b", "0.db", "0.big", "0.relu", "0.da", "0.small", "0.cat", "0.out", "loss")
    bwd = _ix(graph, "grad_0.out", "grad_0.cat", "0.db", "grad_0.db", "grad_0.b", "0.da", "0.small",
              "grad_0.small", "grad_0.da", "grad_0.relu", "grad_0.big")
    seq = fwd + bwd
    sim = simulate(graph, seq)
    assert sim.valid, sim.violation
    return seq


def _plain(net, x, y, seed: int):
    return reference_step([net], F.cross_entropy, x, y, seed=seed)[1]


def test_branch_b_first_matches_plain_autograd():
    net, x, y, graph = _setup()
    for seed in (0, 1):
        result, ok = execute_graph([net], F.cross_entropy, graph, _branch_b_first(graph), x, y, seed=seed,
                                   measure_time=False)
        assert ok, compare_gradients(result.grads, _plain(net, x, y, seed))[1]


def test_recomputed_dropouts_after_the_loss_match():
    net, x, y, graph = _setup()
    seq = _with_recomputations(graph)
    assert len(seq) > len(set(seq))
    result, ok = execute_graph([net], F.cross_entropy, graph, seq, x, y, seed=2, measure_time=False)
    assert ok, compare_gradients(result.grads, _plain(net, x, y, 2))[1]


def test_a_solver_that_reorders_matches():
    """DTR at the budget of the hunter's repro computes branch b first; its gradients now check."""
    net, x, y, graph = _setup()
    res = registry.solve("graph", graph, "dtr", int(0.8 * simulate(graph, list(range(graph.n))).peak_memory))
    assert res.schedule is not None
    seq = res.schedule.indices(graph)
    _, ok = execute_graph([net], F.cross_entropy, graph, seq, x, y, seed=0, measure_time=False)
    assert ok


def test_train_step_matches_plain_and_leaves_the_generator_as_it_does():
    """Two training steps in a row (the second replays the dropouts on zeros, the first ran the
    plain forward): the gradients and the generator's state after each are plain autograd's."""
    net, x, y, graph = _setup()
    executor = GraphExecutor([net], F.cross_entropy, graph, x)
    seq = _with_recomputations(graph)
    torch.manual_seed(5)
    got = []
    for _ in range(2):
        net.zero_grad(set_to_none=True)
        executor.train_step(seq, x, y)
        got.append(({n: p.grad.clone() for n, p in net.named_parameters()}, torch.get_rng_state()))
    torch.manual_seed(5)
    for grads, state in got:
        net.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        ok, msg = compare_gradients(grads, {n: p.grad for n, p in net.named_parameters()})
        assert ok, msg
        assert torch.equal(state, torch.get_rng_state())
    assert executor._random_ops and all(r.replayable for ops in executor._random_ops.values() for r in ops)


def test_the_pre_pass_is_outside_the_measured_step():
    """The measured peak (tracker) is the step's own: the same as a run given no RNG states."""
    from memsched.models.graph.executor import FileOrderRng

    net, x, y, graph = _setup()
    executor = GraphExecutor([net], F.cross_entropy, graph, x)
    seq = _branch_b_first(graph)
    measured = executor.step(seq, x, y, measure_time=False)
    _, frees, tape_at, retain_at = executor.prepare(seq, x)
    bare = FileOrderRng({}, None, "forward")
    _, _, peak, _, _ = executor._run(seq, frees, tape_at, retain_at, x, y, 0, True, False, "wall", rng=bare)
    assert measured.peak_memory == peak > 0


def test_data_dependent_randomness_runs_the_plain_forward_every_step():
    """torch.poisson draws by value: zeros do not replay it, so every pre-pass is the plain
    forward, and a reordered schedule still matches plain autograd, step after step."""
    net, x, y, graph = _setup(poisson=True)
    executor = GraphExecutor([net], F.cross_entropy, graph, x)
    seq = _branch_b_first(graph)
    torch.manual_seed(7)
    assert executor.rng_order(x).method == "forward"
    assert not all(r.replayable for ops in executor._random_ops.values() for r in ops)
    assert executor.rng_order(x).method == "forward"
    result, ok = execute_graph([net], F.cross_entropy, graph, seq, x, y, seed=3, measure_time=False)
    assert ok, compare_gradients(result.grads, _plain(net, x, y, 3))[1]


def test_eval_mode_has_no_random_nodes():
    net, x, y, graph = _setup()
    executor = GraphExecutor([net], F.cross_entropy, graph, x)
    net.eval()
    order = executor.rng_order(x)
    assert order.states == {} and order.final is None
    _, ok = execute_graph([net], F.cross_entropy, graph, _branch_b_first(graph), x, y, measure_time=False)
    assert ok

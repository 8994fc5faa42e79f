"""Python scalars on a tape: the executor's allocator prediction charges them (models.graph.profile, executor).

``h * 1.1`` with a tape makes autograd save the scalar as a 0-dim double tensor (8 B) that no op
makes, so the tensor tracker, hence the profiled ``cost_ram``, never sees it, while the CPU allocator
does: ``memsched run --problem graph`` measured the allocator's peak 8 B per such live tape above its
prediction (4,372 B against 4,212 B on this network), with no warning. The profiler now records those
bytes (``meta["allocator_tape"]``) and the allocator's prediction charges them while the tape lives;
the tracker's prediction is unchanged. The schedules here are fixed: nothing depends on timings.
"""

from __future__ import annotations

import pytest
from conftest import order_with_recomputations

torch = pytest.importorskip("torch")

from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

MULS = 20


class _ScalarChain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        for _ in range(MULS):
            h = torch.tanh(h * 1.1)
        return self.out(h)


_CACHE: dict[str, tuple] = {}


def _setup():
    if "net" not in _CACHE:
        torch.manual_seed(0)
        net, x, y = _ScalarChain(), torch.randn(4, 6), torch.randint(0, 3, (4,))
        graph = export_training_graph(net, example_input=x, loss_fn=F.cross_entropy, target=y, cost="measured",
                                      ram="tape", repeats=1, warmup=1)
        _CACHE["net"] = (graph, GraphExecutor(net, F.cross_entropy, graph, x), x, y)
    return _CACHE["net"]


def _muls(graph) -> list[int]:
    """The forward nodes of ``h * 1.1``."""
    return [v for v, name in enumerate(graph.names)
            if not name.startswith("grad_") and name.rsplit(".", 1)[-1].startswith("mul")]


def test_profile_records_the_scalars_the_tracker_misses():
    graph, *_ = _setup()
    muls = _muls(graph)
    assert len(muls) == MULS
    recorded = graph.meta.get("allocator_tape") or {}
    assert set(recorded) == {graph.names[v] for v in muls}
    assert all(b == 8 for b in recorded.values())  # a float64 scalar each


def test_store_all_allocator_peak_is_predicted():
    graph, executor, x, y = _setup()
    step = executor.step(list(range(graph.n)), x, y, measure_time=False, independent=True)
    assert step.independent_peak is not None
    assert step.peak_memory == step.tracker_predicted_peak  # the tracker's definition is unchanged
    assert step.independent_peak == step.predicted_peak  # was 160 B above it
    assert step.predicted_peak - step.tracker_predicted_peak == 8 * MULS  # all tapes alive at the loss


def _recomputing(graph, executor, every: int) -> list[int]:
    """The graph order with every `every`-th mul node computed again just before its backward node."""
    return order_with_recomputations(graph.n, {executor.bwd_of[v]: v for v in _muls(graph)[::every]})


@pytest.mark.parametrize("every", [1, 3])
def test_recomputed_scalar_tapes_are_predicted(every):
    graph, executor, x, y = _setup()
    seq = _recomputing(graph, executor, every)
    step = executor.step(seq, x, y, measure_time=False, independent=True)
    assert step.peak_memory == step.tracker_predicted_peak
    assert step.independent_peak == step.predicted_peak


def test_a_tape_is_charged_after_its_step_to_its_last_backward():
    graph, executor, *_ = _setup()
    seq = _recomputing(graph, executor, 1)
    charged = executor.allocator_tape_bytes(seq)
    first = seq.index(_muls(graph)[0])  # without a tape (recomputed before its B_v): nothing
    assert charged[first + 1] == charged[first]
    b = seq.index(executor.bwd_of[_muls(graph)[0]])
    again = b - 1  # the computation with the tape, just before its B_v
    assert seq[again] == _muls(graph)[0]
    assert charged[again] == charged[b] - 8  # from the step after the computation, through its B_v
    assert charged[b + 1] == charged[b] - 8
    plain = dict(graph.meta)
    plain.pop("allocator_tape")
    import dataclasses

    old = GraphExecutor.__new__(GraphExecutor)
    old.__dict__.update(executor.__dict__)
    old.graph = dataclasses.replace(graph, meta=plain)
    assert old.allocator_tape_bytes(seq) == [0] * len(seq)  # a graph without the record: as before

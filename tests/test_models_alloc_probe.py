"""The independent CPU memory measurement (models.alloc_probe: torch.profiler allocator events).

It shares no code with the live-tensor tracker that the profiler and the executors use; on
small models (megabytes of activations) both agree with the chain simulator's prediction
within 5%. (On tiny models the allocator's own small allocations, scalars and bookkeeping of a
few tens of KiB, are not negligible; convolutions' backward scratch buffers, which the tracker
does not see, make the probe read higher on convolutional networks: both are limits of the
tracker the probe exists to expose.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.alloc_probe import AllocatorProbe  # noqa: E402
from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.overheads import released_loss_chain  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.chain import reference_peak  # noqa: E402

torch.set_num_threads(1)

SMALL = {
    "gpt2": dict(batch=4, seq_len=64, width=64, depth=4, vocab=512),
    "vgg16": dict(batch=2, image_size=32, width=8),
}


def test_probe_sums_allocations_and_frees():
    mb = 1_000_000

    def step() -> torch.Tensor:
        a = torch.empty(mb, dtype=torch.uint8)
        b = torch.empty(2 * mb, dtype=torch.uint8)
        del a
        c = torch.empty(3 * mb, dtype=torch.uint8)  # peak: b + c = 5 MB
        del c
        return b

    step()  # warm-up
    with AllocatorProbe() as probe:
        kept = step()
    assert 5 * mb <= probe.peak <= 5 * mb + 4096
    assert 2 * mb <= probe.net <= 2 * mb + 4096 and probe.events >= 5
    del kept


@pytest.mark.parametrize("name", sorted(SMALL))
def test_tracker_and_probe_agree_with_the_prediction(name):
    model = build_model(name, device="cpu", **SMALL[name])
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1, warmup=0)
    chain = released_loss_chain(chain)  # the loss as the executor runs it (a_L freed after its forward)
    executor = ChainExecutor(model.blocks, model.loss_fn)
    ran = 0
    for solver in ("store-all", "periodic", "rotor"):
        for frac in (0.7, 0.8, 0.9, 1.0):  # the smallest budget the solver fits
            res = registry.solve("chain", chain, solver, int(frac * reference_peak(chain)))
            if res.found:
                break
        if not res.found:
            continue
        step = executor.step(res.schedule, model.example_input, model.target, chain=chain, measure_time=False,
                             independent=True)
        assert step.independent_method and step.independent_peak is not None
        # each method against the prediction under its own overheads (models.chain.overheads)
        assert abs(step.memory_ratio - 1) <= 0.05, (solver, step.peak_memory, step.tracker_predicted_peak)
        assert abs(step.independent_peak / step.predicted_peak - 1) <= 0.05, (solver, step.independent_peak,
                                                                               step.predicted_peak)
        ran += 1
    assert ran == 3

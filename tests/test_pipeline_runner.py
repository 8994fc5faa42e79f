"""A 2-stage pipeline runs for real on gloo (CPU) and its gradients match plain autograd."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["1f1b"])
def test_two_stage_pipeline_on_gloo(schedule):
    from memsched.models.pipeline.runner import compare, make_mlp, profile_sequential, run_partition
    from memsched.solvers import registry

    layers, width, batch, m = 4, 32, 16, 4
    inst = profile_sequential(make_mlp(layers, width), torch.randn(batch // m, 64), reps=2)
    res = registry.solve("pipeline", inst, "balance-time", 10**12, devices=2, schedule=schedule, micro_batches=m)
    part = res.schedule
    assert len(part.stages) == 2
    run = run_partition(part, layers=layers, width=width, batch=batch, micro_batches=m, steps=1, device="cpu",
                        timeout_s=240)
    out = compare(inst, part, run)
    assert out["grad_check"], out["grad_max_abs_err"]
    # the first stage saves exactly the model's stash: in-flight x inputs of its layers
    assert out["measured"]["saved_activations_peak"][0] == out["predicted"]["stash"][0]
    # the last stage also keeps what the loss saves, which the model leaves out
    assert out["measured"]["saved_activations_peak"][1] >= out["predicted"]["stash"][1]
    assert out["predicted"]["in_flight"] == [2, 1]

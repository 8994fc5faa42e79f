"""A DAG partition whose boundary lies inside a residual block runs for real on gloo (CPU):
two tensors cross the boundary, gradients match plain autograd, saved activations within the model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")


@pytest.mark.torch
@pytest.mark.slow
def test_split_inside_a_residual_block_on_gloo():
    from memsched.models.pipeline.dag_runner import DagNet, compare_dag, profile_dag, residual_spec, run_dag_partition
    from memsched.solvers.pipeline import Partition, simulate
    from memsched.solvers.pipeline.lattice import ideal_lattice

    spec = residual_spec(1)  # 0 stem, 1 block, 2 block, 3 add(2, 0), 4 head
    inst = profile_dag(DagNet(spec, width=32), torch.randn(8, 32), reps=2)
    assert ideal_lattice(inst).n == 6  # the skip 0 -> 3 runs beside the path 0 -> 1 -> 2 -> 3: 6 ideals
    part = Partition.from_bounds([(0, 1), (2, 4)], micro_batches=4)  # boundary after layer 1: outputs of 0 and 1
    assert simulate(inst, part).violation is None
    run = run_dag_partition(part, spec, width=32, batch=32, micro_batches=4, steps=1, timeout_s=240)
    out = compare_dag(inst, part, run)
    assert out["boundary_tensors"] == [1, 2]
    assert out["grad_check"], out["grad_max_abs_err"]
    assert out["predicted"]["in_flight"] == [2, 1]
    # stage 0 is a chain of blocks: it saves exactly the model's stash; stage 1 holds an add,
    # whose inputs the model counts but autograd does not save
    measured, predicted = out["measured"]["saved_activations_peak"], out["predicted"]["stash"]
    assert measured[0] == predicted[0]
    assert 0 < measured[1] <= predicted[1]

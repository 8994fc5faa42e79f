"""A DAG partition whose boundary lies inside a residual block runs for real on gloo (CPU):
two tensors cross the boundary, gradients match plain autograd, the activations saved for
backward match the model's stash n_s A_s built from the measured saves of the profile."""

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
    # the profile's measured saves: a block keeps its ReLU's output (an extra of the block), an add nothing
    assert inst.saved_by is not None and all(not ws for ws in inst.saved_by) and not inst.input_saved
    assert inst.saved_extra is not None and list(inst.saved_extra) == [32 * 8 * 4] * 3 + [0, 32 * 8 * 4]
    measured, predicted = out["measured"]["saved_activations_peak"], out["predicted"]["stash"]
    assert measured[0] == predicted[0]
    # the last stage also holds the loss's saved output and target (2 x 8 x 8 floats per micro-batch)
    assert measured[1] == predicted[1] + 2 * 8 * 8 * 4
    cpu = out["measured"]["cpu_per_micro_batch_s"]
    assert len(cpu) == 2 and all(t > 0 for t in cpu) and out["measured"]["cpu_bottleneck_s"] == max(cpu)
    # every call is counted: the warm-up, the timed step and the metered step (not timed), 4 micro-batches each
    assert all(f >= 12 and b == 12 for f, b in run["cpu_calls"])


def test_zoo_resnet_as_a_layer_dag():
    """The zoo's ResNet cut into operations computes what the zoo's blocks compute; a boundary
    after the first conv-bn-relu of a residual block carries the block's input and its main path."""
    from memsched.models.pipeline.dag_runner import boundaries, node_shapes, profile_dag
    from memsched.models.pipeline.dag_zoo import resnet_dag, sample_shape
    from memsched.models.zoo.resnet import resnet_blocks
    from memsched.solvers.pipeline import Partition, simulate

    net = resnet_dag(18, width=4, depth=1, seed=3)
    torch.manual_seed(3)
    chain = torch.nn.Sequential(*resnet_blocks(18, width=4, classes=10, depth=1)).eval()
    x = torch.randn(2, *sample_shape(size=16))
    assert torch.allclose(net(x), chain(x), atol=1e-6)
    names = [name for name, _ in net.spec]
    assert names[:4] == ["stem.conv", "stem.bn", "stem.relu", "stem.pool"] and names[-1] == "head"
    assert names.count("add_relu") == 4 and names.count("shortcut") == 3  # ResNet-18, one block per stage
    cut = names.index("relu1")  # inside the first residual block
    layers = [list(range(cut + 1)), list(range(cut + 1, len(names)))]
    assert boundaries(net.spec, layers) == [[-1], [3, cut]]
    assert node_shapes(net, x)[cut] == [2, 4, 4, 4]
    inst = profile_dag(net, x, reps=1, clock="cpu")
    assert inst.length == len(names) and inst.succ[3] == [4, 9]
    # measured saves: max-pool keeps its input and int64 indices, a ReLU its output, batch norm its
    # input (its running statistics are buffers: module state), an add with ReLU only its output
    pool, add = names.index("stem.pool"), names.index("add_relu")
    assert inst.saved_extra is not None and inst.saved_extra[pool] == 2 * 4 * 4 * 4 * 8  # indices, int64
    assert inst.saved_by is not None and inst.saved_by[pool - 1] == [pool - 1, pool]  # ReLU and pool keep it
    assert inst.saved_by[add] == [add, add + 1, add + 6] and inst.saved_by[add - 1] == []  # bn2's output: nobody
    assert inst.saved_by[names.index("conv1")] == [names.index("bn1")] and inst.saved_by[names.index("bn1")] == []
    assert inst.input_saved
    part = Partition.from_bounds([(0, cut), (cut + 1, inst.length - 1)])
    ev = simulate(inst, part)
    assert ev.violation is None and inst.messages_into(cut + 1) == 2


@pytest.mark.torch
@pytest.mark.slow
def test_zoo_resnet_split_inside_a_block_on_gloo():
    """A small zoo ResNet split inside a residual block runs on gloo: two tensors cross the
    boundary, gradients match one process; the measured saved activations are the model's stash
    on the first stage and within 10% on the last (which also holds the loss's saves); the
    measured step is reported beside the simulated makespan."""
    from memsched.models.pipeline.dag_runner import compare_dag, profile_dag, run_dag_partition
    from memsched.models.pipeline.dag_zoo import resnet_dag, sample_shape
    from memsched.solvers.pipeline import Partition

    net = resnet_dag(18, width=4, depth=1)
    inst = profile_dag(net, torch.randn(2, *sample_shape(size=16)), reps=1)
    cut = [name for name, _ in net.spec].index("relu1")
    part = Partition.from_bounds([(0, cut), (cut + 1, inst.length - 1)], micro_batches=2)
    spec = {"factory": "memsched.models.pipeline.dag_zoo:resnet_dag", "kwargs": {"variant": 18, "width": 4, "depth": 1}}
    run = run_dag_partition(part, net=spec, in_shape=sample_shape(size=16), batch=4, micro_batches=2, steps=1,
                            timeout_s=240)
    out = compare_dag(inst, part, run)
    assert out["boundary_tensors"] == [1, 2]
    assert out["grad_check"], out["grad_max_abs_err"]
    measured, predicted = out["measured"]["saved_activations_peak"], out["predicted"]["stash"]
    assert measured[0] == predicted[0]
    assert abs(measured[1] - predicted[1]) <= 0.1 * predicted[1]
    assert out["measured"]["step_time_s"] > 0 and out["predicted"]["makespan_s"] > 0

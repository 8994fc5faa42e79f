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
    inst = profile_dag(net, x, reps=1)
    assert inst.length == len(names) and inst.succ[3] == [4, 9]
    part = Partition.from_bounds([(0, cut), (cut + 1, inst.length - 1)])
    ev = simulate(inst, part)
    assert ev.violation is None and inst.messages_into(cut + 1) == 2


@pytest.mark.torch
@pytest.mark.slow
def test_zoo_resnet_split_inside_a_block_on_gloo():
    """A small zoo ResNet split inside a residual block runs on gloo: two tensors cross the
    boundary, gradients match one process; the measured saved activations stay within 1.5x of
    the model's stash (the model counts each operation's input; max-pool also keeps its indices,
    an add nothing) and the measured step is reported beside the simulated makespan."""
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
    for measured, predicted in zip(out["measured"]["saved_activations_peak"], out["predicted"]["stash"]):
        assert 0 < measured <= 1.5 * predicted
    assert out["measured"]["step_time_s"] > 0 and out["predicted"]["makespan_s"] > 0

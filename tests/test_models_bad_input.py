"""Bad input on the PyTorch side (`models.network`, the profilers, the zoo, `ScheduledChain`,
`ScheduledGraph`): one-line `memsched.InputError` naming the argument, never a raw torch or
Python error from deep inside, never silently ignored; and the valid forms still work (CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)

#: the zoo's smallest resnet (profiled in well under a second)
TINY = {"batch": 2, "image_size": 16, "width": 4, "depth": 1}


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(4)], nn.Linear(8, 4))


@pytest.fixture(scope="module")
def data():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randint(0, 4, (4,))


@pytest.fixture(scope="module")
def plan(data):
    """(a profiled chain of `mlp`, rotor's result on it at its reference peak)."""
    x, y = data
    chain = memsched.profile(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    result = memsched.solve(chain, "100%", solver="rotor")
    assert result.found
    return chain, result


@pytest.fixture(scope="module")
def graph_plan(data):
    """(the module, its training graph's plan: every node once)."""
    x, y = data
    net = mlp()
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph", repeats=1)
    result = memsched.solve(graph, "100%", solver="checkpoint-all")
    assert result.found
    return net, result


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------ 1. profile: repeats, timing
@pytest.mark.parametrize("repeats", ["x", 2.5, True, 0, -1, 10**4 + 1])  # None: the default, 3
@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_profile_repeats_must_be_an_int_in_range(data, repeats, problem):
    x, y = data
    with pytest.raises(memsched.InputError, match="repeats") as err:
        memsched.profile(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, repeats=repeats, problem=problem)
    one_line(err)


def test_profile_repeats_of_a_zoo_network_is_checked_before_building():
    with pytest.raises(memsched.InputError, match="repeats"):
        memsched.profile("resnet18", repeats=0, **TINY)


def test_profile_timing_must_be_known(data):
    x, y = data
    with pytest.raises(memsched.InputError, match="timing.*bogus"):
        memsched.profile(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1, timing="bogus")
    chain = memsched.profile(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1, timing="isolated")
    assert chain.meta["timing"] == "isolated" and chain.meta["repeats"] == 1


def test_export_checks_repeats_and_sizes(data):
    from memsched.models.graph.export import export_training_graph

    x, y = data
    with pytest.raises(memsched.InputError, match="repeats"):
        export_training_graph(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, repeats="3")
    with pytest.raises(memsched.InputError, match="warmup"):
        export_training_graph(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, warmup=-1)
    with pytest.raises(memsched.InputError, match="batch"):  # sizes are a zoo name's
        export_training_graph(mlp(), example_input=x, target=y, loss_fn=F.cross_entropy, batch=2)


# ------------------------------------------------------------------ 2. zoo sizes
@pytest.mark.parametrize(("sizes", "field"), [
    ({"batch": "x"}, "batch"), ({"batch": True}, "batch"), ({"batch": 2.0}, "batch"), ({"batch": 0}, "batch"),
    ({"width": -4}, "width"), ({"depth": 10**4 + 1}, "depth"), ({"seq_len": None, "vocab": "many"}, "vocab"),
    ({"image_size": "16y16"}, "image_size"), ({"image_size": 0}, "image_size"),
    ({"image_size": (16, "a")}, "image_size"), ({"image_size": True}, "image_size"),
    ({"dropout": 2}, "dropout"), ({"seed": "s"}, "seed"), ({"classes": 0}, "classes"),
    ({"foo": 1}, "foo"), ({"device": "bogus"}, "device"), ({"device": 3}, "device"),
])
def test_zoo_sizes_are_checked(sizes, field):
    with pytest.raises(memsched.InputError, match=field) as err:
        memsched.profile("resnet18", repeats=1, **{**TINY, **sizes})
    one_line(err)


def test_zoo_sizes_are_checked_with_the_graph_problem_too():
    with pytest.raises(memsched.InputError, match="batch"):
        memsched.profile("resnet18", repeats=1, problem="graph", **{**TINY, "batch": "x"})
    with pytest.raises(memsched.InputError, match="foo"):
        memsched.profile("resnet18", repeats=1, problem="graph", foo=1, **TINY)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA takes device='cuda'")
def test_cuda_without_a_gpu_is_bad_input():
    with pytest.raises(memsched.InputError, match="device.*CUDA"):
        memsched.profile("resnet18", repeats=1, device="cuda", **TINY)


def test_valid_zoo_sizes_still_build():
    import numpy as np
    from memsched.models.zoo import build_model

    chain = memsched.profile("resnet18", repeats=1, device=torch.device("cpu"), seed=3, dropout=0.5,
                             **{**TINY, "image_size": (16, 24)})
    assert chain.length > 1
    model = build_model("resnet18", batch=np.int64(2), image_size="16x24", width=4, depth=1, device="cpu")
    assert tuple(model.example_input.shape) == (2, 3, 16, 24)


def test_join_zoo_sizes_are_checked():
    from memsched.models.join.zoo import build_join_model

    with pytest.raises(memsched.InputError, match="--batch"):
        build_join_model("siamese", batch="x", image_size=16, width=4, depth=1)
    with pytest.raises(memsched.InputError, match="embed_dim"):
        build_join_model("siamese", batch=2, image_size=16, width=4, depth=1, embed_dim=True)
    with pytest.raises(memsched.InputError, match="--device"):
        build_join_model("siamese", batch=2, image_size=16, width=4, depth=1, device="bogus")
    assert build_join_model("siamese", batch=2, image_size=16, width=4, depth=1).label


# ------------------------------------------------------------------ 3. a loss autograd cannot differentiate
LOSSES_WITHOUT_GRADIENT = {
    "detached": lambda o, t: o.detach().mean(),
    "argmax": lambda o, t: o.argmax(1).float().mean(),
    "constant": lambda o, t: torch.tensor(1.0),
    "integer constant": lambda o, t: torch.tensor(1),
}


@pytest.mark.parametrize("loss", list(LOSSES_WITHOUT_GRADIENT))
@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_a_loss_without_gradient_is_refused_by_the_dry_run(data, loss, problem):
    x, y = data
    with pytest.raises(memsched.InputError, match="loss_fn.*does not depend on the output through autograd") as err:
        memsched.profile(mlp(), example_input=x, target=y, loss_fn=LOSSES_WITHOUT_GRADIENT[loss], repeats=1,
                         problem=problem)
    one_line(err)


def test_a_loss_without_gradient_is_refused_by_run(data):
    x, y = data
    with pytest.raises(memsched.InputError, match="loss_fn.*autograd"):
        memsched.run(mlp(), "90%", example_input=x, target=y, loss_fn=LOSSES_WITHOUT_GRADIENT["detached"],
                     repeats=1, time_repeats=1)


def test_a_loss_that_changes_its_input_in_place_still_passes_the_dry_run(data):
    x, y = data

    def loss(out, target):
        out.mul_(2.0)
        return F.cross_entropy(out, target)

    from memsched.models.network import as_zoo_model

    built = as_zoo_model(mlp(), example_input=x, target=y, loss_fn=loss)  # the dry run alone
    assert len(built.blocks) == 5


# ------------------------------------------------------------------ 4. a target without a loss
def test_a_target_without_a_loss_is_refused(data):
    x, y = data
    for problem in ("chain", "graph"):
        with pytest.raises(memsched.InputError, match="loss_fn: a target needs the loss"):
            memsched.profile(mlp(), example_input=x, target=y, repeats=1, problem=problem)
    with pytest.raises(memsched.InputError, match="a target needs the loss"):
        memsched.profile(memsched.Network(mlp(), x, y), repeats=1)
    chain = memsched.profile(mlp(), example_input=x, repeats=1)  # no target: the mean of the output
    assert chain.length == 5


# ------------------------------------------------------------------ 5. the trainers' arguments
@pytest.mark.parametrize("loss_fn", [5, "cross_entropy", [F.cross_entropy]])
def test_the_trainers_need_a_callable_loss(data, plan, graph_plan, loss_fn):
    x, _ = data
    with pytest.raises(memsched.InputError, match="loss_fn.*callable"):
        memsched.ScheduledChain(mlp(), plan[1], loss_fn)
    net, graph_result = graph_plan
    with pytest.raises(memsched.InputError, match="loss_fn.*callable"):
        memsched.ScheduledGraph(net, graph_result, loss_fn, example_input=x)


@pytest.mark.parametrize("input_grad", ["x", 1, None])
def test_input_grad_must_be_a_bool(plan, input_grad):
    with pytest.raises(memsched.InputError, match="input_grad"):
        memsched.ScheduledChain(mlp(), plan[1], F.cross_entropy, input_grad=input_grad)


def test_input_grad_true_still_returns_the_input_gradient(data, plan):
    x, y = data
    trainer = memsched.ScheduledChain(mlp(), plan[1], F.cross_entropy, input_grad=True)
    _, delta0 = trainer.step_with_input_grad(x, y)
    assert delta0 is not None and delta0.shape == x.shape


# ------------------------------------------------------------------ 6. bad input to a step or a forward
def step_cases(x, y):
    return {
        "features": (lambda t: t.step(torch.randn(4, 7), y), "inputs.*block 0.*shapes cannot be multiplied"),
        "dtype": (lambda t: t.step(x.double(), y), "inputs.*float64"),
        "batch of the target": (lambda t: t.step(x, torch.randint(0, 4, (3,))), "target.*batch_size"),
        "no target": (lambda t: t.step(x), "target.*loss fails"),
        "not a tensor": (lambda t: t.step(x.tolist(), y), "inputs.*torch.Tensor"),
    }


@pytest.mark.parametrize("case", ["features", "dtype", "batch of the target", "no target", "not a tensor"])
def test_bad_input_to_a_chain_step_is_input_error(data, plan, case):
    x, y = data
    net = mlp()
    trainer = memsched.ScheduledChain(net, plan[1], F.cross_entropy)
    run, match = step_cases(x, y)[case]
    with pytest.raises(memsched.InputError, match=match) as err:
        run(trainer)
    one_line(err)
    net.zero_grad()
    assert torch.isfinite(trainer.step(x, y))  # still trains


@pytest.mark.parametrize("case", ["features", "dtype", "batch of the target", "no target", "not a tensor"])
def test_bad_input_to_a_graph_step_is_input_error(data, graph_plan, case):
    x, y = data
    net, result = graph_plan
    trainer = memsched.ScheduledGraph(net, result, F.cross_entropy, example_input=x)
    run, match = step_cases(x, y)[case]
    with pytest.raises(memsched.InputError, match=match) as err:
        run(trainer)
    one_line(err)
    net.zero_grad()
    assert torch.isfinite(trainer.step(x, y))


def test_a_loss_returning_a_vector_is_input_error(data, plan, graph_plan):
    x, y = data
    vector = lambda out, target: F.cross_entropy(out, target, reduction="none")  # noqa: E731
    with pytest.raises(memsched.InputError, match="loss_fn.*scalar"):
        memsched.ScheduledChain(mlp(), plan[1], vector).step(x, y)
    net, result = graph_plan
    with pytest.raises(memsched.InputError, match="loss_fn.*scalar"):
        memsched.ScheduledGraph(net, result, vector, example_input=x).step(x, y)
    with pytest.raises(memsched.InputError, match="loss_fn.*autograd"):
        memsched.ScheduledChain(mlp(), plan[1], LOSSES_WITHOUT_GRADIENT["detached"]).step(x, y)


def test_bad_input_to_the_drop_in_forward_is_input_error(data, plan):
    x, y = data
    trainer = memsched.ScheduledChain(mlp(), plan[1], F.cross_entropy)
    with pytest.raises(memsched.InputError, match="inputs.*block 0.*shapes cannot be multiplied"):
        trainer(torch.randn(4, 7))
    with pytest.raises(memsched.InputError, match="inputs.*float64"):
        trainer(x.double())
    with torch.no_grad(), pytest.raises(memsched.InputError, match="inputs.*block 0"):
        trainer(torch.randn(4, 7))
    F.cross_entropy(trainer(x), y).backward()  # the valid form


def test_a_bug_of_the_executor_is_not_turned_into_input_error(data, plan, monkeypatch):
    """The diagnosis re-runs the plain forward and the loss: when they work, the step's own error stays."""
    from memsched.models.chain.executor import ChainExecutor

    x, y = data
    trainer = memsched.ScheduledChain(mlp(), plan[1], F.cross_entropy)

    def broken(self, op, state, target):
        raise KeyError("an executor bug")

    monkeypatch.setattr(ChainExecutor, "apply", broken)
    with pytest.raises(KeyError, match="an executor bug"):
        trainer.step(x, y)
    with pytest.raises(KeyError, match="an executor bug"):
        trainer(x)


def test_a_graph_step_on_other_shapes_than_the_plan_fails_as_input_error_or_works(data, graph_plan):
    """The plan is built for the example's shapes; a batch the plain forward takes either runs, or
    fails as bad input naming the planned shapes (never a raw error from the executor)."""
    x, y = data
    net, result = graph_plan
    trainer = memsched.ScheduledGraph(net, result, F.cross_entropy, example_input=x)
    try:
        loss = trainer.step(x[:2], y[:2])
    except memsched.InputError as err:
        assert "inputs" in str(err) and "(4, 8)" in str(err)
    else:
        assert torch.isfinite(loss)


# ------------------------------------------------------------------ 7. a step under no_grad
def test_a_chain_step_under_no_grad_computes_the_gradients(data, plan):
    x, y = data
    net, twin = mlp(), mlp()
    trainer = memsched.ScheduledChain(net, plan[1], F.cross_entropy)
    with torch.no_grad():
        loss = trainer.step(x, y)
    ref = F.cross_entropy(twin(x), y)
    ref.backward()
    assert torch.allclose(loss, ref.detach())
    for p, q in zip(net.parameters(), twin.parameters()):
        assert p.grad is not None and torch.allclose(p.grad, q.grad, atol=1e-7)


# ------------------------------------------------------------------ 8. a second backward of the drop-in output
def test_a_second_backward_is_refused_naming_retain_graph(data, plan):
    x, y = data
    trainer = memsched.ScheduledChain(mlp(), plan[1], F.cross_entropy)
    loss = F.cross_entropy(trainer(x), y)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()
    assert "retain_graph" in (memsched.ScheduledChain.__doc__ or "")


# ------------------------------------------------------------------ 9. operations given as tuples
@pytest.mark.parametrize("ops", [
    [("F_all", "a")], [("F_all", True)], [("F_all", 0.0)], [("Fwd", 0)], [(0, 0)],
    [("Off", "b", 0)], [("Send", "a", 0)], [("Off", "a", "0")], [("Pre", "abar", False)],
])
def test_operations_given_as_tuples_are_checked(ops):
    with pytest.raises(memsched.InputError, match="schedule: operation 0") as err:
        memsched.ScheduledChain(mlp(), ops, F.cross_entropy)
    one_line(err)


def test_operations_given_as_tuples_still_work(data):
    x, y = data
    ops = [tuple(op) for op in store_all_schedule(5).ops]
    trainer = memsched.ScheduledChain(mlp(), ops, F.cross_entropy)
    assert torch.isfinite(trainer.step(x, y))
    with pytest.raises(memsched.InputError, match="schedule: not a valid schedule"):  # a stage out of range
        memsched.ScheduledChain(mlp(), [("F_all", 9)] + ops[1:], F.cross_entropy)

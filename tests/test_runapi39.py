"""`memsched.run` on a one-child ``nn.Sequential`` (a chain), `ScheduledChain.step` under
``torch.inference_mode()``, the fields of `run`'s bad arguments, and the drop-in backward's
train / eval modes (issue 39)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from memsched.solvers.errors import InputError  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402

RUN = {"repeats": 1, "time_repeats": 1}


@pytest.fixture(scope="module")
def one_child():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 4))
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    return net, x, y, memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy)


@pytest.mark.parametrize("how", ["chain", "solver", "default"])
def test_a_one_child_sequential_runs_as_a_chain(one_child, how):
    net, x, y, chain = one_child
    extra = {"chain": chain} if how == "chain" else {"solver": "rotor"} if how == "solver" else {}
    run = {"time_repeats": 1} if how == "chain" else RUN  # a chain given profiles nothing: repeats is refused
    result = memsched.run(net, "100%", example_input=x, target=y, loss_fn=F.cross_entropy, **run, **extra)
    assert result.data["problem"] == "chain"
    assert result.data["grad_check"]


def test_a_single_module_still_runs_as_a_graph_by_default(one_child):
    _, x, y, _ = one_child
    result = memsched.run(nn.Linear(8, 4), "100%", example_input=x, target=y, loss_fn=F.cross_entropy,
                          time_limit=5, **RUN)
    assert result.data["problem"] == "graph"


def _scheduled(net, x, y, **kwargs):
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy)
    return memsched.ScheduledChain(net, memsched.solve(chain, "100%", solver="rotor"), **kwargs)


def test_step_under_inference_mode_is_refused_up_front():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    sc = _scheduled(net, x, y, loss_fn=F.cross_entropy)
    with torch.inference_mode():
        with pytest.raises(InputError, match=r"ScheduledChain.step .*inference_mode") as err:
            sc.step(x, y)
        assert "block" not in str(err.value)
        out = sc(x)  # the drop-in forward: the plain forward, as under no_grad
    assert out.shape == (6, 4)


def test_bad_run_arguments_name_their_field(one_child):
    net, x, y, _ = one_child
    for field in ("chain", "instance"):
        with pytest.raises(InputError, match="not a memsched instance") as err:
            memsched.run(net, "100%", example_input=x, target=y, loss_fn=F.cross_entropy, **{field: 5})
        assert err.value.field == field
    sc = _scheduled(net, x, y)
    with pytest.raises(InputError, match="ScheduledChain") as err:
        memsched.run(sc, "100%", example_input=x, target=y, loss_fn=F.cross_entropy, **RUN)
    assert err.value.field == "model"
    with pytest.raises(InputError, match="ScheduledChain") as err:
        memsched.profile(sc, example_input=x, target=y, loss_fn=F.cross_entropy)
    assert err.value.field == "model"


def test_backward_recomputes_in_the_forwards_training_modes():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 16),
                        nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy)
    plan = memsched.solve(chain, "100%", solver="recompute-all")
    ref, tst = copy.deepcopy(net), copy.deepcopy(net)
    sc = memsched.ScheduledChain(tst, plan)
    assert any(op[0] != "B" and len(op) == 2 for op in sc.ops[sc._loss_at + 1:])  # recomputes after the Loss
    torch.manual_seed(1)
    F.cross_entropy(ref(x), y).backward()
    torch.manual_seed(1)
    loss = F.cross_entropy(sc(x), y)
    sc.eval()
    loss.backward()
    assert not any(m.training for m in sc.modules())  # the flags set after the forward are kept
    for p, q in zip(ref.parameters(), tst.parameters()):
        torch.testing.assert_close(q.grad, p.grad)

"""The network check (`models.network`'s dry run) refuses a network whose loss has no gradient path
in plain autograd, for `memsched run`, `memsched profile` and the Python API alike, and keeps the
networks plain autograd trains (frozen, parameterless, detached mid-chain); an infeasible chain of
one block says so truly (`models.run._run`), naming ``--problem graph`` only where that run would
take the same options (CPU)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import one_line_refusal

torch = pytest.importorskip("torch")
from memsched.models.network import as_zoo_model  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from torch import nn  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)


class Stop(nn.Module):
    """Stops the gradient: its output is its input, detached."""

    def forward(self, x):
        return x.detach()


class Arg(nn.Module):
    """An integer output: the index of the largest feature."""

    def forward(self, x):
        return x.argmax(-1)


class OneHot(nn.Module):
    """Integer indices to a float one-hot encoding (no parameters)."""

    def forward(self, x):
        return nn.functional.one_hot(x, 8).float()


def frozen(module: nn.Module) -> nn.Module:
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def float_mean(out, target):
    return out.float().mean()


FACTORY = textwrap.dedent('''
    import torch
    from torch import nn


    class Stop(nn.Module):
        def forward(self, x):
            return x.detach()


    class Arg(nn.Module):
        def forward(self, x):
            return x.argmax(-1)


    def last_detach():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Stop()), torch.randn(4, 8)


    def last_argmax():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Arg()), torch.randn(4, 8), None, lambda o, t: o.float().mean()


    def one_child():
        torch.manual_seed(0)
        return nn.Sequential(nn.Sequential(nn.Linear(64, 64), nn.Tanh())), torch.randn(32, 64)
''')


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(FACTORY)
    return path


def refused(model, x, loss_fn=None) -> InputError:
    with pytest.raises(InputError) as info:
        as_zoo_model(model, example_input=x, loss_fn=loss_fn)
    return info.value


def test_a_last_block_that_detaches_is_named():
    err = refused(nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Stop()), torch.randn(4, 8))
    assert "block 2 (Stop)" in err.message and "no gradient path" in err.message


def test_a_last_block_returning_an_argmax_is_named():
    err = refused(nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Arg()), torch.randn(4, 8), float_mean)
    assert "block 2 (Arg)" in err.message and "no gradient path" in err.message


def test_a_frozen_last_block_after_a_detach_names_the_detach():
    model = nn.Sequential(nn.Linear(8, 8), Stop(), frozen(nn.Linear(8, 8)))
    err = refused(model, torch.randn(4, 8))
    assert "block 1 (Stop)" in err.message and "no gradient path" in err.message


def test_an_integer_input_into_frozen_or_parameterless_blocks_names_the_input():
    x = torch.randint(0, 8, (4, 3))
    for model in (nn.Sequential(frozen(nn.Embedding(8, 4)), frozen(nn.Linear(4, 2))),
                  nn.Sequential(OneHot(), nn.Tanh())):
        err = refused(model, x)
        assert "the input is int64" in err.message and "no gradient path" in err.message


def test_networks_plain_autograd_trains_still_pass():
    x = torch.randn(4, 8)
    ok = [
        (nn.Sequential(frozen(nn.Linear(8, 8)), nn.Tanh(), frozen(nn.Linear(8, 2))), x, None),  # through the input
        (nn.Sequential(nn.Tanh(), nn.Softplus()), x, None),  # no parameters: the input's gradient
        (nn.Sequential(nn.Linear(8, 8), Stop(), nn.Linear(8, 2)), x, None),  # the last block still learns
        (nn.Sequential(nn.Linear(8, 8), Arg(), nn.Embedding(8, 3)), x, None),  # an argmax feeding an embedding
        (nn.Sequential(frozen(nn.Embedding(8, 4)), nn.Linear(4, 2)), torch.randint(0, 8, (4, 3)), None),
        (nn.Sequential(nn.Embedding(8, 4), frozen(nn.Linear(4, 2))), torch.randint(0, 8, (4, 3)), None),
    ]
    head = nn.Linear(8, 1)  # a loss with parameters of its own: it back-propagates into them
    ok.append((nn.Sequential(nn.Linear(8, 8), Stop()), x, lambda out, target: head(out).mean()))
    for model, inp, loss_fn in ok:
        built = as_zoo_model(model, example_input=inp, loss_fn=loss_fn)
        assert len(built.blocks) == len(model)


def test_the_check_keeps_the_input_and_refuses_in_place_blocks_as_before():
    x = torch.randn(4, 8)
    before = x.clone()
    as_zoo_model(nn.Sequential(nn.Linear(8, 8), nn.Tanh()), example_input=x)
    assert torch.equal(x, before) and not x.requires_grad
    err = refused(nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True)), x)
    assert "block 1 (ReLU) modifies its input in place" in err.message


def test_python_run_refuses_before_any_schedule(monkeypatch):
    import memsched.models.run as run_module

    def never(*args, **kwargs):
        raise AssertionError("no schedule runs for bad input")

    monkeypatch.setattr(run_module, "execute_schedule", never)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Stop())
    for kw in ({}, {"bandwidth": 1e8}):
        with pytest.raises(InputError, match=r"block 2 \(Stop\).*no gradient path") as info:
            memsched.run(model, "100%", example_input=torch.randn(4, 8), time_repeats=1, repeats=1, **kw)
        assert info.value.field == "model"


def test_python_run_of_an_all_frozen_network_checks_its_input_gradient():
    torch.manual_seed(0)
    model = nn.Sequential(frozen(nn.Linear(8, 8)), nn.Tanh(), frozen(nn.Linear(8, 2)))
    res = memsched.run(model, "100%", example_input=torch.randn(4, 8), time_repeats=1, repeats=1)
    assert res.data["grad_check"] is True


@pytest.mark.parametrize("name, block", [("last_detach", "block 2 (Stop)"), ("last_argmax", "block 2 (Arg)")])
def test_the_commands_refuse_it_in_one_line(cli, factory, tmp_path, name, block):
    spec = f"{factory}:{name}"
    for args in (["run", spec, "--budget", "100%", "--bandwidth", "1e8"], ["run", spec, "--budget", "100%"],
                 ["profile", spec, "-o", tmp_path / "p.json"]):
        line = one_line_refusal(cli(*args), block)
        assert "MODEL" in line and "no gradient path" in line
    assert not (tmp_path / "p.json").exists()


def test_a_chain_of_one_block_says_so_and_names_graph_only_where_it_applies(cli, factory):
    spec = f"{factory}:one_child"
    res = cli("run", spec, "--budget", "50%", "--bandwidth", "1e8", "--repeats", "1")
    assert res.code == 1 and "the chain has one block" in res.err
    assert "--problem graph" not in res.err and "not an nn.Sequential" not in res.err
    res = cli("run", spec, "--budget", "50%", "--solver", "revolve", "--repeats", "1")
    assert res.code == 1 and "the chain has one block" in res.err and "--problem graph" not in res.err
    res = cli("run", spec, "--budget", "50%", "--repeats", "1")
    assert res.code == 1 and "the chain has one block" in res.err and "--problem graph plans inside it" in res.err
    assert "not an nn.Sequential" not in res.err


class GradPenalty(nn.Module):
    """Differentiates inside its forward (a gradient penalty): plain autograd trains it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        with torch.enable_grad():
            z = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.lin(torch.tanh(z)).pow(2).sum(), z, create_graph=True)
        return g + self.lin(x)


def test_a_block_that_differentiates_in_its_forward_is_accepted() -> None:
    """The check must not refuse what plain autograd trains (review of session 42: the check's saved-tensor hooks
    refused torch.autograd.grad inside a forward)."""
    torch.manual_seed(0)
    net = nn.Sequential(GradPenalty(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    run = memsched.run(net, "100%", "store-all", example_input=torch.randn(4, 16), repeats=1, time_repeats=1)
    assert run["grad_check"] is True

"""`memsched.profile` and `memsched.run` of the caller's own network leave torch's global random
generator as they found it, also when the network draws from it (dropout): the dry run that
checks the blocks and the loss (`models.network._dry_run`) is a check, not a step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memsched  # noqa: E402


def dropout_net() -> tuple[object, object, object]:
    """Four Linear-ReLU-Dropout blocks on a batch of 8 (16 features), with class targets."""
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Dropout(0.1)) for _ in range(4)])
    return net, torch.randn(8, 16), torch.randint(0, 16, (8,))


def test_profile_of_a_network_with_dropout_keeps_the_rng():
    net, x, y = dropout_net()
    before = torch.get_rng_state().clone()
    memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    assert torch.equal(before, torch.get_rng_state())


@pytest.mark.parametrize("kwargs", [{"solver": "rotor"}, {"solver": "pofo", "bandwidth": 1e8}])
def test_run_of_a_network_with_dropout_keeps_the_rng(kwargs):
    net, x, y = dropout_net()
    before = torch.get_rng_state().clone()
    memsched.run(net, "80%", example_input=x, target=y, loss_fn=F.cross_entropy, **kwargs)
    assert torch.equal(before, torch.get_rng_state())


def test_a_failing_dry_run_keeps_the_rng_too():
    """A loss that fails after the blocks drew from the generator: bad input, generator kept."""
    net, x, _ = dropout_net()
    before = torch.get_rng_state().clone()
    with pytest.raises(Exception, match="loss"):
        memsched.profile(net, example_input=x, target=torch.zeros(3), loss_fn=F.cross_entropy, repeats=1)
    assert torch.equal(before, torch.get_rng_state())

"""The trainers and the end-to-end run on every device this machine has: the CPU always, CUDA when
present (`scripts/gpu_session.sh` runs this file on a lent GPU machine). Dropout stages are
recomputed, so a schedule only matches plain autograd when it replays each device's RNG state."""

from __future__ import annotations

import copy

import pytest
from conftest import trains_like_plain_autograd

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
#: device -> (batch, width): on CUDA the activations must outweigh the allocator's and libraries'
#: fixed overheads, which the profile charges, for 60-80% of the store-all peak to need recomputation.
SIZES = {"cpu": (16, 32), "cuda": (8192, 512)}


def dropout_mlp(device: str, depth: int = 5) -> nn.Sequential:
    width = SIZES[device][1]
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8 if i == 0 else width, width), nn.Tanh(), nn.Dropout(0.3))
                           for i in range(depth)], nn.Linear(width, 3)).to(device)


class SkipNet(nn.Module):
    """A module that is no chain: the first layer's output is added back after `depth` more."""

    def __init__(self, width: int, depth: int = 4) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(8, width), nn.Linear(width, 3)
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Dropout(0.3))
                                    for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        return self.out(self.body(h) + h)


def batch(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    n = SIZES[device][0]
    return torch.randn(n, 8, device=device), torch.randint(0, 3, (n,), device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_chain_schedule_trains_like_plain_autograd_on(device):
    import memsched

    net = dropout_mlp(device)
    twin = copy.deepcopy(net)
    x, y = batch(device)
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    result = memsched.solve(chain, "60%", solver="rotor")
    assert result.found and result.schedule.recomputations() > 0
    trainer = memsched.ScheduledChain(net, result, F.cross_entropy)
    trains_like_plain_autograd(trainer.step, net, twin, x, y)
    assert all(p.grad.device.type == device for p in net.parameters())


@pytest.mark.parametrize("device", DEVICES)
def test_a_graph_schedule_trains_like_plain_autograd_on(device):
    import memsched

    net = SkipNet(SIZES[device][1]).to(device)
    twin = copy.deepcopy(net)
    x, y = batch(device)
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph", repeats=1)
    plan = memsched.solve(graph, "70%", solver="checkmate", time_limit=20)
    assert plan.found
    trainer = memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=x)
    assert len(trainer.seq) > len(set(trainer.seq))  # some node is computed twice
    trains_like_plain_autograd(trainer.step, net, twin, x, y)


@pytest.mark.parametrize("device", DEVICES)
def test_a_zoo_network_runs_end_to_end_on(device):
    """`memsched.run`: measured below store-all's measured peak, gradients those of plain autograd."""
    import memsched

    out = memsched.run("resnet18", "95%", solver="rotor", batch=2, image_size=32, width=8, depth=1, device=device,
                       time_repeats=1, repeats=1)
    assert out.status == "optimal" and out.grad_check is True, out.data.get("message")
    assert out.device.startswith(device)
    assert 0 < out["measured"]["peak_memory"] < out["store_all"]["measured"]["peak_memory"]
    assert out["measured"]["time"] > 0

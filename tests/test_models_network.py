"""Your own network (`models.network`, `models.chain.training`): factories on the command line,
objects in the facade, and training under a schedule, against plain autograd (CPU)."""

from __future__ import annotations

import copy
import json
import textwrap

import pytest
from conftest import both_modes_match_plain_autograd, trains_like_plain_autograd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

FACTORY = textwrap.dedent('''
    import torch
    from torch import nn
    from torch.nn import functional as F


    def build(batch=4, width=16, depth=5):
        blocks = [nn.Sequential(nn.Linear(8 if i == 0 else width, width), nn.Tanh(), nn.Dropout(0.2))
                  for i in range(depth)]
        model = nn.Sequential(*blocks, nn.Linear(width, 3))
        return model, torch.randn(batch, 8), torch.randint(0, 3, (batch,)), F.cross_entropy


    def broken(batch=4):
        return nn.Sequential(nn.Linear(8, 4), nn.Linear(5, 2)), torch.randn(batch, 8)


    def no_tensor():
        return nn.Sequential(nn.Linear(8, 4)), [1, 2, 3]


    def raises():
        raise RuntimeError("no weights here")


    def exits():
        raise SystemExit(0)  # a script's habit: not memsched's exit 0


    def vector_loss():
        return nn.Sequential(nn.Linear(8, 4)), torch.randn(2, 8), None, lambda out, target: out.sum(dim=1)


    class Skip(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 4)

        def forward(self, x):
            h = torch.relu(self.a(x))
            return self.d(torch.relu(self.c(torch.relu(self.b(h)))) + h)


    def returns_a_module():
        return nn.Linear(8, 4)


    def one_module(batch=64):
        return Skip(), torch.randn(batch, 16), torch.randint(0, 4, (batch,)), F.cross_entropy
''')


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "mynet.py"
    path.write_text(FACTORY)
    return path


def mlp(depth: int = 5, width: int = 16, dropout: float = 0.2) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8 if i == 0 else width, width), nn.Tanh(), nn.Dropout(dropout))
                           for i in range(depth)], nn.Linear(width, 3))


# ------------------------------------------------------------------------------ command line
def test_a_factory_profiles_and_runs_from_the_command_line(cli, factory, tmp_path):
    out = tmp_path / "c.json"
    res = cli("profile", f"{factory}:build", "--batch", "6", "--depth", "4", "--repeats", "1", "-o", out)
    assert res.code == 0, res.err
    data = json.loads(out.read_text())
    assert len(data["stages"]) == 5  # four blocks and the head
    assert data["meta"]["model"] == f"{factory}:build"
    res = cli("run", f"{factory}:build", "--batch", "6", "--budget", "60%", "--json", "--time-repeats", "1",
              "--repeats", "1")
    assert res.code == 0, res.err
    run = res.json()
    assert run["grad_check"] is True and run["recomputations"] > 0
    assert run["measured"]["peak_memory"] <= 1.01 * run["predicted"]["peak_memory"] + 4096
    # the chain file names the factory: `run FILE` executes it with those costs
    res = cli("run", out, "--batch", "6", "--depth", "4", "--budget", "100%", "--solver", "recompute-all",
              "--json", "--time-repeats", "1")
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True


def test_the_example_network_by_its_module_name(cli, tmp_path):
    spec = "memsched.models.examples.my_network:build"
    sizes = ["--batch", "4", "--image-size", "32x24", "--depth", "6", "--width", "8"]
    res = cli("run", spec, *sizes, "--budget", "70%", "--json", "--time-repeats", "1", "--repeats", "1")
    assert res.code == 0, res.err
    assert res.json()["instance"] == "my_network.build" and res.json()["grad_check"] is True
    res = cli("max-batch", spec, "--image-size", "16", "--depth", "3", "--width", "4", "--memory", "2MB", "--json")
    assert res.code == 0, res.err
    assert res.json()["largest"] > 1


def test_one_module_is_planned_as_a_graph_and_the_chain_says_so(cli, factory):
    res = cli("run", f"{factory}:one_module", "--budget", "70%", "--repeats", "1")
    assert res.code == 1 and "the chain has one block" in res.err and "--problem graph plans inside it" in res.err
    res = cli("run", f"{factory}:one_module", "--budget", "70%", "--problem", "graph", "--json", "--repeats", "1",
              "--time-repeats", "1", "--time-limit", "10")
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True and res.json()["recomputations"] > 0


def test_a_factory_exports_a_training_graph(cli, factory, tmp_path):
    out = tmp_path / "g.json"
    res = cli("export-graph", f"{factory}:build", "--batch", "2", "-o", out)
    assert res.code == 0, res.err
    assert json.loads(out.read_text())["nodes"]


@pytest.mark.parametrize("spec, args, field, words", [
    ("{f}:nope", [], "MODEL", "has no function 'nope'"),
    ("{d}/missing.py:build", [], "MODEL", "no such file"),
    ("{f}:build", ["--image-size", "32"], "--image-size", "takes no argument 'image_size'"),
    ("{f}:raises", [], "MODEL", "RuntimeError: no weights here"),
    ("{f}:exits", [], "MODEL", "SystemExit: 0"),
    ("{f}:broken", [], "MODEL", "block 1 (Linear) fails on its input of shape (4, 4)"),
    ("{f}:no_tensor", [], "example_input", "must be a torch.Tensor"),
    ("{f}:vector_loss", [], "loss_fn", "must return a scalar tensor, got (2,)"),
    ("alexnet", [], "MODEL", "unknown model 'alexnet'"),
    ("{f}:returns_a_module", [], "MODEL", "mynet.returns_a_module returned a Linear; expected (model, example_input"),
])
def test_a_bad_factory_is_one_line_naming_the_field(cli, factory, tmp_path, spec, args, field, words):
    spec = spec.format(f=factory, d=tmp_path)
    res = cli("profile", spec, *args, "--repeats", "1", "-o", tmp_path / "out.json")
    assert res.code == 2, res.err
    line = res.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"{field}:" in line and words in line, line
    assert not (tmp_path / "out.json").exists()


# ------------------------------------------------------------------------------ facade
def test_profile_and_run_take_a_network_object():
    import memsched

    net = mlp()
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    assert chain.length == 6 and chain.meta["model"] == "custom"
    assert chain.x[0] == x.numel() * x.element_size()
    run = memsched.run(memsched.Network(net, x, y, F.cross_entropy, name="mlp"), "50%", time_repeats=1, repeats=1)
    assert run.grad_check is True and run.status == "optimal"
    with pytest.raises(memsched.InputError, match="example_input"):
        memsched.profile(net)
    with pytest.raises(memsched.InputError, match="batch"):
        memsched.profile(net, example_input=x, batch=3)
    with pytest.raises(memsched.InputError, match="loss_fn"):
        memsched.profile("resnet18", loss_fn=F.cross_entropy)
    with pytest.raises(memsched.InputError, match="problem"):
        memsched.run(net, "50%", example_input=x, problem="join")


# ------------------------------------------------------------------------------ training
def planned_mlp():
    """(an MLP with dropout, its copy, a batch, labels, rotor's plan at 60% with recomputations)."""
    import memsched

    net = mlp()
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    result = memsched.solve(chain, "60%", solver="rotor")
    assert result.found and result.schedule.recomputations() > 0
    return net, copy.deepcopy(net), x, y, result


def test_training_under_a_schedule_follows_plain_autograd():
    import memsched

    net, twin, x, y, result = planned_mlp()
    trainer = memsched.ScheduledChain(net, result, F.cross_entropy)
    trains_like_plain_autograd(trainer.step, net, twin, x, y)


def test_the_drop_in_module_follows_plain_autograd():
    """``loss_fn(net(x), y).backward()``: the schedule's forward ops now, the rest in the backward."""
    import memsched

    net, twin, x, y, result = planned_mlp()
    trainer = memsched.ScheduledChain(net, result)
    opt, opt_twin = torch.optim.SGD(net.parameters(), lr=0.5), torch.optim.SGD(twin.parameters(), lr=0.5)
    for step in range(3):
        x_in, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        torch.manual_seed(step)
        opt.zero_grad()
        loss = F.cross_entropy(trainer(x_in), y)
        loss.backward()
        opt.step()
        torch.manual_seed(step)
        opt_twin.zero_grad()
        ref = F.cross_entropy(twin(x_ref), y)
        ref.backward()
        opt_twin.step()
        assert torch.allclose(loss, ref) and torch.allclose(x_in.grad, x_ref.grad, atol=1e-7)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    with pytest.raises(memsched.InputError, match="loss_fn"):  # step's stand-in loss would ignore the target
        trainer.step(x, y)
    out = F.cross_entropy(trainer(x), y)
    out.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        out.backward()
    net.eval(), twin.eval()
    with torch.no_grad():  # the plain forward
        assert torch.equal(trainer(x), twin(x)) or torch.allclose(trainer(x), twin(x), atol=1e-6)


def test_the_drop_in_module_keeps_the_memory_the_simulator_predicts():
    """Live tensor bytes of ``loss_fn(net(x), y).backward()`` (the tracker) against the replay of the
    schedule on the chain as the tracker charges it, and against plain autograd's."""
    from memsched.models.chain.overheads import released_loss_chain, tracker_chain
    from memsched.models.memory import LiveTensorTracker
    from memsched.solvers.chain import simulate

    import memsched

    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(8 if i == 0 else 128, 128), nn.ReLU()) for i in range(16)],
                        nn.Linear(128, 3))
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    for p in net.parameters():
        p.grad = torch.zeros_like(p)  # allocated before: not counted, as the simulator counts none
    with LiveTensorTracker() as plain:
        F.cross_entropy(net(x), y).backward()
    result = memsched.solve(chain, "50%", solver="rotor")
    assert result.found and result.schedule.recomputations() > 0
    trainer = memsched.ScheduledChain(net, result, chain=chain)
    predicted = simulate(tracker_chain(released_loss_chain(chain)), result.schedule).peak_memory
    with LiveTensorTracker() as scheduled:
        F.cross_entropy(trainer(x), y).backward()
    assert scheduled.peak <= predicted
    assert scheduled.peak >= predicted - x.numel() * x.element_size() - 4096  # a_0 is the caller's, not copied
    assert scheduled.peak < 0.6 * plain.peak


def test_a_schedule_that_does_not_fit_the_network_is_refused():
    from memsched.solvers.chain.baselines import store_all_schedule

    import memsched

    net = mlp(depth=3)
    with pytest.raises(memsched.InputError, match="3 stages but the model 4 blocks"):
        memsched.ScheduledChain(net, store_all_schedule(4), F.cross_entropy,
                                chain=memsched.profile(mlp(depth=2, width=16), example_input=torch.randn(2, 8),
                                                       repeats=1))
    ops = list(store_all_schedule(4).ops)
    with pytest.raises(memsched.InputError, match="not a valid schedule"):
        memsched.ScheduledChain(net, ops[1:], F.cross_entropy)
    with pytest.raises(memsched.InputError, match="expected a chain or offloading schedule"):
        memsched.ScheduledChain(net, "F_all(0) ...", F.cross_entropy)
    with pytest.raises(memsched.InputError, match="no schedule"):
        chain = memsched.profile(net, example_input=torch.randn(2, 8), repeats=1)
        memsched.ScheduledChain(net, memsched.solve(chain, 10, solver="rotor"), F.cross_entropy)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(2, 7), frac=st.floats(0.2, 1.0), solver=st.sampled_from(["rotor", "periodic", "sqrt"]),
       dropout=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 100))
def test_every_schedule_trains_like_plain_autograd(depth, frac, solver, dropout, seed):
    """Any solver's schedule, at any budget it fits, gives plain autograd's loss and gradients."""
    import memsched

    torch.manual_seed(seed)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Dropout(dropout)) for _ in range(depth)])
    twin = copy.deepcopy(net)
    x = torch.randn(3, 6)
    chain = memsched.profile(net, example_input=x, repeats=1)
    result = memsched.solve(chain, max(1, int(frac * memsched.reference_peak(chain))), solver=solver)
    if not result.found:
        return
    both_modes_match_plain_autograd(memsched.ScheduledChain(net, result, input_grad=True), net, twin, x, seed)


def test_one_module_runs_as_its_training_graph(factory):
    """A module that is not an nn.Sequential is planned on its torch.fx graph (the graph problem)."""
    from memsched.models.network import build_network

    import memsched

    blocks, x, loss_fn, y = build_network(f"{factory}:one_module")  # the factory's Skip module and batch
    skip = blocks[0]
    run = memsched.run(skip, "70%", example_input=x, target=y, loss_fn=loss_fn, time_repeats=1, repeats=1,
                       time_limit=20)
    assert run["problem"] == "graph" and run.grad_check is True and run["recomputations"] > 0
    assert run["measured"]["peak_memory"] == run["predicted"]["peak_memory"]
    run = memsched.run(mlp(depth=3, dropout=0.0), "80%", problem="graph", example_input=torch.randn(4, 8),
                       time_repeats=1, repeats=1, time_limit=10)
    assert run.grad_check is True and run["problem"] == "graph"
    graph = memsched.profile(skip, example_input=x, target=y, loss_fn=loss_fn, problem="graph", repeats=1)
    assert memsched.problem_of(graph) == "graph" and graph.n > 8  # forward and backward ops
    assert memsched.solve(graph, "70%", solver="checkmate", time_limit=10).found
    with pytest.raises(memsched.InputError, match="problem"):
        memsched.profile(skip, example_input=x, problem="join")


def test_a_sweep_profiles_and_executes_a_factory(cli, factory, tmp_path):
    config = tmp_path / "own.toml"
    config.write_text(textwrap.dedent(f'''
        name = "own"
        budgets = ["70%", "100%"]
        solvers = ["rotor"]
        execute = true
        [measure]
        time_repeats = 1
        [[instances]]
        model = "{factory}:build"
        batch = 8
        depth = 6
        repeats = 1
    '''))
    res = cli("sweep", config, "--output", tmp_path / "out", "--no-progress")
    assert res.code == 0, res.err
    import pandas as pd

    rows = pd.read_csv(tmp_path / "out" / "own.csv")
    assert len(rows) == 2 and set(rows.status) == {"optimal"}
    assert rows.grad_check.astype(bool).all() and (rows.instance == "mynet.build").all()


def test_a_chain_profiled_with_early_release_trains_alike():
    """B(i) releasing delta_{i+1} early (the chain's bwd_overhead_released) inside the drop-in's backward."""
    from memsched.models.chain.profiler import profile_chain

    import memsched

    net = mlp()
    twin = copy.deepcopy(net)
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    chain = profile_chain(net, F.cross_entropy, x, y, repeats=1, release=True)
    assert chain.has_release()
    trainer = memsched.ScheduledChain(net, memsched.solve(chain, "60%", solver="rotor"), F.cross_entropy)
    for run in (lambda: F.cross_entropy(trainer(x), y).backward(), lambda: trainer.step(x, y)):
        net.zero_grad(), twin.zero_grad()
        torch.manual_seed(3)
        run()
        torch.manual_seed(3)
        F.cross_entropy(twin(x), y).backward()
        for p, q in zip(net.parameters(), twin.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-7)


def test_a_graph_schedule_trains_any_module_like_plain_autograd(factory):
    """`ScheduledGraph`: a module with a skip across its layers, trained under Checkmate's schedule."""
    from memsched.models.network import build_network

    import memsched

    blocks, x, loss_fn, y = build_network(f"{factory}:one_module")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.3), blocks[0])  # a recomputed dropout must replay its mask
    twin = copy.deepcopy(net)
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=loss_fn, problem="graph", repeats=1)
    plan = memsched.solve(graph, "70%", solver="checkmate", time_limit=20)
    assert plan.found
    trainer = memsched.ScheduledGraph(net, plan, loss_fn, example_input=x)
    assert len(trainer.seq) > len(set(trainer.seq))  # some node is computed twice
    trains_like_plain_autograd(trainer.step, net, twin, x, y)
    with pytest.raises(memsched.InputError, match="does not fit this model"):
        memsched.ScheduledGraph(mlp(), plan, loss_fn, example_input=x)
    with pytest.raises(memsched.InputError, match="graph"):
        memsched.ScheduledGraph(net, plan.schedule, loss_fn, example_input=x)
    with pytest.raises(memsched.InputError, match="loss_fn"):
        memsched.ScheduledGraph(net, plan, example_input=x).step(x, y)

"""Fixes of bugs a hunt found in the graph problem (Problem 2): the graph trainer's constructor and
BatchNorm statistics, the exact models' necessary-memory check at the smallest budget, griewank's
recomputations, export-graph on a network that cannot run at its sizes, the message of a baseline
that refuses a graph's structure, and cpsat's ``max_computations`` range."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace

import pytest
from conftest import run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, generate, reference_peak, simulate
from memsched.solvers.graph.baselines import griewank_sequence, solve_checkpoint_all, solve_griewank
from memsched.solvers.result import INFEASIBLE, OPTIMAL, TIMEOUT

# --------------------------------------------------------------------------- 1. BatchNorm and the constructor


def _bn_net():
    """A tiny convolutional network with a BatchNorm, its input and target."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 5))
    return net, torch.randn(2, 3, 8, 8), torch.randint(0, 5, (2,))


def _buffers(net):
    """name -> (tensor object, copy of its values) of every buffer of `net`."""
    return {name: (buf, buf.detach().clone()) for name, buf in net.named_buffers()}


def _assert_buffers_unchanged(net, before) -> None:
    import torch

    after = dict(net.named_buffers())
    assert after.keys() == before.keys()
    for name, (buf, values) in before.items():
        assert after[name] is buf, name  # the same tensor object, restored in place
        assert torch.equal(after[name], values), name  # bit for bit


def test_scheduled_graph_constructor_leaves_batchnorm_statistics_alone():
    import torch
    import torch.nn.functional as F

    import memsched

    net, x, y = _bn_net()
    graph = memsched.profile(copy.deepcopy(net), example_input=x, target=y, loss_fn=F.cross_entropy,
                             problem="graph", repeats=1)
    plan = memsched.solve(graph, "100%", solver="checkpoint-all")
    plain = copy.deepcopy(net)
    before = _buffers(net)
    trainer = memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=x)
    _assert_buffers_unchanged(net, before)
    assert int(net[1].num_batches_tracked) == 0

    trainer.step(x, y)  # each node once: the BatchNorm runs once, as in a plain training step
    plain.train()
    F.cross_entropy(plain(x), y).backward()
    assert int(net[1].num_batches_tracked) == int(plain[1].num_batches_tracked) == 1
    for name in ("running_mean", "running_var"):
        assert torch.allclose(getattr(net[1], name), getattr(plain[1], name), rtol=1e-6, atol=1e-7), name


def test_build_plan_restores_the_buffers_when_it_raises():
    """The graph of another network: the plan's forward runs, then the names do not match."""
    import torch.nn.functional as F
    from memsched.models.chain.executor import as_blocks
    from memsched.models.graph.plan import build_plan
    from torch import nn

    import memsched

    net, x, y = _bn_net()
    longer = nn.Sequential(*copy.deepcopy(list(net)), nn.ReLU(), nn.Linear(5, 5))
    graph = memsched.profile(longer, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph",
                             repeats=1)
    before = _buffers(net)
    with pytest.raises(ValueError):
        build_plan(as_blocks(net), graph, x)
    _assert_buffers_unchanged(net, before)


# --------------------------------------------------------------------------- 2. exact sizes at the smallest budget


def _seed7() -> Graph:
    """The hunt's 5-node graph: necessary budget 13273 bytes, where a schedule of makespan 25 fits;
    with sizes rounded up to 500 slots its necessary memory is over the 500 slots."""
    return Graph.from_lists([5.0, 4.0, 2.0, 5.0, 3.0], [3970, 3154, 3404, 3666, 3049],
                            [(0, 1), (0, 3), (1, 2), (1, 4), (2, 3), (2, 4), (3, 4)], name="seed7")


@pytest.mark.parametrize("solver", ["checkmate", "cpsat"])
def test_exact_models_solve_at_the_smallest_budget_with_exact_sizes(solver):
    from memsched.solvers import registry

    g = _seed7()
    need = g.necessary_budget()
    assert need == 13273
    M, B, slot = g.discretised(need, 500)
    assert g.necessary_budget(M, g.workspace_in(slot)) > B  # the rounding alone made it infeasible
    res = registry.solve("graph", g, solver, need, time_limit=20)
    assert res.status == OPTIMAL and res.objective == 25.0
    assert "exact sizes" in res.scope and "500 slots" in res.scope
    assert res.details["retried_exact_sizes"]
    below = registry.solve("graph", g, solver, need - 1, time_limit=20)
    assert below.status == INFEASIBLE and "exact sizes" in below.message


def test_no_time_for_the_exact_retry_is_a_timeout_naming_the_slots():
    from memsched.solvers.exact.options import Deadline, ExactOptions
    from memsched.solvers.graph.cpsat import _solve_cpsat
    from memsched.solvers.graph.milp import exact_size_retry

    deadline = Deadline(1e-6)
    time.sleep(0.01)
    res = exact_size_retry(_solve_cpsat, "cpsat", _seed7(), 13273, options=replace(ExactOptions(), slots=500),
                           deadline=deadline)
    assert res.status == TIMEOUT
    assert "500 slots" in res.message and "exact sizes" in res.message


def test_cli_names_the_true_smallest_budget(tmp_path, monkeypatch):
    from memsched.experiments.commands import _infeasible

    # a loaded machine must cut neither the search nor one probe (a 1 s proof of infeasibility) short
    monkeypatch.setattr(_infeasible, "SEARCH_SECONDS", 300.0)
    monkeypatch.setattr(_infeasible, "PROBE_SECONDS", 60.0)
    path = tmp_path / "seed7.json"
    _seed7().save(path)
    r = run_cli("solve", path, "--budget", "13272", "--solver", "checkmate", "--time-limit", "10")
    assert r.code == 1
    assert "smallest feasible budget: 13273 bytes" in r.err


# --------------------------------------------------------------------------- 3. griewank


def _forwards(graph: Graph, seq: list[int]) -> int:
    return sum(1 for v in seq if not graph.backward[v])


@pytest.mark.parametrize("L", [2, 3, 5, 8, 12])
def test_griewank_recomputes_nothing_with_memory_to_spare(L):
    g = generate.linear_graph(L)
    all_once = solve_checkpoint_all(g, 10**6).objective
    for budget in (reference_peak(g), 10**6):
        res = solve_griewank(g, budget)
        assert res.objective == all_once == g.total_cpu()
    for s in range(L - 1, L + 2):
        seq = griewank_sequence(g, s)
        assert seq is not None and _forwards(g, seq) == L  # each forward node once


def _revolve(length: int, s: int) -> int:
    """Griewank & Walther: t(l, s) = r l - beta(s + 1, r - 1), beta(s, r) = C(s + r, s), r least with
    l <= beta(s, r)."""
    r = 0
    while math.comb(s + r, s) < length:
        r += 1
    return r * length - math.comb(s + r, s + 1)


def test_griewank_forward_count_is_revolves():
    from memsched.solvers.graph.baselines import revolve_advances

    for L in range(1, 13):
        g = generate.linear_graph(L)
        for s in range(1, L + 1):
            t = _revolve(L, s)
            assert revolve_advances(L, s) == t
            assert _forwards(g, griewank_sequence(g, s)) == t + 1  # the last node's computation added
            assert _forwards(g, griewank_sequence(g, s, reuse=False)) == t + L  # Revolve's recompute per step
    assert _revolve(5, 4) == 4  # s >= L - 1: the first sweep only


def test_griewank_schedules_replay_within_budget_and_never_lose_to_revolves_recomputation():
    for L in (4, 7, 10):
        g = generate.linear_graph(L, cost_ram=3)
        candidates = [seq for reuse in (True, False) for s in range(1, L + 1)
                      if (seq := griewank_sequence(g, s, reuse)) is not None]
        peaks = sorted({simulate(g, seq).peak_memory for seq in candidates})
        for budget in range(peaks[0] - 1, reference_peak(g) + 2):
            res = solve_griewank(g, budget)
            if res.schedule is None:
                assert budget < peaks[0]
                continue
            sim = simulate(g, res.schedule, budget)
            assert sim.valid and sim.peak_memory <= budget
            old = [simulate(g, seq).makespan for s in range(1, L + 1)
                   if simulate(g, seq := griewank_sequence(g, s, reuse=False)).peak_memory <= budget]
            assert not old or res.objective <= min(old)


# --------------------------------------------------------------------------- 4. export-graph at impossible sizes


def test_export_graph_names_the_model_and_block_that_cannot_run(tmp_path):
    out = tmp_path / "bn1.json"
    r = run_cli("export-graph", "resnet18", "--batch", "1", "--image-size", "32", "--width", "8", "--depth", "1",
                "--device", "cpu", "-o", out)
    assert r.code == 2, r.err
    assert "internal error" not in r.err
    assert "MODEL" in r.err and "resnet18" in r.err and "batch 1" in r.err and "block" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not out.exists()


# --------------------------------------------------------------------------- 6. a structural refusal


@pytest.mark.parametrize("solver", ["sqrt", "greedy", "griewank"])
def test_a_refused_structure_is_printed_and_not_searched(solver, tmp_path, monkeypatch):
    from memsched.experiments.commands import _infeasible
    from memsched.solvers import registry

    g = generate.random_layered(7, seed=1)
    assert not any(g.backward)
    res = registry.solve("graph", g, solver, reference_peak(g))
    assert res.status == INFEASIBLE and res.details.get("not_applicable") is True
    monkeypatch.setattr(registry, "solve", lambda *a, **k: pytest.fail("searched a budget"))
    _infeasible.find_min_budget("graph", g, res, {})
    assert res.min_budget is None and "min_budget_note" not in res.details
    monkeypatch.undo()

    path = tmp_path / "dag.json"
    g.save(path)
    r = run_cli("solve", path, "--budget", "100%", "--solver", solver)
    assert r.code == 1
    assert "needs a training graph" in r.err
    assert "smallest feasible budget" not in r.err


# --------------------------------------------------------------------------- 7. cpsat's max_computations


def test_cpsat_max_computations_zero_is_refused_with_its_range(tmp_path):
    import memsched

    g = generate.linear_graph(3)
    with pytest.raises(InputError, match=r"1\.\.1000000"):
        memsched.solve(g, "100%", solver="cpsat", max_computations=0)
    path = tmp_path / "lin3.json"
    g.save(path)
    r = run_cli("solve", path, "--budget", "100%", "--solver", "cpsat", "--option", "max_computations=0")
    assert r.code == 2
    assert "--option max_computations" in r.err and "1..1000000" in r.err
    ok = run_cli("solve", path, "--budget", "100%", "--solver", "cpsat", "--option", "max_computations=1",
                 "--time-limit", "5")
    assert ok.code == 0, ok.err

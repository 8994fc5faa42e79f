"""Times of 1e-12 units (seconds of tiny layers) in the exact solvers: costs and ticks are scaled, never
rounded to 0 as "already whole" (`solvers.discretize`), and makespans are compared relatively, with no
absolute floor of 1e-9 units (`solvers.exact.layer`, `solvers.join.cpsat`). Each exact answer is at
least as fast as the problem's fast solvers, and its bound is below every schedule found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memsched.solvers.discretize import integer_costs, tick_scale, to_ticks

import memsched.api as api

pytest.importorskip("ortools")

#: relative slack for comparing makespans of different solvers (float sums)
RTOL = 1e-9

TINY_CHAIN = {"format": "memsched.chain/1", "name": "c", "input_size": 4, "stages": [
    {"fwd_time": 3e-12, "bwd_time": 2e-12, "out_size": 4, "tape_size": 8, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 1e-12, "bwd_time": 1e-12, "out_size": 2, "tape_size": 6, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 2e-12, "bwd_time": 1e-12, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 5e-12, "bwd_time": 1e-12, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0}],
    "loss": {"bwd_time": 1e-12, "bwd_overhead": 0}, "meta": {"units": {"time": "s", "memory": "bytes"}}}

ZERO_CHAIN = {"format": "memsched.chain/1", "name": "c", "input_size": 4, "stages": [
    {"fwd_time": 0, "bwd_time": 0, "out_size": 4, "tape_size": 8, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 0, "bwd_time": 0, "out_size": 2, "tape_size": 6, "fwd_overhead": 0, "bwd_overhead": 0},
    {"fwd_time": 0, "bwd_time": 0, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0}],
    "loss": {"bwd_time": 0, "bwd_overhead": 0}}

TINY_JOIN = {"format": "memsched.join/1", "name": "j", "branches": [
    {"input_size": 2, "stages": [
        {"fwd_time": 1e-12, "bwd_time": 2e-12, "out_size": 2, "tape_size": 4, "fwd_overhead": 0, "bwd_overhead": 0},
        {"fwd_time": 3e-12, "bwd_time": 1e-12, "out_size": 1, "tape_size": 2, "fwd_overhead": 0, "bwd_overhead": 0}]},
    {"input_size": 3, "stages": [
        {"fwd_time": 2e-12, "bwd_time": 1e-12, "out_size": 3, "tape_size": 5, "fwd_overhead": 1, "bwd_overhead": 0},
        {"fwd_time": 1e-12, "bwd_time": 1e-12, "out_size": 3, "tape_size": 5, "fwd_overhead": 0, "bwd_overhead": 0}]}],
    "loss": {"bwd_time": 1e-12, "bwd_overhead": 0}}

#: a PipeDream graph with times of 1e-12 s (one duplicated edge)
TINY_PIPE_GRAPH = """\
node5 -- Linear -- forward_compute_time=0.5e-12, backward_compute_time=1.0e-12, activation_size=10, parameter_size=100
node1 -- Input -- forward_compute_time=0e-12, backward_compute_time=0e-12, activation_size=40, parameter_size=0
node2 -- Conv -- forward_compute_time=1.0e-12, backward_compute_time=2.0e-12, activation_size=200, parameter_size=50
node3 -- ReLU -- forward_compute_time=0.0e-12, backward_compute_time=0.0e-12, activation_size=200, parameter_size=0
node4 -- Conv -- forward_compute_time=2.0e-12, backward_compute_time=3.0e-12, activation_size=100, parameter_size=80
\tnode1 -- node2
\tnode2 -- node3
\tnode2 -- node4
\tnode3 -- node4
\tnode2 -- node3
\tnode4 -- node5
"""


def _write(tmp_path: Path, name: str, data: Any) -> str:
    """`data` (a dict as JSON, or text) written to `tmp_path / name`; the path."""
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _honest(res: Any, makespans: list[float]) -> None:
    """`res` (an exact solver's `api` result) is at least as fast as every makespan found by the fast
    solvers, its bound below each of them and below its own makespan; ``optimal`` only with the bound
    at its makespan (relative `RTOL`)."""
    raw = res.raw
    assert res.makespan is not None
    for other in makespans:
        assert res.makespan <= other * (1 + RTOL), (raw.status, res.makespan, makespans, raw.message)
    bound = raw.lower_bound
    if bound is not None:
        assert bound <= min([res.makespan, *makespans]) * (1 + RTOL), (bound, res.makespan, makespans)
    if raw.status == "optimal":
        assert bound is not None and bound >= res.makespan * (1 - 1e-6), (bound, res.makespan, raw.scope)


# ------------------------------------------------------------------ discretize


def test_integer_costs_scale_tiny_costs_instead_of_rounding_them_to_zero() -> None:
    assert integer_costs([3e-12, 1e-12, 2e-12], digits=9) == ([3, 1, 2], 1e12, True)
    assert integer_costs([3e-10, 1e-10], digits=9) == ([3, 1], 1e10, True)
    ints, scale, exact = integer_costs([1.5e-15, 3.25e-15], digits=9)  # past 10^12: significant digits
    assert all(i > 0 for i in ints) and exact and ints[1] / ints[0] == pytest.approx(3.25 / 1.5)
    assert integer_costs([3.0, 0.0, 2.0]) == ([3, 0, 2], 1.0, True)  # whole costs unchanged
    assert integer_costs([0.1, 0.2, 0.3]) == ([1, 2, 3], 10.0, True)


def test_integer_costs_never_exact_when_a_nonzero_cost_becomes_zero() -> None:
    ints, scale, exact = integer_costs([1.5, 3e-12], digits=9)
    assert ints[1] == 0 and not exact  # the tiny cost is lost: the caller must allow for it
    ints, scale, exact = integer_costs([1.0, 1e-12], digits=9)
    assert ints[1] == 0 and not exact


def test_tick_scale_gives_tiny_durations_ticks() -> None:
    times = [3e-12, 1e-12, 2e-12]
    scale, exact = tick_scale(times)
    assert exact and all(to_ticks(t, scale) > 0 for t in times)
    assert [to_ticks(t, scale) / to_ticks(times[1], scale) for t in times] == [3, 1, 2]
    assert tick_scale([3, 1, 0]) == (1.0, True)
    assert tick_scale([0.5, 0.25]) == (100.0, True)
    assert tick_scale([0.0, 0.0]) == (1.0, True)
    scale, exact = tick_scale([1.0, 1e-12])  # no 10^k below 10^5: about 10^4 ticks, rounded up
    assert not exact and to_ticks(1e-12, scale) == 1


# ------------------------------------------------------------------ exact layer and join tolerances


def test_layer_compares_tiny_makespans_relatively() -> None:
    from memsched.solvers.exact import layer

    assert not layer._bound_reaches(1.7e-11, 2.8e-11)  # 2.8e-11 is 65% above the bound
    assert layer._bound_reaches(2.3e-11, 2.3e-11 * (1 + 1e-12))
    assert layer._bound_reaches(0.0, 0.0)
    assert not layer._bound_reaches(0.0, 6e-10)
    assert layer._honest_bound(1e-7, 1e-10) is None  # a bound 1000 times the objective is no bound
    assert layer._honest_bound(1e-10 * (1 + 1e-9), 1e-10) == 1e-10  # float noise: the objective


def test_join_reaches_is_relative() -> None:
    from memsched.solvers.join import cpsat

    assert not cpsat._reaches(1.5e-11, 1.3e-11)
    assert cpsat._reaches(1.3e-11, 1.3e-11)
    assert not cpsat._reaches(1e-12, 0.0)


# ------------------------------------------------------------------ exact solvers on tiny times


def test_chain_cpsat_tiny_times_not_slower_than_rotor(tmp_path: Path) -> None:
    chain = api.load(_write(tmp_path, "tiny.json", TINY_CHAIN))
    rotor = api.solve(chain, 20, "rotor")
    res = api.solve(chain, 20, "cpsat", time_limit=5)
    assert rotor.makespan is not None
    _honest(res, [rotor.makespan])


def test_graph_cpsat_tiny_times_without_warm_start(tmp_path: Path) -> None:
    from memsched.solvers.graph.generate import training_graph

    graph = training_graph([3e-12, 1e-12, 5e-12, 2e-12, 4e-12, 1e-12], [40, 10, 30, 20, 50, 10],
                           [(i, i + 1) for i in range(5)], bwd_cpu=[2e-12, 3e-12, 1e-12, 4e-12, 2e-12, 1e-12],
                           loss_cpu=1e-12, input_size=8)
    fast = api.solve(graph, "90%", "dtr-orders")
    assert fast.makespan is not None
    res = api.solve(graph, "90%", "cpsat", time_limit=5, warm_start=False)  # the model alone
    _honest(res, [fast.makespan])


def test_interleave_cpsat_tiny_times_not_slower_than_its_seed(tmp_path: Path) -> None:
    pipe = api.load(_write(tmp_path, "tiny.graph.txt", TINY_PIPE_GRAPH), problem="pipeline")
    fast = [api.solve(pipe, "100%", s, devices=2) for s in ("interleave", "interleave-v")]
    res = api.solve(pipe, "100%", "interleave-cpsat", devices=2, time_limit=5)
    _honest(res, [r.makespan for r in fast if r.makespan is not None])
    assert res.raw.lower_bound is not None and res.raw.lower_bound > 0


def test_offload_cpsat_zero_times_not_slower_than_store_all(tmp_path: Path) -> None:
    inst = api.load(_write(tmp_path, "zero.json", ZERO_CHAIN), problem="offload", bandwidth="1GB/s")
    store_all = api.solve(inst, "100%", "none")
    assert store_all.makespan == 0.0
    res = api.solve(inst, "100%", "cpsat", time_limit=5)
    _honest(res, [0.0])
    assert res.makespan == 0.0


def test_join_cpsat_tiny_times_no_false_every_op_once(tmp_path: Path) -> None:
    join = api.load(_write(tmp_path, "join.json", TINY_JOIN))
    dp = api.solve(join, "80%", "dp")
    assert dp.makespan is not None and dp.makespan > 1.3e-11 * (1 + 1e-6)  # dp recomputes at 80%
    res = api.solve(join, "80%", "cpsat", time_limit=5)
    _honest(res, [dp.makespan])
    assert "every operation once" not in res.raw.message + res.raw.scope


def test_join_cpsat_model_alone_tiny_times(tmp_path: Path) -> None:
    """The join phase model contains the DP's schedules: without a seed its optimum is no slower."""
    join = api.load(_write(tmp_path, "join.json", TINY_JOIN))
    dp = api.solve(join, "80%", "dp")
    res = api.solve(join, "80%", "cpsat", time_limit=5, warm_start=False)
    assert dp.makespan is not None
    _honest(res, [dp.makespan])

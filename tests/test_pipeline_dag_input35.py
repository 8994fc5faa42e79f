"""The network's input on a DAG with a second source: charged to the stage holding layer 0.

A PipeDream graph with a source that is not an ``Input`` (a constant) lets a DAG partition put
that source in a stage before the one holding layer 0 (the only reader of the input). The
documented model (docs/pipeline.md, simulator rules) has the input stashed by the stage holding
layer 0 and sent by no stage; `dag`, `dag-cpsat` and the simulator used to charge it to whichever
stage came first in the order instead.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from memsched.solvers.pipeline import Partition, from_graph_txt, simulate
from memsched.solvers.pipeline.dag_cpsat import solve_dag_cpsat
from memsched.solvers.pipeline.dag_dp import solve_dag
from memsched.solvers.pipeline.dp import solve_madpipe
from memsched.solvers.pipeline.instance import Pipeline


def graph(linear_act: int) -> str:
    """Input (1000 B) -> Linear (`linear_act` B) -> Add <- Const (10 B): Const is a second source."""
    return (
        "node0 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=1000.000, "
        "parameter_size=0.000\n"
        f"node1 -- Linear -- forward_compute_time=0.5, backward_compute_time=0.5, activation_size={linear_act}.000, "
        "parameter_size=0.000\n"
        "node2 -- Const -- forward_compute_time=2.5, backward_compute_time=2.5, activation_size=10.000, "
        "parameter_size=0.000\n"
        "node3 -- Add -- forward_compute_time=2.0, backward_compute_time=2.5, activation_size=10.000, "
        "parameter_size=0.000\n"
        "\tnode0 -- node1\n\tnode1 -- node3\n\tnode2 -- node3\n"
    )


def const_first(micro_batches: int | None = None) -> Partition:
    """{Const} | {Linear, Add} on 2 devices, 1F1B: the order [1, 0, 2] (Const, Linear, Add)."""
    part = Partition.from_bounds([(0, 0, 1), (1, 2, 1)], schedule="1f1b", micro_batches=micro_batches, devices=2)
    part.order = [1, 0, 2]
    return part


def test_simulator_charges_the_input_to_the_stage_holding_layer_0() -> None:
    """Stage 0 = {Const} keeps nothing and sends its 10 B; stage 1 = {Linear, Add} stashes the
    input (1000 B), Linear's output (5000 B) and Const's (10 B), plus the 10 B gradient buffer."""
    inst = from_graph_txt(graph(5000))
    ev = simulate(inst, const_first())
    assert ev.violation is None
    assert ev.stage_memory == [2 * 0 + 10, 1 * (1000 + 5000 + 10) + 10]
    assert ev.peak_memory == 6020


def test_reordered_instance_follows_the_input_reader() -> None:
    """`Pipeline.reordered` moves the input with layer 0: the stash of a stage starting at the
    Const holds the input only once the stage reaches Linear, and no cut carries it."""
    inst = from_graph_txt(graph(5000)).reordered([1, 0, 2])
    assert inst.input_layer == 1
    assert inst.stash(0).tolist() == [0, 1000, 6010]
    assert inst.stash(1).tolist() == [10 + 1000, 10 + 1000 + 5000]
    assert inst.input_of(0) == 0 and inst.input_of(1) == 10
    original = from_graph_txt(graph(5000))  # index order: layer 0 first, unchanged
    assert original.stash(0).tolist() == [1000, 1000, 6010]


@pytest.mark.parametrize("solve", [solve_dag, solve_dag_cpsat])
def test_no_partition_fits_when_every_split_needs_more(solve) -> None:
    """ms2 at 5020 B on 2 devices: {Const} | {Linear, Add} needs 6020 B (not 5020), the single
    stage 6010 B, the contiguous splits more: infeasible, least memory 6010 B as madpipe says."""
    inst = from_graph_txt(graph(5000))
    res = solve(inst, 5020, devices=2)
    assert res.status == "infeasible"
    assert res.min_budget == 6010
    chain = solve_madpipe(inst, 5020, devices=2)
    assert chain.status == "infeasible" and chain.min_budget == 6010


@pytest.mark.parametrize("solve", [solve_dag, solve_dag_cpsat])
def test_a_first_stage_without_layer_0_is_found(solve) -> None:
    """ms at 1030 B: {Const} | {Linear, Add} needs 1030 B (stage 1: 1000 + 10 + 10 stashed, 10
    buffered) and halves the period (5.5 ms against 10.5 for the single stage)."""
    inst = from_graph_txt(graph(10))
    res = solve(inst, 1030, devices=2)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(5.5)
    assert res.peak_memory == 1030
    assert res.schedule is not None and res.schedule.order == [1, 0, 2]
    assert simulate(inst, res.schedule).stage_memory == [10, 1030]


# ---------------------------------------------------------------- brute force on random DAGs
def _ideals(L: int, succ: list[list[int]]) -> list[frozenset[int]]:
    """Every set of layers closed under predecessors."""
    pred = [[u for u in range(L) if v in succ[u]] for v in range(L)]
    return [frozenset(v for v in range(L) if m >> v & 1) for m in range(1 << L)
            if all(all(m >> p & 1 for p in pred[v]) for v in range(L) if m >> v & 1)]


def _stage(inst: Pipeline, succ: list[list[int]], I: frozenset[int], J: frozenset[int], n: int, first: bool,
           last: bool) -> tuple[float, int]:
    """(tau, memory in bytes) of the stage J \\ I under docs/pipeline.md's rules (classic stash, no
    bandwidth): the input stashed by the stage holding layer 0."""
    st = J - I

    def cut(K: frozenset[int]) -> int:
        return sum(int(inst.act[u]) for u in K if any(v not in K for v in succ[u]))

    A = cut(I) + (int(inst.input_size) if 0 in st else 0) + sum(
        int(inst.act[l]) for l in st if any(v in st for v in succ[l]))
    W = sum(int(inst.params[l]) for l in st)
    M = math.ceil(inst.weight_factor * W) + n * A + (0 if first else cut(I)) + (0 if last else cut(J))
    return float(sum(inst.fwd[l] + inst.bwd[l] for l in st)), M


def _brute(inst: Pipeline, P: int, budget: int) -> tuple[float | None, int]:
    """(best period within `budget` or None, least peak) over every chain of <= P ideals, 1F1B."""
    L, succ = inst.length, inst.succ
    assert succ is not None
    full = frozenset(range(L))
    ids = sorted(_ideals(L, succ), key=len)
    best, least = None, None
    for S in range(1, P + 1):
        for mids in itertools.combinations(ids[1:-1], S - 1):
            path = [frozenset(), *mids, full]
            if not all(a < b for a, b in zip(path, path[1:])):
                continue
            res = [_stage(inst, succ, path[s], path[s + 1], S - s, s == 0, s == S - 1) for s in range(S)]
            period, peak = max(t for t, _ in res), max(m for _, m in res)
            least = peak if least is None else min(least, peak)
            if peak <= budget and (best is None or period < best):
                best = period
    assert least is not None
    return best, least


def _random_dag(rng: random.Random) -> Pipeline:
    """3..6 layers, some of them extra sources (no predecessor), a nonzero input read by layer 0."""
    L = rng.randint(3, 6)
    succ: list[list[int]] = [[] for _ in range(L)]
    for v in range(1, L):
        if rng.random() < 0.35:
            continue
        for u in rng.sample(range(v), rng.randint(1, min(2, v))):
            succ[u].append(v)
    if not succ[0]:
        succ[0].append(rng.randint(1, L - 1))
    return Pipeline(fwd=[rng.randint(0, 5) for _ in range(L)], bwd=[rng.randint(0, 5) for _ in range(L)],
                    act=[rng.randint(1, 50) for _ in range(L)], params=[rng.randint(0, 20) for _ in range(L)],
                    input_size=rng.randint(50, 200), succ=succ)


def test_dag_solvers_match_the_brute_force_on_dags_with_extra_sources() -> None:
    """`dag` (every instance) and `dag-cpsat` (every fourth) against the brute force: the same
    optimal period or the same least memory; the solvers' peak is the simulator's."""
    for k in range(60):
        rng = random.Random(35_000 + k)
        inst = _random_dag(rng)
        P = rng.randint(2, 3)
        _, least = _brute(inst, P, 10**12)
        budget = rng.randint(least - 20, least + 200)
        best, _ = _brute(inst, P, budget)
        for solve in (solve_dag, solve_dag_cpsat) if k % 4 == 0 else (solve_dag,):
            res = solve(inst, budget, devices=P)
            if best is None:
                assert res.status == "infeasible" and res.min_budget == least, (k, solve.__name__)
            else:
                assert res.status == "optimal" and res.objective == pytest.approx(best), (k, solve.__name__)
                assert res.schedule is not None and res.peak_memory is not None and res.peak_memory <= budget
                assert simulate(inst, res.schedule).peak_memory == res.peak_memory


def test_measured_saves_charge_the_kept_input_to_the_stage_holding_layer_0() -> None:
    """With measured saves the input counts on the stage holding layer 0 when it is kept
    (``input_saved``), and nowhere when it is not."""
    base = from_graph_txt(graph(5000))
    saved_by = [[2], [2], [2]]  # Add keeps both its inputs and its own output (layers: Linear, Const, Add)
    for kept in (True, False):
        inst = Pipeline(fwd=base.fwd, bwd=base.bwd, act=base.act, params=base.params, input_size=1000,
                        succ=base.succ, saved_by=saved_by, input_saved=kept)
        ev = simulate(inst, const_first())
        assert ev.stage_memory == [10, (1000 if kept else 0) + 5000 + 10 + 10 + 10]
        res = solve_dag(inst, ev.peak_memory, devices=2)
        assert res.status == "optimal" and res.peak_memory <= ev.peak_memory


def test_a_reordered_pipeline_written_as_graph_txt_loads_back() -> None:
    """`Pipeline.to_graph_txt` of a pipeline whose input reader is not first in its order (a DAG
    reordered with another source first) loads back with the same layers and the same input
    layer (the loader refused it: "charges the input to the first layer only")."""
    import numpy as np

    p = Pipeline(fwd=np.array([1.0, 1.0, 1.0]), bwd=np.array([2.0, 2.0, 2.0]), act=np.array([10, 20, 30]),
                 params=np.array([1, 1, 1]), input_size=100, succ=[[2], [2], []], name="two-src")
    q = p.reordered([1, 0, 2])
    assert q.input_layer == 1
    back = from_graph_txt(q.to_graph_txt(), path="q.graph.txt")
    assert back.input_layer == 1 and back.input_size == 100
    assert list(back.act) == list(q.act) and back.succ == q.succ
    assert all(np.array_equal(back.stash(i), q.stash(i)) for i in range(3))


def test_an_input_read_by_two_layers_is_refused_naming_both() -> None:
    from memsched.solvers.errors import InputError

    text = ("node0 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=100.0, "
            "parameter_size=0.0\n"
            "node1 -- a -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=10.0, "
            "parameter_size=0.0\n"
            "node2 -- b -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=10.0, "
            "parameter_size=0.0\n"
            "\tnode0 -- node1\n\tnode0 -- node2\n\tnode1 -- node2\n")
    with pytest.raises(InputError) as err:
        from_graph_txt(text, path="g.txt")
    assert err.value.field == "line 1" and "'node2'" in err.value.message and "'node1'" in err.value.message

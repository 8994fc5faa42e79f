"""Measured saves in the pipeline model (`Pipeline.saved_by`, `saved_extra`, `input_saved`): the
stash A_s counts what autograd keeps (docs/pipeline.md), the chain and DAG DPs charge exactly the
simulator's memory with it, and graph.txt profiles carry it as optional fields."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, Pipeline, simulate
from memsched.solvers.pipeline.dag_dp import dag_partition_dp, solve_dag, stage_tables, to_partition
from memsched.solvers.pipeline.dp import solve_madpipe
from memsched.solvers.pipeline.instance import from_graph_txt
from memsched.solvers.pipeline.lattice import ideal_lattice
from memsched.solvers.result import INFEASIBLE, OPTIMAL


def measured_dag(seed: int, L: int = 7, chain: bool = False) -> Pipeline:
    """A random layer DAG (or chain) whose layers keep a random subset of {itself} + consumers
    of each output, and random extra saved bytes."""
    rng = np.random.default_rng(seed)
    succ = [[l + 1] for l in range(L - 1)] + [[]]
    if not chain:
        for u in range(L - 2):
            for v in range(u + 2, L):
                if rng.random() < 0.35:
                    succ[u].append(v)
    saved_by = [[w for w in [v, *succ[v]] if rng.random() < 0.5] for v in range(L)]
    return Pipeline(
        fwd=rng.uniform(1, 10, L),
        bwd=rng.uniform(1, 20, L),
        act=rng.integers(1, 100, L) * 1000,
        params=rng.integers(0, 50, L) * 1000,
        input_size=5000,
        succ=succ,
        saved_by=saved_by,
        saved_extra=rng.integers(0, 3, L) * 700,
        input_saved=bool(seed % 2),
        name=f"saved{seed}",
    )


def expected_stash(inst: Pipeline, stage: set[int], first: bool) -> int:
    """The rule written out on sets: each output kept by a layer of the stage, once, plus extras."""
    assert inst.saved_by is not None and inst.saved_extra is not None
    total = sum(int(inst.act[v]) for v in range(inst.length) if set(inst.saved_by[v]) & stage)
    total += sum(int(inst.saved_extra[v]) for v in stage)
    return total + (int(inst.input_size) if first and inst.input_saved else 0)


def test_classic_stash_is_unchanged_without_saved_by():
    inst = Pipeline(
        fwd=[1, 2, 3], bwd=[1, 2, 3], act=[10, 20, 30], params=[0, 0, 0], input_size=7, succ=[[1, 2], [2], []]
    )
    for i in range(3):
        assert list(inst.stash(i)) == list(inst.input_of(i) + inst.internal_stash(i))
    with_extra = Pipeline(
        fwd=[1, 2, 3],
        bwd=[1, 2, 3],
        act=[10, 20, 30],
        params=[0, 0, 0],
        input_size=7,
        succ=[[1, 2], [2], []],
        saved_extra=[1, 2, 4],
    )
    assert list(with_extra.stash(0)) == list(inst.stash(0) + np.array([1, 3, 7]))


def test_stage_tables_and_pipeline_stash_follow_the_rule():
    for seed in range(5):
        inst = measured_dag(seed)
        lat = ideal_lattice(inst)
        members = [set(np.flatnonzero(lat.contains[:, k]).tolist()) for k in range(lat.n)]
        for i in range(lat.n):
            tab = stage_tables(inst, lat, i)
            for col, j in enumerate(tab["J"]):
                want = expected_stash(inst, members[int(j)] - members[i], not members[i])
                assert int(tab["stash"][col]) == want
        for i in range(inst.length):  # the chain view (index order)
            got = inst.stash(i)
            for j in range(i, inst.length):
                assert int(got[j - i]) == expected_stash(inst, set(range(i, j + 1)), i == 0)


def test_saved_by_must_name_the_layer_or_its_consumers():
    with pytest.raises(ValueError, match="saved_by"):
        Pipeline(fwd=[1, 1], bwd=[1, 1], act=[1, 1], params=[0, 0], succ=[[1], []], saved_by=[[1], [0]])


def _brute_dag(inst: Pipeline, P: int, budget: int | None) -> float:
    lat = ideal_lattice(inst)
    full = int(np.flatnonzero(lat.size == inst.length)[0])
    best = math.inf

    def rec(i: int, stages: list[tuple[int, int, int]]) -> None:
        nonlocal best
        if i == full:
            ev = simulate(inst, to_partition(inst, lat, stages, P, "1f1b", None), budget, devices=P)
            if ev.violation is None:
                best = min(best, ev.period)
            return
        if len(stages) < P:
            for j in lat.supersets(i):
                rec(int(j), stages + [(i, int(j), 1)])

    rec(int(np.flatnonzero(lat.size == 0)[0]), [])
    return best


def test_dag_dp_with_measured_saves_equals_brute_force():
    for seed in range(4):
        inst = measured_dag(seed, L=6)
        need = dag_partition_dp(inst, ideal_lattice(inst), 3, None, objective="memory")
        assert need is not None
        for P in (2, 3):
            for budget in (int(need[0]), int(need[0] * 1.2), None):
                want = _brute_dag(inst, P, budget)
                res = solve_dag(inst, budget, devices=P)  # type: ignore[arg-type]
                if math.isinf(want):
                    assert res.status == INFEASIBLE
                    continue
                assert res.status == OPTIMAL and res.objective == pytest.approx(want, rel=1e-9)


def test_chain_dp_with_measured_saves_equals_brute_force():
    for seed in range(4):
        inst = measured_dag(seed, L=6, chain=True)
        L = inst.length
        mems = []
        for cuts in itertools.chain.from_iterable(itertools.combinations(range(1, L), k) for k in range(3)):
            edges = [0, *cuts, L]
            part = Partition.from_bounds([(a, b - 1) for a, b in zip(edges, edges[1:])])
            ev = simulate(inst, part)
            mems.append((ev.peak_memory, ev.period))
        budget = sorted(m for m, _ in mems)[len(mems) // 2]
        want = min(p for m, p in mems if m <= budget)
        res = solve_madpipe(inst, budget, devices=3)
        assert res.status == OPTIMAL and res.objective == pytest.approx(want, rel=1e-9)


def test_graph_txt_round_trip_and_errors():
    inst = measured_dag(3)
    back = from_graph_txt(inst.to_graph_txt())
    assert back.saved_by == inst.saved_by and back.input_saved == inst.input_saved
    assert list(back.saved_extra) == list(inst.saved_extra)  # type: ignore[arg-type]
    for i in range(inst.length):
        assert list(back.stash(i)) == list(inst.stash(i))
    old = re.sub(r", saved_(extra|by)=[^,\n]*", "", inst.to_graph_txt())
    assert from_graph_txt(old).saved_by is None  # files without the fields: the classic stash
    bad = re.sub(r"^(node3 -- .*saved_by=\[)", r"\1node1; ", inst.to_graph_txt(), flags=re.M)  # not a consumer
    with pytest.raises(InputError, match="saved_by"):
        from_graph_txt(bad)

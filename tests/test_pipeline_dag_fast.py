"""The batched DAG DP (`dag_partition_dp`: ideals of one size solved together, live states only
under an upper bound) gives the same value and the same stages as the per-ideal recurrence it
replaced (`reference_dp` below, that DP step by step), on random DAGs (classic and measured
stash, GPipe, replication, bandwidth) and on PipeDream's profiles; `pair_tables` equals
`stage_tables` on every pair."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import random_dag
from memsched.solvers.pipeline import Pipeline, load
from memsched.solvers.pipeline.dag_dp import dag_partition_dp, lattice_for, pair_tables, stage_tables
from memsched.solvers.pipeline.dp import partition_dp
from memsched.solvers.pipeline.lattice import Lattice, ideal_lattice

PIPEDREAM = Path(__file__).resolve().parents[1] / "solvers" / "data" / "pipeline" / "pipedream"
INF = math.inf


def reference_dp(
    inst: Pipeline,
    lat: Lattice,
    P: int,
    budget: int | None,
    *,
    schedule: str = "1f1b",
    m: int = 0,
    replication: bool = False,
    objective: str = "period",
    upper: float | None = None,
):
    """The recurrence of `solvers.pipeline.dag_dp`, one ideal at a time, every stage and d
    (ties: the smallest r, then the smallest index of J)."""
    G = np.full((lat.n, P + 1), INF)
    full = int(np.flatnonzero(lat.size == inst.length)[0])
    G[full, 0] = 0.0
    choice = {}
    memory = objective == "memory"
    limit = INF if budget is None or memory else float(budget)
    cap = INF if upper is None or memory else upper * (1 + 1e-9)
    for i in np.argsort(-lat.size, kind="stable"):
        i = int(i)
        if i == full:
            continue
        t = stage_tables(inst, lat, i)
        ar = inst.comm_time(1.0) * 4.0 * t["W"]
        for r in range(1, P + 1) if replication else (1,):
            tau = (t["fb"] + ar * (r - 1) / r) / r
            for d in range(r, P + 1):
                n = -(-d // r) if schedule == "1f1b" else -(-m // r)
                mem = t["wmem"] + n * t["stash"] + t["buffers"]
                rest = G[t["J"], d - r]
                if memory:
                    v = np.maximum(mem.astype(float), rest)
                else:
                    v = np.where(mem <= limit, np.maximum(np.maximum(tau, t["link"] / r), rest), INF)
                k = int(np.argmin(v))  # the first J of the smallest value
                if v[k] < G[i, d]:
                    G[i, d], choice[(i, d)] = v[k], (int(t["J"][k]), r)
    empty = int(np.flatnonzero(lat.size == 0)[0])
    d_best = int(np.argmin(G[empty, 1:])) + 1
    if not (math.isfinite(G[empty, d_best]) and G[empty, d_best] <= cap):
        return None
    stages, i, d = [], empty, d_best
    while i != full:
        j, r = choice[(i, d)]
        stages.append((i, j, r))
        i, d = j, d - r
    return float(G[empty, d_best]), stages


def measured(inst: Pipeline, seed: int) -> Pipeline:
    """`inst` with a measured stash: each layer's output saved by itself or some consumers."""
    rng = np.random.default_rng(seed)
    succ = inst.succ or [[l + 1] for l in range(inst.length - 1)] + [[]]
    saved_by = [[w for w in [l, *vs] if rng.random() < 0.6] for l, vs in enumerate(succ)]
    inst.saved_by, inst.saved_extra = saved_by, rng.integers(0, 3, inst.length) * 1000
    inst.__post_init__()
    return inst


def same(got, want) -> bool:
    """Same value and stages (None: nothing within the cap)."""
    return (got is None and want is None) or (
        got is not None and want is not None and got[0] == want[0] and got[1] == want[1]
    )


@pytest.mark.parametrize("seed", range(4))
def test_batched_dp_equals_the_per_ideal_recurrence(seed):
    for kind in ("classic", "measured"):
        inst = random_dag(seed, L=8)
        if kind == "measured":
            inst = measured(inst, seed)
        lat = ideal_lattice(inst)
        whole = reference_dp(inst, lat, 3, None, objective="memory")
        assert same(dag_partition_dp(inst, lat, 3, None, objective="memory"), whole)
        for budget in (None, int(whole[0] * 1.3), int(whole[0] * 0.99)):
            for P, rep, bw, sched in ((3, False, None, "1f1b"), (4, True, 2e6, "1f1b"), (3, False, 2e6, "gpipe")):
                inst.bandwidth = bw
                m = 4 if sched == "gpipe" else 0
                want = reference_dp(inst, lat, P, budget, schedule=sched, m=m, replication=rep)
                got = dag_partition_dp(inst, lat, P, budget, schedule=sched, micro_batches=m, replication=rep)
                assert same(got, want), (kind, budget, P, rep, sched)
                chain = partition_dp(inst, P, budget, schedule=sched, micro_batches=m, replication=rep)
                if chain is not None:  # with the contiguous DP's period as the upper bound
                    up = reference_dp(inst, lat, P, budget, schedule=sched, m=m, replication=rep, upper=chain[0])
                    got = dag_partition_dp(
                        inst, lat, P, budget, schedule=sched, micro_batches=m, replication=rep, upper=chain[0]
                    )
                    assert same(got, up), (kind, budget, P, rep, sched, "upper")
                    assert same(got, want if want is not None and want[0] <= chain[0] * (1 + 1e-9) else None)


def test_pair_tables_equal_stage_tables():
    for inst in (random_dag(3, L=9), measured(random_dag(4, L=9), 4)):
        inst.bandwidth = 1e6
        lat = ideal_lattice(inst)
        for i in range(lat.n):
            t = stage_tables(inst, lat, i)
            if len(t["J"]) == 0:
                continue
            p = pair_tables(inst, lat, np.full(len(t["J"]), i), t["J"])
            for key in ("fb", "W", "wmem", "stash", "buffers"):
                assert np.array_equal(p[key], t[key]), key
            assert np.all(p["link"] == t["link"])


@pytest.mark.parametrize("name,P,modes", [("resnet18", 4, 2), ("squeezenet1_0", 8, 2), ("resnet50", 8, 1)])
def test_same_plan_as_the_per_ideal_dp_on_pipedream_profiles(name, P, modes):
    """PipeDream's profiles, compute only (and at 1 GB/s with replication), without and with
    16 GB per device, the contiguous DP's period as upper bound (as `plan` runs it)."""
    base = load(PIPEDREAM / f"{name}.graph.txt")
    for bw, rep, states in ((None, False, 5000), (1e9, True, 300))[:modes]:
        inst = base.with_machine(bandwidth=bw)
        lat = lattice_for(inst, states)
        for budget in (None, 16_000_000_000):
            chain = partition_dp(inst, P, budget, replication=rep)
            up = chain[0] if chain is not None else None
            want = reference_dp(inst, lat, P, budget, replication=rep, upper=up)
            assert same(dag_partition_dp(inst, lat, P, budget, replication=rep, upper=up), want), (bw, budget)

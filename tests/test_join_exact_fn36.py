"""Hunt 36: the join `exact` A* (`solvers/join/astar.py`, `search`) pruned F_n(i) while the tape
abar_{i+1} was resident, as "a standalone copy of an activation whose tape is resident". But F_n(i) is
the only operation that frees a standalone a_i before B(i): F_all(i) then F_n(i) drops a_i before the
loss and lowers the loss's peak. On the hunt's join (`PRUNE_34`) `exact` said infeasible at 27 and 28
(smallest feasible budget 29) while F_ck(0,0) F_all(0,1) F_n(0,1) F_ck(1,0) Loss F_all(1,0) B(1,0)
F_all(0,0) B(0,1) B(0,0) replays at 27 in 22 time units. F_n now runs whenever it frees a standalone
a_i (i >= 1); the search is checked against an independent Dijkstra over the simulator's rules.
"""

from __future__ import annotations

import heapq
import json
import math

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain.simulator import op_cost, stage_precondition
from memsched.solvers.join import simulate
from memsched.solvers.join.astar import search
from memsched.solvers.join.instance import Join
from memsched.solvers.join.schedule import LOSS_OP, JoinSchedule, JOp
from memsched.solvers.result import INFEASIBLE, OPTIMAL


def _stage(name: str, fwd: int, bwd: int, out: int, tape: int, fo: int, bo: int, **extra: int) -> dict:
    return {"name": name, "fwd_time": fwd, "bwd_time": bwd, "out_size": out, "tape_size": tape,
            "fwd_overhead": fo, "bwd_overhead": bo, **extra}


#: the hunt's instance (/tmp/work/hunt_join/prune_34.json): least budget 27, optimum 22 at 27 and 28, 19 at 29
PRUNE_34 = {
    "format": "memsched.join/1", "name": "r",
    "branches": [
        {"name": "b0", "input_size": 5, "stages": [
            _stage("s00", 2, 1, 5, 5, 5, 1, fwd_time_all=2, fwd_time_nograd=1, fwd_overhead_all=5,
                   fwd_overhead_nograd=1),
            _stage("s01", 2, 1, 3, 3, 8, 1, fwd_overhead_all=8, fwd_overhead_nograd=1)]},
        {"name": "b1", "input_size": 5, "stages": [_stage("s10", 3, 5, 1, 3, 2, 0)]}],
    "loss": {"bwd_time": 2, "bwd_overhead": 6},
}
HUNT_SCHEDULE = [JOp("F_ck", 0, 0), JOp("F_all", 0, 1), JOp("F_n", 0, 1), JOp("F_ck", 1, 0), LOSS_OP,
                 JOp("F_all", 1, 0), JOp("B", 1, 0), JOp("F_all", 0, 0), JOp("B", 0, 1), JOp("B", 0, 0)]


def _join(data: dict) -> Join:
    return Join.from_dict(json.loads(json.dumps(data)))


# --------------------------------------------------------------------------- the hunt's join
def test_hunt_schedule_replays_at_27():
    sim = simulate(_join(PRUNE_34), JoinSchedule(HUNT_SCHEDULE, [2, 1]), 27)
    assert sim.valid, sim.violation
    assert (sim.makespan, sim.peak_memory) == (22, 27)


@pytest.mark.parametrize(("budget", "makespan"), [(27, 22), (28, 22), (29, 19)])
def test_exact_finds_the_optimum_freeing_a_i_under_its_tape(budget: int, makespan: float):
    join = _join(PRUNE_34)
    res = registry.solve("join", join, "exact", budget, time_limit=20)
    assert res.status == OPTIMAL, res.message
    assert res.objective == pytest.approx(makespan)
    sim = simulate(join, res.schedule, budget)
    assert sim.valid and sim.makespan == pytest.approx(makespan) and sim.peak_memory <= budget


def test_exact_smallest_feasible_budget_is_27(tmp_path):
    path = tmp_path / "prune_34.json"
    path.write_text(json.dumps(PRUNE_34))
    res = run_cli("solve", path, "--budget", "26", "--solver", "exact", "--time-limit", "20", "--json")
    out = json.loads(res.out)
    assert out["status"] == INFEASIBLE
    assert out["min_budget"] == 27, out


# --------------------------------------------------------------------------- independent brute force
State = tuple  # (per branch (standalone a_j, tapes abar_j, gradients delta_j, stages whose B ran), loss ran)


def _start(join: Join) -> State:
    return (tuple((frozenset({0}), frozenset(), frozenset(), frozenset()) for _ in join.branches), False)


def _moves(join: Join, s: State, mem: int):
    """Every operation the join simulator accepts in state `s` (memory `mem`), nothing pruned: its
    `stage_precondition`, `op_cost` and the frees of its rules table. Yields (next state, memory while
    it runs, memory after, time)."""
    branches, loss = s
    br = join.branches
    if not loss and all(c.length in a or c.length in t for c, (a, t, _, _) in zip(br, branches)):
        new = tuple((a - {c.length}, t, g | {c.length}, dn) for c, (a, t, g, dn) in zip(br, branches))
        out = sum(int(c.x[c.length]) for c in br)
        freed = sum(int(c.x[c.length]) for c, (a, _, _, _) in zip(br, branches) if c.length in a)
        yield (new, True), mem + out + join.loss_overhead, mem + out - freed, join.loss_time
    for b, c in enumerate(br):
        a, t, g, dn = branches[b]
        for kind in ("F_all", "F_ck", "F_n", "B"):
            for i in range(c.length):
                if stage_precondition(kind, i, a, t, g, dn) is not None:
                    continue
                out, ovh, dt = op_cost(c, kind, i)
                after = mem + out
                if kind == "F_all":
                    nb = (a, t | {i + 1}, g, dn)
                elif kind == "F_ck":
                    nb = (a | {i + 1}, t, g, dn)
                elif kind == "F_n":
                    nb = ((a | {i + 1}) - {i}, t, g, dn)
                    after -= int(c.x[i]) if i in a else 0
                else:
                    nb = (a - {i}, t - {i + 1}, (g | {i}) - {i + 1}, dn | {i})
                    after -= int(c.xbar[i + 1]) + int(c.x[i + 1]) + (int(c.x[i]) if i in a else 0)
                yield (branches[:b] + (nb,) + branches[b + 1:], loss), mem + out + ovh, after, dt


def _done(s: State) -> bool:
    return s[1] and all(0 in g for (_, _, g, _) in s[0])


def _brute(join: Join, budget: int | None) -> float:
    """Dijkstra over the simulator's states (`_moves`). With a `budget`: the least makespan of a
    complete schedule whose every operation runs within it (inf when none fits); without: the least
    budget of a complete schedule (the least peak, a bottleneck shortest path)."""
    start = _start(join)
    mem0 = join.input_total()
    if budget is not None and mem0 > budget:
        return math.inf
    first = 0.0 if budget is not None else float(mem0)
    dist = {start: first}
    heap = [(first, 0, start, mem0)]
    n = 1
    while heap:
        d, _, s, mem = heapq.heappop(heap)
        if d > dist[s]:
            continue
        if _done(s):
            return d
        for s2, during, after, dt in _moves(join, s, mem):
            if budget is not None and during > budget:
                continue
            d2 = d + dt if budget is not None else max(d, during)
            if d2 < dist.get(s2, math.inf) - 1e-12:
                dist[s2] = d2
                heapq.heappush(heap, (d2, n, s2, after))
                n += 1
    return math.inf


def test_brute_force_agrees_with_the_hunt():
    join = _join(PRUNE_34)
    assert _brute(join, None) == 27
    assert [_brute(join, m) for m in (26, 27, 28, 29)] == [math.inf, 22, 22, 19]


@st.composite
def tiny_joins(draw) -> dict:
    """Two branches of 1-2 stages, sizes 1-5, tapes at least the output, per-mode overheads of 0-8 (an F_all
    dear in memory is when F_all(i) then F_n(i) pays) and per-mode times."""
    branches = []
    for b in range(2):
        stages = []
        for i in range(draw(st.integers(1, 2))):
            out = draw(st.integers(1, 5))
            ofa, ofn = draw(st.integers(0, 8)), draw(st.integers(0, 8))
            ufa = draw(st.integers(1, 4))
            ufn = draw(st.integers(0, ufa))
            stages.append(_stage(f"s{b}{i}", ufa, draw(st.integers(1, 5)), out, out + draw(st.integers(0, 2)),
                                 max(ofa, ofn), draw(st.integers(0, 2)), fwd_overhead_all=ofa,
                                 fwd_overhead_nograd=ofn, fwd_time_all=ufa, fwd_time_nograd=ufn))
        branches.append({"name": f"b{b}", "input_size": draw(st.integers(1, 5)), "stages": stages})
    loss = {"bwd_time": draw(st.integers(0, 2)), "bwd_overhead": draw(st.integers(0, 8))}
    return {"format": "memsched.join/1", "name": "tiny", "branches": branches, "loss": loss}


def _tiny(branches: list[tuple[int, list[dict]]], loss_time: int, loss_overhead: int) -> dict:
    return {"format": "memsched.join/1", "name": "tiny", "loss": {"bwd_time": loss_time, "bwd_overhead": loss_overhead},
            "branches": [{"name": f"b{b}", "input_size": x0, "stages": st_} for b, (x0, st_) in enumerate(branches)]}


def _modes(name: str, out: int, ofa: int, ofn: int, ufa: int, ufn: int, bwd: int, bo: int) -> dict:
    """A stage whose tape is its output, with per-mode forward overheads and times."""
    return _stage(name, ufa, bwd, out, out, max(ofa, ofn), bo, fwd_overhead_all=ofa, fwd_overhead_nograd=ofn,
                  fwd_time_all=ufa, fwd_time_nograd=ufn)


#: two joins of a seeded sweep of `tiny_joins`' distribution where the old search said infeasible at the least
#: budget (21 and 25, optima 24 and 17): each has a stage 1 whose F_all is dear (o_fa 8)
SWEEP_45 = _tiny([(2, [_modes("s00", 4, 3, 8, 2, 0, 3, 2), _modes("s01", 2, 8, 7, 3, 0, 5, 1)]),
                  (4, [_modes("s10", 2, 6, 3, 1, 0, 3, 2), _modes("s11", 2, 7, 7, 3, 3, 2, 1)])], 2, 1)
SWEEP_52 = _tiny([(2, [_modes("s00", 1, 6, 3, 2, 2, 5, 0)]),
                  (3, [_modes("s10", 5, 2, 4, 1, 0, 2, 2), _modes("s11", 4, 8, 3, 3, 0, 2, 1)])], 2, 6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_joins(), st.integers(-1, 3))
@example(SWEEP_45, 0)
@example(SWEEP_52, 0)
@example(PRUNE_34, 0)
def test_exact_search_equals_brute_force(data: dict, offset: int):
    join = _join(data)
    budget = int(_brute(join, None)) + offset
    want = _brute(join, budget)
    status, value, ops, _ = search(join, budget, time_limit=30)
    if math.isinf(want):
        assert status == "infeasible"
        return
    assert status == "optimal" and value == pytest.approx(want), (status, value, want)
    sim = simulate(join, JoinSchedule(ops or [], join.lengths), budget)
    assert sim.valid, sim.violation
    assert sim.makespan == pytest.approx(want)

"""The exact offloading models (`exact-combined`, `offload-exact`) keep the schedules that recompute a_{j+1}
while the tape abar_{j+1} is on the host.

The chain model's dominance rule "no F_ck(j) while abar_{j+1} lives" does not hold once tapes can travel:
on the chain below, F_ck(0) rebuilds a_1 while abar_1 waits on the host, a valid 19.0 schedule that both
models had ruled out (they claimed ``optimal`` 20.0 with ``lower_bound`` 20.0). The property test builds,
independently of the models, every phase-form compute sequence of small chains with at most one Off/Pre
pair and checks that no such schedule, nor a fast solver's, beats a proven optimum or its bound.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from memsched.solvers import registry
from memsched.solvers.chain import Chain
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.schedule import Op
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.schedule import Off, OffloadSchedule, Pre

EXACT = ("exact-combined", "offload-exact")
FAST = ("pofo", "rotor-offload", "remat-only", "offload-prefix", "vdnn", "none")
TOL = 1e-9


def _instance(uf: list[int], ub: list[int], x: list[int], xbar: list[int], per_byte: float) -> OffloadInstance:
    """A chain of L = len(uf) stages (whole time units, no overheads) whose link moves a byte in `per_byte` units."""
    L = len(uf)
    chain = Chain(u_f=np.array([*uf, 0], dtype=float), u_b=np.array(ub, dtype=float), x=np.array([*x, 0]),
                  xbar=np.array([0, *xbar, 0]), o_f=np.zeros(L + 1, int), o_b=np.zeros(L + 1, int))
    return OffloadInstance(chain, bandwidth=chain.time_units_per_second() / per_byte)


REPRO = _instance([2, 3, 3], [2, 3, 2, 1], [4, 2, 1, 3], [3, 2, 5], 2.0)
#: F_ck(0) rebuilds a_1 while abar_1 is on the host (outside the chain model's dominance rules)
REPRO_SCHEDULE = [Op("F_all", 0), Op("F_all", 1), Off("abar", 1), Op("F_all", 2), Op("Loss", 3), Op("B", 2),
                  Op("F_ck", 0), Pre("abar", 1), Op("B", 1), Op("B", 0)]


def test_repro_schedule_is_valid() -> None:
    sim = simulate(REPRO, OffloadSchedule(REPRO_SCHEDULE, 3), 16)
    assert sim.valid and sim.makespan == pytest.approx(19.0) and sim.peak_memory <= 16


@pytest.mark.parametrize("name", EXACT)
def test_exact_models_find_the_recompute_while_offloaded_schedule(name: str) -> None:
    r = registry.solve("offload", REPRO, name, 16, slots=0, time_limit=20)
    assert r.schedule is not None and r.objective is not None
    assert r.objective <= 19.0 + TOL
    if r.lower_bound is not None:
        assert r.lower_bound <= 19.0 + TOL
    assert simulate(REPRO, r.schedule, 16).valid


def phase_form(L: int) -> list[list[Op]]:
    """Every phase-form compute sequence (phases L..0, each stage at most once per phase in increasing order,
    stage k of phase k < L only F_all) that the simulator accepts with unlimited memory; no dominance rule."""
    phases = []
    for k in range(L, -1, -1):
        choices = []
        for j in range(min(k, L - 1) + 1):
            kinds = [None, "F_all"] + ([] if j == k else ["F_ck", "F_n"])
            choices.append([None if kd is None else Op(kd, j) for kd in kinds])
        end = Op("Loss", L) if k == L else Op("B", k)
        phases.append([[op for op in combo if op is not None] + [end] for combo in itertools.product(*choices)])
    # prune phase by phase: a prefix the simulator rejects (with the memory unlimited) has no valid completion
    prefixes: list[list[Op]] = [[]]
    for options in phases:
        prefixes = [p + ph for p in prefixes for ph in options]
        prefixes = [p for p in prefixes if _legal_prefix(L, p)]
    return prefixes


def _legal_prefix(L: int, ops: list[Op]) -> bool:
    """Whether `ops` runs in the simulator with unlimited memory (a prefix: only its own violations count)."""
    sim = simulate(_UNLIMITED[L], OffloadSchedule(ops, L), None)
    return sim.violation is None or sim.violation.op is None  # only "incomplete": the backward ops still to come


_UNLIMITED = {L: _instance([1] * L, [1] * (L + 1), [1] * (L + 1), [1] * L, 1.0) for L in (2, 3)}


def _reads(op: Op, v: tuple[str, int]) -> bool:
    """Whether compute op `op` may read value v (stage-wise: the simulator picks the container)."""
    return op.index == v[1] or (v[0] == "abar" and op.kind == "B" and op.index == v[1] - 1)


def with_one_pair(ops: list[Op]) -> list[list]:
    """`ops` with one Off(v) right after an op a that makes or may read v (or first, for a_0) and its Pre(v)
    right before a later op b > a + 1 that may read v, for every value v and such (a, b); the simulator sorts
    out which are legal. A Pre with no reader after it would make the Off a discard (outside the models'
    class: docs/offload.md)."""
    L = max(op.index for op in ops)
    values = [("a", i) for i in range(L + 1)] + [("abar", i) for i in range(1, L + 1)]
    makers = {"a": ("F_ck", "F_n"), "abar": ("F_all",)}
    out = []
    for v in values:
        for a in range(-1 if v == ("a", 0) else 0, len(ops)):
            if a >= 0 and not (_reads(ops[a], v) or (ops[a].kind in makers[v[0]] and ops[a].index == v[1] - 1)):
                continue
            for b in range(a + 2, len(ops)):
                if _reads(ops[b], v):
                    out.append(ops[: a + 1] + [Off(*v)] + ops[a + 1: b] + [Pre(*v)] + ops[b:])
    return out


def best_hunted(inst: OffloadInstance, budget: int, seqs: list[list[Op]]) -> float:
    """The fastest valid schedule within `budget` among the phase-form sequences with at most one Off/Pre pair."""
    L, chain = inst.chain.length, inst.chain

    def busy(ops: list[Op]) -> float:
        """The compute time of `ops`: no schedule of them is faster."""
        return sum(float(chain.u_b[op.index] if op.kind in ("B", "Loss") else chain.u_f[op.index]) for op in ops)

    best = float("inf")
    for ops in sorted(seqs, key=busy):
        if busy(ops) >= best:
            break
        for cand in [ops] + with_one_pair(ops):
            sim = simulate(inst, OffloadSchedule(cand, L), budget)
            if sim.valid and sim.makespan < best:
                best = sim.makespan
    return best


def _random_instances(n: int) -> list[tuple[OffloadInstance, int]]:
    rng = random.Random(35)
    out = [(REPRO, 16)]
    while len(out) < n:
        L = rng.choice((2, 2, 3))
        x = [rng.randint(1, 4) for _ in range(L + 1)]
        xbar = [x[i + 1] + rng.randint(0, 3) for i in range(L)]
        inst = _instance([rng.randint(1, 3) for _ in range(L)], [rng.randint(1, 3) for _ in range(L + 1)],
                         x, xbar, rng.choice((0.5, 1.0, 2.0)))
        # around rotor's least budget (below it only offloading helps)
        out.append((inst, int(rotor_min_budget(inst.chain) * rng.uniform(0.9, 1.2))))
    return out


@pytest.mark.parametrize("case", range(6))
def test_exact_optimum_beats_fast_solvers_and_hunted_schedules(case: int) -> None:
    inst, budget = _random_instances(6)[case]
    L = inst.chain.length
    hunted = best_hunted(inst, budget, phase_form(L))
    fast = [registry.solve("offload", inst, n, budget, slots=0).objective for n in FAST]
    best_fast = min([f for f in fast if f is not None], default=float("inf"))
    for name in EXACT:
        r = registry.solve("offload", inst, name, budget, slots=0, time_limit=20)
        if r.status == "infeasible":
            assert hunted == float("inf") and best_fast == float("inf"), (name, hunted, best_fast)
            continue
        if r.objective is not None:
            assert simulate(inst, r.schedule, budget).valid
            assert r.objective <= best_fast + TOL, (name, r.objective, best_fast)
            if r.status == "optimal":
                assert r.objective <= hunted + TOL, (name, r.objective, hunted)
        if r.lower_bound is not None:
            assert r.lower_bound <= min(hunted, best_fast) + TOL, (name, r.lower_bound, hunted, best_fast)

"""Revolve against periodic checkpointing (checkpoint_sequential) on homogeneous chains, both
replayed by the simulator: the rule of docs/chain.md "Revolve and periodic".

Revolve's model records the tape of a step only at its turn, right before its adjoint, so
every step runs forward at least twice but the last: L + p(L, c) >= 2L - 1 forwards for every
c. Periodic with K segments runs the stages before its last segment twice and the others once
(F_all keeps their tapes): 2L - |last segment| <= 2L - 1 forwards. Hence, at equal per-step
times, periodic is never slower than Revolve when a segment count fits the budget; Revolve
needs no more memory than the least periodic peak, so below that peak it is the only one of
the two that runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule, solve_periodic
from memsched.solvers.chain.revolve import revolve_forwards, revolve_peak, solve_revolve
from memsched.solvers.chain.schedule import FORWARD_KINDS


def forwards(schedule) -> int:
    return sum(op.kind in FORWARD_KINDS for op in schedule)


def chain_of(L: int, x: int, extra: int, o_f: int, o_b: int, u_f: float, u_b: float) -> Chain:
    chain = Chain.homogeneous(L, x=x, xbar=x + extra, u_f=u_f, u_b=u_b, loss_time=0.5)
    chain.o_f[:L] = o_f
    chain.o_b[:L] = o_b
    return chain


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 22), st.integers(1, 4), st.integers(0, 6), st.integers(0, 3), st.integers(0, 3),
       st.floats(0.1, 3.0), st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_periodic_never_slower_than_revolve_when_it_fits(L, x, extra, o_f, o_b, u_f, u_b, where):
    chain = chain_of(L, x, extra, o_f, o_b, u_f, u_b)
    least_revolve = revolve_peak(chain, 1)
    periodic_peaks = [simulate(chain, periodic_schedule(L, k)).peak_memory for k in range(1, L + 1)]
    assert least_revolve <= min(periodic_peaks)  # Revolve runs wherever periodic does
    top = simulate(chain, periodic_schedule(L, 1)).peak_memory  # store-all
    budget = int(least_revolve + where * (top - least_revolve))
    rev = solve_revolve(chain, budget)
    per = solve_periodic(chain, budget)
    assert rev.status == "feasible"
    rev_sim = simulate(chain, rev.schedule, budget).raise_if_invalid()
    assert rev_sim.peak_memory <= budget and rev_sim.makespan == rev.objective
    assert forwards(rev.schedule) == L + revolve_forwards(L, rev.details["checkpoints"]) >= 2 * L - 1
    if per.status == "feasible":
        per_sim = simulate(chain, per.schedule, budget).raise_if_invalid()
        assert per_sim.peak_memory <= budget
        assert forwards(per.schedule) <= 2 * L - 1
        assert per_sim.makespan <= rev_sim.makespan + 1e-9 * rev_sim.makespan
    else:
        assert budget < min(periodic_peaks)


def test_the_example_chain_numbers():
    # examples/homogeneous20.json is Chain.homogeneous(20, x=10**6) with u_f = 1, u_b = 2: at 60%
    # of store-all Revolve holds every a_i (c = 20) yet runs 39 forwards; 2 segments run 30
    chain = Chain.homogeneous(20, x=10**6, u_f=1.0, u_b=2.0)
    top = simulate(chain, periodic_schedule(20, 1)).peak_memory
    rev, per = solve_revolve(chain, int(0.6 * top)), solve_periodic(chain, int(0.6 * top))
    assert (rev.details["checkpoints"], rev.details["forwards"], rev.objective) == (20, 39, 79.0)
    assert (per.details["segments"], forwards(per.schedule), per.objective) == (2, 30, 70.0)
    low = int(0.3 * top)  # below every periodic peak: only Revolve runs
    assert solve_periodic(chain, low).status == "infeasible" and solve_revolve(chain, low).status == "feasible"

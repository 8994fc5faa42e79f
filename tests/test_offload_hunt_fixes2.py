"""Offloading fixes (hunt 2): the two-stream simulator charges operations of zero or tiny time as the chain
simulator does (rule 6 of docs/offload.md); offload-exact on a link that moves a value in less than a tick, and
its answer when the simulator rejects its model's schedule; cpsat and offload-exact on extremely slow links;
``--bandwidth`` keeps fractions of a byte per second; rotor-offload's ``grid`` is at least 1."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from conftest import FAST_LINK
from conftest import OFFLOAD_TINY as TINY
from conftest import offload_tiny as tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain import simulate as simulate_chain
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule
from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, Loss
from memsched.solvers.errors import InputError
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.schedule import Off, Pre
from memsched.solvers.offload.simulator import memory_profile
from memsched.solvers.units import parse_bandwidth

import memsched


# --------------------------------------------------------------------------- 1. zero / tiny durations
@pytest.mark.parametrize("t", [0.0, 1e-10])
def test_store_all_of_no_time_peaks_as_in_the_chain_simulator(t):
    inst = tiny(t)
    schedule = store_all_schedule(2)
    chain_peak = simulate_chain(inst.chain, schedule).peak_memory
    sim = simulate_offload(inst, OffloadSchedule.from_chain(schedule))
    assert chain_peak == 21
    assert sim.peak_memory == 21
    assert sim.makespan == pytest.approx(simulate_chain(inst.chain, schedule).makespan, rel=1e-12)
    assert not simulate_offload(inst, OffloadSchedule.from_chain(schedule), 20).valid


def test_memory_profile_of_no_time_is_never_negative():
    rows = memory_profile(tiny(0.0), OffloadSchedule.from_chain(store_all_schedule(2)))
    assert min(r["mem_during"] for r in rows) >= 0
    assert max(r["mem_during"] for r in rows) == 21


def test_off_releases_after_a_zero_length_reader_allocated():
    """a_0 goes to the host and back, F_all(0) (no time) reads it, then a free Off(a_0) (the host holds a copy)
    drops it at the same instant: F_all(0) runs holding a_0 + abar_1 + o_fa[0] (4 + 10 + 10 = 24; the old sweep
    released a_0 and the overhead first, down to -10 bytes)."""
    data = copy.deepcopy(TINY)
    data["stages"][0].update(fwd_time=0.0, tape_size=10, fwd_overhead=10)
    inst = OffloadInstance(Chain.from_dict(data), 2000)
    ops = [Off("a", 0), Pre("a", 0), F_all(0), Off("a", 0), F_all(1), Loss(2), Bwd(1), Pre("a", 0), Bwd(0)]
    sim = simulate_offload(inst, OffloadSchedule(ops, 2))
    assert sim.valid, sim.violation
    assert max(m for t, m in sim.timeline if t == 4.0) == 24  # F_all(0) runs at t = 4
    assert min(m for _, m in sim.timeline) >= 0


def _zero_times(chain: Chain, rng: np.random.Generator, tiny_time: float) -> Chain:
    """`chain` with about half of its durations (forward per mode, backward, loss) set to 0 or `tiny_time`."""
    L = chain.length

    def some(u: np.ndarray, n: int) -> np.ndarray:
        u = np.array(u, dtype=float)
        pick = rng.random(n) < 0.5
        u[:n][pick] = rng.choice([0.0, tiny_time], size=int(pick.sum()))
        return u

    u_fa, u_fn, u_b = some(chain.u_fa, L), some(chain.u_fn, L), some(chain.u_b, L + 1)
    return Chain(np.maximum(u_fa, u_fn), u_b, chain.x, chain.xbar, chain.o_f, chain.o_b, name=chain.name,
                 o_fa=chain.o_fa, o_fn=chain.o_fn, u_fa=u_fa, u_fn=u_fn, o_bh=chain.o_bh)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 7), seed=st.integers(0, 10_000), frac=st.floats(0.0, 1.0),
       tiny_time=st.sampled_from([0.0, 1e-10, 1e-13]))
def test_rule6_no_transfers_replay_as_the_chain_simulator_with_zero_and_tiny_times(L, seed, frac, tiny_time):
    """docs/offload.md rule 6 with durations of 0 and tiny ones: same peak, makespan and budget verdicts."""
    rng = np.random.default_rng(seed)
    chain = _zero_times(random_chain(L, seed, overhead=1.0), rng, tiny_time)
    inst = OffloadInstance(chain, 1e9)
    lo, hi = rotor_min_budget(chain), store_all_peak(chain)
    schedules = [store_all_schedule(L), recompute_all_schedule(L), periodic_schedule(L, max(1, L // 2))]
    rotor = solve_rotor(chain, int(lo + frac * (hi - lo)), slots=0)
    if rotor.schedule is not None:
        schedules.append(rotor.schedule)
    for schedule in schedules:
        ref = simulate_chain(chain, schedule)
        sim = simulate_offload(inst, OffloadSchedule.from_chain(schedule))
        assert ref.valid and sim.valid
        assert sim.peak_memory == ref.peak_memory
        assert sim.makespan == pytest.approx(ref.makespan, rel=1e-12, abs=1e-12)
        assert min(m for _, m in sim.timeline) >= 0
        for budget in (ref.peak_memory, ref.peak_memory - 1):
            assert simulate_offload(inst, OffloadSchedule.from_chain(schedule), budget).valid == \
                simulate_chain(chain, schedule, budget).valid


@pytest.mark.parametrize("solver", ["cpsat", "offload-exact"])
@pytest.mark.parametrize("t", [0.0, 1e-10])
def test_exact_solvers_do_not_claim_store_all_at_20_with_zero_times(solver, t):
    """Store-all (makespan 3) needs 21 bytes: at 20 the answer must be slower (pofo's 6) and fit."""
    inst = tiny(t)
    r = memsched.solve(inst, 20, solver, slots=0, time_limit=10)
    assert r.schedule is not None
    assert r.objective >= 6.0 - 1e-9
    replay = simulate_offload(inst, r.schedule, 20)
    assert replay.valid, replay.violation


# --------------------------------------------------------------------------- 2. offload-exact on a very fast link
def test_offload_exact_on_a_very_fast_link_answers_a_valid_schedule():
    inst = tiny(bandwidth=FAST_LINK, tape0=8)
    r = memsched.solve(inst, 20, "offload-exact", slots=0, time_limit=10)
    assert r.status in ("optimal", "feasible")
    replay = simulate_offload(inst, r.schedule, 20)
    assert replay.valid, replay.violation
    assert r.objective == pytest.approx(replay.makespan)


def _broken_schedule(self: Any, solver: Any) -> OffloadSchedule:
    """A schedule the simulator rejects (Off(abar_1) before abar_1 exists)."""
    return OffloadSchedule([Off("abar", 1), F_ck(0), F_all(1), Loss(2), Bwd(1), Bwd(0)], 2)


@pytest.mark.parametrize("solver, module, model", [("offload-exact", "exact_free", "FreeOrderModel"),
                                                   ("exact-combined", "exact_combined", "_Model")])
def test_exact_models_fall_back_on_the_seed_when_their_schedule_is_invalid(monkeypatch, solver, module, model):
    import importlib

    monkeypatch.setattr(getattr(importlib.import_module(f"memsched.solvers.offload.{module}"), model), "schedule",
                        _broken_schedule)
    inst = tiny(tape0=8)
    r = memsched.solve(inst, 20, solver, slots=0, time_limit=10)
    assert r.status == "feasible"
    assert "model_invalid" in r.raw.details and "fails the simulator" in r.raw.message
    assert r.raw.lower_bound is None or r.raw.lower_bound <= r.objective
    assert simulate_offload(inst, r.schedule, 20).valid
    bare = memsched.solve(inst, 20, solver, slots=0, time_limit=10, warm_start=False)
    assert bare.schedule is None and bare.status == "timeout"
    assert "model_invalid" in bare.raw.details


# --------------------------------------------------------------------------- 3. extremely slow links
@pytest.mark.parametrize("solver", ["cpsat", "offload-exact"])
@pytest.mark.parametrize("bandwidth", [1e-9, 1e-6])
def test_exact_solvers_on_extremely_slow_links(solver, bandwidth):
    inst = tiny(bandwidth=bandwidth, tape0=8)
    for budget in (30, 20):
        r = memsched.solve(inst, budget, solver, slots=0, time_limit=3)
        if r.schedule is not None:
            replay = simulate_offload(inst, r.schedule, budget)
            assert replay.valid, replay.violation
        if budget == 30:
            assert r.status == "optimal" and r.objective == pytest.approx(9.5)  # store-all, every op once


def test_default_tick_scale_is_capped_and_durations_last_a_tick():
    from memsched.solvers.offload.cpsat import MAX_DEFAULT_TICKS, duration_ticks, durations_total, fit_scale

    slow = tiny(bandwidth=1e-9, tape0=8)
    scale = fit_scale(slow, 10.0)
    assert durations_total(slow) * scale <= MAX_DEFAULT_TICKS
    ordinary = tiny(tape0=8)
    assert fit_scale(ordinary, 10.0) == 10.0
    assert duration_ticks(1e-10, 1.0) == 1 and duration_ticks(0.0, 1.0) == 0 and duration_ticks(0.0, 1.0, least=1) == 1
    assert duration_ticks(2.5, 10.0) == 25


@pytest.mark.parametrize("bandwidth", [1e-10, 1e-20, 1e-300, 5e-324])
def test_a_bandwidth_below_the_floor_is_an_input_error_in_a_file_and_on_the_command_line(tmp_path, bandwidth):
    """MIN_BANDWIDTH (1e-9 bytes/s) for host_link.bandwidth and --bandwidth alike."""
    with pytest.raises(InputError, match="host_link.bandwidth"):
        OffloadInstance(tiny().chain, bandwidth)
    data = copy.deepcopy(TINY)
    data["host_link"]["bandwidth"] = bandwidth
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="host_link.bandwidth.*1e-09"):
        memsched.load(str(path))
    with pytest.raises(InputError, match="--bandwidth.*1e-09"):
        parse_bandwidth(repr(bandwidth))


# --------------------------------------------------------------------------- 4. --bandwidth parsing
def test_parse_bandwidth_keeps_fractions_and_units():
    assert parse_bandwidth("2.7") == 2.7
    assert parse_bandwidth("0.5") == 0.5
    assert parse_bandwidth(0.5) == 0.5
    assert parse_bandwidth("12GB/s") == 12e9
    assert parse_bandwidth("800MiB/s") == 800 * 2**20
    assert parse_bandwidth("25e9") == 25e9
    for bad in ("0", "0GB/s", "-1", "abc", "2PB/s", "1e400", float("nan"), True, 2**50 + 1):
        with pytest.raises(InputError, match="--bandwidth|bandwidth"):
            parse_bandwidth(bad)


def test_bandwidth_option_as_the_file(tmp_path):
    data = copy.deepcopy(TINY)
    del data["host_link"]
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(data))
    assert memsched.load(str(path), bandwidth="0.5").bandwidth == 0.5
    assert memsched.load(str(path), bandwidth="2.7").bandwidth == 2.7


def test_bandwidth_flag_on_the_command_line(tmp_path, capsys):
    from memsched.experiments.cli import main

    data = copy.deepcopy(TINY)
    del data["host_link"]
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(data))
    code = main(["solve", str(path), "--bandwidth", "0.5", "--solver", "none", "--budget", "30", "--json"])
    assert code in (0, None)
    assert json.loads(capsys.readouterr().out)["status"] == "feasible"


# --------------------------------------------------------------------------- 5. rotor-offload's grid
def test_rotor_offload_grid_must_be_at_least_one():
    from memsched.solvers.offload.combined import solve_rotor_offload

    inst = tiny(tape0=8)
    with pytest.raises(InputError, match="grid"):
        memsched.solve(inst, 30, "rotor-offload", grid=0)
    with pytest.raises(InputError, match="grid"):
        solve_rotor_offload(inst, 30, grid=0)
    assert memsched.solve(inst, 30, "rotor-offload", grid=1).status == "feasible"

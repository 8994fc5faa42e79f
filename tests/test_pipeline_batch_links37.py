"""`simulate_batch` with communication charged: each link is a resource (one transfer at a time,
forward and backward on the same link, as the period's link time c_s charges them), so the replay
is never faster than the period T of `simulate`; it can be slower (1F1B's round trips), and the
pipeline timeline of `memsched plot` then gives both in its title."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from memsched.solvers.pipeline import Partition, Pipeline, simulate, simulate_batch  # noqa: E402

TWO_STAGES = Partition.from_bounds([(0, 0), (1, 1)], devices=2)  # straight 1F1B


def _repro(act0: int, bandwidth: float | None = 2e6) -> Pipeline:
    """Two stages of tau = 1 ms; the boundary carries act0 bytes each way (act0 / 2e6 s per transfer)."""
    return Pipeline(fwd=[0.5, 0.5], bwd=[0.5, 0.5], act=[act0, 1000], params=[0, 0], input_size=10,
                    bandwidth=bandwidth)


def _slope(inst: Pipeline, part: Partition, m: int) -> float:
    """(makespan(2m) - makespan(m)) / m: the replay's time per micro-batch."""
    return (simulate_batch(inst, part, 2 * m).makespan - simulate_batch(inst, part, m).makespan) / m


def _random_case(rng: np.random.Generator, bandwidth: bool, schedule: str = "1f1b",
                 micro_batches: int | None = None) -> tuple[Pipeline, Partition]:
    """A small random chain (2..7 layers) cut into 2..L straight stages."""
    L = int(rng.integers(2, 8))
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, L), size=int(rng.integers(1, L)), replace=False))
    b = [0, *cuts, L]
    inst = Pipeline(fwd=rng.uniform(0.1, 5, L).tolist(), bwd=rng.uniform(0.1, 5, L).tolist(),
                    act=rng.integers(1, 10000, L).tolist(), params=[0] * L, input_size=10,
                    bandwidth=float(rng.choice([1e5, 1e6, 1e7])) if bandwidth else None)
    part = Partition.from_bounds([(b[i], b[i + 1] - 1) for i in range(len(b) - 1)], schedule=schedule,
                                 micro_batches=micro_batches)
    return inst, part


# ---------------------------------------------------------------------------- the reported cases
@pytest.mark.parametrize("act0, period, bound", [(1000, 1.0, 1.5), (10000, 10.0, 10.0)])
def test_the_replay_is_never_faster_than_the_period(act0, period, bound):
    """The brief's repro: link time c_1 = 2 * act0 / 2e6 s. With act0 = 10000, c_1 = 10 ms is the period
    and the old replay (links as delays only, transfers overlapping) took 6 ms per micro-batch; with
    act0 = 1000 the round trip of stage 0 (tau_0 + tau_1 + c_1 = 3 ms for its 2 micro-batches in flight)
    makes the replay 1.5 ms per micro-batch, over the period of 1 ms."""
    inst = _repro(act0)
    assert simulate(inst, TWO_STAGES).period == pytest.approx(period)
    slope = _slope(inst, TWO_STAGES, 8)
    assert slope >= period - 1e-9
    assert slope == pytest.approx(bound)


def test_makespan_is_at_least_m_periods_and_the_round_trips():
    """For any m: the busiest resource (a stage, tau_s per micro-batch, or a link, c_s) needs m T; and under
    1F1B stage s starts micro-batch k + S - s only after micro-batch k came back, so the round trips of
    micro-batches 0, S - s, 2 (S - s), ... follow one another (compute of stages >= s, transfers of links > s)."""
    rng = np.random.default_rng(37)
    for _ in range(40):
        inst, part = _random_case(rng, bandwidth=True)
        ev = simulate(inst, part)
        S = len(part.stages)
        for m in (S, 2 * S + 1, 16):
            run = simulate_batch(inst, part, m)
            assert run.makespan >= m * ev.period * (1 - 1e-12)
            for s in range(S):
                trip = sum(ev.stage_times[s:]) + sum(ev.link_times[s + 1:])
                assert run.makespan >= ((m - 1) // (S - s) + 1) * trip * (1 - 1e-12)


def test_without_bandwidth_the_replay_runs_at_the_period():
    """No communication: the steady state of the 1F1B replay is the period (long batches: at small m the
    slope still carries the replay's transient)."""
    rng = np.random.default_rng(1)
    for _ in range(25):
        inst, part = _random_case(rng, bandwidth=False)
        assert _slope(inst, part, 300) == pytest.approx(simulate(inst, part).period, rel=1e-9)


# ---------------------------------------------------------------------------- the links as resources
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_a_link_carries_one_transfer_at_a_time_in_the_order_they_become_ready(schedule):
    rng = np.random.default_rng(11)
    for _ in range(30):
        m = int(rng.integers(1, 12))
        inst, part = _random_case(rng, bandwidth=True, schedule=schedule, micro_batches=m)
        run = simulate_batch(inst, part, m)
        ev = simulate(inst, part)
        S = len(part.stages)
        ends = {(kind, s, k): e for s in range(S) for kind, k, _, e in run.ops[s]}
        starts = {(kind, s, k): b for s in range(S) for kind, k, b, _ in run.ops[s]}
        assert len(run.transfers) == S and run.transfers[0] == []
        for s in range(1, S):
            link = run.transfers[s]
            assert sorted((kind, k) for kind, k, _, _ in link) == sorted([("B", k) for k in range(m)]
                                                                        + [("F", k) for k in range(m)])
            free = 0.0
            last_ready = -math.inf
            for kind, k, start, end in link:
                # an activation leaves stage s - 1 when its forward ends; a gradient leaves stage s
                ready = ends[("F", s - 1, k)] if kind == "F" else ends[("B", s, k)]
                assert ready >= last_ready  # served in the order they become ready
                assert start == max(ready, free)  # never two at once; the link idles only when nothing waits
                assert end - start == pytest.approx(ev.link_times[s] / 2)  # both directions make c_s
                consumer = starts[("F", s, k)] if kind == "F" else starts[("B", s - 1, k)]
                assert consumer >= end  # the input has arrived
                free, last_ready = end, ready


def test_without_bandwidth_transfers_take_no_time():
    rng = np.random.default_rng(3)
    inst, part = _random_case(rng, bandwidth=False)
    run = simulate_batch(inst, part, 6)
    assert all(b == e for link in run.transfers for _, _, b, e in link)


def test_replay_period_and_its_bound():
    from memsched.solvers.pipeline.simulator import replay_bound, replay_period

    for act0, expected in ((1000, 1.5), (10000, 10.0)):
        inst = _repro(act0)
        assert replay_bound(inst, TWO_STAGES) == pytest.approx(expected)
        assert replay_period(inst, TWO_STAGES) == pytest.approx(expected)
    inst = _repro(1000, bandwidth=None)
    assert replay_bound(inst, TWO_STAGES) == replay_period(inst, TWO_STAGES) == pytest.approx(1.0)


# ---------------------------------------------------------------------------- the plot's title
def _panel_title(inst: Pipeline) -> str:
    from memsched.experiments.plotting import plot_schedule

    fig = plot_schedule("pipeline", inst, Partition.from_bounds([(0, 0), (1, 1)], devices=2, micro_batches=4))
    return fig.axes[0].get_title(loc="left")


def test_the_timeline_title_gives_the_replay_when_slower_than_the_model_period():
    title = _panel_title(_repro(1000))
    assert title.startswith("period 1 ms (model); replay 1.5 ms per micro-batch"), title
    assert "replay" not in _panel_title(_repro(10000))  # the link is the bottleneck: the replay runs at T
    assert "replay" not in _panel_title(_repro(1000, bandwidth=None))

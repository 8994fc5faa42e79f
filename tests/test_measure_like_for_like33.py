"""Hunt 33 (measure): ``vs_store_all``'s predicted ratios compare what ``ratio.*`` compares (an
offloading step on the CPU runs one op at a time); the over-budget warning judges the step as it ran;
a join's wrong input gradients fail its check (were None, "nothing checked"); the timed runs' spread
is reported beside the median."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memsched.models.run  # noqa: E402
from memsched.models.measure import StepResult, measure_runs, measured_vs_predicted  # noqa: E402
from memsched.models.offload.executor import OffloadStepResult  # noqa: E402

# the package under test's own tree (the old tree's when run against it), for its docs
ROOT = Path(os.path.realpath(memsched.models.run.__file__)).parents[1]

# the hunter's repro: gpt2, offloading on CPU, where the two-stream and sequential tracker peaks differ
GPT = {"batch": 2, "seq_len": 16, "width": 16, "depth": 3, "vocab": 50, "device": torch.device("cpu"), "seed": 0}


def _offload_step(peak: int, tracker: int, seq: int, tracker_seq: int, makespan: float, seq_makespan: float,
                  measured: int) -> OffloadStepResult:
    """A synchronous (CPU) offloading step's result with the given predictions (bytes, the time unit)."""
    return OffloadStepResult(loss=0.0, grads={}, input_grad=None, peak_memory=measured, time_ms=15.0, device="cpu",
                             memory_method="LiveTensorTracker", predicted_peak=peak, predicted_makespan=makespan,
                             tracker_predicted_peak=tracker, sequential_peak=seq, tracker_sequential_peak=tracker_seq,
                             sequential_makespan=seq_makespan)


# --- 1. vs_store_all compares like with like ---------------------------------------------------------------------
def test_vs_store_all_predicted_ratios_use_what_the_ratios_compare():
    """Two-stream tracker peak 117,632 B, sequential 113,856 B (the one ratio.memory uses on CPU):
    the predicted ratio to store-all was 117632 / 175240, now 113856 / 175240."""
    step = _offload_step(122688, 117632, 118912, 113856, 14.1, 14.3, measured=113856)
    base = _offload_step(175240, 175240, 175240, 175240, 12.7, 12.7, measured=175240)
    assert step.synchronous and step.comparisons()["memory"].predicted == 113856
    out = measured_vs_predicted(14.1, 122688, step, base)
    vs = out["vs_store_all"]["predicted"]
    assert vs["memory"] == 113856 / 175240 == out["vs_store_all"]["measured"]["memory"]
    assert vs["time"] == 14.3 / 12.7  # the sequential makespan, as ratio.time on CPU
    assert out["predicted"]["peak_memory"] == 122688  # the reported prediction itself is unchanged
    assert out["ratio"]["memory"] == 1.0


@pytest.fixture(scope="module")
def offload_run() -> dict:
    return memsched.models.run.run("gpt2", "70%", problem="offload", solver="rotor-offload", sizes=dict(GPT),
                                   bandwidth="1GB/s", time_limit=10, time_repeats=2, profile_repeats=1)


def test_run_offload_vs_store_all_memory_is_the_compared_pair(offload_run):
    out = offload_run  # its schedule follows the profiled times: the unit test above pins the two-stream case
    assert out["grad_check"] is True
    s = out["store_all"]["predicted"]  # store-all has no transfers: its sequential replay is its two-stream one
    store = s["tracker_peak_memory"] or s["peak_memory"]
    assert out["vs_store_all"]["predicted"]["memory"] == out["compared"]["memory"]["predicted"] / store
    assert out["compared"]["memory"]["predicted"] == (out["predicted"]["tracker_sequential_peak"]
                                                      or out["predicted"]["sequential_peak"])


def test_run_offload_warns_by_the_step_as_it_ran(offload_run):
    """The CPU step runs one op at a time: warned exactly when its sequential prediction (allocator's,
    RNG states included) exceeds the budget, not the two-stream one no CPU run follows."""
    out = offload_run
    above = out["predicted"]["sequential_peak"] > out["budget"]
    assert ("warning" in out) == above
    if above:
        assert "(one op at a time)" in out["warning"]


def test_over_budget_warning_takes_the_executed_prediction():
    warn = memsched.models.run.over_budget_warning
    predicted = {"peak_memory": 122688, "model_peak_memory": 117632}  # two streams, above the budget
    assert warn(predicted, 122668, 1, peak=118912, run_as="one op at a time") is None
    text = warn(predicted, 122668, 1, peak=123000, run_as="one op at a time")
    assert text.startswith("the executed step (one op at a time) is predicted above the budget: 123000 B > 122668 B")
    assert "1 recomputed random stage " in text
    assert warn(predicted, 122668, 1).startswith("the executed step is predicted above the budget: 122688 B")


# --- 2. a join's input gradients count -------------------------------------------------------------------------
class _Doubler(torch.nn.Module):
    """x -> 2x, with a parameter whose gradient is zero: only the input gradients test anything."""

    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + self.p * 0


def _join_check(monkeypatch: pytest.MonkeyPatch, scale: float) -> bool | None:
    """`execute_join`'s check of a store-all step of two 2-block branches whose input gradients
    the executor returns times `scale`."""
    from memsched.models.join import executor as JE
    from memsched.solvers.join.schedule import LOSS_OP, JoinSchedule, JOp

    original = JE.JoinExecutor._run

    def scaled(self, *args, **kwargs):
        loss, input_grads, peak, traces, elapsed = original(self, *args, **kwargs)
        return loss, [None if g is None else g * scale for g in input_grads], peak, traces, elapsed

    monkeypatch.setattr(JE.JoinExecutor, "_run", scaled)
    ops = [JOp("F_all", b, i) for b in range(2) for i in range(2)] + [LOSS_OP]
    ops += [JOp("B", b, i) for b in range(2) for i in reversed(range(2))]
    torch.manual_seed(0)
    xs = [torch.randn(4, 3), torch.randn(4, 3)]
    _, ok = JE.execute_join([[_Doubler(), _Doubler()], [_Doubler(), _Doubler()]],
                            lambda ys, t: sum(y.sum() for y in ys), JoinSchedule(ops, [2, 2]), xs, None,
                            time_repeats=1)
    return ok


def test_join_wrong_input_gradients_fail_the_check(monkeypatch):
    assert _join_check(monkeypatch, 1.0) is True  # zero parameter gradients, the input ones compared
    assert _join_check(monkeypatch, 1.5) is False  # was None: "nothing checked"


def test_join_gradient_check_rule():
    from memsched.models.join.executor import join_gradient_check

    nonzero, zero = [torch.ones(2)], [torch.zeros(2), None]
    assert join_gradient_check(None, False, nonzero) is False
    assert join_gradient_check(True, False, nonzero) is False
    assert join_gradient_check(False, True, nonzero) is False
    assert join_gradient_check(None, True, nonzero) is True
    assert join_gradient_check(True, True, zero) is True
    assert join_gradient_check(None, True, zero) is None


# --- 3. the RNG-state count names offloading steps too -----------------------------------------------------------
def test_docs_say_offloading_warnings_name_the_rng_states():
    doc = memsched.models.run.over_budget_warning.__doc__ or ""
    assert "None: not known, an offloading step" not in doc.replace("\n    ", " ")
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert "a chain; an offloading step gives the bytes beyond the model instead" not in cli
    assert "(a chain or an offloading step;" in cli


# --- 4. the spread of the timed runs -----------------------------------------------------------------------------
def test_measure_runs_keeps_every_timed_run():
    elapsed = iter([7.0, 3.0, 5.0, 9.0])

    def run(watch: bool, trace: bool):
        return 0.0, None, 0, [], next(elapsed)

    m = measure_runs(run, cuda=False, measure_memory=True, measure_time=True, trace=False, time_repeats=3)
    assert m.times_ms == (3.0, 5.0, 9.0) and m.time_ms == 5.0  # the watched run is never timed on CPU
    made = StepResult(loss=0.0, grads={}, input_grad=None, peak_memory=0, time_ms=m.time_ms, device="cpu",
                      memory_method="LiveTensorTracker", time_runs_ms=m.times_ms)
    out = measured_vs_predicted(1.0, 1, made, None)["measured"]
    assert (out["time_min"], out["time"], out["time_max"], out["time_runs"]) == (3.0, 5.0, 9.0, 3)
    untimed = StepResult(loss=0.0, grads={}, input_grad=None, peak_memory=0, time_ms=None, device="cpu",
                         memory_method="LiveTensorTracker")
    assert measured_vs_predicted(1.0, 1, untimed, None)["measured"]["time_runs"] == 0


def test_run_reports_the_spread_of_the_timed_runs(offload_run):
    m = offload_run["measured"]
    assert m["time_runs"] == 2 and m["time_min"] <= m["time"] <= m["time_max"]
    line = next(x for x in memsched.models.run.describe(offload_run).splitlines() if x.startswith("  measured:"))
    assert f"{m['time']:.2f} ms (min {m['time_min']:.2f}, max {m['time_max']:.2f} over 2), peak" in line

"""Runs and reports (hunt 27): a chain max-batch answer notes what its fake-tensor sizes leave out
(kernel scratch buffers) and the `memsched run` command that checks it; a network whose plain
backward fails (a saved tensor modified in place) is bad input naming the block; the vs-torch
verdicts leave out memsched points whose gradients differ and count a point duelled only above its
peak as unmatched; `memsched run`'s vs_store_all memory ratios compare the tracker's predictions."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402
from memsched.experiments import vs_torch_report  # noqa: E402
from memsched.models.measure import StepResult, measured_vs_predicted  # noqa: E402

torch.set_num_threads(1)

RESULTS = Path(__file__).resolve().parent.parent / "results"
CHAIN_MB = ("max-batch", "resnet18", "--memory", "3MB", "--image-size", "64", "--width", "4", "--depth", "1",
            "--limit", "2", "--json")

# --- 1. max-batch --problem chain: the note ---------------------------------------------------------------------


def test_chain_max_batch_answer_notes_missing_scratch_and_the_run_command():
    r = run_cli(*CHAIN_MB)
    assert r.code == 0, r.err
    out = r.json()
    note = out["note"]
    assert note is not None
    assert "fake-tensor profile" in note and "kernel scratch buffers" in note
    budget = out["result"]["budget"]
    assert f"`memsched run resnet18 --batch {out['largest']} --budget {budget}`" in note
    text = run_cli(*CHAIN_MB[:-1])
    assert text.code == 0 and text.out.strip().splitlines()[-1].startswith("note: the chain's sizes")


def test_chain_note_reads_the_profile_method():
    from memsched.experiments.commands.max_batch import chain_note

    fake = chain_note("vgg16", "image-size", 64, 1000, {"method": "LiveTensorTracker on fake tensors"})
    assert "kernel scratch buffers" in fake and "`memsched run vgg16 --image-size 64 --budget 1000`" in fake
    other = chain_note("vgg16", "batch", 3, 1000, {"method": "AllocatorProbe"})
    assert "fake-tensor" not in other and "AllocatorProbe" in other and "--batch 3 --budget 1000" in other


# --- 2. a network whose plain backward fails -------------------------------------------------------------------

BADNET = '''
import torch, torch.nn as nn
class Inp(nn.Module):
    def __init__(s): super().__init__(); s.l = nn.Linear(16, 16)
    def forward(self, x): y = self.l(x); y.relu_(); y.mul_(2); return y
def build(batch=2):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), Inp(), nn.Linear(16, 3)), torch.randn(batch, 8)
def loss_in_place(batch=2):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.Sigmoid())
    def loss(out, target): out.mul_(2); return out.sum()
    return net, torch.randn(batch, 8), None, loss
'''


@pytest.fixture
def badnet(tmp_path):
    path = tmp_path / "badnet.py"
    path.write_text(textwrap.dedent(BADNET))
    return path


@pytest.mark.parametrize("command", [("profile",), ("run", "--budget", "100%", "--time-repeats", "1")])
def test_backward_failure_is_bad_input_naming_the_block(badnet, command):
    r = run_cli(command[0], f"{badnet}:build", *command[1:])
    assert r.code == 2, (r.out, r.err)
    assert "internal error" not in r.err and len(r.err.strip().splitlines()) == 1
    assert "MODEL" in r.err and "block 1 (Inp)" in r.err and "modified by an inplace operation" in r.err


def test_backward_failure_outside_any_block_names_the_network(badnet):
    r = run_cli("profile", f"{badnet}:loss_in_place")
    assert r.code == 2, (r.out, r.err)
    assert "the network fails in plain autograd" in r.err and "inplace" in r.err


def test_backward_check_passes_a_good_network_and_keeps_its_state():
    from memsched.models.network import backward_error

    torch.manual_seed(0)
    blocks = [torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)]
    blocks[0].weight.grad = torch.ones_like(blocks[0].weight)
    grad, before = blocks[0].weight.grad, blocks[1].running_mean.clone()
    x = torch.randn(3, 4)
    assert backward_error(blocks, lambda out, t: out.sum(), x, None, "net") is None
    assert blocks[0].weight.grad is grad and torch.equal(grad, torch.ones_like(grad))
    assert blocks[2].weight.grad is None and torch.equal(blocks[1].running_mean, before)


# --- 3, 4. vs_torch_report: gradients and duels --------------------------------------------------------------------

BASE = {"model": "gpt2", "size": "tiny", "status": "ok", "load": "0.5", "overhead_ci": "0.01", "alloc_peak": "",
        "grad_ok": "True"}


def _point(tool: str, setting: str, peak: int, overhead: float, **extra: str) -> dict:
    return {**BASE, "tool": tool, "setting": setting, "peak_bytes": str(peak), "time_ms": str(10 * (1 + overhead)),
            "overhead": str(overhead), "overhead_unpaired": str(overhead), **extra}


def test_memsched_points_with_wrong_gradients_are_no_points():
    rows = [_point("torch", "no checkpointing", 1000, 0.0), _point("checkpoint-per-block", "4 blocks", 600, 0.4),
            _point("memsched-block", "rotor, 5 stages", 500, 0.2, grad_ok="False", status="optimal")]
    (v,) = vs_torch_report.verdicts(rows)
    assert v["memsched_smallest_peak"] is None and v["smallest_at_most_per_block"] is None
    assert v["curve_on_or_below"] is False and v["unmatched"] == "checkpoint-per-block 4 blocks"
    rows[-1]["grad_ok"] = "True"
    (v,) = vs_torch_report.verdicts(rows)
    assert v["memsched_smallest_peak"] == 500 and v["curve_on_or_below"] is True
    old = [{k: x for k, x in r.items() if k != "grad_ok"} for r in rows]  # an older CSV without the column
    assert vs_torch_report.verdicts(old)[0]["curve_on_or_below"] is True


def test_a_point_duelled_only_above_its_peak_is_unmatched():
    rows = [_point("torch", "no checkpointing", 1000, 0.0), _point("checkpoint-per-block", "4 blocks", 600, 0.4),
            _point("checkpoint_sequential", "segments=2", 700, 0.2), _point("memsched-block", "rotor", 550, 0.2)]
    duel = {"model": "gpt2", "size": "tiny", "their_peak": "600", "rounds": "15", "tool": "checkpoint-per-block",
            "setting": "4 blocks", "memsched_peak": "640", "peak_ok": "False", "ratio": "0.90", "ratio_ci": "0.01"}
    (v,) = vs_torch_report.verdicts(rows, [duel])
    assert v["curve_on_or_below"] is True  # the paired verdict matches it ...
    assert v["curve_on_or_below_duel"] is False and v["unmatched_duel"] == "checkpoint-per-block 4 blocks"  # not so
    fine = {**duel, "tool": "checkpoint_sequential", "setting": "segments=2", "their_peak": "700",
            "memsched_peak": "560", "peak_ok": "True", "ratio": "0.99"}
    (v,) = vs_torch_report.verdicts(rows, [duel, fine])
    assert v["curve_on_or_below_duel"] is False and v["unmatched_duel"] == "checkpoint-per-block 4 blocks"
    (v,) = vs_torch_report.verdicts(rows, [{**duel, "peak_ok": "True", "memsched_peak": "590"}, fine])
    assert v["curve_on_or_below_duel"] is True


def test_committed_vs_torch_summary_is_what_the_verdicts_give(tmp_path):
    from memsched.experiments.benchtable import write_csv

    csv_path = RESULTS / "bench_vs_torch.csv"
    rows = vs_torch_report.read_rows(csv_path)
    duels = vs_torch_report.read_rows(vs_torch_report.duels_path(csv_path))
    out = write_csv(vs_torch_report.verdicts(rows, duels), tmp_path / "summary.csv", vs_torch_report.SUMMARY_COLUMNS)
    assert Path(out).read_text() == (RESULTS / "bench_vs_torch_summary.csv").read_text()


# --- 5. vs_store_all compares like with like ---------------------------------------------------------------------


def _step(peak: int, predicted: int, tracker: int | None, makespan: float) -> StepResult:
    return StepResult(loss=0.0, grads={}, input_grad=None, peak_memory=peak, time_ms=1.0, device="cpu",
                      memory_method="LiveTensorTracker", predicted_peak=predicted, predicted_makespan=makespan,
                      tracker_predicted_peak=tracker)


def test_vs_store_all_memory_uses_the_tracker_prediction():
    step = _step(18432, 33600, 18432, 2.0)  # the allocator's prediction adds RNG states the tracker never sees
    store_all = _step(30144, 30144, None, 1.0)
    out = measured_vs_predicted(2.0, 33600, step, store_all)
    assert out["ratio"]["memory"] == 1.0
    vs = out["vs_store_all"]
    assert set(vs) == {"predicted", "measured"} and set(vs["predicted"]) == {"time", "memory"}
    assert vs["predicted"]["memory"] == pytest.approx(18432 / 30144) == vs["measured"]["memory"]
    assert out["predicted"]["peak_memory"] == 33600  # the reported prediction itself is unchanged
    json.dumps(out)
    plain = measured_vs_predicted(2.0, 200, _step(150, 200, None, 2.0), _step(300, 400, None, 1.0))
    assert plain["vs_store_all"]["predicted"]["memory"] == pytest.approx(0.5)

"""Session 41 fixes of ``memsched max-batch``: a size the network refuses inside the bisection is
skipped (the nearest accepted sizes are tried), not taken for a size that does not fit; the exit-1
line says when only the overhead bound failed; an interrupted search reports its bracket (text and
``--json``, exit 130) and ``--journal FILE`` keeps its probes so that a rerun resumes them.

The CLI tests replace `max_batch.probe_size` (building and solving a network) by a table of verdicts,
so that each runs in milliseconds; the search, the rows, the journal and the messages are the command's."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

pytest.importorskip("torch")

from memsched.experiments.commands import max_batch  # noqa: E402
from memsched.experiments.commands.max_batch import Probe, search_accepted  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

#: the unet of the hunter's repro: 2 levels take image sides that are multiples of 4 only
UNET = ("max-batch", "unet", "--depth", "2", "--batch", "2", "--vary", "image-size", "--step", "1", "--limit", "100",
        "--solver", "store-all", "--tolerance", "0", "--memory", "125209488")
#: a batch search whose probes `fake_probes` answers (--tolerance 0: the exact largest)
BATCH = ("max-batch", "resnet18", "--image-size", "32", "--tolerance", "0", "--limit", "1000")


def probe(size: int, fits: bool, *, overhead: float | None = None) -> Probe:
    """A probe's numbers (bytes, the cost model's time unit): a schedule when it fits or has an `overhead`."""
    over = overhead if overhead is not None else (1.0 if fits else None)
    return Probe(size=size, fits=fits, status="optimal" if over is not None else "infeasible", budget=10**8,
                 parameter_bytes=1000, store_all_peak=1000 * size, store_all_time=10.0,
                 makespan=None if over is None else 10.0 * over, overhead=over,
                 peak_memory=None if over is None else 1000 * size, bound=1.2, nodes=4, solve_time_s=0.0)


def fake_probes(monkeypatch, verdict, calls: list[int] | None = None) -> None:
    """`max_batch.probe_size` answered by `verdict(size)`: a `Probe`, or raising (a refused size, an interrupt)."""
    def fake(model, sizes, *, size, **kw):
        if calls is not None:
            calls.append(size)
        return verdict(size)

    monkeypatch.setattr(max_batch, "probe_size", fake)


def cli(*argv: object) -> tuple[int, str, str]:
    res = run_cli(*(str(a) for a in argv))
    return res.code, res.out, res.err


# --- bug 1: a refused size inside the bisection is skipped, not "does not fit" -----------------------------------

def test_search_skips_refused_sizes_inside_the_bracket():
    """Sides that are multiples of 4 only, fitting up to 96 of at most 100: the answer is 96 (it was 68:
    82, 73, 70, 69 refused, each taken as not fitting); each size asked once, few refused ones tried."""
    asked: list[int] = []

    def verdict(k: int) -> bool | None:
        asked.append(k)
        return None if k % 4 else k <= 96

    assert search_accepted(verdict, 100) == (96, 4)
    assert len(asked) == len(set(asked))
    assert sum(k % 4 != 0 for k in asked) <= 16


@pytest.mark.parametrize("step,largest,limit", [(4, 96, 100), (16, 640, 1000), (32, 992, 2000), (8, 56, 61),
                                                (2, 1000, 1001)])
def test_search_finds_the_largest_accepted_size_that_fits(step, largest, limit):
    """Sizes that must be multiples of a power of two up to 2 x `MAX_NEAR` (unet's levels): the largest
    accepted size that fits, whatever the limit."""
    def verdict(k: int) -> bool | None:
        return None if k % step else k <= largest

    want = max(k for k in range(1, limit + 1) if k % step == 0 and k <= largest)
    assert search_accepted(verdict, limit) == (want, step)


def test_cli_refused_sides_inside_the_bisection(monkeypatch):
    """The hunter's repro (unet, --step 1): largest image-size 96, not 68; the refused sides have rows."""
    def verdict(side: int) -> Probe:
        if side % 4:
            raise InputError("unet with 2 levels needs image sides multiple of 4", field="--image-size")
        return probe(side, side <= 96)

    fake_probes(monkeypatch, verdict)
    code, out, err = cli(*UNET)
    assert code == 0, err
    assert "largest image-size: 96 " in out
    assert "      82  refused  unet with 2 levels" in out


# --- bug 2: the exit-1 line names the overhead bound when the memory fits ----------------------------------------

def test_overhead_bound_failing_is_said(monkeypatch):
    """A schedule within the budget at every batch, but above the overhead bound: exit 1 naming the
    overhead and the bound, not "does not train within M"."""
    fake_probes(monkeypatch, lambda b: probe(b, False, overhead=1.212))
    code, out, err = cli(*BATCH, "--memory", "400MB", "--solver", "sqrt")
    assert code == 1, err
    assert "does not train within" not in err
    assert "overhead x1.212 is above the bound x1.200 (--max-overhead 1.2)" in err
    assert "sqrt's schedule of resnet18 at batch 1 fits within" in err


def test_memory_failing_keeps_its_line(monkeypatch):
    fake_probes(monkeypatch, lambda b: probe(b, False))
    code, _, err = cli(*BATCH, "--memory", "400MB")
    assert code == 1 and "infeasible: resnet18 does not train within" in err and "overhead x" not in err


# --- bug 3: an interrupted search reports its bracket; --journal resumes it --------------------------------------

def interrupting(at: int, largest: int = 100):
    """Batches up to `largest` fit; the probe of batch `at` is interrupted (Ctrl-C)."""
    def verdict(b: int) -> Probe:
        if b == at:
            raise KeyboardInterrupt
        return probe(b, b <= largest)

    return verdict


def test_interrupt_json_keeps_the_probes(monkeypatch):
    """Doubling 1..128 (128 does not fit), bisection 64, 96, then Ctrl-C at 112: exit 130 with the usual
    object, status interrupted, the probes so far and the bracket 96..128; one line on stderr."""
    fake_probes(monkeypatch, interrupting(112))
    code, out, err = cli(*BATCH, "--memory", "1GB", "--json")
    assert code == 130
    answer = json.loads(out)
    assert answer["status"] == "interrupted"
    assert answer["largest"] == 96 and answer["smallest_not_fitting"] == 128
    assert [p["size"] for p in answer["probes"]] == [1, 2, 4, 8, 16, 32, 64, 128, 96]
    assert answer["result"]["size"] == 96 and answer["journal"] is None
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted after 9 probes: batch 96 fits, batch 128 does not" in lines[0]


def test_interrupt_text_summary(monkeypatch):
    fake_probes(monkeypatch, interrupting(112))
    code, out, err = cli(*BATCH, "--memory", "1GB")
    assert code == 130
    assert "     128  no" in out and "largest batch:" not in out
    assert "batch 96 fits, batch 128 does not (the largest is at least 96, below 128)" in err
    assert "--journal FILE keeps the probes" in err


def test_complete_json_says_so(monkeypatch):
    fake_probes(monkeypatch, interrupting(0))
    code, out, _ = cli(*BATCH, "--memory", "1GB", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "complete"
    assert answer["largest"] == 100 and answer["smallest_not_fitting"] == 101


def test_journal_resumes_an_interrupted_search(monkeypatch, tmp_path):
    """The interrupted run journals its 9 probes; a rerun reuses them (none is probed again), says how many,
    and gets the answer of an uninterrupted search; other settings (memory) reuse nothing; a torn last line
    (a kill mid-write) is cut."""
    journal = tmp_path / "probes.jsonl"
    fake_probes(monkeypatch, interrupting(112))
    code, _, err = cli(*BATCH, "--memory", "1GB", "--journal", journal)
    assert code == 130 and f"9 sizes kept in {journal}; rerun to resume" in err
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["size"] for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 96]
    assert all(r["command"] == "max-batch" and r["settings"]["memory"] == 10**9 for r in rows)

    with journal.open("a") as f:
        f.write('{"key": "torn')  # a kill in the middle of a line
    calls: list[int] = []
    fake_probes(monkeypatch, interrupting(0), calls)
    code, out, err = cli(*BATCH, "--memory", "1GB", "--journal", journal)
    assert code == 0, err
    assert "largest batch: 100 " in out
    assert f"journal {journal}: 9 sizes resumed from the journal, {len(calls)} run now" in out
    assert calls and not set(calls) & {1, 2, 4, 8, 16, 32, 64, 128, 96}
    assert journal.read_text().endswith("\n") and "torn" not in journal.read_text()

    calls.clear()
    code, out, _ = cli(*BATCH, "--memory", "2GB", "--journal", journal, "--json")
    answer = json.loads(out)
    assert code == 0 and answer["journal"]["resumed"] == 0 and 1 in calls  # another memory: nothing reused
    assert answer["journal"]["run"] == len(calls)


def test_journal_reuses_refused_sizes(monkeypatch, tmp_path):
    journal = tmp_path / "j.jsonl"

    def verdict(side: int) -> Probe:
        if side % 4:
            raise InputError("unet with 2 levels needs image sides multiple of 4", field="--image-size")
        return probe(side, side <= 96)

    fake_probes(monkeypatch, verdict)
    assert cli(*UNET, "--journal", journal)[0] == 0
    calls: list[int] = []
    fake_probes(monkeypatch, verdict, calls)
    code, out, _ = cli(*UNET, "--journal", journal)
    assert code == 0 and calls == [] and "largest image-size: 96 " in out and "      82  refused  unet" in out


def test_journal_that_is_a_folder_is_bad_input(monkeypatch, tmp_path):
    fake_probes(monkeypatch, interrupting(0))
    code, out, err = cli(*BATCH, "--memory", "1GB", "--journal", tmp_path)
    assert code == 2 and out == "" and "--journal" in err and "is a folder" in err

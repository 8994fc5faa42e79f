"""`memsched max-batch` fixes: (1) a batch the network refuses (BatchNorm at batch 1: "Expected more than 1
value per channel when training") is skipped, as image sides too small are, and the search goes on from
the next batch, with a row saying so; no batch accepted up to --limit is one line of bad input naming
the batches tried and why. (2) A --slots whose rotor table is too large is refused before the first row
(the first probe's table is the largest of the search), and bad input that only a larger size shows
stops the search with the largest size that fit so far (exit 2, after the rows and that answer).
Tiny factories written into tmp_path, counted cost (flops, max-batch's default), in-process CLI."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

#: fails at batch 1 only: BatchNorm1d in training needs more than one value per channel
BN_FACTORY = """
import torch, torch.nn as nn
def build(batch=1):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 16), nn.Sequential(nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16)),
                      nn.Sequential(nn.ReLU(), nn.Linear(16, 16)))
    return m, torch.randn(batch, 16)
"""

#: 3 Linear(256, 256) blocks (the hunter's mlp.py)
MLP_FACTORY = """
import torch, torch.nn as nn
def build(batch=1):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 256), nn.Sequential(nn.ReLU(), nn.Linear(256, 256)),
                      nn.Sequential(nn.ReLU(), nn.Linear(256, 256)))
    return m, torch.randn(batch, 256)
"""

BN_REASON = "Expected more than 1 value per channel"


def _factory(tmp_path, text: str, name: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return f"{path}:build"


@pytest.fixture
def bn(tmp_path) -> str:
    return _factory(tmp_path, BN_FACTORY, "bn36")


@pytest.fixture
def mlp(tmp_path) -> str:
    return _factory(tmp_path, MLP_FACTORY, "mlp36")


# --- bug 1: a batch the network refuses is skipped -----------------------------------------------------------------

@pytest.mark.parametrize("problem,solver", [("chain", "rotor"), ("graph", "checkpoint-all")])
def test_refused_batch_is_skipped_and_the_search_goes_on(bn, problem, solver):
    r = run_cli("max-batch", bn, "--memory", "1MB", "--limit", "8", "--problem", problem, "--solver", solver)
    assert r.code == 0, r.err
    assert r.err == ""
    lines = r.out.splitlines()
    assert lines[0].startswith(f"{bn}: largest batch within"), lines[0]  # the header comes first
    assert lines[1].split()[:2] == ["1", "refused"] and BN_REASON in lines[1]  # the row says what happened
    assert [line.split()[:2] for line in lines[2:5]] == [["2", "fits"], ["4", "fits"], ["8", "fits"]]
    assert any(line.startswith("largest batch: 8 (") for line in lines)


def test_refused_batch_in_json(bn):
    r = run_cli("max-batch", bn, "--memory", "1MB", "--limit", "8", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["largest"] == 8
    assert [p["size"] for p in doc["probes"]] == [2, 4, 8]  # probes: the sizes solved
    assert [x["size"] for x in doc["refused"]] == [1] and BN_REASON in doc["refused"][0]["reason"]
    assert doc["stopped"] is None


def test_no_batch_accepted_is_one_line_naming_the_batches_tried(bn):
    r = run_cli("max-batch", bn, "--memory", "1MB", "--limit", "1")
    assert r.code == 2
    assert r.out == ""  # nothing before the error
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert lines[0].startswith("memsched max-batch: error: MODEL: ")
    assert "runs at none of the batches tried (1): " in lines[0]
    assert BN_REASON in lines[0]


#: fails at every batch (a shape mismatch): broken, not too small
BROKEN_FACTORY = """
import torch, torch.nn as nn
CALLS = []
def build(batch=1):
    with open(__file__ + ".calls", "a") as log:
        log.write(f"{batch}\\n")
    return nn.Sequential(nn.Linear(16, 16), nn.Linear(9, 2)), torch.randn(batch, 16)
"""


def test_a_network_failing_at_every_batch_is_tried_at_1_2_4_only(tmp_path):
    spec = _factory(tmp_path, BROKEN_FACTORY, "broken36")
    r = run_cli("max-batch", spec, "--memory", "1MB")
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "runs at none of the batches tried (1, 2, 4): " in lines[0], r.err
    built = {int(line) for line in (tmp_path / "broken36.py.calls").read_text().split()}
    assert max(built) == 4  # never built at 8, 16, ... up to --limit


def test_smallest_accepted_batch_does_not_fit_names_it(bn):
    """Batch 2 (the smallest the network runs at) does not fit 100 bytes: infeasible there, exit 1."""
    r = run_cli("max-batch", bn, "--memory", "100", "--state-factor", "0", "--limit", "8")
    assert r.code == 1, r.err
    assert r.err.startswith("memsched max-batch: infeasible: "), r.err
    assert "batch 2 (the smallest batch it runs at)" in r.err
    assert "       1  refused" in r.out


# --- bug 2: a --slots that cannot work is refused before any row ----------------------------------------------------

#: activations of 4 MB per block at batch 1 (4000 x 256 floats): store-all does not fit 15 MB
WIDE_FACTORY = """
import torch, torch.nn as nn
def build(batch=1):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 256), nn.Sequential(nn.ReLU(), nn.Linear(256, 256)),
                      nn.Sequential(nn.ReLU(), nn.Linear(256, 256)))
    return m, torch.randn(batch, 4000, 256)
"""


@pytest.mark.parametrize("memory,slots", [("15MB", "0"), ("15MB", "50000000")])
@pytest.mark.parametrize("json_out", [False, True])
def test_rotor_table_too_large_refused_before_any_row(tmp_path, memory, slots, json_out):
    """Exact sizes, or 5e7 slots, at 15 MB where store-all does not fit even at batch 1: the rotor table
    has over 1e8 cells (L = 3): refused with dp.rotor_table's message before the header and any row."""
    wide = _factory(tmp_path, WIDE_FACTORY, "wide36")
    r = run_cli("max-batch", wide, "--memory", memory, "--slots", slots, "--state-factor", "0",
                *(["--json"] if json_out else []))
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert lines[0].startswith("memsched max-batch: error: --slots: the rotor table would have "), lines[0]
    assert "more than 1e+08" in lines[0]


def test_rotor_table_too_large_later_stops_the_search(mlp):
    """At 20 MB store-all fits the small batches (no table), then a batch needs one whose --slots 0 table is
    too large: the rows so far, the largest size that fit as a lower bound, then the error (exit 2)."""
    r = run_cli("max-batch", mlp, "--memory", "20MB", "--slots", "0")
    assert r.code == 2
    assert "largest batch: " in r.out and "(at least; the search stopped at batch " in r.out
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "--slots: the rotor table would have " in lines[0], r.err


def test_default_slots_still_search(mlp):
    r = run_cli("max-batch", mlp, "--memory", "20MB", "--limit", "64", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["largest"] == 64


@pytest.fixture
def bad_input_from_batch(monkeypatch):
    """Every solve at a batch >= the given one raises bad input naming a solver option."""
    from memsched.solvers import registry
    from memsched.solvers.errors import InputError

    real = registry.solve

    def install(first: int) -> None:
        def solve(problem, instance, solver, budget, **options):
            if int(instance.meta["batch"]) >= first:
                raise InputError("too large for this solver at this size", field="--option x")
            return real(problem, instance, solver, budget, **options)

        monkeypatch.setattr(registry, "solve", solve)

    return install


COMMON = ("--memory", "10MB", "--limit", "64", "--problem", "graph", "--solver", "checkpoint-all")


def test_bad_input_mid_search_stops_with_the_largest_so_far(mlp, bad_input_from_batch):
    bad_input_from_batch(4)
    r = run_cli("max-batch", mlp, *COMMON)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert lines[0].startswith("memsched max-batch: error: --option x: too large for this solver at this size")
    assert "at batch 4, where the search stopped; batch 2 fits" in lines[0]
    out = r.out.splitlines()
    assert [line.split()[:2] for line in out[1:3]] == [["1", "fits"], ["2", "fits"]]
    assert any(line.startswith("largest batch: 2 (at least; the search stopped at batch 4") for line in out), r.out


def test_bad_input_mid_search_in_json(mlp, bad_input_from_batch):
    bad_input_from_batch(4)
    r = run_cli("max-batch", mlp, *COMMON, "--json")
    assert r.code == 2
    doc = json.loads(r.out)
    assert doc["largest"] == 2 and [p["size"] for p in doc["probes"]] == [1, 2]
    assert doc["stopped"]["size"] == 4 and doc["stopped"]["error"].startswith("--option x: too large")


def test_bad_input_at_the_first_probe_prints_nothing(mlp, bad_input_from_batch):
    bad_input_from_batch(1)
    r = run_cli("max-batch", mlp, *COMMON)
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == "memsched max-batch: error: --option x: too large for this solver at this size"


def test_slots_0_runs_when_store_all_fits_every_size(mlp):
    """rotor builds no table where store-all fits: --slots 0 with a large memory is no bad input then
    (the review's case: 20MB, every batch up to 64 fits store-all)."""
    r = run_cli("max-batch", mlp, "--memory", "20MB", "--slots", "0", "--limit", "64", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["largest"] == 64

"""`memsched max-batch --problem graph`: Checkmate's maximum batch on op-level training graphs, with
Checkmate's overhead bound (store-all plus one forward pass), on a tiny U-Net (51 nodes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.experiments.commands.max_batch import FORWARD, parse_overhead, probe_size  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

torch.set_num_threads(1)

TINY = dict(image_size=32, width=4, depth=1, device="cpu")
ARGS = ("--image-size", "32", "--width", "4", "--depth", "1", "--tolerance", "0", "--problem", "graph")
MEMORY = 1_700_000  # bytes: about 381 kB of activations per sample at store-all, so checkpoint-all holds 4
KW = dict(memory=MEMORY, cost="flops", state_factor=2.0, slots=500, time_limit=10.0, problem="graph")


@pytest.fixture(scope="module")
def checkpoint_all_answer():
    from conftest import run_cli

    r = run_cli(
        "max-batch",
        "unet",
        "--memory",
        str(MEMORY),
        "--solver",
        "checkpoint-all",
        "--max-overhead",
        "forward",
        *ARGS,
        "--json",
    )
    assert r.code == 0, r.err
    return r.json()


def test_checkpoint_all_answer_fits_and_the_next_batch_does_not(checkpoint_all_answer):
    out = checkpoint_all_answer
    assert out["problem"] == "graph" and out["max_overhead"] == FORWARD
    best, res = out["largest"], out["result"]
    assert best >= 2 and res["fits"] and res["status"] in ("optimal", "feasible")
    # checkpoint-all computes each node once: no overhead, and its peak is store-all's
    assert res["overhead"] == pytest.approx(1.0) and res["peak_memory"] == res["store_all_peak"] <= res["budget"]
    for p in out["probes"]:  # every probe: the bound is 1 + forward / total, and a fit obeys both limits
        assert 1.0 < p["bound"] < 2.0 and p["nodes"] == res["nodes"]
        if p["fits"]:
            assert p["peak_memory"] <= p["budget"] and p["overhead"] <= p["bound"] + 1e-9
    assert [p["fits"] for p in out["probes"] if p["size"] == best + 1] == [False]  # tolerance 0: the next one


def test_checkmate_trains_the_batch_checkpoint_all_cannot(checkpoint_all_answer):
    best = checkpoint_all_answer["largest"]
    p = probe_size("unet", {**TINY, "batch": best + 1}, size=best + 1, solver="checkmate", max_overhead=FORWARD, **KW)
    assert p.store_all_peak > p.budget  # checkpoint-all cannot hold it: the gain comes from recomputation
    assert p.fits and p.status in ("optimal", "feasible") and p.peak_memory <= p.budget
    assert 1.0 < p.overhead <= p.bound + 1e-9


def test_graph_default_solver_is_checkmate(cli):
    r = cli("max-batch", "unet", "--memory", str(MEMORY), "--limit", "1", "--time-limit", "5", *ARGS, "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["solver"] == "checkmate" and out["largest"] == 1 and out["max_overhead"] == 1.2


def test_a_numeric_bound_and_a_budget_below_the_weights():
    p = probe_size("unet", {**TINY, "batch": 4}, size=4, solver="checkpoint-all", max_overhead=1.0, **KW)
    assert p.bound == 1.0 and p.fits
    tiny = {**KW, "memory": 1000}  # bytes: less than the weights
    p = probe_size("unet", {**TINY, "batch": 4}, size=4, solver="checkmate", max_overhead=1.5, **tiny)
    assert not p.fits and p.status == "infeasible" and p.budget < 0


def test_parse_overhead():
    assert parse_overhead("forward") == FORWARD and parse_overhead(" Forward ") == FORWARD
    assert parse_overhead("1.25") == 1.25
    for bad in ("0.9", "fast", ""):
        with pytest.raises(InputError):
            parse_overhead(bad)


def test_bad_input_exits_2(cli):
    r = cli("max-batch", "unet", "--memory", "1GB", "--max-overhead", "fast", *ARGS)
    assert r.code == 2 and "--max-overhead" in r.err
    r = cli("max-batch", "unet", "--memory", "1GB", "--solver", "rotor", *ARGS)  # a chain solver
    assert r.code == 2


def test_a_rejected_schedule_is_a_bug_not_a_size_that_does_not_fit(monkeypatch):
    from memsched.experiments.commands.max_batch import SolverBugError
    from memsched.solvers import registry

    def rejected(*_args, **_kw):
        raise RuntimeError("solver x returned a schedule the simulator rejects")

    monkeypatch.setattr(registry, "solve", rejected)
    with pytest.raises(SolverBugError):
        probe_size("unet", {**TINY, "batch": 2}, size=2, solver="checkpoint-all", max_overhead=FORWARD, **KW)

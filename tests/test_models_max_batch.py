"""`memsched max-batch`: the search, and that its answer fits while the next size does not."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from memsched.experiments.commands.max_batch import probe_size, search_largest  # noqa: E402

torch.set_num_threads(1)

TINY = dict(image_size=64, width=4, depth=1, device="cpu")
ARGS = ("--image-size", "64", "--width", "4", "--depth", "1", "--tolerance", "0")


@pytest.mark.parametrize("threshold,limit", [(1, 100), (37, 100), (64, 64), (100, 100), (5, 5), (0, 10)])
def test_search_finds_the_threshold_in_few_calls(threshold, limit):
    calls: list[int] = []

    def fits(k: int) -> bool:
        calls.append(k)
        return k <= threshold

    assert search_largest(fits, limit) == min(threshold, limit)
    assert len(calls) <= 2 * math.log2(limit) + 3


def test_tolerance_stops_early_below_the_threshold():
    assert 990 <= search_largest(lambda k: k <= 1000, 10**6, tolerance=0.01) <= 1000


def test_answer_fits_and_the_next_batch_does_not(cli):
    memory = 8 * 2**20
    r = cli("max-batch", "resnet18", "--memory", str(memory), "--max-overhead", "1.1", *ARGS, "--json")
    assert r.code == 0, r.err
    out = r.json()
    best = out["largest"]
    assert out["result"]["fits"] and out["result"]["overhead"] <= 1.1
    assert out["result"]["peak_memory"] <= out["result"]["budget"] < memory
    kw = dict(memory=memory, max_overhead=1.1, solver="rotor", cost="flops", state_factor=2.0, slots=500,
              time_limit=None)
    assert not probe_size("resnet18", {**TINY, "batch": best + 1}, size=best + 1, **kw).fits
    # without recomputation the largest batch is no larger: store-all must hold every activation
    r = cli("max-batch", "resnet18", "--memory", str(memory), "--solver", "store-all", *ARGS, "--json")
    assert r.code == 0 and r.json()["largest"] <= best
    assert r.json()["result"]["store_all_peak"] <= r.json()["result"]["budget"]


def test_vary_image_size(cli):
    r = cli("max-batch", "resnet18", "--memory", "8MiB", "--vary", "image-size", "--batch", "2", "--width", "4",
            "--depth", "1", "--step", "32", "--limit", "512", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["largest"] % 32 == 0 and out["largest"] >= 64
    assert all(p["size"] % 32 == 0 for p in out["probes"])


def test_bad_input_and_infeasible(cli):
    r = cli("max-batch", "resnet18", "--memory", "lots", *ARGS)
    assert r.code == 2 and "--memory" in r.err
    r = cli("max-batch", "resnet18", "--memory", "1GB", "--cost", "measured", *ARGS)
    assert r.code == 2 and "--cost" in r.err
    r = cli("max-batch", "resnet18", "--memory", "1GB", "--batch", "4", *ARGS)
    assert r.code == 2 and "--batch" in r.err
    r = cli("max-batch", "resnet18", "--memory", "1GB", "--max-overhead", "0.5", *ARGS)
    assert r.code == 2 and "--max-overhead" in r.err
    r = cli("max-batch", "resnet18", "--memory", "1GB", "--solver", "nope", *ARGS)
    assert r.code == 2
    r = cli("max-batch", "resnet18", "--memory", "100kB", *ARGS)  # less than the weights and gradients
    assert r.code == 1 and "infeasible" in r.err
    r = cli("max-batch", "resnet18", "--memory", "1GB", "--image-size", "32", "--width", "4", "--limit", "4",
            "--json")  # batch norm needs two values per channel at 1x1: batch 1 is refused, the search goes on
    assert r.code == 0, r.err
    assert r.json()["refused"][0]["size"] == 1 and r.json()["largest"] == 4

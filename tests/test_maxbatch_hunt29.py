"""Session 29 hunt (max-batch, profile, export-graph, run): one batch cap for every command, image sides
a network refuses skipped by ``max-batch --vary image-size``, ``--repeats`` / ``--timing`` refused under
a counted cost model, and ``run --problem graph --timing`` passed to the graph's profile."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")

torch.set_num_threads(1)

#: a tiny resnet18 (fake tensors with a counted cost: milliseconds)
TINY = ("--image-size", "32", "--width", "4", "--depth", "1", "--batch", "2")
#: inception_v3 at its smallest width (it refuses image sides below 75 px)
INCEPTION = ("max-batch", "inception_v3", "--vary", "image-size", "--batch", "2", "--width", "8")


def cli(*argv: object) -> tuple[int, str, str]:
    """`memsched ARGV` in-process: (exit code, stdout, stderr) (`conftest.run_cli`)."""
    res = run_cli(*(str(a) for a in argv))
    return res.code, res.out, res.err


# --- bug 1: one batch cap (2^24) for profile, run, export-graph and max-batch's --limit -------------------------

BEYOND_OLD_CAP = 10**6 + 1  # a max-batch answer that `run --batch` used to refuse (its cap was 10^6)


@pytest.mark.parametrize("command", [("profile", "nosuchmodel"), ("export-graph", "nosuchmodel", "-o", "g.json"),
                                     ("run", "resnet18", "--budget", "abc")])
@pytest.mark.parametrize("batch", [BEYOND_OLD_CAP, 2**24])
def test_batch_up_to_the_max_batch_limit_is_accepted(command, batch, tmp_path, monkeypatch):
    """A batch max-batch can answer (its --limit goes to 2^24) passes --batch's check: the command
    fails on the next thing wrong (the model, the budget), not on --batch."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(*command, "--batch", batch)
    assert code == 2 and "Traceback" not in err
    assert "--batch" not in err, err
    assert ("--budget" if command[0] == "run" else "MODEL") in err


@pytest.mark.parametrize("command", [("profile", "resnet18"), ("export-graph", "resnet18", "-o", "g.json"),
                                     ("run", "resnet18", "--budget", "1MB")])
def test_batch_above_the_cap_is_refused_everywhere(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(*command, "--batch", 2**24 + 1)
    assert code == 2 and "--batch" in err and "16777216" in err


def test_max_batch_limit_has_the_same_cap(tmp_path, monkeypatch):
    """--limit 2^24 is taken (the MODEL error comes first), one more is refused naming --limit."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("max-batch", "nosuchmodel", "--memory", "1GB", "--limit", 2**24)
    assert code == 2 and "MODEL" in err and "--limit" not in err
    code, _, err = cli("max-batch", "resnet18", "--memory", "1GB", "--limit", 2**24 + 1)
    assert code == 2 and "--limit" in err and "16777216" in err


def test_the_cap_is_one_constant():
    from memsched.experiments.commands import max_batch, profile
    from memsched.experiments.sweep import config
    from memsched.models.zoo.registry import SIZE_RANGES

    assert max_batch.MAX_BATCH == profile.MAX_BATCH == SIZE_RANGES["batch"][1] == 2**24
    assert config._MODEL_COUNTS["batch"] == (1, 2**24)


# --- bug 2: max-batch --vary image-size skips the sides a network refuses as too small ----------------------------

def test_vary_image_size_skips_sides_too_small():
    """inception_v3 refuses 32 and 64 px (the first sides of --step 32): the search goes on to 128."""
    code, out, err = cli(*INCEPTION, "--memory", "50MB", "--limit", "128", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["largest"] == 128
    assert [p["size"] for p in doc["probes"]] == [128]


def test_vary_image_size_no_side_accepted_names_vary_and_step():
    code, out, err = cli(*INCEPTION, "--memory", "50MB", "--limit", "64")
    assert code == 2 and "Traceback" not in err and out == ""
    assert "--vary image-size" in err and "--step 32" in err and "32, 64 px" in err
    assert "75 pixels" in err  # why
    assert "--image-size" not in err  # an option max-batch forbids with --vary image-size


def test_vary_image_size_smallest_accepted_side_does_not_fit():
    """The first side accepted (128 px) does not fit: a smaller accepted one (96) is tried, and the
    infeasible message names it."""
    code, _, err = cli(*INCEPTION, "--memory", "1MB", "--limit", "256")
    assert code == 1, err
    assert "image-size 96" in err


@pytest.mark.parametrize("k0,largest,limit", [(1, 40, 100), (3, 40, 100), (3, 3, 100), (3, 2, 100), (75, 200, 256),
                                              (75, 300, 256), (9, 50, 8), (1, 0, 10), (64, 64, 64), (5, 4, 4)])
def test_search_accepted(k0, largest, limit):
    """Sizes below k0 refused (None), k0..largest fit; each size asked once, about 3 log2(limit) asks."""
    from memsched.experiments.commands.max_batch import search_accepted

    calls: list[int] = []

    def verdict(k: int) -> bool | None:
        calls.append(k)
        return None if k < k0 else k <= largest

    best, smallest = search_accepted(verdict, limit)
    if k0 > limit:  # no size accepted
        assert (best, smallest) == (0, 0)
    else:
        assert best == (min(largest, limit) if largest >= k0 else 0)
        assert k0 <= smallest <= max(best, k0)
        if best == 0:  # the smallest accepted size was found (bisection), and it does not fit
            assert smallest == k0
    assert len(calls) == len(set(calls)) <= 3 * math.log2(max(limit, 2)) + 3


# --- bug 3: --repeats / --timing refused under a counted cost model -----------------------------------------------

@pytest.mark.parametrize("cost", ["flops", "roofline:a100"])
@pytest.mark.parametrize("option", [("--repeats", "3"), ("--timing", "isolated")])
@pytest.mark.parametrize("command", ["profile", "export-graph"])
def test_timing_options_refused_with_a_counted_cost(command, option, cost, tmp_path):
    out = tmp_path / "x.json"
    code, _, err = cli(command, "resnet18", *TINY, "--cost", cost, *option, "-o", out)
    assert code == 2 and "Traceback" not in err
    assert f"{option[0]}: {command} times nothing with a counted cost model" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("command", ["profile", "export-graph"])
def test_counted_cost_without_timing_options_still_runs(command, tmp_path):
    out = tmp_path / "x.json"
    code, _, err = cli(command, "resnet18", *TINY, "--cost", "flops", "-o", out)
    assert code == 0, err
    assert out.exists()


def test_export_graph_default_cost_without_options_runs(tmp_path):
    out = tmp_path / "g.json"
    code, _, err = cli("export-graph", "resnet18", *TINY, "-o", out)  # --cost flops by default
    assert code == 0, err


def test_measured_profile_takes_repeats_and_defaults_to_five(tmp_path):
    given, default = tmp_path / "given.json", tmp_path / "default.json"
    assert cli("profile", "resnet18", *TINY, "--device", "cpu", "--repeats", "1", "--timing", "isolated",
               "-o", given)[0] == 0
    assert json.loads(given.read_text())["meta"]["repeats"] == 1
    assert cli("profile", "resnet18", *TINY, "--device", "cpu", "-o", default)[0] == 0
    assert json.loads(default.read_text())["meta"]["repeats"] == 5


def test_max_batch_refusal_has_the_shared_wording():
    code, _, err = cli("max-batch", "lstm", "--memory", "3MB", "--timing", "isolated")
    assert code == 2 and "--timing: max-batch times nothing with a counted cost model" in err


# --- bug 4: run --problem graph profiles with --timing ----------------------------------------------------------

FACTORY = '''import torch
from torch import nn


def build(batch=2):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)), torch.randn(batch, 8)
'''


@pytest.mark.parametrize("timing", ["isolated", "in_step", None])
def test_run_graph_profiles_with_timing(timing, tmp_path):
    net = tmp_path / "tinynet.py"
    net.write_text(FACTORY)
    saved = tmp_path / "graph.json"
    extra = () if timing is None else ("--timing", timing)
    code, out, err = cli("run", f"{net}:build", "--problem", "graph", "--solver", "checkpoint-all", "--budget", "100%",
                         "--device", "cpu", "--repeats", "1", "--time-repeats", "1", "--no-independent",
                         "--profile-file", saved, "--json", *extra)
    assert code == 0, err
    meta = json.loads(saved.read_text())["graph"]["meta"]
    assert meta["timing"] == (timing or "in_step")
    note = json.loads(out).get("note") or ""
    if timing == "isolated":  # timed alone: no temporaries recorded, and the note says how to get them
        assert "timing 'isolated'" in note and "--timing in_step" in note



@pytest.mark.parametrize("key, value, ok", [("batch", 2**24, True), ("batch", 2**24 + 1, False),
                                            ("seed", 2**32 - 1, True), ("seed", 2**32, False)])
def test_a_sweeps_model_sizes_share_the_commands_ranges(key, value, ok):
    """A sweep file's model ``batch`` and ``seed`` take what ``--batch`` and ``--seed`` take."""
    from memsched.experiments.sweep import config
    from memsched.solvers.errors import InputError

    def bad(field: str, why: str) -> InputError:
        return InputError(why, field=field)

    entry = {"model": "resnet18", key: value}
    if ok:
        config._instance_spec(0, entry, bad)
    else:
        with pytest.raises(InputError, match="at most|in 0") as err:
            config._instance_spec(0, entry, bad)
        assert err.value.field == f"instances[0].{key}"

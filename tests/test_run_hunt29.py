"""Hunt 29 (`memsched run` / `profile` measurements):

1. `memsched profile` and `memsched run` always timed by the wall clock, though docs/chain.md says
   CPU times are taken "by the run's clock (thread CPU time with one thread)" and sweeps use
   `models.run.default_clock`: a profile with ``--threads 1`` recorded ``clock: wall``. Both (and
   `models.run.prepare`, so the facade's `memsched.run`) now take `default_clock()` when no clock is
   given; a profile's ``meta.clock`` and a run's ``clock`` say which one timed it.
2. ``--seed -1`` / ``--seed 2**40`` ran (exit 0) while ``memsched.run(seed=-1)`` is an `InputError`:
   the command line's ``--seed`` (run, profile, max-batch, export-graph) now takes 0..2^32-1, else
   exit 2 naming ``--seed``.
3. With an instance file `memsched run` refused ``--profile-file`` and ``--early-release`` but
   ignored the profiling options ``--repeats`` and ``--timing``: refused now too (exit 2, one line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memsched.models.measure  # noqa: E402
import memsched.models.run  # noqa: E402

import memsched  # noqa: E402

R18 = ["--batch", "2", "--image-size", "32", "--width", "4", "--depth", "1", "--device", "cpu"]
GPT2 = ["--batch", "1", "--seq-len", "8", "--width", "16", "--depth", "1", "--vocab", "32", "--device", "cpu"]
RUN = ["--budget", "100%", "--no-independent", "--time-repeats", "1"]


@pytest.fixture(autouse=True)
def threads_kept():
    """Each test may set torch's threads (``--threads``): put them back afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny resnet18 chain file (the hunter's ``r18.json``), profiled once for the module."""
    from conftest import run_cli

    path = tmp_path_factory.mktemp("hunt29") / "r18.json"
    before = torch.get_num_threads()
    res = run_cli("profile", "resnet18", *R18, "--repeats", "1", "-o", path)
    torch.set_num_threads(before)
    assert res.code == 0, res.err
    return str(path)


# ---------------------------------------------------------------------------- 1. the clock
def test_profile_cli_with_one_thread_times_by_thread_cpu_time(cli, tmp_path: Path) -> None:
    """The hunter's repro_clock.sh: ``profile --threads 1`` recorded ``clock: wall``."""
    out = tmp_path / "g.json"
    res = cli("profile", "gpt2", *GPT2, "--repeats", "1", "--threads", "1", "-o", out)
    assert res.code == 0, res.err
    assert json.loads(out.read_text())["meta"]["clock"] == "thread"


def test_run_cli_with_one_thread_profiles_and_times_by_thread_cpu_time(cli, tmp_path: Path,
                                                                         step_clocks: list[str]) -> None:
    """A run that profiles: its --profile-file and its JSON ``clock`` say "thread", and its steps used it."""
    prof = tmp_path / "p.json"
    res = cli("run", "gpt2", *GPT2, *RUN, "--repeats", "1", "--threads", "1", "--profile-file", prof, "--json")
    assert res.code == 0, res.err
    assert json.loads(prof.read_text())["meta"]["clock"] == "thread"
    assert res.json()["clock"] == "thread"
    assert step_clocks and set(step_clocks) == {"thread"}


def test_run_cli_on_an_instance_file_times_steps_by_the_default_clock(cli, chain_file: str,
                                                                      step_clocks: list[str]) -> None:
    """With an instance file nothing is profiled; the steps are still timed by `default_clock`."""
    res = cli("run", chain_file, *RUN, "--threads", "1", "--json")
    assert res.code == 0, res.err
    assert res.json()["clock"] == "thread"
    assert step_clocks and set(step_clocks) == {"thread"}


def test_facade_run_takes_the_default_clock(chain_file: str, step_clocks: list[str]) -> None:
    """`memsched.run` (through `models.run.run`, no clock argument) picks up `default_clock`."""
    torch.set_num_threads(1)
    out = memsched.run("resnet18", "100%", chain=chain_file, time_repeats=1)
    assert out["clock"] == "thread"
    assert step_clocks and set(step_clocks) == {"thread"}


@pytest.mark.parametrize("threads, clock", [(1, "thread"), (2, "wall")])
def test_facade_profile_takes_the_default_clock(threads: int, clock: str) -> None:
    """`memsched.profile` (a zoo name and your own blocks) times by `default_clock`, as the CLI does."""
    torch.set_num_threads(threads)
    chain = memsched.profile("gpt2", repeats=1, batch=1, seq_len=8, width=16, depth=1, vocab=32)
    assert chain.meta["clock"] == clock
    blocks = [torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)]
    own = memsched.profile((blocks, torch.randn(2, 4)), repeats=1)
    assert own.meta["clock"] == clock


def test_prepare_uses_wall_clock_with_several_threads(chain_file: str) -> None:
    """More than one thread: the thread's CPU time misses the others' work, so the wall clock."""
    torch.set_num_threads(2)
    target = memsched.models.run.prepare("chain", "resnet18", instance=chain_file)
    assert target.info["clock"] == "wall"
    torch.set_num_threads(1)
    assert memsched.models.run.prepare("chain", "resnet18", instance=chain_file).info["clock"] == "thread"
    assert memsched.models.run.prepare("chain", "resnet18", instance=chain_file, clock="wall").info["clock"] == "wall"


# ---------------------------------------------------------------------------- 2. --seed's range
@pytest.mark.parametrize("seed", ["-1", "1099511627776", "4294967296"])
@pytest.mark.parametrize("command", ["run", "profile", "max-batch"])
def test_cli_seed_out_of_range_is_a_usage_error(cli, chain_file: str, tmp_path: Path, command: str,
                                                seed: str) -> None:
    """The hunter's repro_seed.sh: ``--seed -1`` ran; the facade refuses it (0..2^32-1)."""
    args = {"run": ["run", chain_file, *RUN, "--json"],
            "profile": ["profile", "gpt2", *GPT2, "--repeats", "1", "-o", tmp_path / "s.json"],
            "max-batch": ["max-batch", "gpt2", "--seq-len", "8", "--width", "16", "--depth", "1", "--vocab", "32",
                          "--memory", "1MB"]}[command]
    res = cli(*args, "--seed", seed)
    assert res.code == 2, (res.code, res.err)
    assert "--seed" in res.err and "0..4294967295" in res.err
    assert len(res.err.strip().splitlines()) <= 2  # argparse's usage line and the one error line


def test_cli_seed_takes_the_largest_seed(cli, chain_file: str) -> None:
    """2^32 - 1, the facade's largest seed, runs."""
    res = cli("run", chain_file, *RUN, "--seed", str(2**32 - 1), "--json")
    assert res.code == 0, res.err


# ---------------------------------------------------------------------------- 3. profiling options with a file
@pytest.mark.parametrize("option", [["--repeats", "2"], ["--timing", "in_step"], ["--timing", "isolated"]])
@pytest.mark.parametrize("via_chain", [False, True])
def test_run_with_an_instance_file_refuses_profiling_options(cli, chain_file: str, option: list[str],
                                                             via_chain: bool) -> None:
    """As max-batch refuses them, and run refuses --profile-file and --early-release: nothing is profiled."""
    head = ["resnet18", "--chain", chain_file] if via_chain else [chain_file]
    res = cli("run", *head, *RUN, *option, "--json")
    assert res.code == 2, (res.code, res.err)
    assert res.err.strip().count("\n") == 0
    assert res.err.startswith(f"memsched run: error: {option[0]}:")
    assert "instance file" in res.err


def test_run_without_repeats_profiles_five_times(cli, tmp_path: Path) -> None:
    """--repeats left out still profiles with its default (5), now that run tells it from a given one."""
    prof = tmp_path / "p.json"
    res = cli("run", "gpt2", *GPT2, *RUN, "--threads", "1", "--profile-file", prof, "--json")
    assert res.code == 0, res.err
    assert json.loads(prof.read_text())["meta"]["repeats"] == 5

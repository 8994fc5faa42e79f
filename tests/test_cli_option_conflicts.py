"""Options that conflict or would be silently ignored are bad input (exit 2, one line naming them).

1. A solver option given twice (the same key, '-' and '_' spellings, or an exact solver's older
   name) is refused naming ``--option KEY``; ``partition --replication --option replication=...``
   too.
2. ``memsched run`` refuses ``--chain`` when MODEL is an instance file, and ``--profile-file`` /
   ``--early-release`` when an instance file gives the costs (nothing is profiled); ``--model``
   when MODEL names the network.
3. ``run FILE --model nosuch`` says the model is unknown; partition's unknown-option message lists
   only what ``--option`` takes.
4. The ``--help`` of ``partition --replication`` and of ``--device`` (max-batch, export-graph) say
   what the code does; ``--solver ""`` is refused by partition and max-batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memsched.solvers.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "solvers" / "data" / "examples" / "tiny.json"
PIPE = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"
SIAMESE = ROOT / "solvers" / "data" / "join" / "siamese8.json"
CPU = ["--device", "cpu", "--time-repeats", "1"]


# ---------------------------------------------------------------------------- 1. an option given twice
@pytest.mark.parametrize("first, second, name", [
    ("segments=1", "segments=2", "segments"),
    ("table-budget=100", "table_budget=200", "table_budget"),
    ("workers=1", "num_workers=3", "workers"),
    ("threads=2", "num_workers=3", "workers"),
    ("random_seed=1", "seed=1", "seed"),
])
def test_parse_options_refuses_a_key_given_twice(first: str, second: str, name: str) -> None:
    from memsched.experiments.commands._common import parse_options

    with pytest.raises(InputError) as err:
        parse_options([first, second])
    assert err.value.field == f"--option {name}" and "twice" in str(err.value)
    # one spelling each: kept as given, '-' read as '_'
    assert parse_options(["table-budget=100", "workers=2"]) == {"table_budget": 100, "workers": 2}


@pytest.mark.parametrize("solver, options", [
    ("periodic", ["segments=1", "segments=2"]),
    ("rotor", ["table-budget=100", "table_budget=200"]),
    ("cpsat", ["workers=1", "num_workers=3"]),
])
def test_cli_solve_refuses_an_option_given_twice(cli, solver: str, options: list[str]) -> None:
    argv = ["solve", TINY, "--budget", "25", "--solver", solver, "--time-limit", "5"]
    for item in options:
        argv += ["--option", item]
    res = cli(*argv)
    assert res.code == 2 and "--option" in res.err and "twice" in res.err, res.err
    assert not res.out


def test_cli_partition_refuses_replication_flag_and_option_together(cli) -> None:
    base = ["partition", PIPE, "--devices", "4", "--memory", "200%"]
    res = cli(*base, "--replication", "--option", "replication=false", "--json")
    assert res.code == 2 and "--option replication" in res.err and "--replication" in res.err, res.err
    assert not res.out
    res = cli(*base, "--option", "replication=true", "--json")  # the option alone still works
    assert res.code == 0, res.err
    assert "with replication" in res.json()["scope"]


# ---------------------------------------------------------------------------- 2. run: options without effect


def _profiled(tmp_path: Path) -> Path:
    """tiny.json as a profile of resnet18 (its meta's model)."""
    data = json.loads(TINY.read_text())
    data["meta"]["model"] = "resnet18"
    path = tmp_path / "r18.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_run_refuses_chain_when_model_is_an_instance_file(cli, run_stub, tmp_path) -> None:
    res = cli("run", _profiled(tmp_path), "--chain", TINY, "--budget", "90%", *CPU)
    assert res.code == 2 and "--chain" in res.err and not run_stub, res.err


@pytest.mark.parametrize("how", ["model", "chain"])
def test_cli_run_refuses_profile_file_with_an_instance_file(cli, run_stub, tmp_path, how: str) -> None:
    path = _profiled(tmp_path)
    out = tmp_path / "pf.json"
    argv = [path] if how == "model" else ["resnet18", "--chain", path]
    res = cli("run", *argv, "--budget", "90%", "--profile-file", out, *CPU)
    assert res.code == 2 and "--profile-file" in res.err and not run_stub, res.err
    assert not out.exists()


@pytest.mark.parametrize("how", ["model", "chain"])
def test_cli_run_refuses_early_release_with_an_instance_file(cli, run_stub, tmp_path, how: str) -> None:
    path = _profiled(tmp_path)
    argv = [path] if how == "model" else ["resnet18", "--chain", path]
    res = cli("run", *argv, "--budget", "90%", "--early-release", *CPU)
    assert res.code == 2 and "--early-release" in res.err and not run_stub, res.err
    # without the flag the run goes ahead (the executor follows the file's own profile)
    res = cli("run", *argv, "--budget", "90%", *CPU)
    assert res.code == 1 and "stub" in res.err, res.err


def test_cli_run_refuses_early_release_for_other_problems(cli, run_stub) -> None:
    res = cli("run", "resnet18", "--problem", "graph", "--budget", "90%", "--early-release", *CPU)
    assert res.code == 2 and "--early-release" in res.err and not run_stub, res.err


def test_cli_run_refuses_model_when_model_names_the_network(cli, run_stub) -> None:
    res = cli("run", "resnet18", "--model", "lstm", "--budget", "90%", *CPU)
    assert res.code == 2 and "--model" in res.err and not run_stub, res.err


# ---------------------------------------------------------------------------- 3. messages
def test_cli_run_names_an_unknown_model(cli, run_stub, tmp_path) -> None:
    res = cli("run", _profiled(tmp_path), "--model", "nosuch", "--budget", "90%", *CPU)
    assert res.code == 2 and not run_stub
    assert "--model" in res.err and "unknown model 'nosuch'" in res.err and "resnet18" in res.err, res.err
    assert "needs --model" not in res.err
    data = json.loads(SIAMESE.read_text())
    data["meta"]["model"] = "siamese"
    join = tmp_path / "siam.json"
    join.write_text(json.dumps(data))
    res = cli("run", join, "--model", "nosuch", "--budget", "100%", *CPU)
    assert res.code == 2 and not run_stub
    assert "unknown join network 'nosuch'" in res.err and "triplet" in res.err, res.err


def test_cli_partition_unknown_option_lists_only_what_option_takes(cli) -> None:
    res = cli("partition", PIPE, "--devices", "2", "--memory", "200%", "--option", "foo=1")
    assert res.code == 2 and "unknown option 'foo'" in res.err, res.err
    listed = res.err.split("its options:")[1]
    assert "replication" in listed
    for flag_set in ("devices", "micro_batches", "schedule"):
        assert flag_set not in listed, res.err


# ---------------------------------------------------------------------------- 4. help text, empty solver
def _help(cli, command: str) -> str:
    res = cli(command, "--help")
    assert res.code == 0
    return " ".join(res.out.split())  # argparse wraps lines


def test_help_says_what_the_code_does(cli) -> None:
    text = _help(cli, "partition").replace("- ", "-")  # argparse may break a line after a hyphen
    assert "madpipe, pipedream, dag, dag-pipedream" in text
    text = _help(cli, "max-batch")
    assert "cuda when present" not in text and "cpu only" in text
    text = _help(cli, "export-graph")
    assert "with --cost measured" in text and "leave it out or give cpu" in text


def test_cli_partition_and_max_batch_refuse_an_empty_solver(cli) -> None:
    res = cli("partition", PIPE, "--devices", "2", "--memory", "200%", "--solver", "", "--json")
    assert res.code == 2 and "--solver" in res.err and not res.out, res.err
    pytest.importorskip("torch")
    res = cli("max-batch", "lstm", "--memory", "1MB", "--seq-len", "2", "--width", "4",
              "--limit", "2", "--solver", "", "--json")
    assert res.code == 2 and "--solver" in res.err and not res.out, res.err


def test_cli_run_refuses_a_profile_file_onto_the_network_source(cli, tmp_path):
    """``run FILE.py:FUNCTION --profile-file FILE.py`` would replace the network's source."""
    import shutil

    from conftest import ROOT

    source = tmp_path / "my_network.py"
    shutil.copy(ROOT / "models" / "examples" / "my_network.py", source)
    before = source.read_bytes()
    res = cli("run", f"{source}:build", "--budget", "80%", "--profile-file", source)
    assert res.code == 2 and "--profile-file" in res.err and "Traceback" not in res.err
    assert source.read_bytes() == before


@pytest.mark.parametrize("option", [["--timing", "isolated"], ["--repeats", "7"]])
def test_cli_max_batch_refuses_timing_options(cli, option):
    """max-batch counts costs (flops, roofline): a timing option would be ignored."""
    res = cli("max-batch", "lstm", "--memory", "3MB", *option)
    assert res.code == 2 and option[0] in res.err and "Traceback" not in res.err

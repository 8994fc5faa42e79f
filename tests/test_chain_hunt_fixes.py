"""Fixes from the chain bug hunt: backend logs stay off ``--json``'s standard output, rotor's
``table_budget`` is checked alike on the command line and in Python, ``bwd_overhead_released``
errors keep the value as written, and the exact options' errors spell the option as the caller did."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import EXAMPLES
from memsched.experiments.commands._checks import option_type_error
from memsched.solvers.chain import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.units import MAX_BYTES

import memsched


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`memsched ARGV` in a child process: the backends print at file-descriptor level."""
    return subprocess.run([sys.executable, "-m", "memsched.experiments.cli", *argv], capture_output=True, text=True,
                          timeout=120)


# --------------------------------------------------------------------------- 1. logs off --json's stdout
@pytest.mark.parametrize("options, log_word", [
    (["--solver", "cpsat", "--option", "verbose=true"], "CP-SAT"),
    (["--solver", "cpsat", "--option", "parameters=log_search_progress:true"], "CP-SAT"),
    (["--solver", "milp", "--option", "verbose=true"], "presolv"),  # SCIP, in process
    (["--solver", "milp", "--option", "verbose=true", "--option", "backend=highs"], "HiGHS"),
    (["--solver", "milp", "--option", "verbose=true", "--option", "backend=portfolio", "--option", "workers=2"],
     "presolv"),  # SCIP and HiGHS in forked children
])
def test_verbose_backend_log_goes_to_stderr_not_json_stdout(options, log_word):
    res = _cli("solve", str(EXAMPLES / "random10.json"), "--budget", "40%", "--json", "--time-limit", "30", *options)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)  # stdout holds exactly the JSON object
    assert answer["status"] in ("optimal", "feasible")
    assert log_word.lower() in res.stderr.lower()  # the log was asked for: it is on stderr


def test_stdout_to_stderr_restores_fd1_after_interrupt_and_nests(capfd):
    from memsched.solvers.exact.stdio import stdout_to_stderr

    with pytest.raises(KeyboardInterrupt):
        with stdout_to_stderr():
            os.write(1, b"inside\n")
            with stdout_to_stderr():  # nested: the outer block restores
                os.write(1, b"nested\n")
            os.write(1, b"after-nested\n")
            raise KeyboardInterrupt
    os.write(1, b"restored\n")
    with stdout_to_stderr(active=False):
        os.write(1, b"inactive\n")
    out, err = capfd.readouterr()
    assert out.split() == ["restored", "inactive"]
    assert err.split() == ["inside", "nested", "after-nested"]


# --------------------------------------------------------------------------- 2. table_budget range
def test_cli_accepts_table_budget_as_python_does():
    big = 50_000_000
    res = _cli("solve", str(EXAMPLES / "random10.json"), "--budget", "50%", "--option", f"table_budget={big}", "--json")
    assert res.returncode == 0, res.stderr
    api = memsched.solve(str(EXAMPLES / "random10.json"), "50%", "rotor", table_budget=big)
    assert json.loads(res.stdout)["makespan"] == pytest.approx(api.raw.objective)
    assert option_type_error("int", "table_budget", MAX_BYTES) is None


@pytest.mark.parametrize("value", [0, MAX_BYTES + 1])
def test_table_budget_refused_alike_with_the_same_range(value):
    res = _cli("solve", str(EXAMPLES / "random10.json"), "--budget", "50%", "--option", f"table_budget={value}")
    assert res.returncode == 2
    with pytest.raises(InputError) as err:
        memsched.solve(str(EXAMPLES / "random10.json"), "50%", "rotor", table_budget=value)
    python = str(err.value)
    assert python.startswith("table_budget: ") and f"1..{MAX_BYTES}" in python
    assert f"error: --option {python}" in res.stderr  # same text, the option spelt as on the command line


# --------------------------------------------------------------------------- 3. bwd_overhead_released
def _chain_with_release(value):
    data = {"format": "memsched.chain/1", "input_size": 4,
            "stages": [{"fwd_time": 1, "bwd_time": 2, "out_size": 4, "tape_size": 8, "fwd_overhead": 0,
                        "bwd_overhead": 0, "bwd_overhead_released": value}],
            "loss": {"bwd_time": 0.5, "bwd_overhead": 0}}
    return Chain.from_dict(data, path="c.json")


@pytest.mark.parametrize("value, shown", [
    (-1.5, "must be an integer number of bytes, got -1.5"),
    (float("-inf"), "must be a finite integer number of bytes, got -inf"),  # JSON's -1e400
    (float("nan"), "got nan"),
    (-13, "-13 must lie between -(out_size + tape_size) = -12 and bwd_overhead = 0"),
    (-1e300, "-1e+300 must lie between"),
    (-(10**40), "a negative integer of about 41 digits must lie between"),
    ("-3", "must be a number, got '-3'"),
])
def test_released_error_keeps_the_value_as_written(value, shown):
    with pytest.raises(InputError) as err:
        _chain_with_release(value)
    assert str(err.value).startswith("c.json: stages[0].bwd_overhead_released: ")
    assert shown in str(err.value)


def test_released_negative_values_in_range_are_read():
    assert _chain_with_release(-12).to_dict()["stages"][0]["bwd_overhead_released"] == -12
    assert _chain_with_release(-8.0).to_dict()["stages"][0]["bwd_overhead_released"] == -8


def test_released_from_a_json_file_with_minus_1e400(tmp_path):
    path = tmp_path / "rel.json"
    path.write_text('{"format":"memsched.chain/1","input_size":4,"stages":[{"fwd_time":1,"bwd_time":2,"out_size":4,'
                    '"tape_size":8,"fwd_overhead":0,"bwd_overhead":0,"bwd_overhead_released":-1e400}],'
                    '"loss":{"bwd_time":0.5,"bwd_overhead":0}}')
    with pytest.raises(InputError, match=r"bwd_overhead_released: must be a finite integer number of bytes, got -inf"):
        Chain.load(path)


# --------------------------------------------------------------------------- 4b. option fields
def test_exact_option_errors_spell_the_option_as_the_caller():
    res = _cli("solve", str(EXAMPLES / "tiny.json"), "--budget", "22", "--solver", "milp", "--option", "workers=0")
    assert res.returncode == 2
    assert "error: --option workers: must be an integer in 1..10000, got 0" in res.stderr
    with pytest.raises(InputError) as err:
        memsched.solve(str(EXAMPLES / "tiny.json"), 22, "milp", workers=0)
    assert err.value.field == "workers" and str(err.value) == "workers: must be an integer in 1..10000, got 0"


@pytest.mark.parametrize("option, value", [("workers", 0), ("workers", "x"), ("memory_gb", -1.0), ("seed", "x")])
def test_exact_options_name_the_option_in_both_spellings(option, value):
    from memsched.solvers.errors import python_spelling
    from memsched.solvers.exact.options import ExactOptions

    with pytest.raises(InputError) as err:
        ExactOptions(**{option: value}).validated()
    assert err.value.field == f"--option {option}"
    with python_spelling(), pytest.raises(InputError) as err:
        ExactOptions(**{option: value}).validated()
    assert err.value.field == option


def test_unknown_milp_backend_names_the_option_as_the_caller():
    """`--option backend=gurobi` is named `--option backend` on the command line, `backend` in Python."""
    res = _cli("solve", str(EXAMPLES / "tiny.json"), "--budget", "22", "--solver", "milp", "--option", "backend=gurobi")
    assert res.returncode == 2
    assert "error: --option backend: unknown MILP backend 'gurobi'" in res.stderr
    with pytest.raises(InputError, match=r"^backend: unknown MILP backend 'gurobi'"):
        memsched.solve(str(EXAMPLES / "tiny.json"), 22, "milp", backend="gurobi")


def test_periodic_refuses_zero_segments_before_solving():
    """``segments`` counts checkpointed segments: 0 is refused with its range (it solved and failed before)."""
    res = _cli("solve", str(EXAMPLES / "tiny.json"), "--budget", "90%", "--solver", "periodic",
               "--option", "segments=0")
    assert res.returncode == 2
    assert "error: --option segments: must be an integer in 1..1000000, got 0" in res.stderr

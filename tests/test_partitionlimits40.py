"""The pipeline DPs' work limit (`_checks.check_work`) and the runner's usage errors.

1. ``memsched partition ... --option replication=true`` skipped the work limit that ``--replication``
   enforces (layers^2 x devices^2 DP steps at most 10^7): partition.py passed the flag alone to
   `check_work`, so 176 PipeDream layers on 300 devices ran 80 s instead of a refusal. The effective
   replication (the flag or the option's true) now decides the limit, and the message names the spelling.
2. Beyond 3162 layers even one device is over 10^7 steps, yet the error advised "use fewer devices (at
   most 1)", also on 1 device ("4000 layers on 1 devices"); the steps read "1e+07 ... more than 1e+07"
   just above the limit. Such a chain is now refused naming the file and its layers (merge layers into
   blocks), and step counts are whole numbers with thousands separators.
3. ``python -m memsched.models.pipeline.runner --memory 1GB`` (a value of the wrong type, a bad choice,
   an unknown option) printed argparse's 13-line usage block; it is now one line and exit 2.

Every refusal here happens before any solve (each command well under a second, plus imports).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from memsched.experiments.commands._checks import MAX_DP_STEPS, check_work
from memsched.solvers.errors import InputError

RUNNER_PROG = "python -m memsched.models.pipeline.runner"


def chain_file(tmp_path: Path, layers: int) -> str:
    """A memsched.chain/1 file of `layers` equal stages (times in ms, sizes in bytes)."""
    stage = {"fwd_time": 1.0, "bwd_time": 2.0, "out_size": 1000, "tape_size": 1000, "fwd_overhead": 0,
             "bwd_overhead": 0}
    doc = {"format": "memsched.chain/1", "name": f"c{layers}", "input_size": 100,
           "loss": {"bwd_time": 0.1, "bwd_overhead": 0}, "stages": [{"name": f"l{k}", **stage} for k in range(layers)]}
    path = tmp_path / f"c{layers}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def memsched_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m memsched ARGS`` in a fresh process (60 s at most: every call here is a refusal)."""
    return subprocess.run([sys.executable, "-m", "memsched", *args], capture_output=True, text=True, timeout=60)


def one_error_line(res: subprocess.CompletedProcess, prog: str) -> str:
    """The one stderr line of a usage or input error (exit 2), asserted to be exactly one."""
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), \
        (res.returncode, res.stderr[-2000:])
    return lines[0]


# ---------------------------------------------------------------------------- 1. --option replication=true
def test_the_replication_option_is_held_to_the_flags_work_limit(tmp_path):
    """100 layers on 40 devices replicated: 100^2 x 40^2 = 1.6e7 steps, over 10^7, however it is allowed."""
    path = chain_file(tmp_path, 100)
    base = ["partition", path, "--devices", "40", "--memory", "16GB", "--solver", "dag"]
    flag = one_error_line(memsched_cli(*base, "--replication"), "memsched partition")
    option = one_error_line(memsched_cli(*base, "--option", "replication=true"), "memsched partition")
    for line in (flag, option):  # the same limit, both naming --devices and the most that fit: isqrt(10^7 / 100^2)
        assert "--devices: " in line and "16,000,000 DP steps" in line and "(at most 31)" in line, line
    assert "--option replication=true" in option and "--replication" in flag


def test_check_work_counts_replication_given_as_an_option():
    inst = SimpleNamespace(length=100)
    check_work("pipeline", "dag", inst, devices=40)  # straight: 100^2 x 40 = 4e5 steps
    with pytest.raises(InputError, match=r"with --option replication=true .*at most 31\) or no --option") as err:
        check_work("pipeline", "dag", inst, devices=40, replication=True,
                   replication_given="--option replication=true")
    assert err.value.field == "--devices"


# ---------------------------------------------------------------------------- 2. advice that can work
@pytest.mark.parametrize(("devices", "steps"), [("1", "16,000,000"), ("2", "32,000,000")])
def test_a_chain_over_the_limit_on_one_device_names_the_file(tmp_path, devices, steps):
    path = chain_file(tmp_path, 4000)
    line = one_error_line(memsched_cli("partition", path, "--devices", devices, "--memory", "16GB"),
                          "memsched partition")
    assert f"{path}: layers: 4000 layers on {devices} device" in line, line
    assert f"is {steps} DP steps" in line and "more than 10,000,000" in line, line
    assert "merge layers into blocks" in line and "at most 3162 layers" in line, line
    assert "fewer devices" not in line and "1 devices" not in line and "e+0" not in line, line


def test_the_limit_on_one_device_is_3162_layers():
    check_work("pipeline", "madpipe", SimpleNamespace(length=3162), devices=1, path="f.json")  # 9,998,244 steps
    with pytest.raises(InputError) as err:
        check_work("pipeline", "madpipe", SimpleNamespace(length=3163), devices=1, path="f.json")
    assert (err.value.path, err.value.field) == ("f.json", "layers")
    assert "1 device is 10,004,569 DP steps" in err.value.message


def test_steps_just_above_the_limit_never_read_as_the_limit():
    """2237 layers on 2 devices is 10,008,338 steps: ``.3g`` printed it as 1e+07, the limit itself."""
    with pytest.raises(InputError) as err:
        check_work("pipeline", "madpipe", SimpleNamespace(length=2237), devices=2)
    assert err.value.field == "--devices"
    assert "is 10,008,338 DP steps" in err.value.message and f"more than {MAX_DP_STEPS:,}" in err.value.message
    assert "use fewer devices (at most 1)" in err.value.message  # 2237^2 x 1 fits


# ---------------------------------------------------------------------------- 3. the runner's usage errors
def test_the_runner_refuses_a_memory_with_units_in_one_line():
    pytest.importorskip("torch")
    res = subprocess.run([sys.executable, "-m", "memsched.models.pipeline.runner", "--memory", "1GB"],
                         capture_output=True, text=True, timeout=120)
    line = one_error_line(res, RUNNER_PROG)
    assert "--memory" in line and "'1GB'" in line and "usage:" not in res.stderr, res.stderr


@pytest.mark.parametrize(("argv", "named"), [(["--devices", "abc"], "--devices"), (["--schedule", "x"], "--schedule"),
                                             (["--no-such-flag"], "--no-such-flag"), (["--layers"], "--layers")])
def test_the_runners_usage_errors_are_one_line_and_exit_2(capsys, argv, named):
    pytest.importorskip("torch")
    from memsched.models.pipeline import runner

    assert runner.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{RUNNER_PROG}: error: ") and named in lines[0], lines

"""Four command-line defects, fixed:

1. ``memsched run`` printed an infeasible budget as bare numbers ("no persistent schedule fits 49588; the
   smallest feasible budget is 3247360"): its line now names the unit as ``memsched solve`` does
   ("49588 bytes (48.43 KiB)", `experiments.commands.run.no_schedule_text`).
2. Standard output that cannot be written (``> /dev/full``: ENOSPC) was an internal error (exit 3); it is now
   one line naming standard output, exit 2, as an output file that cannot be written (``-o /dev/full``).
3. ``memsched export-graph``'s summary and description named a zoo network only; MODEL may be a factory too.
4. ``memsched hrevolve 0`` with levels of incomparable costs said ``feasible`` (no proof) for its one
   possible schedule; ``--ub -0`` was reported as ``-0.0``.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from memsched.experiments.cli import COMMANDS, build_parser, main
from memsched.experiments.commands.run import no_schedule_text
from memsched.solvers.offload.hrevolve import HRevolveInstance, solve_hrevolve
from memsched.solvers.result import FEASIBLE, OPTIMAL

# ------------------------------------------------------------------ 1. sizes in units


def test_run_infeasible_line_names_the_unit(cli):
    """The rotor DP's own words, with both sizes in bytes and binary units (the JSON keeps the numbers)."""
    res = cli("run", "resnet18", "--budget", "1%", "--solver", "rotor", "--batch", "2", "--image-size", "32",
              "--width", "8", "--threads", "1", "--json")
    assert res.code == 1, res.err
    out = json.loads(res.out)
    budget, least = out["budget"], out["min_budget"]
    line = res.err.strip()
    assert line.startswith("memsched run: infeasible: no persistent schedule fits "), line
    assert f"fits {budget} bytes (" in line and f"budget is {least} bytes (" in line and "KiB)" in line, line
    assert len(res.err.strip().splitlines()) == 1


def test_no_schedule_text_sizes():
    """Bare budget / smallest budget get their unit; one saying "bytes" gets the human form; one followed by its
    human form, other numbers (a slot count, a digit inside a word or a decimal) and non-byte units are kept."""
    out = {"message": "no persistent schedule fits 49588; the smallest feasible budget is 3247360",
           "budget": 49588, "min_budget": 3247360, "units": {"memory": "bytes"}}
    assert no_schedule_text(out) == ("no persistent schedule fits 49588 bytes (48.43 KiB); the smallest feasible "
                                     "budget is 3247360 bytes (3.10 MiB)")
    out = {"message": "x finds no schedule within budget 500 bytes (smallest feasible budget: 2048 bytes (2.00 KiB)) "
                      "at 500-slot rounding, v500, 500.5", "budget": 500, "min_budget": 2048}
    assert no_schedule_text(out) == ("x finds no schedule within budget 500 bytes (500 B) (smallest feasible "
                                     "budget: 2048 bytes (2.00 KiB)) at 500-slot rounding, v500, 500.5")
    assert no_schedule_text({"message": "fits 7", "budget": 7, "min_budget": None}) == "fits 7 bytes (7 B)"
    assert no_schedule_text({"message": "fits 7", "budget": 7, "units": {"memory": "slots"}}) == "fits 7"
    assert no_schedule_text({"budget": 7}) == ""


# ------------------------------------------------------------------ 2. standard output that cannot be written


class _FullStream(io.StringIO):
    """A standard output on a full disk: every write and flush fails with ENOSPC."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def _main(argv: list[str], stdout: io.StringIO) -> tuple[int, str]:
    """`main` on `argv` with `stdout` as standard output: (exit code, stderr)."""
    err = io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def test_stdout_that_cannot_be_written_is_one_line_exit_2(monkeypatch):
    """ENOSPC on standard output: one line naming it, exit 2 (was exit 3). A reader that left (BrokenPipeError)
    still exits 0, and an OSError that is no write to standard output is still a bug, exit 3."""
    argv = ["hrevolve", "3", "--level", "2,0,0"]
    code, err = _main(argv, _FullStream())
    assert (code, err) == (2, "memsched hrevolve: error: standard output: cannot write (No space left on device)\n")

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    assert _main(argv, Closed())[0] == 0

    import memsched.solvers.offload.hrevolve as hrevolve

    def broken(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hrevolve, "solve_hrevolve", broken)
    monkeypatch.delenv("MEMSCHED_DEBUG", raising=False)
    code, err = _main(argv, io.StringIO())
    assert code == 3 and "internal error: OSError" in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_dev_full_subprocess():
    """The real thing: ``memsched solvers > /dev/full``, one line and exit 2 (nothing more at exit)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "memsched", "solvers"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "memsched solvers: error: standard output: cannot write (No space left on device)\n"


# ------------------------------------------------------------------ 3. export-graph takes a factory


def test_export_graph_summary_names_the_factory():
    assert "factory" in COMMANDS["export-graph"] and "FILE.py:FUNCTION" in COMMANDS["export-graph"]
    parser = build_parser("export-graph", lazy=True)
    sub = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    description = sub.choices["export-graph"].description or ""
    assert "zoo network's training graph for" not in description
    assert "factory" in description.splitlines()[0] and "FILE.py:FUNCTION" in description


# ------------------------------------------------------------------ 4. hrevolve: l = 0, -0


def test_hrevolve_length_0_is_optimal_whatever_the_levels(cli):
    incomparable = ((1, 1, 5), (1, 5, 1))
    res = solve_hrevolve(HRevolveInstance(0, incomparable, 1.0, 2.0))
    assert res.status == OPTIMAL and res.objective == 2.0 and res.lower_bound == 2.0
    assert "no proof" not in res.scope
    assert solve_hrevolve(HRevolveInstance(3, incomparable)).status == FEASIBLE  # no claim beyond l = 0
    out = cli("hrevolve", "0", "--level", "1,1,5", "--level", "1,5,1", "--json")
    assert out.code == 0 and out.json()["status"] == OPTIMAL and out.json()["cost"] == 1.0


def test_hrevolve_negative_zero_is_zero(cli):
    res = cli("hrevolve", "3", "--level", "2,-0,0", "--ub", "-0", "--uf", "-0", "--json")
    assert res.code == 0, res.err
    assert "-0.0" not in res.out
    data = res.json()
    assert math.copysign(1.0, data["u_b"]) == 1.0 and math.copysign(1.0, data["u_f"]) == 1.0
    assert cli("hrevolve", "3", "--level", "2,0,0", "--ub", "-1").code == 2  # negatives are bad input
    inst = HRevolveInstance(3, ((2, 0, 0),), -0.0, -0.0)
    assert math.copysign(1.0, inst.u_b) == 1.0 and math.copysign(1.0, inst.u_f) == 1.0

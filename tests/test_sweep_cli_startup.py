"""Imports on demand: `memsched --help` loads no command, a chain solve loads only what a chain needs.

Checked by the modules a fresh process holds after the command (``sys.modules``), not by timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memsched.experiments.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "solvers" / "data" / "examples"


PROBE = """
import json, sys
from memsched.experiments.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""


def imported(*argv: str) -> tuple[int, set[str]]:
    """Exit code and the modules a fresh process holds after `memsched ARGV`."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, check=False)
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES "))
    return proc.returncode, set(json.loads(line[len("MODULES "):]))


def test_command_table_matches_the_modules():
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    registered = {a.dest: a.help for a in sub._choices_actions}
    assert registered == {k: v for k, v in COMMANDS.items() if k in registered}
    assert set(registered) <= set(COMMANDS)


def test_help_imports_no_command_and_no_numpy():
    code, names = imported("--help")
    assert code == 0
    assert not {n for n in names if n.startswith("memsched.experiments.commands")}
    assert "numpy" not in names and "memsched.solvers.registry" not in names


def test_chain_solve_imports_only_what_a_chain_needs():
    code, names = imported("solve", str(EXAMPLES / "cnn12.json"), "--budget", "50%", "--solver", "rotor", "--json")
    assert code == 0
    assert "memsched.solvers.chain.dp" in names
    heavy = {"pandas", "networkx", "ortools", "pulp", "matplotlib", "torch", "memsched.solvers.offload",
             "memsched.solvers.graph", "memsched.solvers.pipeline", "memsched.solvers.join",
             "memsched.experiments.sweep", "memsched.solvers.chain.cpsat", "memsched.solvers.chain.milp"}
    assert not heavy & names, sorted(heavy & names)
    commands = {n.rsplit(".", 1)[-1] for n in names if n.startswith("memsched.experiments.commands.")}
    assert commands <= {"solve", "_common", "_checks", "_infeasible"}, commands


def test_unknown_command_is_one_line(cli):
    r = cli("bogus")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1

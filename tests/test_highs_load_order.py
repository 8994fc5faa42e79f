"""`test_exact_interrupt.py` then `test_exact_highs.py` in one process crashed it (segmentation fault)
in `test_without_highspy_the_pywraplp_highs_runs`. No interrupt was involved: the interrupt tests'
module calls `cbc_cmd.cbc_program()` when collected, which imports PuLP, whose ``__init__`` loads
highspy's extension (HiGHS 1.16) with ``RTLD_GLOBAL``; OR-Tools, loaded after it, bound its own
HiGHS (1.12) to highspy's symbols, and pywraplp's HiGHS segfaulted in ``HighsSolveProto``.
`cbc_cmd.cbc_program` and `milp_runner` now load OR-Tools before PuLP can be imported. Each sequence
runs in a child process, so that a crash fails the test instead of ending pytest."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pulp") is None or importlib.util.find_spec("highspy") is None
    or importlib.util.find_spec("ortools") is None, reason="the clash needs PuLP, highspy and OR-Tools")

#: a chain whose MILP solves at once, and the two solves of `test_without_highspy_the_pywraplp_highs_runs`
SOLVES = """
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact import highs_runner
from memsched.solvers.registry import solve

highs_runner.available = lambda: False  # pywraplp's HiGHS, as without highspy
chain = random_chain(6, 3)
budget = rotor_min_budget(chain) + 3

def both():
    highs = solve("chain", chain, "milp", budget, slots=0, backend="highs", time_limit=20)
    assert highs.status == "optimal" and not highs.details["backend_status"].startswith("highspy")
    scip = solve("chain", chain, "milp", budget, slots=0, time_limit=20)
    assert scip.status == "optimal" and abs(scip.objective - highs.objective) < 1e-6
"""


def _run(before: str, after: str, tmp_path) -> subprocess.CompletedProcess:
    """`before`, `SOLVES` and `after` in a fresh interpreter (faulthandler on), from `tmp_path`
    (the `memsched` this process imports: the environment is passed on)."""
    script = textwrap.dedent(before) + SOLVES + textwrap.dedent(after)
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], cwd=tmp_path, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("before", [
    # the interrupt tests' collection: PuLP imported by the CBC lookup, nothing of OR-Tools loaded yet
    "from memsched.solvers.exact.cbc_cmd import cbc_program\ncbc_program()\n",
    # the MILP runner imported, then PuLP by someone else
    "import memsched.solvers.exact.milp_runner  # noqa: F401\nimport pulp  # noqa: F401\n",
])
def test_pulp_after_memsched_leaves_pywraplp_highs_working(tmp_path, before):
    """pywraplp's HiGHS and SCIP solve a small chain after PuLP was imported (highspy's HiGHS global)."""
    proc = _run(before, """
    both()
    print("ok")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")

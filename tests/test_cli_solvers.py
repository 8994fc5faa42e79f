"""`memsched solvers` reads the solver tables and their dependencies from the sources: the
same table as importing every solver, also when a package is missing, and no solver imported."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
for name in {missing!r}:
    sys.modules[name] = None   # as if not installed: find_spec returns None, import raises
from memsched.experiments.commands.solvers import fast_solver_table
fast = fast_solver_table()
heavy = [m for m in ("numpy", "ortools", "pulp", "networkx", "numba") if m in sys.modules and sys.modules[m]]
from memsched.solvers import registry
print(json.dumps({{"fast": fast, "imported": registry.solver_table(), "heavy": heavy}}))
"""


def tables(missing: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(missing=missing)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_fast_table_is_the_imported_table_and_imports_no_solver():
    got = tables([])
    assert got["fast"] == got["imported"]
    assert {("chain", "rotor"), ("chain", "cpsat"), ("graph", "checkmate")} <= {(p, n) for p, n, _ in got["fast"]}
    assert got["heavy"] == []


def test_a_missing_package_removes_exactly_the_solvers_that_need_it():
    full = tables([])["fast"]
    got = tables(["ortools", "pulp"])
    assert got["fast"] == got["imported"]
    gone = {(p, n) for p, n, _ in full} - {(p, n) for p, n, _ in got["fast"]}
    assert ("graph", "cpsat") in gone and ("chain", "rotor") not in gone


def test_cli_solvers_json(cli):
    res = cli("solvers", "--json")
    rows = res.json()
    assert res.code == 0
    assert {"problem": "chain", "solver": "revolve"} in [{k: r[k] for k in ("problem", "solver")} for r in rows]

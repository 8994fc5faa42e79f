"""The package's module-level imports form no cycle (issue #13: dependencies point one way).

The graph is read from the sources with `ast` (nothing is imported): an edge m -> t for every
module-level ``import``/``from ... import`` of m that names a module t of memsched (a
``from pkg import name`` counts for ``pkg`` and, when ``name`` is a submodule, for it too).
Imports inside functions are on-demand imports and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
#: The installed package name of each folder of the design card (see pyproject.toml).
FOLDERS = {"memsched": "memsched", "memsched.solvers": "solvers", "memsched.models": "models",
           "memsched.experiments": "experiments"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([package, *parts])] = path
    return mods


def _import_graph() -> nx.DiGraph:
    mods = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return graph


def test_the_graph_sees_the_imports():
    graph = _import_graph()
    assert graph.number_of_nodes() > 100
    assert graph.has_edge("memsched.models.chain.executor", "memsched.models.measure")
    assert graph.has_edge("memsched.solvers.chain.dp", "memsched.solvers.chain.instance")


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(_import_graph()))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])

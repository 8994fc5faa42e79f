"""Dependencies point one way: experiments -> models -> solvers (docs/CONVENTIONS.md).

Every import statement of every module under solvers/ and models/ is read with `ast` (nothing is
imported): module level, inside functions and classes, under ``if TYPE_CHECKING:``, absolute
(``memsched.experiments...``, ``from memsched import experiments``) and relative (``from ..experiments
import x``). A lazy import inside a function is still a dependency of the package, so it counts.
Forbidden edges: solvers -> models or experiments, models -> experiments. And the solvers never
need torch: no module under solvers/ imports it, and each one imports with torch made unimportable.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the layers of the design card, lowest first, with their folders (installed as memsched.<layer>)
LAYERS = ("solvers", "models", "experiments")


def module_name(path: Path, root: Path) -> str:
    """The installed dotted name of `path`, a .py file under `root` (whose folder is one of `LAYERS`)."""
    parts = [f"memsched.{root.name}", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, name: str, *, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of everything `source` (module `name`) imports, at any depth of its
    tree; ``from M import a`` yields both M and M.a (``a`` may be a submodule)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def layer_of(module: str) -> str | None:
    """The layer (`LAYERS`) that the dotted `module` belongs to (``memsched.models.x`` and a bare
    ``models.x`` alike), or None for anything else (the standard library, numpy, the ``memsched`` facade)."""
    parts = module.split(".")
    if parts[0] == "memsched" and len(parts) > 1:
        parts = parts[1:]
    return parts[0] if parts[0] in LAYERS else None


def violations(root: Path) -> list[str]:
    """``file:line: module -> target`` for each import of a module under `root` (a folder named after
    its layer) that points to a higher layer."""
    own = LAYERS.index(root.name)
    bad = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        for line, target in imported_modules(path.read_text(encoding="utf-8"), name,
                                             is_package=path.name == "__init__.py"):
            layer = layer_of(target)
            if layer is not None and LAYERS.index(layer) > own:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {name} -> {target}")
    return sorted(set(bad))


@pytest.mark.parametrize("layer", LAYERS[:2])
def test_no_import_points_up_the_layers(layer):
    bad = violations(ROOT / layer)
    rule = "docs/CONVENTIONS.md: experiments -> models -> solvers"
    assert not bad, f"{layer}/ imports a higher layer ({rule}):\n" + "\n".join(bad)


def test_the_walker_sees_every_kind_of_import(tmp_path):
    """A broken walker would pass everything: it must catch imports at any depth, absolute and relative."""
    root = tmp_path / "models"
    (root / "pipeline").mkdir(parents=True)
    (root / "pipeline" / "__init__.py").write_text("from ...experiments import cli\nfrom ..experiments import x\n")
    (root / "pipeline" / "runner.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        import numpy
        from memsched.solvers import registry
        from . import distributed
        if TYPE_CHECKING:
            import memsched.experiments.cli
        def main():
            from ...experiments.commands._checks import work_limit
            from memsched import experiments
            return work_limit
        """))
    runner = "models/pipeline/runner.py:{}: memsched.models.pipeline.runner -> memsched.experiments{}"
    assert set(violations(root)) == {  # (``..experiments`` in models/pipeline/ is memsched.models.experiments)
        "models/pipeline/__init__.py:1: memsched.models.pipeline -> memsched.experiments",
        "models/pipeline/__init__.py:1: memsched.models.pipeline -> memsched.experiments.cli",
        runner.format(7, ".cli"), runner.format(9, ".commands._checks"),
        runner.format(9, ".commands._checks.work_limit"), runner.format(10, ""),
    }
    solvers = tmp_path / "solvers"
    solvers.mkdir()
    (solvers / "m.py").write_text("def f():\n    from ..models import zoo\n    import models.run\n")
    assert set(violations(solvers)) == {"solvers/m.py:2: memsched.solvers.m -> memsched.models",
                                        "solvers/m.py:2: memsched.solvers.m -> memsched.models.zoo",
                                        "solvers/m.py:3: memsched.solvers.m -> models.run"}


def test_the_pipeline_runner_loads_nothing_of_experiments():
    """The case reported: importing the runner (models/) loaded experiments modules."""
    pytest.importorskip("torch")
    code = ("import sys, memsched.models.pipeline.runner, memsched.models.pipeline.distributed; "
            "print(sorted(m for m in sys.modules if m.startswith('memsched.experiments')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_solvers_module_imports_torch():
    bad = [f"{path.relative_to(ROOT)}:{line}: {target}" for path in sorted((ROOT / "solvers").rglob("*.py"))
           for line, target in imported_modules(path.read_text(encoding="utf-8"), module_name(path, ROOT / "solvers"),
                                                is_package=path.name == "__init__.py")
           if target.split(".")[0] == "torch"]
    assert not bad, bad


def test_every_solvers_module_imports_without_torch():
    """torch made unimportable (``sys.modules['torch'] = None``): each module of memsched.solvers imports."""
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        sys.modules["torch"] = None
        import memsched.solvers as root
        names = [m.name for m in pkgutil.walk_packages(root.__path__, "memsched.solvers.")]
        failed = []
        for name in names:
            try:
                importlib.import_module(name)
            except ImportError as err:
                failed.append(f"{name}: {err}")
        print(len(names), "torch" in sys.modules and sys.modules["torch"] is not None, failed)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
                         check=True)
    count, torch_loaded, failed = out.stdout.strip().split(" ", 2)
    assert int(count) > 40 and torch_loaded == "False" and failed == "[]", out.stdout

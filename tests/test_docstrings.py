"""Every public function, class and method in solvers/, models/, experiments/ and memsched/ has a
docstring (issue #13).

Public: a module-level def or class, or a method of a public class, whose name does not start
with an underscore (dunder methods excluded), in a module whose name does not start with one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLVERS = ROOT / "solvers"


def undocumented(path: Path, root: Path = SOLVERS) -> list[str]:
    """``file:line name`` of each public def or class of `path` (under `root`) without a docstring."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(root.parent)
    out = []

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith("_"):
                continue
            if ast.get_docstring(node) is None:
                out.append(f"{where}:{node.lineno} {prefix}{node.name}")
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{node.name}.")

    visit(tree.body, "")
    return out


def test_every_public_definition_in_solvers_is_documented():
    files = [p for p in sorted(SOLVERS.rglob("*.py")) if not p.name.startswith("_") or p.name == "__init__.py"]
    assert len(files) > 40
    missing = [m for p in files for m in undocumented(p)]
    assert not missing, f"{len(missing)} undocumented:\n" + "\n".join(missing)


def public_files(root: Path) -> list[Path]:
    """The modules of `root` the rule covers: names not starting with an underscore, plus ``__init__.py``."""
    return [p for p in sorted(root.rglob("*.py")) if not p.name.startswith("_") or p.name == "__init__.py"]


@pytest.mark.parametrize(("folder", "at_least"), [("models", 30), ("experiments", 40), ("memsched", 4)])
def test_every_public_definition_outside_solvers_is_documented(folder, at_least):
    files = public_files(ROOT / folder)
    assert len(files) >= at_least, f"{folder}/: only {len(files)} modules found"
    missing = [m for p in files for m in undocumented(p, ROOT / folder)]
    assert not missing, f"{len(missing)} undocumented:\n" + "\n".join(missing)


def test_the_walker_finds_an_undocumented_def(tmp_path):
    fake = tmp_path / "solvers"
    fake.mkdir()
    (fake / "m.py").write_text('def f():\n    return 1\n\n\nclass C:\n    """Doc."""\n\n    def g(self):\n'
                               '        pass\n\n    def _h(self):\n        pass\n')
    assert [m.split(" ")[1] for m in undocumented(fake / "m.py", fake)] == ["f", "C.g"]

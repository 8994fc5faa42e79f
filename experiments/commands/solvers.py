"""`memsched solvers`: the solvers available per problem, read without importing them.

Importing every solver to test it (`Problem.available_solvers`) loads numpy, OR-Tools, pulp,
networkx and numba: about 1.5 s. This command reads the same facts from the sources instead:

- each problem's solver table is the literal ``SOLVERS`` dict of ``solvers/<problem>/__init__.py``
  (read with `ast.literal_eval`, not executed); a package whose table is not a literal is imported;
- a solver is *available* when every package its function's module imports at module level
  (the import statements at column 0, followed through the imports inside
  ``memsched.solvers``, package ``__init__`` files included) is found by
  `importlib.util.find_spec`, which locates a top-level package without importing it. Indented
  imports (under ``if TYPE_CHECKING:``, in a ``try`` for an optional dependency, in a function)
  do not run on import and are skipped.

So a solver is listed exactly when importing it would not raise ImportError for a missing
package (tests compare this table with `registry.solver_table`, which imports everything).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

from memsched.solvers import registry

from ._common import print_json

#: the directory of ``memsched.solvers`` (the package is light: errors and result only)
SOLVERS_DIR = Path(registry.__file__).resolve().parent


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``solvers`` subcommand (list the solvers per problem)."""
    p = sub.add_parser("solvers", help="list the solvers available per problem")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def _module_file(dotted: str) -> Path | None:
    """The source of ``memsched.solvers.<dotted>`` (module or package), or None."""
    base = SOLVERS_DIR.joinpath(*dotted.split(".")) if dotted else SOLVERS_DIR
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


_IMPORT = re.compile(r"^(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)|import[ \t]+([^\n#]+))", re.M)


@cache
def _imports(dotted: str) -> tuple[frozenset[str], frozenset[str]]:
    """(top-level external packages, ``memsched.solvers`` modules) that module ``dotted``
    imports at module level: the import statements at column 0. Imports indented under ``if
    TYPE_CHECKING:``, a ``try`` (optional dependencies) or a function are not run on import."""
    path = _module_file(dotted)
    if path is None:
        raise FileNotFoundError(f"memsched.solvers.{dotted}")
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    external: set[str] = set()
    internal: set[str] = set()
    for dots, module, names, plain in _IMPORT.findall(path.read_text()):
        if plain:
            external |= {n.split()[0].partition(".")[0] for n in plain.split(",") if n.strip()}
            continue
        if not dots:
            if module.startswith("memsched.solvers"):
                internal.add(module.removeprefix("memsched.solvers").lstrip("."))
            elif module != "memsched":
                external.add(module.partition(".")[0])
            continue
        parts = package.split(".") if package else []
        parts = parts[: len(parts) - (len(dots) - 1)] if len(dots) > 1 else parts
        base = ".".join(parts + ([module] if module else []))
        internal.add(base)
        for name in names.strip("()").replace("\n", " ").split(","):
            sub = f"{base}.{name.split()[0]}".lstrip(".") if name.strip() else ""
            if sub and _module_file(sub):
                internal.add(sub)
    return frozenset(external), frozenset(internal)


@cache
def _closure(dotted: str) -> frozenset[str]:
    """External top-level packages needed to import ``memsched.solvers.<dotted>`` (its parent
    packages included); raises FileNotFoundError when a module inside memsched.solvers is missing."""
    seen: set[str] = set()
    need: set[str] = set()
    todo = [dotted]
    while todo:
        name = todo.pop()
        parts = name.split(".") if name else []
        for mod in [".".join(parts[:i]) for i in range(len(parts) + 1)]:
            if mod in seen:
                continue
            seen.add(mod)
            external, internal = _imports(mod)
            need |= external
            todo += [m for m in internal if m not in seen]
    return frozenset(need)


@cache
def _installed(package: str) -> bool:
    """Whether the top-level `package` can be found (not imported)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def importable(target: str) -> bool:
    """Whether the solver function ``"module:function"`` (relative to memsched.solvers) would
    import: its module exists, defines the name at module level, and every package it needs is
    installed."""
    module, _, attr = target.partition(":")
    dotted = module.lstrip(".")
    try:
        need = _closure(dotted)
    except FileNotFoundError:
        return False
    path = _module_file(dotted)
    assert path is not None
    source = path.read_text()
    defined = re.search(rf"^(?:(?:async[ \t]+)?def|class)[ \t]+{attr}\b|^{attr}[ \t]*[:=]", source, re.M)
    imported = any(re.search(rf"\b{attr}\b", m.group(0)) for m in _IMPORT.finditer(source))
    return bool(defined or imported) and all(_installed(p) for p in need)


_TABLE = re.compile(r"^SOLVERS\b[^=\n]*=[ \t]*(\{.*?^\})", re.M | re.S)


def solver_tables(problem: str) -> dict[str, tuple[str, str]]:
    """The ``SOLVERS`` table of `problem` from its package source (imported when not a literal)."""
    path = _module_file(problem)
    match = _TABLE.search(path.read_text()) if path is not None else None
    if match is not None:
        try:
            table = ast.literal_eval(match.group(1))
            return {str(k): (str(v[0]), str(v[1])) for k, v in table.items()}
        except (ValueError, SyntaxError, TypeError, IndexError):
            pass
    return dict(registry.get_problem(problem).solvers)


def fast_solver_table() -> list[tuple[str, str, str]]:
    """(problem, solver, summary) for every solver that would import here, like
    `registry.solver_table` but without importing any solver or problem package."""
    rows = []
    for problem in registry.PROBLEMS:
        try:
            package_ok = _module_file(problem) is not None and all(_installed(p) for p in _closure(problem))
        except FileNotFoundError:
            package_ok = False
        if not package_ok:
            continue
        rows += [(problem, name, summary) for name, (target, summary) in solver_tables(problem).items()
                 if importable(target)]
    return rows


def main(args: argparse.Namespace) -> int:
    """Print the solvers of each problem with their summaries (or JSON); exit 0."""
    rows = fast_solver_table()
    if args.json:
        print_json([{"problem": p, "solver": n, "summary": s} for p, n, s in rows])
        return 0
    width = max(len(n) for _, n, _ in rows)
    current = None
    for problem, name, summary in rows:
        if problem != current:
            print(f"{problem}:")
            current = problem
        print(f"  {name:<{width}}  {summary}")
    return 0

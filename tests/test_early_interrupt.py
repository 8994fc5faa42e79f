"""A Ctrl-C while the ``memsched`` command starts, before the CLI's `main` runs (docs/cli.md, exit codes):
the console script's entry point (``[project.scripts]``) imports the CLI module inside its own handling,
so an interrupt during that import is the CLI's one line and exit 130, never a traceback; the same for
``python -m memsched``.

The Ctrl-C comes from the process itself when the import reaches a chosen module (a meta path finder
sends SIGINT and waits for it), so that each run hits the window every time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import sigint_as_in_a_terminal

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, a dependency there (pyproject.toml)
    import tomli as tomllib

#: a stand-in's wait for the signal it sent itself (s): the handler runs long before
WAIT_S = 5

#: the modules whose import is interrupted: the CLI's package and the CLI module itself
IMPORTED = ["memsched.experiments", "memsched.experiments.cli"]

#: command lines: no command, one that only prints, one that would solve
ARGVS = [[], ["--version"], ["solvers"]]


def _tree_entry_point() -> str:
    """The ``memsched`` console script's entry point (``module:function``) in the pyproject.toml of the tree
    whose ``memsched`` this process imports (``memsched.experiments`` is that tree's experiments/ folder)."""
    spec = importlib.util.find_spec("memsched.experiments")
    assert spec is not None and spec.origin is not None
    pyproject = Path(spec.origin).resolve().parent.parent / "pyproject.toml"
    return tomllib.loads(pyproject.read_text())["project"]["scripts"]["memsched"]


def _interrupt_line() -> str:
    """The line the CLI prints for an interrupt outside a command (``memsched: interrupted``)."""
    from memsched.experiments import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli._interrupted(None) == 130
    return err.getvalue().strip()


def _driver(imported: str, start: str) -> str:
    """Python code: a Ctrl-C when the import of module `imported` begins, then `start` (what runs the command)."""
    return textwrap.dedent(f"""
        import os, signal, sys, time

        class SigintOnImport:
            def find_spec(self, name, path=None, target=None):
                if name == {imported!r}:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep({WAIT_S})
                return None

        sys.meta_path.insert(0, SigintOnImport())
        """) + textwrap.dedent(start)


def _run(code: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          preexec_fn=sigint_as_in_a_terminal, check=False)


def _assert_one_line_interrupt(res: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 130, (res.returncode, res.stderr)
    assert res.stderr.strip() == _interrupt_line(), res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a) or "none")
@pytest.mark.parametrize("imported", IMPORTED)
def test_ctrl_c_while_the_entry_point_imports_the_cli_is_one_line(imported, argv):
    """The entry point as the generated console script calls it: ``from MODULE import FUNC; sys.exit(FUNC())``."""
    module, func = _tree_entry_point().split(":")
    start = f"""
        from {module} import {func}
        sys.exit({func}())
        """
    _assert_one_line_interrupt(_run(_driver(imported, start), *argv))


@pytest.mark.parametrize("imported", IMPORTED)
def test_ctrl_c_while_python_m_memsched_imports_the_cli_is_one_line(imported):
    start = """
        import runpy
        runpy.run_module("memsched", run_name="__main__", alter_sys=True)
        """
    _assert_one_line_interrupt(_run(_driver(imported, start), "solvers"))


def test_ctrl_c_while_the_installed_console_script_imports_the_cli_is_one_line():
    """The script pip generated (bin/memsched beside this Python), run as a file."""
    script = Path(sys.executable).parent / "memsched"
    if not script.is_file():
        pytest.skip(f"no console script at {script}")
    module, func = _tree_entry_point().split(":")
    if f"from {module} import {func}\n" not in script.read_text():
        pytest.skip(f"{script} was not generated from this tree's entry point: pip install --no-deps -e . renews it")
    start = f"""
        import runpy
        sys.argv[0] = {str(script)!r}
        runpy.run_path(sys.argv[0], run_name="__main__")
        """
    _assert_one_line_interrupt(_run(_driver("memsched.experiments.cli", start), "solvers"))


def test_without_an_interrupt_the_entry_point_is_the_cli():
    """The same exit statuses and output as the CLI; importing the entry module alone loads no CLI."""
    res = subprocess.run([sys.executable, "-m", "memsched", "--version"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.startswith("memsched "), res
    res = subprocess.run([sys.executable, "-m", "memsched", "solve", "no-such-file.json", "--budget", "1"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr
    module = _tree_entry_point().split(":")[0]
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('memsched.')))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert res.stdout.strip() == repr([module] if module != "memsched" else []), res.stdout

"""Small gaps (hunt 30).

1. A sweep cell executed in this process (``isolate=False``, `cell._execute`) pins torch to ``[measure] threads``
   only while it runs: the caller's thread count is put back, whether the execution succeeds or fails.
2. A ``meta.units.memory`` outside the supported byte units ("PiB", "EiB", "slots") refused by offloading or a
   pipeline is one line naming the file, the field and the accepted units; a too-large byte unit is said to be
   too large (not "needs a byte unit", which PiB is).
3. A Ctrl-C while ``memsched`` imports what it needs exits 130 with one line, never a traceback: the module
   the console script imports first (`experiments.cli`) imports nothing heavy, and an interrupt that breaks
   the command module's import (numpy turns it into an `ImportError`) is reported as the interrupt it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import memsched.experiments.cli as cli_module
import pytest
from conftest import EXAMPLES, sweep_toml


# ---------------------------------------------------------------------------- 1. the caller's torch threads
def test_a_failing_execution_puts_back_the_callers_torch_threads(monkeypatch):
    torch = pytest.importorskip("torch")
    from memsched.experiments.sweep import cell

    seen: list[int] = []

    def failing_target(li: Any) -> Any:
        seen.append(torch.get_num_threads())
        raise RuntimeError("the network could not be built")

    monkeypatch.setattr(cell, "_target", failing_target)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(RuntimeError, match="could not be built"):
            cell._execute(None, None, {"threads": 1})  # type: ignore[arg-type]
        assert seen == [1]  # run with the sweep's threads
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_executing_sweep_in_this_process_keeps_the_callers_torch_threads(tmp_path):
    torch = pytest.importorskip("torch")
    from memsched.experiments.sweep import run_sweep

    cfg = tmp_path / "thr.toml"
    cfg.write_text(sweep_toml("thr", budgets=["100%"], execute=True, defaults={"slots": 20},
                              tables={"measure": {"threads": 1, "time_repeats": 1, "warmup": 0}},
                              instances=[{"model": "lstm", "batch": 1, "seq_len": 3, "width": 4}],
                              solvers=["rotor"]))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        run_sweep(cfg, output=tmp_path / "out", workers=1, progress=False, isolate=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    rows = [json.loads(line) for line in (tmp_path / "out" / "thr.jsonl").read_text().splitlines()]
    assert rows and all(r.get("threads") == 1 and r.get("measured_time_ms") for r in rows), rows


# ---------------------------------------------------------------------------- 2. unsupported memory units
def _in_unit(tmp_path: Path, unit: str, *, link: bool) -> Path:
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"]["units"]["memory"] = unit
    if link:
        data["host_link"] = {"bandwidth": 2000, "latency": 0.0}
    path = tmp_path / f"{'off' if link else 'chain'}_{unit}.json"
    path.write_text(json.dumps(data))
    return path


ACCEPTED = ("bytes", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")


@pytest.mark.parametrize("unit", ["PiB", "EiB", "ZiB", "pb", "EB"])
def test_offloading_in_a_too_large_byte_unit_names_the_accepted_units(tmp_path, cli, unit):
    path = _in_unit(tmp_path, unit, link=True)
    res = cli("solve", path, "--budget", "60%")
    assert res.code == 2, (res.out, res.err)
    err = res.err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert str(path) in err and "meta.units.memory" in err and repr(unit) in err, err
    assert all(u in err for u in ACCEPTED), err  # the accepted units, not "bytes, KiB, MiB, MB, ..."
    assert "too large" in err, err


def test_a_unit_that_is_no_byte_unit_names_the_accepted_units_and_is_not_too_large(tmp_path, cli):
    res = cli("solve", _in_unit(tmp_path, "slots", link=True), "--budget", "60%")
    assert res.code == 2 and "\n" not in res.err.strip(), res.err
    assert "'slots'" in res.err and all(u in res.err for u in ACCEPTED), res.err
    assert "too large" not in res.err


def test_a_pipeline_in_pib_names_the_file_field_and_accepted_units(tmp_path, cli):
    path = _in_unit(tmp_path, "PiB", link=False)
    res = cli("partition", path, "--devices", "2", "--memory", "1GB")
    assert res.code == 2, (res.out, res.err)
    err = res.err.strip()
    assert "\n" not in err and str(path) in err and "meta.units.memory" in err, err
    assert all(u in err for u in ACCEPTED) and "too large" in err, err


def test_the_message_helper_names_every_supported_unit():
    from memsched.solvers.units import ACCEPTED_MEMORY_UNITS, MEMORY_UNIT_BYTES, unsupported_memory_unit

    named = {u.strip().lower() for u in ACCEPTED_MEMORY_UNITS.split(",")}
    assert named <= set(MEMORY_UNIT_BYTES) and set(MEMORY_UNIT_BYTES.values()) == {MEMORY_UNIT_BYTES[u] for u in named}
    assert "too large" in unsupported_memory_unit(" EiB ") and "too large" not in unsupported_memory_unit("furlongs")


# ---------------------------------------------------------------------------- 3. Ctrl-C while memsched imports
def test_the_cli_module_imports_nothing_heavy():
    code = ("import sys, memsched; before = set(sys.modules); import memsched.experiments.cli; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    added = set(out.stdout.split())
    assert not added & {"argparse", "threading", "numpy", "memsched.solvers"}, added


def _interrupting_import(monkeypatch: pytest.MonkeyPatch, *, wrap: bool) -> None:
    """The command module's import is stopped by a Ctrl-C: the handler `main` set raises `KeyboardInterrupt`
    in it; with `wrap`, the import turns it into an `ImportError`, as numpy's C extension does."""
    real = cli_module.importlib.import_module

    def interrupted(name: str, package: str | None = None) -> Any:
        if not name.startswith("memsched.experiments.commands."):
            return real(name, package)
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler)
        try:
            handler(signal.SIGINT, None)  # what a Ctrl-C arriving now does
        except KeyboardInterrupt as err:
            if wrap:
                raise ImportError("numpy: Error importing numpy's C-extensions") from err
            raise
        raise AssertionError("the handler main sets raises KeyboardInterrupt")

    monkeypatch.setattr(cli_module.importlib, "import_module", interrupted)


@pytest.mark.parametrize("wrap", [True, False], ids=["wrapped-in-ImportError", "KeyboardInterrupt"])
def test_an_interrupt_during_the_command_import_exits_130_in_one_line(monkeypatch, capsys, wrap):
    _interrupting_import(monkeypatch, wrap=wrap)
    before = signal.getsignal(signal.SIGINT)
    assert cli_module.main(["solve", str(EXAMPLES / "tiny.json"), "--budget", "60%"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "memsched solve: interrupted", err
    assert signal.getsignal(signal.SIGINT) is before


def test_a_real_sigint_during_the_command_import_exits_130_without_traceback(tmp_path):
    script = textwrap.dedent(f"""
        import importlib, os, signal, sys, time
        from memsched.experiments import cli
        real = importlib.import_module

        def slow(name, package=None):
            if name.startswith("memsched.experiments.commands."):
                try:
                    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while numpy loads
                    time.sleep(30)
                except KeyboardInterrupt as err:
                    raise ImportError("numpy: Error importing numpy's C-extensions") from err
            return real(name, package)

        cli.importlib.import_module = slow
        sys.exit(cli.main(["solve", {str(EXAMPLES / 'tiny.json')!r}, "--budget", "60%"]))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MEMSCHED_DEBUG": ""})
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 130 and res.stderr.strip() == "memsched solve: interrupted", res.stderr

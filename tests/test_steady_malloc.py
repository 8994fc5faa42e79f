"""The malloc pin of the timing benchmarks: the command is re-executed once with the thresholds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from memsched.experiments.steady_malloc import PINNED


def _run(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in PINNED and k != "MEMSCHED_NO_MALLOC_PIN"}
    out = subprocess.run(
        [sys.executable, "-m", "memsched.experiments.steady_malloc"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc tunables: Linux only")
def test_reexecuted_with_pinned_thresholds() -> None:
    assert _run() == "pinned True"


def test_opt_out_runs_unpinned() -> None:
    assert _run(MEMSCHED_NO_MALLOC_PIN="1") == "pinned False"

"""Start-up cost of the command line, and a whole-process rotor solve against rotor's own C DP.

Measures, each as the median (and minimum) of a few runs of a fresh process:

- ``python -c pass``: the interpreter alone (the floor of every other line);
- ``memsched --help`` and ``memsched solvers``;
- ``memsched solve CHAIN --solver rotor --slots 500`` on a 200-stage random chain
  (`solvers.chain.generate.random_chain(200, seed=0)`, budget 50% of the store-all peak),
  whole process, with the DP time it reports itself (``solve_time_s``) and the kernel it ran
  (`solvers.chain.jit.kernel_backend`: C when a C compiler built `solvers/chain/rotor_kernel.c`);
  one untimed run first builds the C kernel (or fills numba's cache), as the first run after an
  install does once;
- the same with ``MEMSCHED_NO_CC=1`` (the numba kernel: numba's import and JIT start-up);
- the same DP in this process, warm (`solvers.chain.dp.solve_rotor`);
- rotor's own C dynamic program (``persistent_compute_table`` of rotor's
  ``rotor/algorithms/dynamic_programs.c``, Beaumont et al.) on the same chain, discretised the
  same way (500 slots of the budget), in this process, when ``--rotor-c`` gives its source
  (compiled here with the C compiler and this Python's headers) or a folder holding the built
  module; the ratio whole-process solve / C DP is the target of issue #13 (at most 0.2);
- ``python -X importtime`` of the rotor solve: the packages that cost the most import time.

Prints a table and writes ``results/bench_cli_startup.csv`` (columns: measure, what, runs,
median_s, min_s, median_cpu_s, load_avg_1min, detail). Times are wall-clock seconds and depend
on the machine's load (the ``python -c pass`` line is the reference); CPU seconds (user + system
of the child process, or of this process in-process) depend on it less, and the ratio to rotor's
C DP is given in both.

    python -m memsched.experiments.bench_cli_startup [--runs 5] [--rotor-c path/to/dynamic_programs.c]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    check_out,
    guarded,
    positive,
    print_and_write_frame,
    progress,
)
from memsched.experiments.script_args import ScriptParser

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
L, SLOTS, BUDGET = 200, 500, "50%"
FIELDS = ["measure", "what", "runs", "median_s", "min_s", "median_cpu_s", "load_avg_1min", "detail"]


def memsched_cmd() -> list[str]:
    """The installed console script when there is one next to this Python, else ``-m``."""
    script = Path(sys.executable).parent / "memsched"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memsched.experiments.cli"]


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[list[float], str, list[float]]:
    """Wall times of `runs` runs of `cmd` (a fresh process each, with `env` added to the
    environment), the last run's stdout, and each run's CPU seconds (user + system: less
    sensitive than wall time to a shared machine's load)."""
    times, out, cpus = [], "", []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), _children_cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
        times.append(time.perf_counter() - t0)
        cpus.append(_children_cpu() - c0)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        out = proc.stdout
    return times, out, cpus


def row(measure: str, what: str, times: list[float], detail: str = "", cpus: list[float] | None = None
        ) -> dict[str, Any]:
    """One CSV row: the median and minimum of `times` (wall seconds) for `measure` of `what`, and
    the median of `cpus` (CPU seconds) when given; the machine's load average when it is written."""
    return {"measure": measure, "what": what, "runs": len(times), "median_s": statistics.median(times),
            "min_s": min(times), "median_cpu_s": statistics.median(cpus) if cpus else float("nan"),
            "load_avg_1min": os.getloadavg()[0], "detail": detail}


def rotor_c_module(path: str | None) -> Any:
    """rotor's ``dynamic_programs`` extension: built from a .c file, or imported from a folder."""
    if not path:
        return None
    p = Path(path)
    folder = p
    if p.suffix == ".c":
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise SystemExit("--rotor-c: no C compiler (cc) to build it")
        folder = Path(tempfile.mkdtemp(prefix="rotor-c-"))
        target = folder / f"dynamic_programs{sysconfig.get_config_var('EXT_SUFFIX')}"
        subprocess.run([cc, "-O3", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(p), "-o",
                        str(target)], check=True)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("dynamic_programs")
    finally:
        sys.path.pop(0)


class _RotorChain:
    """rotor's chain parameters (fweigth, bweigth, cweigth, cbweigth, fwd_tmp, bwd_tmp, length)
    from a discretised memsched chain: u_f, u_b, x[0..L], xbar[0..L], o_f, o_b."""

    def __init__(self, chain: Any) -> None:
        n = chain.length
        self.length = n
        self.fweigth = [float(v) for v in chain.u_f]
        self.bweigth = [float(v) for v in chain.u_b]
        self.cweigth = [int(v) for v in chain.x[: n + 1]]
        self.cbweigth = [int(v) for v in chain.xbar[: n + 1]]
        self.fwd_tmp = [int(v) for v in chain.o_f]
        self.bwd_tmp = [int(v) for v in chain.o_b]


def import_offenders(cmd: list[str], top: int) -> list[dict[str, Any]]:
    """Import time (self, summed per top-level package) of `cmd` under ``python -X importtime``."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd], capture_output=True, text=True, check=False)
    per: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, _, name = line[len("import time:"):].split("|")
        parts = name.strip().split(".")
        package = ".".join(parts[:3]) if parts[0] == "memsched" else parts[0]
        per[package] += int(self_us) / 1e6
    ranked = sorted(per.items(), key=lambda kv: -kv[1])[:top]
    return [row("import", name, [seconds], "self time summed over the package's modules") for name, seconds in ranked]


def main(argv: list[str] | None = None) -> int:
    """Time fresh ``memsched`` processes; print a table, write results/bench_cli_startup.csv; exit 0 (2 on a bad
    argument, 130 on Ctrl-C: nothing kept, the CSV as it was; a run takes seconds, so it is not resumed)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive(int), default=5,
                        help="fresh processes per command (default %(default)s)")
    parser.add_argument("--rotor-c", metavar="PATH", default=os.environ.get("MEMSCHED_ROTOR_C"),
                        help="rotor's dynamic_programs.c (compiled here) or a folder with the built module")
    parser.add_argument("--output", default=str(RESULTS / "bench_cli_startup.csv"))
    args = parser.parse_args(argv)
    if args.rotor_c and not Path(args.rotor_c).exists():
        parser.error(f"--rotor-c: {args.rotor_c!r} does not exist")
    return guarded("bench_cli_startup", lambda: _main(args),
                   interrupted=f"interrupted: nothing kept; {args.output} is unchanged")


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --output checked, the processes timed in a scratch folder (removed after), the
    table printed and written atomically; on Ctrl-C nothing is written (--output stays as it was)."""
    check_out(args.output, "--output")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as work, progress(desc="bench_cli_startup",
                                                                            unit="measure") as bar:
        _measure(args, Path(work), _Counted(rows, bar))

    import pandas as pd

    frame = pd.DataFrame(rows)
    print_and_write_frame(frame, args.output, lambda v: f"{v:.3f}", width=200, max_colwidth=90)
    return 0


class _Counted(list[dict[str, Any]]):
    """`rows` that moves the progress bar `bar` by one for every row appended (then kept in `rows`)."""

    def __init__(self, rows: list[dict[str, Any]], bar: Any) -> None:
        super().__init__()
        self._rows, self._bar = rows, bar

    def append(self, item: dict[str, Any]) -> None:
        self._rows.append(item)
        self._bar.update()

    def extend(self, items: Any) -> None:
        for item in items:
            self.append(item)


def _measure(args: argparse.Namespace, work: Path, rows: list[dict[str, Any]]) -> None:
    """Append to `rows` each measure of the module docstring (the chain file under `work`)."""
    from memsched.solvers.chain.dp import solve_rotor
    from memsched.solvers.chain.generate import random_chain
    from memsched.solvers.chain.jit import kernel_backend
    from memsched.solvers.registry import get_problem
    from memsched.solvers.units import parse_budget

    chain = random_chain(L, seed=0)
    path = work / f"chain{L}.json"
    chain.save(path)
    budget = parse_budget(BUDGET, get_problem("chain").reference_peak(chain))
    ms = memsched_cmd()
    solve = [*ms, "solve", str(path), "--budget", BUDGET, "--solver", "rotor", "--slots", str(SLOTS), "--json"]
    for what, cmd in (("python -c pass", [sys.executable, "-c", "pass"]), ("memsched --help", [*ms, "--help"]),
                      ("memsched solvers", [*ms, "solvers"])):
        times, _, cpus = timed(cmd, args.runs)
        rows.append(row("process", what, times, cpus=cpus))
    kernel = kernel_backend()
    timed(solve, 1)  # builds the C kernel or fills numba's cache, once per install
    times, out, cpus = timed(solve, args.runs)
    reported = json.loads(out)
    rows.append(row("process", f"memsched solve rotor L={L} {SLOTS} slots", times,
                    f"status {reported['status']}; kernel {kernel}; the DP inside: {reported['solve_time_s']:.3f} s",
                    cpus))
    whole, whole_cpu = statistics.median(times), statistics.median(cpus)
    if kernel == "c":
        timed(solve, 1, {"MEMSCHED_NO_CC": "1"})
        times, out, cpus = timed(solve, args.runs, {"MEMSCHED_NO_CC": "1"})
        rows.append(row("process", f"memsched solve rotor L={L} {SLOTS} slots, MEMSCHED_NO_CC=1", times,
                        f"kernel {kernel_backend(True)}; the DP inside: {json.loads(out)['solve_time_s']:.3f} s", cpus))
    inproc, inproc_cpu = [], []
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        solve_rotor(chain, budget, slots=SLOTS)
        inproc.append(time.perf_counter() - t0)
        inproc_cpu.append(time.process_time() - c0)
    rows.append(row("in-process", f"solve_rotor L={L} {SLOTS} slots (warm)", inproc, cpus=inproc_cpu))
    dp = rotor_c_module(args.rotor_c)
    if dp is not None:
        work_chain = chain.discretised(budget / SLOTS)
        rc = _RotorChain(work_chain)
        mmax = SLOTS - int(work_chain.x[0])
        ctimes, ccpus = [], []
        for _ in range(max(1, args.runs // 2)):
            t0, c0 = time.perf_counter(), time.process_time()
            dp.persistent_compute_table(rc, mmax)
            ctimes.append(time.perf_counter() - t0)
            ccpus.append(time.process_time() - c0)
        c_med, c_cpu = statistics.median(ctimes), statistics.median(ccpus)
        rows.append(row("in-process", f"rotor C persistent_compute_table L={L} {SLOTS} slots", ctimes,
                        f"whole-process memsched solve / C DP = {whole / c_med:.3f} (target <= 0.2); "
                        f"in CPU seconds {whole_cpu / c_cpu:.3f}", ccpus))
    rows.extend(import_offenders(solve, 12))


if __name__ == "__main__":
    sys.exit(main())

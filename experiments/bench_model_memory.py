"""Peak memory of Checkmate's model per nonzero: the constants of the memory guard.

`solvers.exact.memory.BYTES_PER_NONZERO` estimates, before a model is built, whether it fits
the machine. This script measures what it assumes: for random layered graphs
(`solvers.graph.generate.random_layered`, or graph files given with --graphs) it builds
`CheckmateModel` at 90% of the topological-order peak and solves it with each backend for
--time-limit seconds, each run in a forked child, and reads the child's resident memory
(``/proc/self/status``: VmRSS before, VmRSS after building, VmHWM at the end; a backend still
running 30 s past its limit is measured then, status ``overran``). Columns: graph, n, variables,
rows, nonzeros (`milp.checkmate_size`, checked against the built model), backend, status,
seconds, model_bytes_per_nnz (the `LinearModel`), backend_bytes_per_nnz (the peak above the
built model), measured_gb (the whole peak above the start), estimated_gb
(`memory.ModelSize.bytes_needed`, what the guard plans for), estimate_covers (estimated >=
measured), and the load average. Prints the table and writes results/bench_model_memory.csv;
the last line counts the rows the estimate covers.

    python -m memsched.experiments.bench_model_memory [--sizes 100 200 300] [--time-limit 20]
    python -m memsched.experiments.bench_model_memory --reestimate   # the guard's columns, constants changed

--resume and --reestimate read --out: a header other than the columns above (not this script's CSV)
is one line naming the file and exit 2, the file left as it was. --out is written once, at the end:
Ctrl-C (exit 130) leaves it as it was and keeps the finished runs in ``<out stem>.partial.csv``, from
which the same command run again resumes (`benchtable.resumable`).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    check_out,
    guarded,
    positive,
    read_table,
    resumable,
    settings_of,
    write_csv,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers.errors import InputError

FIELDS = ("graph", "n", "variables", "rows", "nonzeros", "backend", "status", "seconds",
          "model_bytes_per_nnz", "backend_bytes_per_nnz", "measured_gb", "estimated_gb", "estimate_covers", "load")
BACKENDS = ("scip", "cbc", "highs", "lp", "cpsat")


def _status_kb(key: str) -> float:
    """A line of /proc/self/status in kB (VmRSS, VmHWM)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return float(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def guard_columns(size: Any, backend: str, measured_bytes: float) -> dict[str, Any]:
    """The guard's columns of a row: what `memory.ModelSize.bytes_needed` plans for (GB), and whether
    that covers the measured peak."""
    need = size.bytes_needed(backend)
    return {"estimated_gb": round(need / 1e9, 3), "estimate_covers": need >= measured_bytes}


def _measure(conn: Any, graph: Any, backend: str, time_limit: float, grace: float) -> None:
    """Child body: build the model, solve it with `backend`, send the measured row. A backend still
    running `grace` seconds past its limit (SCIP's presolve and HiGHS's root LP on large models do
    not look at the clock) is measured then, reported with status ``overran``, and the child exits. Ctrl-C is
    ignored here: the parent, interrupted, kills the child (`measure`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from memsched.solvers.exact.memory import ModelSize
    from memsched.solvers.exact.options import Deadline, DeadlineExceeded
    from memsched.solvers.graph import reference_peak
    from memsched.solvers.graph.linmodel import solve_cpsat_linear, solve_milp
    from memsched.solvers.graph.milp import CheckmateModel

    before = _status_kb("VmRSS")
    budget = math.ceil(0.9 * reference_peak(graph))
    M, B, slot = graph.discretised(budget, 500)
    cm = CheckmateModel(graph, M, B, integer_memory=backend == "cpsat", W=graph.workspace_in(slot))
    built = _status_kb("VmRSS")
    nnz = sum(len(row[0]) for row in cm.model.rows)
    size = ModelSize(cm.model.num_vars, len(cm.model.rows), nnz)
    t0 = time.perf_counter()
    sent = threading.Lock()

    def send(status: str) -> None:
        peak = _status_kb("VmHWM")
        measured = 1024 * (peak - before)
        conn.send({"variables": size.variables, "rows": size.rows, "nonzeros": nnz, "status": status,
                   "seconds": round(time.perf_counter() - t0, 1),
                   "model_bytes_per_nnz": round(1024 * (built - before) / nnz, 1),
                   "backend_bytes_per_nnz": round(1024 * (peak - built) / nnz, 1),
                   "measured_gb": round(measured / 1e9, 3), **guard_columns(size, backend, measured)})
        conn.close()

    def overran() -> None:
        if sent.acquire(blocking=False):
            send("overran")
            os._exit(0)

    watchdog = threading.Timer(time_limit + grace, overran)
    watchdog.daemon = True
    watchdog.start()
    dl = Deadline(time_limit)
    try:
        if backend == "cpsat":
            status = solve_cpsat_linear(cm.model, deadline=dl).status
        elif backend == "lp":
            status = solve_milp(cm.model, "scip", relax=True, lp_solver="HIGHS", deadline=dl).status
        else:
            status = solve_milp(cm.model, backend, deadline=dl).status
    except DeadlineExceeded:  # the limit came while the model was handed to the backend (CBC's MPS file)
        status = "timeout (emitting)"
    if sent.acquire(blocking=False):
        watchdog.cancel()
        send(status)


def measure(graph: Any, backend: str, time_limit: float, grace: float = 30.0) -> dict[str, Any] | None:
    """One run in a forked child (its own peak); None when the child ended without an answer. On Ctrl-C
    the child is killed before the interrupt goes on."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_measure, args=(send, graph, backend, time_limit, grace))
    proc.start()
    send.close()
    try:
        row = recv.recv()
    except EOFError:  # the child failed (its traceback is on stderr) or was killed
        row = None
    except KeyboardInterrupt:
        proc.kill()
        proc.join()
        raise
    proc.join()
    return row


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows (text) of an earlier run's CSV at `path` (--out, for --resume and --reestimate); a
    header other than `FIELDS` (in any order: a column missing, or one this script would drop when it
    rewrites the file), a row of more or fewer fields or a file that is not UTF-8 CSV is an `InputError`
    naming the file (`benchtable.read_table`), so --out is left as it was."""
    return read_table(path, field="--out", required=FIELDS, known=FIELDS, of="bench_model_memory")[1]


def reestimate(path: Path) -> int:
    """Rewrite the guard's columns of the CSV at `path` with `memory.ModelSize.bytes_needed` as it is now
    (the measured columns are kept); print the rows it does not cover. 2 when `path` is missing; a CSV
    that is not this script's (`read_rows`) or a row that is not a number where one is needed is an
    `InputError` (the file left as it was)."""
    from memsched.solvers.exact.memory import ModelSize

    if not path.is_file():
        print(f"bench_model_memory: --out: {path} is not a file", file=sys.stderr)
        return 2
    rows = read_rows(path)
    for k, row in enumerate(rows, start=1):
        try:
            size = ModelSize(int(row["variables"]), int(row["rows"]), int(row["nonzeros"]))
            measured = float(row["measured_gb"]) * 1e9
        except (TypeError, ValueError) as err:
            raise InputError(f"row {k}: not a number where one is needed ({err})", path=str(path),
                             field="--out") from None
        row.update(guard_columns(size, row["backend"], measured))
        if not row["estimate_covers"]:
            print(f"not covered: {row['graph']} {row['backend']}: measured {row['measured_gb']} GB, "
                  f"estimated {row['estimated_gb']} GB")
    write_csv(rows, path, FIELDS)
    covered = sum(1 for r in rows if r["estimate_covers"])
    print(f"the guard's estimate covers the measured peak in {covered} of {len(rows)} runs; wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Measure every (graph, backend) pair, print the table, write --out at the end; 0 on success (2 on a
    bad argument, 130 on Ctrl-C: --out as it was, the runs measured before it kept beside it for the same
    command run again to resume from)."""
    ap = ScriptParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=positive(int), nargs="+", default=[100, 200, 300],
                    help="nodes of the generated graphs")
    ap.add_argument("--graphs", nargs="*", default=[], help="graph files to measure as well")
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--time-limit", type=positive(float), default=20.0, help="seconds per backend run (> 0)")
    ap.add_argument("--grace", type=positive(float, zero=True), default=30.0,
                    help="seconds past the limit before a run counts as overran (>= 0)")
    ap.add_argument("--out", default="results/bench_model_memory.csv")
    ap.add_argument("--resume", action="store_true", help="keep --out's rows; measure only the pairs it lacks")
    ap.add_argument("--reestimate", action="store_true",
                    help="measure nothing: recompute --out's estimated_gb and estimate_covers with the guard's "
                         "current constants")
    args = ap.parse_args(argv)
    missing = [p for p in args.graphs if not Path(p).is_file()]
    if missing:
        ap.error(f"--graphs: {missing[0]!r} is not a file")
    return guarded("bench_model_memory", lambda: _main(args))


def _line(row: dict[str, Any]) -> str:
    """The printed line of a measured pair's row (s, bytes per nonzero, GB), from the row alone (a row read back
    from a partial file prints as when it ran)."""
    return (f"{row['graph']:<28} {row['nonzeros']:>10} {row['backend']:<6} {row['status']:<9} {row['seconds']:>6} "
            f"{row['model_bytes_per_nnz']:>11} {row['backend_bytes_per_nnz']:>13} {row['measured_gb']:>8} "
            f"{row['estimated_gb']:>9}")


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, then re-estimated, or each pair measured (those an interrupted run
    of the same settings measured taken from its partial file, `benchtable.resumable`) and --out written."""
    from memsched.solvers import graph as graphs
    from memsched.solvers.graph.generate import random_layered
    from memsched.solvers.graph.milp import checkmate_size

    check_out(args.out)
    if args.reestimate:
        return reestimate(Path(args.out))
    todo = [(f"random_layered({n}, 0)", lambda n=n: random_layered(n, 0)) for n in args.sizes]
    todo += [(Path(p).name[:40], lambda p=p: graphs.load(p)) for p in args.graphs]
    rows: list[dict[str, Any]] = []
    if args.resume and Path(args.out).is_file():
        rows = read_rows(Path(args.out))
    done = {(r["graph"], r["backend"]) for r in rows}
    print(f"{'graph':<28} {'nonzeros':>10} {'backend':<6} {'status':<9} {'s':>6} {'model B/nnz':>11} "
          f"{'backend B/nnz':>13} {'peak GB':>8} {'guard GB':>9}")
    with resumable(args.out, FIELDS, settings_of(args, "resume", "reestimate"), ("graph", "backend"),
                   line=_line) as table:
        for name, make in todo:
            # the kept pairs' lines are printed by `table` (`line`): the printed table of a resumed run is whole
            backends = [b for b in args.backends if (name, b) not in done and table.kept(name, b) is None]
            if not backends:
                continue
            g = make()
            size = checkmate_size(g)
            for backend in backends:
                load = round(os.getloadavg()[0], 2)
                measured = measure(g, backend, args.time_limit, args.grace)
                if measured is None:
                    print(f"{name} {backend}: the run ended without an answer (not in the CSV)", file=sys.stderr)
                    continue
                row = {"graph": name, "n": g.n, "backend": backend, "load": load, **measured}
                if (row["variables"], row["rows"], row["nonzeros"]) != (size.variables, size.rows, size.nonzeros):
                    print(f"{name}: checkmate_size {size} differs from the built model", file=sys.stderr)
                    return 1
                table.add(row)
                print(_line(row), flush=True)
        rows += table.rows
        write_csv(rows, args.out, FIELDS)
    covered = sum(1 for r in rows if r["estimate_covers"] in (True, "True"))
    print(f"the guard's estimate covers the measured peak in {covered} of {len(rows)} runs")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

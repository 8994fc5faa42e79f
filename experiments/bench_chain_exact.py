"""Benchmark of the exact chain models (phase model): MILP per backend and CP-SAT.

    python -m memsched.experiments.bench_chain_exact                      # the full grid (long)
    python -m memsched.experiments.bench_chain_exact --lengths 5 10 --time-limit 10 --fractions 0.3

For each chain length L, seeded random chain (`solvers.chain.generate.random_chain`) and budget
(a fraction of the way from the smallest budget of the rotor DP, or else the recompute-all peak,
to the store-all peak),
runs each solver with `--slots` memory slots and a time limit, and prints a table of
L, budget, solver, status, makespan, bound, gap, time, and (when `solvers.chain.dp` is
importable) the rotor DP's makespan and its gap to the exact answer. Rows go to
results/bench_chain_exact.csv (one per run, with parameters, versions, the slots really used
(`effective_slots`: 0 = exact sizes, the case of a budget of at most `--slots` units) and the
1-minute load average when the run started: timings on shared cores depend on it).

The arguments (solver names, fractions in [0, 1], positive lengths and time limit, a writable
--out) are checked before anything is written (one line, exit 2). The CSV is written atomically once
every run finished (with ``--append``, after the rows it had). Ctrl-C (exit 130) leaves it as it was
and keeps the finished runs in ``<out stem>.partial.csv``; the same command run again resumes from them
(`benchtable.resumable`), printing their lines too, in order: the printed table is whole.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import resource
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from memsched.experiments.benchtable import check_out, guarded, positive, read_table, resumable, settings_of
from memsched.experiments.script_args import ScriptParser
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.discretize import effective_slots
from memsched.solvers.jsonio import write_atomic
from memsched.solvers.registry import solve

SOLVERS = ("milp:scip", "milp:highs", "milp:portfolio", "milp:cbc", "milp:cp-sat", "cpsat")
#: not a solver: the phase model's LP relaxation (GLOP), whose value is the root bound every MILP backend starts from
LP = "lp"
#: not a solver: the same LP after the tape-cut rounds that `milp` and `cpsat` run first (`solvers.chain.phase_cuts`)
LP_CUTS = "lp+cuts"
#: not a solver: the Lagrangian dual of the phase-to-phase rows (blocks: whole phases, solved by a DP),
#: by column generation within the time limit (`solvers.chain.phase_colgen`); status says if it converged
LAGRANGE = "lagrange"
FIELDS = ("L", "seed", "slots", "budget", "fraction", "solver", "backend", "status", "makespan", "bound", "gap",
          "time_s", "cpu_s", "time_limit_s", "variables", "constraints", "warm_start", "rotor_makespan", "rotor_gap",
          "num_workers", "ortools", "python", "effective_slots", "load_avg_1min")
#: what --solvers accepts: the solvers (``milp`` alone: its default backend) and the bounds
NAMES = (*SOLVERS, "milp", LP, LP_CUTS, LAGRANGE)


def rotor_makespan(chain, budget: int, slots: int) -> float | None:
    """Makespan of the rotor DP's schedule at `budget` bytes, or None when the DP is unavailable or infeasible."""
    try:
        import memsched.solvers.chain.dp  # noqa: F401
    except ImportError:
        return None
    res = solve("chain", chain, "rotor", budget, slots=slots)
    return res.objective if res.schedule is not None else None


def lp_relaxation(chain, budget: int, slots: int, cuts: bool = False, time_limit: float = 60.0) -> SimpleNamespace:
    """The phase model's LP relaxation (all variables in [0, 1], GLOP) at `budget` with `slots`:
    a result-like record whose `lower_bound` is the relaxation's optimum (no schedule; status "lp").
    With `cuts`, the value after the tape-cut rounds the exact solvers run under `time_limit` (s)."""
    from memsched.solvers.chain.exact_model import PhaseModel, discretise
    from memsched.solvers.chain.phase_cuts import separate_tape_cuts
    from memsched.solvers.exact.milp_runner import run_milp
    from memsched.solvers.exact.options import Deadline

    dchain, M = discretise(chain, budget, slots)
    model = PhaseModel.build(dchain, M)
    if cuts:
        report = separate_tape_cuts(model, Deadline(time_limit))
        return SimpleNamespace(status=LP, objective=None, lower_bound=report.lp_after, gap=None,
                               details={"variables": len(model.keys), "constraints": len(model.rows)})
    run = run_milp(model.to_linear(), "scip", Deadline(None), relax=True)
    return SimpleNamespace(status=LP, objective=None, lower_bound=run.objective, gap=None,
                           details={"variables": len(model.keys), "constraints": len(model.rows)})


def lagrange_bound(chain, budget: int, slots: int, time_limit: float = 60.0) -> SimpleNamespace:
    """The best Lagrangian bound Z that column generation (`solvers.chain.phase_colgen`, started
    from the LP duals of the block form and the rotor start) reaches in `time_limit` (s): a
    result-like record (no schedule); status "lagrange" when the dual was solved, else "lagrange-stopped"."""
    from memsched.solvers.chain.cpsat import phase_hint
    from memsched.solvers.chain.exact_model import PhaseModel, discretise
    from memsched.solvers.chain.phase_colgen import column_generation
    from memsched.solvers.chain.phase_lagrange import lp_multipliers
    from memsched.solvers.exact.options import Deadline

    deadline = Deadline(time_limit)
    dchain, M = discretise(chain, budget, slots)
    model = PhaseModel.build(dchain, M)
    hint, ok, _ = phase_hint(model, None, deadline)
    start = hint if ok else None
    incumbent = model.objective.value(hint) if start is not None else None
    _, mu, nu = lp_multipliers(model, deadline)
    rep = column_generation(model, deadline, incumbent=incumbent, start=start, mu=mu, nu=nu)
    return SimpleNamespace(status="lagrange" if rep.converged else "lagrange-stopped", objective=None,
                           lower_bound=rep.bound, gap=None,
                           details={"variables": len(model.keys), "constraints": len(model.rows)})


def min_budget(chain, store_all_peak: int) -> int:
    """The rotor DP's smallest feasible budget when rotor is importable, else the peak of
    recompute-all (which always fits)."""
    try:
        from memsched.solvers.chain.dp import rotor_min_budget
    except ImportError:
        return solve("chain", chain, "recompute-all", store_all_peak).min_budget
    return int(rotor_min_budget(chain))


def fraction(text: str) -> float:
    """An argparse ``type``: a budget fraction in [0, 1] (0: the smallest budget, 1: the store-all peak)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number in [0, 1]")
    return value


def read_kept(out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, header) of an earlier CSV that ``--append`` adds to: its rows as read, and its columns
    followed by those of `FIELDS` it lacks (none of an empty or missing file: `FIELDS`). A file that is not
    UTF-8 CSV or has a row of more or fewer fields than its header is an `InputError` naming it and --out
    (`benchtable.read_table`), raised before any run."""
    if not out.is_file() or out.stat().st_size == 0:
        return [], list(FIELDS)
    header, rows = read_table(out, field="--out")
    return list(rows), header + [f for f in FIELDS if f not in header]


def write_rows(out: Path, rows: list[dict[str, Any]], header: list[str]) -> None:
    """Replace `out` by `rows` under `header` (lines ending in ``\\n``, as the committed CSV), through a
    temporary file renamed into place: an interrupted write leaves the old file."""
    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, write)


def main(argv: list[str] | None = None) -> int:
    """Compare the exact chain solvers with the rotor DP; print a table, write results/bench_chain_exact.csv; exit 0,
    2 on bad arguments (before anything is written), 130 on Ctrl-C (the CSV as it was, the finished rows
    kept for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=positive(int), nargs="+", default=[5, 10, 15, 20, 30, 40, 50])
    ap.add_argument("--fractions", type=fraction, nargs="+", default=[0.1, 0.3, 0.6],
                    help="budgets, from the smallest (0) to the store-all peak (1)")
    ap.add_argument("--seeds", type=positive(int, zero=True), nargs="+", default=[0])
    ap.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=NAMES, metavar="SOLVER",
                    help=f"from {', '.join(SOLVERS)}, milp (its default backend), or {LP} (the LP relaxation's "
                         f"bound), {LP_CUTS} (the same after the tape cuts), {LAGRANGE} (the Lagrangian bound by "
                         "column generation)")
    ap.add_argument("--slots", type=positive(int, zero=True), default=100, help="memory slots (0: exact sizes)")
    ap.add_argument("--time-limit", type=positive(float), default=60.0, help="per run (s)")
    ap.add_argument("--num-workers", type=positive(int), default=1,
                    help="CP-SAT workers (MILP backends use 1 thread)")
    ap.add_argument("--no-warm-start", action="store_true")
    ap.add_argument("--out", default="results/bench_chain_exact.csv")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of an existing CSV and add the new ones (else it is replaced when all runs "
                         "finished)")
    args = ap.parse_args(argv)
    return guarded("bench_chain_exact", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """`main` once the arguments are read: --out checked, then every run (one cell: L, seed, fraction,
    solver; those an interrupted run of the same command finished are taken from its partial file,
    `benchtable.resumable`), then the CSV written once, atomically."""

    out = Path(args.out)
    check_out(out)
    kept, fields = read_kept(out) if args.append else ([], list(FIELDS))
    header = f"{'L':>3} {'budget':>7} {'solver':<12} {'status':<10} {'makespan':>9} {'bound':>9} {'gap':>7} " \
             f"{'time':>6} {'cpu':>6} {'rotor':>9} {'rotor-gap':>9}"
    print(header)
    print("-" * len(header))
    with resumable(out, fields, settings_of(args), ("L", "seed", "fraction", "solver"), line=_line) as table:
        _runs(args, table)
        write_rows(out, kept + table.rows, fields)
    print(f"wrote {out} ({len(table.rows)} rows)", file=sys.stderr)
    return 0


def _runs(args: argparse.Namespace, table: Any) -> None:
    """Every run of `main` not yet in `table` (a `benchtable.Resumable`), added to it, a line printed for each
    cell in order, those taken from an interrupted run's partial file too (`_line`, given to `resumable`: the printed
    table is whole)."""
    import ortools

    for L in args.lengths:
        for seed in args.seeds:
            chain = random_chain(L, seed)
            hi = reference_peak(chain)
            lo = min_budget(chain, hi)
            for frac in args.fractions:
                budget = int(lo + frac * (hi - lo))
                rotor = rotor_makespan(chain, budget, args.slots)
                for name in args.solvers:
                    if table.kept(L, seed, frac, name) is not None:  # its line printed (`line`)
                        continue
                    solver, _, backend = name.partition(":")
                    load = os.getloadavg()[0]  # the machine's load when the run starts (shared cores)
                    workers = args.num_workers if solver == "cpsat" else 2 if backend == "portfolio" else 1
                    t0, c0 = time.perf_counter(), _cpu_s()
                    res = lagrange_bound(chain, budget, args.slots, args.time_limit) if name == LAGRANGE \
                        else lp_relaxation(chain, budget, args.slots, name == LP_CUTS, args.time_limit) \
                        if name in (LP, LP_CUTS) else solve(
                        "chain", chain, solver, budget, slots=args.slots, time_limit=args.time_limit,
                        backend=backend or None, num_workers=workers, warm_start=not args.no_warm_start)
                    elapsed, cpu = time.perf_counter() - t0, _cpu_s() - c0
                    rgap = None
                    if rotor is not None and res.objective:
                        rgap = (rotor - res.objective) / res.objective
                        rgap = 0.0 if abs(rgap) < 1e-9 else rgap  # same value, summed in another order
                    row = {"L": L, "seed": seed, "slots": args.slots, "budget": budget, "fraction": frac,
                           "solver": name, "backend": backend, "status": res.status,
                           "makespan": res.objective, "bound": res.lower_bound, "gap": res.gap,
                           "time_s": round(elapsed, 3), "cpu_s": round(cpu, 3), "time_limit_s": args.time_limit,
                           "variables": res.details.get("variables"), "constraints": res.details.get("constraints"),
                           "warm_start": res.details.get("warm_start"), "rotor_makespan": rotor, "rotor_gap": rgap,
                           "num_workers": workers,
                           "ortools": ortools.__version__, "python": platform.python_version(),
                           "effective_slots": effective_slots(budget, args.slots), "load_avg_1min": round(load, 2)}
                    table.add(row)
                    print(_line(row), flush=True)


def _line(row: dict[str, Any]) -> str:
    """The printed line of a run's row (the header of `_main`; times in seconds, gaps in %), from the row alone:
    a row read back from a partial file prints as it did when it ran (a missing value: ``-``)."""
    return (f"{row['L']:>3} {row['budget']:>7} {row['solver']:<12} {row['status']:<10} {_f(row.get('makespan')):>9} "
            f"{_f(row.get('bound')):>9} {_p(row.get('gap')):>7} {row['time_s']:>6.1f} {row['cpu_s']:>6.1f} "
            f"{_f(row.get('rotor_makespan')):>9} {_p(row.get('rotor_gap')):>9}")


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the portfolio's backend processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _p(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


if __name__ == "__main__":
    raise SystemExit(main())

"""Head-to-head duels: another tool's point against memsched's plan at that point's own peak.

    python -m memsched.experiments.vs_torch_duel [--csv results/bench_vs_torch.csv] [--rounds 30]
        [--all] [--models gpt2,resnet50] [--sizes small,medium,large] [--repeats 5]
        [--out results/bench_vs_torch_duels.csv] [--resume] [--replot]

`experiments.bench_vs_torch` pairs every step with a plain-torch step, so two tools' overheads
are two medians of ratios taken at different moments; at a 2% allowance the verdict on a point
of another tool then often depends on the noise (intervals of +-3 to +-20 points with 7-11
rounds). A duel measures the comparison itself: for the points P of another tool
(checkpoint-per-block, a checkpoint_sequential segment count, a torch.compile budget) of one
model and size, the model is built again, each P's step and its tracker peak are measured,
memsched's block and layer chains are profiled anew (once) and rotor plans at each P's measured
peak (`bench_vs_torch.memsched_points`, targets only, no schedule left out), and each of
`--rounds` rounds visits every P once in a new random order (seeded), running P's step and its
memsched steps back to back, shuffled. ``ratio`` is the median over the rounds of
memsched's step time over P's in the same round (thread CPU time); ``ratio_ci`` the half-width
of its approximate 95% interval (`bench_vs_torch.median_ci`); ``ratio_of_least`` the ratio of
the two least times. ``peak_ok``: memsched's measured tracker peak is at most P's.

Which points: by default those unmatched on the paired or the unpaired overheads
(`vs_torch_report.contested`); ``--all``: every point of the other tools
(torch.compile's only with the aot backend). Rows of the models and sizes run replace those of
`--out` (each model and size is written as it ends; ``--resume`` skips those `--out` has); the
summary of `--csv` is rewritten with the duel verdicts
(`vs_torch_report.verdicts` reads the duels CSV beside it), and a figure beside `--out`
(`duel_figure`, same stem, ``.png``: an ``--out`` ending in .png is refused before any work;
``--replot`` runs nothing and redraws it and the summary).

Ctrl-C is one line, ``vs_torch_duel: interrupted...``, and exit 130 (the models and sizes that ended
are in `--out`), also while torch and the other modules it needs are imported (about a second): at its
top this module imports only modules that Python's start-up has loaded (os, sys, pathlib, typing) and the
small `interrupts`, the others inside `main`'s handling of interrupts (`interrupts.script_main`, then
`benchtable.guarded`), as `main_job`, `paper_figures`, `bench_vs_torch` and `bench_executor` do. What comes
before this module runs is not covered: Python's start-up and the import of the ``memsched`` package.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from memsched.experiments.interrupts import script_main


def their_points(base: dict, model: Any, rows: list[dict], twin: Any) -> tuple[list[Any], list]:
    """The tools of `rows` rebuilt on `model` (`bench_vs_torch.Point`s in the order of `rows`,
    peaks re-measured) and plain autograd's gradients (the reference)."""
    from memsched.experiments.bench_vs_torch import torch_points

    ks = ",".join(r["setting"].split("=")[1] for r in rows if r["tool"] == "checkpoint_sequential") or "0"
    budgets = tuple(float(r["setting"].split("=")[1]) for r in rows if r["tool"].startswith("torch.compile"))
    points, ref = torch_points(base, model, False, None, ks)
    if budgets:
        points += torch_points(base, model, False, ["aot"], "0", budgets, twin, only_compile=True)[0]
    by_name = {(p.row["tool"], p.row["setting"]): p for p in points}
    return [by_name[(r["tool"], r["setting"])] for r in rows], ref


def duel(name: str, size: str, rows: list[dict], rounds: int, repeats: int, seed: int = 0) -> list[dict]:
    """The duels of `rows` (points of one model and size; module docstring): one row per point
    and memsched granularity. The chains are profiled once; each round visits every point once
    in a new random order and runs its step and its memsched steps back to back, shuffled."""
    import random
    import statistics

    from memsched.experiments.bench_vs_torch import SIZES, median_ci, memsched_points
    from memsched.models.zoo import build_model

    if not rows:
        return []
    sizes = SIZES[name][size]
    base = {"model": name, "size": size}
    model = build_model(name, **sizes)
    twin = lambda dtype: build_model(name, dropout=0.0, dtype=dtype, **sizes)
    theirs, ref = their_points(base, model, rows, twin)
    peaks = [int(p.row["peak_bytes"]) for p in theirs]
    ours: dict[str, list[Any]] = {}  # granularity -> its point at each of `peaks` (None: no plan)
    for g in ("block", "layer"):
        planned = memsched_points(base, name, sizes, g, 0, repeats, ref, False, peaks, spread=False, dedupe=False)
        ok = [q for q in planned if q.timer is not None]  # budgets ascending: min(peak, store-all)
        ours[g] = [
            max((q for q in ok if int(q.row["budget"]) <= peak), key=lambda q: int(q.row["budget"]), default=None)
            for peak in peaks
        ]
    rng = random.Random(seed)
    times: dict[tuple[int, str], list[float]] = {}
    for _ in range(rounds):
        for i in rng.sample(range(len(theirs)), len(theirs)):
            timers = {"theirs": theirs[i].timer} | {g: q[i].timer for g, q in ours.items() if q[i] is not None}
            for key in rng.sample(list(timers), len(timers)):
                times.setdefault((i, key), []).append(timers[key]())
    out = []
    for i, (row, peak) in enumerate(zip(rows, peaks)):
        their_times = times[(i, "theirs")]
        for g in ours:
            mine = ours[g][i].row if ours[g][i] is not None else {}
            d = {
                **base,
                "tool": row["tool"],
                "setting": row["setting"],
                "granularity": g,
                "their_peak": peak,
                "memsched_peak": mine.get("peak_bytes"),
                "memsched_budget": mine.get("budget"),
                "their_time_ms": statistics.median(their_times),
                "rounds": rounds,
                "load": round(os.getloadavg()[0], 2),
            }
            ts = times.get((i, g))
            if ts:
                ratios = [m / t for m, t in zip(ts, their_times)]
                d.update(
                    peak_ok=int(mine["peak_bytes"]) <= peak,
                    ratio=statistics.median(ratios),
                    ratio_ci=median_ci(ratios),
                    ratio_of_least=min(ts) / min(their_times),
                    memsched_time_ms=statistics.median(ts),
                )
            out.append(d)
    return out


def duel_figure(duels: list[dict], path: Path) -> None:
    """One panel per model and size: each duelled point's time ratio (memsched / the point's tool,
    median with its 95% interval) against the point's peak (MiB), one marker per tool and
    granularity; dashed: the 2% allowance. Written atomically (`vs_torch_report.save_png`)."""
    import matplotlib
    from memsched.experiments.vs_torch_report import save_png

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys((d["model"], d["size"]) for d in duels))
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4.6 * max(1, len(keys)), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys):
        rs = [d for d in duels if (d["model"], d["size"]) == key and d.get("ratio") not in (None, "")]
        for label in dict.fromkeys(f"{d['tool']} ({d['granularity']})" for d in rs):
            pts = sorted(
                (int(d["their_peak"]) / 2**20, float(d["ratio"]), float(d["ratio_ci"] or 0))
                for d in rs
                if f"{d['tool']} ({d['granularity']})" == label
            )
            ax.errorbar(
                [p for p, _, _ in pts],
                [r for _, r, _ in pts],
                yerr=[c for _, _, c in pts],
                fmt="o",
                markersize=3,
                capsize=2,
                label=label,
            )
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(1.02, color="grey", lw=0.8, ls="--")
        ax.set_title(f"{key[0]} ({key[1]})", fontsize=9)
        ax.set_xlabel("the point's peak (MiB, tracker)", fontsize=8)
        ax.set_ylabel("memsched time / the point's (median, 95% CI)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=5)
    fig.tight_layout()
    save_png(fig, path)  # atomically


def main(argv: list[str] | None = None) -> int:
    """Duel the contested points of `--csv` (module docstring); exit 0, 2 on a missing CSV or a bad argument
    (a count below 1, an unknown option, a value that is not a number, an --out ending in .png whose figure would
    replace it: one line on stderr, before any duel),
    130 on Ctrl-C (one line; `benchtable.guarded`), also while the modules are imported (module docstring)."""
    return script_main("vs_torch_duel", lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    """`main` under `benchtable.guarded` (imported here: module docstring)."""
    from memsched.experiments.benchtable import guarded

    return guarded("vs_torch_duel", lambda: _main(argv),
                   interrupted="interrupted: the models and sizes that ended are in --out (--resume skips them)")


def _main(argv: list[str] | None) -> int:
    """`main` with its modules imported here (see the module docstring): a Ctrl-C leaves as `KeyboardInterrupt`."""
    import argparse

    from memsched.experiments.benchtable import figure_beside, write_csv
    from memsched.experiments.script_args import ScriptParser
    from memsched.experiments.vs_torch_report import (
        DUEL_COLUMNS,
        SUMMARY_COLUMNS,
        contested,
        duels_path,
        read_rows,
        verdicts,
    )

    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", default="results/bench_vs_torch.csv", help="bench_vs_torch's CSV")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5, help="profiling repetitions (memsched's chains)")
    parser.add_argument("--all", dest="every", action="store_true", help="every point, not only the contested")
    parser.add_argument("--models", default="", help="comma-separated (default: every model of --csv)")
    parser.add_argument("--sizes", default="", help="comma-separated (default: every size of --csv)")
    parser.add_argument("--out", default="", help="default: <csv stem>_duels.csv beside --csv")
    parser.add_argument("--resume", action="store_true", help="skip the models and sizes --out already has")
    parser.add_argument("--replot", action="store_true", help="run nothing: redraw the figure and summary of --out")
    args = parser.parse_args(argv)
    csv_path = Path(args.csv)
    for flag, value in (("--rounds", args.rounds), ("--repeats", args.repeats)):
        if value < 1:
            print(f"vs_torch_duel: {flag} must be at least 1, not {value}", file=sys.stderr)
            return 2
    if not csv_path.exists():
        print(f"vs_torch_duel: {csv_path} does not exist", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else duels_path(csv_path)
    figure = figure_beside(out, ".png", "--out" if args.out else "output")  # before any work: not out itself
    rows = read_rows(csv_path, field="--csv")
    keys = sorted({(r["model"], r["size"]) for r in rows}, key=lambda k: (k[0], k[1]))
    keys = [
        k
        for k in keys
        if (not args.models or k[0] in args.models.split(",")) and (not args.sizes or k[1] in args.sizes.split(","))
    ]
    import torch  # once the arguments are checked: a usage error needs no torch (a second or so)

    torch.set_num_threads(1)
    done = read_rows(out) if out.exists() else []
    if args.replot:
        keys = []
    elif args.resume:
        keys = [k for k in keys if k not in {(d["model"], d["size"]) for d in done}]
    done = [d for d in done if (d["model"], d["size"]) not in set(keys)]
    for name, size in keys:
        new = duel(name, size, contested(rows, (name, size), args.every), args.rounds, args.repeats)
        for d in new:
            ratio = f"{d['ratio']:.3f} +- {d['ratio_ci']:.3f}" if d.get("ratio") is not None else "no plan"
            print(
                f"{name:>8} {size:>6} {d['tool']:>22} {d['setting']:>28} {d['granularity']:>5}: memsched/theirs "
                f"{ratio} (least {d.get('ratio_of_least') or float('nan'):.3f}), peak ok {d.get('peak_ok')}",
                flush=True,
            )
        done += new
        write_csv(done, out, DUEL_COLUMNS, extrasaction="ignore")  # each model and size kept as it ends
    if not out.exists():
        write_csv([], out, DUEL_COLUMNS)
    duel_figure(read_rows(out), figure)
    summary_path = write_csv(
        verdicts(read_rows(csv_path, field="--csv"), read_rows(out)),
        csv_path.with_name(f"{csv_path.stem}_summary.csv"),
        SUMMARY_COLUMNS,
    )
    print(f"wrote {out}, {figure} and {summary_path}")
    return 0


if __name__ == "__main__":
    from memsched.experiments.steady_malloc import run_with_pinned_malloc

    sys.exit(run_with_pinned_malloc("memsched.experiments.vs_torch_duel", main))  # steady step times

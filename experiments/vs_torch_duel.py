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
the two least times. ``peak_ok``: memsched's measured tracker peak is at most P's. ``grad_ok`` and
``their_grad_ok``: whether memsched's plan's and P's parameter gradients match plain autograd's (the
bench's check, `bench_vs_torch.memsched_points` and `torch_points`; "True" or "False", empty where
unknown: no memsched plan, or a duels CSV written before these columns). The duel verdict
(`checked_duels`, then `vs_torch_report.verdicts`) counts only the duels whose checks passed: a duel
whose memsched plan failed its check is one without a plan (memsched has no point at P's peak: P is
lost unless another duel of P matches it), a duel whose P failed its check is no evidence (P keeps its
paired verdict unless another duel of P decides it). An unknown check is taken as passed (the committed
duels' points were checked in the bench's own rows); P's is first looked up in `--csv`'s row of P
(same model, size, tool and setting), where a "False" leaves the duel out. The figure draws the same
duels as the verdict counts, one colour per tool and one marker per granularity (`duel_styles`).

Which points: by default those unmatched on the paired or the unpaired overheads
(`vs_torch_report.contested`); ``--all``: every point of the other tools
(torch.compile's only with the aot backend). Rows of the models and sizes run replace those of
`--out` (each model and size is written as it ends; ``--resume`` skips those `--out` has); the
summary of `--csv` is rewritten with the duel verdicts
(`vs_torch_report.verdicts` reads the duels CSV beside it), and a figure beside `--out`
(`duel_figure`, same stem, ``.png``: an ``--out`` ending in .png is refused before any work;
``--replot`` runs nothing and redraws it and the summary). A name in ``--models`` or ``--sizes`` that
`bench_vs_torch.SIZES` lacks or `--csv` has no row of, a row of `--csv` to duel whose model/size
`bench_vs_torch.SIZES` lacks, or whose tool and setting cannot be rebuilt on its model
(`setting_error`: checkpoint_sequential's k above the model's block count, say) is one line on
stderr and exit 2, before any duel.

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

#: a duel row's gradient checks, after `vs_torch_report.DUEL_COLUMNS` (module docstring)
GRAD_COLUMNS = ("grad_ok", "their_grad_ok")
#: the fixed colour of each tool's duels in `duel_figure` (another tool takes a free one: `duel_styles`)
TOOL_COLOURS = {"checkpoint-per-block": "#d62728", "checkpoint_sequential": "#1f77b4",
                "torch.compile(aot_eager, min-cut)": "#2ca02c"}
#: the fixed marker of each memsched granularity in `duel_figure`
GRANULARITY_MARKERS = {"block": "o", "layer": "s"}
#: what a panel of `duel_figure` says in place of a legend when none of its duels is drawn
NO_DUEL_TEXT = "no duel counted"


def option_error(models: str, sizes: str, rows: list[dict], csv_path: Path) -> str | None:
    """Why ``--models`` or ``--sizes`` (comma-separated, empty: every one of `rows`) selects something that
    cannot be dueled: a model or size `bench_vs_torch.SIZES` lacks, or one no row of `rows` (`csv_path`'s,
    among the models selected) has. One line; None when every name is fine."""
    from memsched.experiments.bench_vs_torch import SIZES

    names = [m for m in models.split(",") if m]
    for m in names:
        if m not in SIZES:
            return f"--models: unknown model {m!r} (bench_vs_torch has {', '.join(SIZES)})"
        if not any(r["model"] == m for r in rows):
            return f"--models: {csv_path} has no row of model {m!r}"
    known = dict.fromkeys(s for m in (names or SIZES) for s in SIZES[m])
    for s in (s for s in sizes.split(",") if s):
        if s not in known:
            return f"--sizes: unknown size {s!r} (bench_vs_torch has {', '.join(known)})"
        if not any(r["size"] == s and (not names or r["model"] in names) for r in rows):
            return f"--sizes: {csv_path} has no row of size {s!r}" + (f" of {', '.join(names)}" if names else "")
    return None


def key_error(keys: list[tuple[str, str]], csv_path: Path) -> str | None:
    """Why a (model, size) of `keys` (those of `csv_path` to duel) cannot be dueled: `bench_vs_torch.SIZES`
    lacks it. One line; None when it has them all."""
    from memsched.experiments.bench_vs_torch import SIZES

    for name, size in keys:
        if size not in SIZES.get(name, {}):
            return f"--csv: {csv_path} has rows of unknown model/size {name}/{size}"
    return None


def setting_error(row: dict, blocks: int) -> str | None:
    """Why `their_points` cannot rebuild `row`'s point (its tool and setting, as `bench_vs_torch.torch_points`
    and `vs_torch_compile.compile_points` name them) on its model, of `blocks` blocks: checkpoint-per-block
    is "<blocks> blocks", checkpoint_sequential "segments=<k>" for 2 <= k <= `blocks`, torch.compile(aot)
    "activation_memory_budget=<b>" for 0 <= b <= 1 (b as Python prints the float). One line; None when it can."""
    from memsched.experiments.vs_torch_compile import TOOLS

    tool, setting = row["tool"], row["setting"]
    value = setting.partition("=")[2]
    if tool == "checkpoint-per-block":
        ok = setting == f"{blocks} blocks"
    elif tool == "checkpoint_sequential":
        ok = value.isdigit() and setting == f"segments={int(value)}" and 2 <= int(value) <= blocks
    elif tool == TOOLS["aot"]:
        try:
            budget = float(value)
        except ValueError:
            budget = float("nan")
        ok = setting == f"activation_memory_budget={budget}" and 0.0 <= budget <= 1.0
    else:
        ok = False
    if ok:
        return None
    return (f"--csv: cannot duel {row['model']}/{row['size']}'s {tool} {setting} "
            f"(not a point bench_vs_torch builds on its {blocks} blocks)")


def checked_duels(duels: list[dict], rows: list[dict]) -> list[dict]:
    """`duels` (rows of the duels CSV, strings) as the duel verdict is to count them (module docstring): a duel
    whose P failed its gradient check (``their_grad_ok`` "False", or unknown and `rows`' row of P, the bench's,
    has ``grad_ok`` "False") left out; one whose memsched plan failed its check (``grad_ok`` "False") kept
    without its times (``ratio`` empty, as a duel without a plan); the others, unknown checks included, as
    they are. New dicts; `duels` is not changed."""
    bench = {(r["model"], r["size"], r["tool"], r["setting"]): str(r.get("grad_ok", "")) for r in rows}
    out = []
    for d in duels:
        theirs = d.get("their_grad_ok") or bench.get((d["model"], d["size"], d["tool"], d["setting"]), "")
        if theirs == "False":
            continue
        out.append({**d, "ratio": "", "ratio_ci": "", "ratio_of_least": ""} if d.get("grad_ok") == "False" else d)
    return out


def duel_styles(duels: list[dict]) -> dict[str, dict[str, Any]]:
    """Legend label ("<tool> (<granularity>)") of each of `duels` -> matplotlib keywords (color, marker): the
    tool's `TOOL_COLOURS` with the granularity's `GRANULARITY_MARKERS`, the same in every panel and figure; a
    tool or granularity without one takes a free pair (`plotting.styles.distinct_styles`, labels sorted)."""
    from memsched.experiments.plotting.styles import distinct_styles

    pairs = sorted({(d["tool"], d["granularity"]) for d in duels})
    return distinct_styles(
        (f"{tool} ({g})", {"color": TOOL_COLOURS[tool], "marker": GRANULARITY_MARKERS[g]}
         if tool in TOOL_COLOURS and g in GRANULARITY_MARKERS else None)
        for tool, g in pairs
    )


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
    and memsched granularity, with both sides' gradient checks (``grad_ok``: memsched's plan, None
    without one; ``their_grad_ok``: the point's). The chains are profiled once; each round visits every
    point once in a new random order and runs its step and its memsched steps back to back, shuffled."""
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
                "grad_ok": mine.get("grad_ok"),
                "their_grad_ok": theirs[i].row.get("grad_ok"),
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


#: the legend entry of the duels figure's dashed line: a ratio up to it counts as matched (`vs_torch_report.TIME_NOISE`)
ALLOWANCE_LABEL = "2% allowance"
#: the font size of the duels figure's legends (pt)
LEGEND_FONTSIZE = 7


def duel_figure(duels: list[dict], path: Path) -> None:
    """One panel per model and size: each duelled point's time ratio (memsched / the point's tool,
    median with its 95% interval) against the point's peak (MiB), one colour per tool and one marker per
    granularity (`duel_styles`, the same in every panel); dashed: the 2% allowance (`vs_torch_report.TIME_NOISE`,
    1.02), the legend's last entry (`ALLOWANCE_LABEL`; the legend at `LEGEND_FONTSIZE` pt). Only the duels the
    verdict counts are drawn (`checked_duels` without the bench's rows: a failed gradient check on either
    side leaves a duel out); a panel none of whose duels is drawn (each left out, or without a plan: no
    ``ratio``), or the one panel of no duels at all, has no legend and says `NO_DUEL_TEXT` instead. Written
    atomically (`vs_torch_report.save_png`)."""
    import matplotlib
    from memsched.experiments.vs_torch_report import TIME_NOISE, save_png

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys((d["model"], d["size"]) for d in duels))
    duels = checked_duels(duels, [])
    styles = duel_styles([d for d in duels if d.get("ratio") not in (None, "")])
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
                fmt=styles[label]["marker"],
                color=styles[label]["color"],
                markersize=3,
                capsize=2,
                label=label,
            )
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(TIME_NOISE, color="grey", lw=0.8, ls="--", label=ALLOWANCE_LABEL)
        ax.set_title(f"{key[0]} ({key[1]})", fontsize=9)
        ax.set_xlabel("the point's peak (MiB, tracker)", fontsize=8)
        ax.set_ylabel("memsched time / the point's (median, 95% CI)", fontsize=8)
        ax.grid(alpha=0.3)
        if rs:  # the duels' entries first, the allowance last
            handles, labels = ax.get_legend_handles_labels()
            order = sorted(range(len(labels)), key=lambda i: labels[i] == ALLOWANCE_LABEL)
            ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=LEGEND_FONTSIZE)
        else:  # every duel of the panel left out or without a plan: a legend of nothing warns
            ax.text(0.5, 0.5, NO_DUEL_TEXT, ha="center", transform=ax.transAxes, fontsize=8)
    if not keys:  # no duel at all: the one panel is empty too
        axes[0][0].text(0.5, 0.5, NO_DUEL_TEXT, ha="center", transform=axes[0][0].transAxes, fontsize=8)
    fig.tight_layout()
    save_png(fig, path)  # atomically


def main(argv: list[str] | None = None) -> int:
    """Duel the contested points of `--csv` (module docstring); exit 0, 2 on a missing CSV or a bad argument
    (a count below 1, an unknown option, a value that is not a number, an --out ending in .png whose figure would
    replace it, a model, size or point that cannot be dueled: one line on stderr, before any duel),
    130 on Ctrl-C (one line; `benchtable.guarded`), also while the modules are imported (module docstring)."""
    return script_main("vs_torch_duel", lambda: _run(argv))


def _points_errors(rows: list[dict], key: tuple[str, str], every: bool) -> list[str]:
    """`setting_error` of each point of `rows` that `key` (model, size) would duel (`vs_torch_report.contested`),
    on the model built at that size (its block count; no step is run)."""
    from memsched.experiments.bench_vs_torch import SIZES
    from memsched.experiments.vs_torch_report import contested
    from memsched.models.zoo import build_model

    points = contested(rows, key, every)
    if not points:
        return []
    blocks = len(build_model(key[0], **SIZES[key[0]][key[1]]).blocks)
    return [e for r in points if (e := setting_error(r, blocks)) is not None]


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
    error = option_error(args.models, args.sizes, rows, csv_path)
    error = error or (None if args.replot else key_error(keys, csv_path))  # --replot duels nothing
    if error:
        print(f"vs_torch_duel: {error}", file=sys.stderr)
        return 2
    import torch  # once the arguments are checked: a usage error needs no torch (a second or so)

    torch.set_num_threads(1)
    done = read_rows(out) if out.exists() else []
    if args.replot:
        keys = []
    elif args.resume:
        keys = [k for k in keys if k not in {(d["model"], d["size"]) for d in done}]
    error = next((e for k in keys for e in _points_errors(rows, k, args.every)), None)
    if error:
        print(f"vs_torch_duel: {error}", file=sys.stderr)
        return 2
    columns = list(dict.fromkeys((*DUEL_COLUMNS, *GRAD_COLUMNS)))  # once each, should DUEL_COLUMNS gain them
    done = [d for d in done if (d["model"], d["size"]) not in set(keys)]
    for name, size in keys:
        new = duel(name, size, contested(rows, (name, size), args.every), args.rounds, args.repeats)
        for d in new:
            ratio = f"{d['ratio']:.3f} +- {d['ratio_ci']:.3f}" if d.get("ratio") is not None else "no plan"
            print(
                f"{name:>8} {size:>6} {d['tool']:>22} {d['setting']:>28} {d['granularity']:>5}: memsched/theirs "
                f"{ratio} (least {d.get('ratio_of_least') or float('nan'):.3f}), peak ok {d.get('peak_ok')}, "
                f"grads ok {d.get('grad_ok')}/{d.get('their_grad_ok')} (memsched/theirs)",
                flush=True,
            )
        done += new
        write_csv(done, out, columns, extrasaction="ignore")  # each model and size kept as it ends
    if not out.exists():
        write_csv([], out, columns)
    counted = checked_duels(read_rows(out), rows)  # the duels whose gradient checks passed (or are unknown)
    duel_figure(counted, figure)
    summary_path = write_csv(
        verdicts(read_rows(csv_path, field="--csv"), counted),
        csv_path.with_name(f"{csv_path.stem}_summary.csv"),
        SUMMARY_COLUMNS,
    )
    print(f"wrote {out}, {figure} and {summary_path}")
    return 0


if __name__ == "__main__":
    from memsched.experiments.steady_malloc import run_with_pinned_malloc

    sys.exit(run_with_pinned_malloc("memsched.experiments.vs_torch_duel", main))  # steady step times

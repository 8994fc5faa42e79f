"""Offloading trade-offs: overhead versus device memory, remat only / offload only / both.

    python -m memsched.experiments.bench_offload [--quick] [--chains FILE ...] [--activation-rate BYTES_PER_S]
        [--bandwidths BYTES_PER_S ...] [--slots N] [--out results/offload/offload_tradeoff.csv]

For ResNet-50, DenseNet-121 and a GPT-2-style transformer from the zoo (small sizes, profiled
here on the CPU, or chain files given with --chains), at host-link bandwidths of 12, 25 and
50 GB/s (PCIe 3, PCIe 4, NVLink-class) and device budgets from 20% to 100% of the store-all
peak, it runs: remat-only (the chain DP), offload-only (the best of vDNN and offload-prefix)
and both (the best of rotor-offload and pofo), each replayed by the two-stream simulator, and writes
``--out`` (default results/offload/offload_tradeoff.csv) and the figure beside it (its name with .png
and .pdf). The zoo's profiles are cached in results/offload/profiles whatever ``--out``.

``--quick`` (budgets 30%, 60% and 100% only) writes the same default file, except that it refuses
(one line, exit 2, before any work) to replace a table there holding other budgets, such as the
committed full table: give ``--out`` to write the quick table elsewhere. A quick table there may be
replaced by another. Bad arguments are one line and exit 2 before any work; Ctrl-C is one line and
exit 130: the CSV and figure stay as they were, the points finished before it are kept in ``<out
stem>.partial.csv`` and the same command run again resumes from them (`benchtable.resumable`), only
with the same arguments and chains: the partial file records a SHA-256 of each chain's content (as
loaded, before rescaling; --chains files and cached zoo profiles alike), so a chain edited (or profiled
again) since is not resumed and every point runs again. A point is named by its chain's name (the
``model`` column): two chains of the same name (--chains files whose "name" is the same) are refused
before any work (one line naming --chains, both files and the name, exit 2). The CSV and the figure's
files are written through temporary files renamed into place.

The compute times of a CPU profile are far longer than a GPU's, which would make any transfer
look free. So the times are rescaled until the network produces its tapes at
``--activation-rate`` bytes per second (sum of xbar over the step's forward and backward
time; default 30 GB/s, about a V100 training ResNet-50), and the scale is written in the CSV
and on the figure. Give chain files profiled on a GPU with ``--chains`` and
``--activation-rate 0`` to keep their times as they are.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from memsched.experiments.benchtable import (
    Resumable,
    check_out,
    figure_beside,
    guarded,
    positive,
    resumable,
    save_figure,
    settings_of,
    write_frame,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.chain import Chain, reference_peak
from memsched.solvers.errors import InputError
from memsched.solvers.offload import OffloadInstance
from tqdm import tqdm

RESULTS = Path(__file__).resolve().parent.parent / "results" / "offload"
ZOO = {  # small sizes so that profiling takes seconds on 2 cores
    "resnet50": {"batch": 4, "image_size": 64, "width": 16},
    "densenet121": {"batch": 4, "image_size": 64, "width": 16},
    "gpt2": {"batch": 4, "seq_len": 128, "width": 128, "depth": 8, "vocab": 2048},
}
#: budget fractions of --quick (of the store-all peak); the full run: 0.2, 0.3, ..., 1.0
QUICK_FRACTIONS = (0.3, 0.6, 1.0)
STRATEGIES = {"remat only": ["remat-only"], "offload only": ["vdnn", "offload-prefix"],
              "both": ["rotor-offload", "pofo"]}


def profiled_chains(quick: bool) -> list[Chain]:
    """The zoo models of `ZOO` as chains, at the sizes there (the same with `quick`, which times each
    operation 2 times instead of 5 when it profiles). A profile cached in ``RESULTS/profiles/<model>.json``
    is reused when it is that model at those sizes (`cached_profile`), whatever its repeats, and a line on
    stderr says so; otherwise the model is profiled here (on the CPU) and the cache replaced."""
    from memsched.models.chain.profiler import profile_model

    chains = []
    for name, sizes in ZOO.items():
        path = RESULTS / "profiles" / f"{name}.json"
        cached = cached_profile(path, name, sizes)
        if cached is not None:
            chains.append(cached)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        chain, _ = profile_model(name, repeats=2 if quick else 5, warmup=1, out=str(path), **sizes)
        chains.append(chain)
    return chains


def cached_profile(path: Path, model: str, sizes: dict[str, Any]) -> Chain | None:
    """The chain cached at `path` when its ``meta`` says it is `model` profiled (measured, not a cost
    model such as ``roofline:v100``) at `sizes`, with a line on stderr naming the file and its repeats;
    None when there is no such file, or, with a line saying what differs, when it is another profile."""
    if not path.exists():
        return None
    chain = Chain.load(path)
    meta = chain.meta
    asked = {"model": model, **sizes}
    differs = [f"{k} {meta.get(k)!r} (asked {v!r})" for k, v in asked.items() if meta.get(k) != v]
    if meta.get("cost") not in (None, "measured"):
        differs.append(f"cost {meta['cost']!r} (asked: measured here)")
    if differs:
        print(f"bench_offload: {path}: another profile ({', '.join(differs)}): profiling {model} again",
              file=sys.stderr)
        return None
    print(f"bench_offload: reusing the profile {path} ({meta.get('repeats')} repeats, {meta.get('date')})",
          file=sys.stderr)
    return chain


def check_names(chains: list[Chain], paths: list[str], field: str) -> None:
    """`InputError` naming `field`, the name and its two files (`paths`, in the order of `chains`) when two of
    `chains` have the same name: a row's cell is its chain's name (the ``model`` column, with the bandwidth and
    budget), so one chain's rows would be taken for the other's on a resume and share its curves in the figure."""
    seen: dict[str, str] = {}
    for chain, path in zip(chains, paths):
        if chain.name in seen:
            raise InputError(f"{seen[chain.name]!r} and {path!r} both hold a chain named {chain.name!r} (the table's "
                             "model column): give each chain file its own \"name\"", field=field)
        seen[chain.name] = path


def digest(chain: Chain) -> str:
    """The SHA-256 (hex) of `chain`'s content: its chain file's JSON object (`Chain.to_dict`) with sorted keys and
    no spaces, so that reformatting a file keeps it and any changed value (a time, a size, the name) changes it."""
    text = json.dumps(chain.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scaled(chain: Chain, factor: float) -> Chain:
    """A copy of `chain` with u_f, u_fa, u_fn and u_b multiplied by `factor` (x, xbar, o_f, o_fa, o_fn, o_b kept)."""
    return Chain(chain.u_f * factor, chain.u_b * factor, chain.x, chain.xbar, chain.o_f, chain.o_b,
                 name=chain.name, stage_names=chain.stage_names, meta=chain.meta, o_fa=chain.o_fa, o_fn=chain.o_fn,
                 u_fa=chain.u_fa * factor, u_fn=chain.u_fn * factor)


def run(chains: list[Chain], bandwidths: list[float], fractions: list[float], slots: int,
        rows: list[dict[str, Any]] | None = None, table: Resumable | None = None) -> pd.DataFrame:
    """Solve each chain x bandwidth (bytes/s) x budget fraction; one row per point and strategy (remat only, offload
    only, both) with its best makespan, a point's rows appended to `rows` (when given) as soon as it is solved, so
    a caller interrupted keeps the finished ones; with `table` (`benchtable.resumable`; then `rows` is its rows),
    the points it holds already are taken from it, the others added to it."""
    rows = table.rows if table is not None else [] if rows is None else rows
    grid = [(c, bw, f) for c in chains for bw in bandwidths for f in fractions]
    for chain, bw, fraction in tqdm(grid, desc="offload", unit="point"):
        if table is not None and table.kept(chain.name, bw / 1e9, fraction) is not None:
            continue
        inst = OffloadInstance(chain, bw)
        budget = int(reference_peak(chain) * fraction)
        point = []
        for strategy, solvers in STRATEGIES.items():
            best = None
            for name in solvers:
                result = registry.solve("offload", inst, name, budget, slots=slots)
                if result.schedule is not None and (best is None or result.objective < best.objective):
                    best = result
            point.append({"model": chain.name, "L": chain.length, "bandwidth_GBps": bw / 1e9,
                          "budget_fraction": fraction, "budget": budget, "strategy": strategy,
                          "solver": best.solver if best else None, "status": best.status if best else "infeasible",
                          "makespan": best.objective if best else None,
                          "overhead": best.objective / chain.total_time() - 1 if best else None,
                          "peak_memory": best.peak_memory if best else None})
        if table is not None:
            table.add(*point)
        else:
            rows.extend(point)
    return pd.DataFrame(rows)


def holds_other_budgets(path: Path, fractions: tuple[float, ...]) -> bool:
    """Whether the CSV at `path` exists and is not a table of `fractions` only: a row whose
    ``budget_fraction`` is another number, or a file that is not such a table (no such column, not
    readable as text). A missing file holds nothing."""
    if not path.exists():
        return False
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if "budget_fraction" not in (reader.fieldnames or ()):
                return True
            return any(float(row["budget_fraction"] or "nan") not in fractions for row in reader)
    except (OSError, UnicodeDecodeError, ValueError, csv.Error):
        return True


def figure(table: pd.DataFrame, note: str, out: Path) -> None:
    """Draw the recompute/offload trade-off (makespan against budget per bandwidth) to `out` (PNG and PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(table["model"]))
    bws = sorted(table["bandwidth_GBps"].unique())
    fig, axes = plt.subplots(len(models), len(bws), figsize=(4 * len(bws), 3 * len(models)), squeeze=False,
                             sharey="row")
    for r, model in enumerate(models):
        for c, bw in enumerate(bws):
            ax = axes[r][c]
            sub = table[(table.model == model) & (table.bandwidth_GBps == bw)]
            for strategy, marker in zip(STRATEGIES, "os^"):
                part = sub[sub.strategy == strategy].dropna(subset=["overhead"])
                ax.plot(100 * part.budget_fraction, 100 * part.overhead, marker=marker, label=strategy)
            ax.set_title(f"{model}, {bw:g} GB/s", fontsize=9)
            ax.set_xlabel("device memory (% of store-all peak)")
            if c == 0:
                ax.set_ylabel("time overhead (%)")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"Offloading and rematerialization — {note}", fontsize=9)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        save_figure(fig, out.with_name(f"{out.name}.{ext}"), dpi=120)  # `out`: the CSV's path without ".csv"
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the offload trade-off benchmark; print a table, write --out (default
    results/offload/offload_tradeoff.csv) and the figure beside it (PNG, PDF); exit 0 (2 on a bad argument, or
    on --quick without --out where the default file holds other budgets; 130 on Ctrl-C: the files as they were, the
    finished points kept beside them for a rerun to resume from)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", nargs="*", help="chain files to use instead of profiling the zoo")
    parser.add_argument("--activation-rate", type=positive(float, zero=True), default=30e9,
                        help="bytes/s of tapes produced per second of compute after rescaling (0: keep times)")
    parser.add_argument("--bandwidths", nargs="+", type=positive(float), default=[12e9, 25e9, 50e9])
    parser.add_argument("--slots", type=positive(int, zero=True), default=200)
    parser.add_argument("--quick", action="store_true",
                        help="budgets 30%%, 60%%, 100%% only; without --out it will not replace a default table "
                             "holding other budgets (the committed full one)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the CSV; the figure beside it (.png, .pdf); default results/offload/offload_tradeoff.csv")
    args = parser.parse_args(argv)
    missing = [p for p in args.chains or [] if not Path(p).is_file()]
    if missing:
        parser.error(f"--chains: {missing[0]!r} is not a file")
    out = args.out if args.out is not None else RESULTS / "offload_tradeoff.csv"
    return guarded("bench_offload", lambda: _main(args, out))


def _main(args: argparse.Namespace, out: Path) -> int:
    """The body of `main`: `out` checked, the chains loaded (or profiled) and rescaled, the grid solved, the
    CSV, figure and table written; on Ctrl-C the points finished so far are kept beside `out` and a rerun
    resumes from them (`benchtable.resumable`)."""
    from memsched.experiments.cli import interrupts_deferred

    check_out(out, "--out" if args.out is not None else "output")
    for ext in (".png", ".pdf"):
        figure_beside(out, ext, "--out" if args.out is not None else "output")  # where `figure` writes: not `out`
    if args.quick and args.out is None and holds_other_budgets(out, QUICK_FRACTIONS):
        raise InputError(f"would replace the full table in {out} (budgets other than 30%, 60%, 100%); give --out "
                         "to write the quick one elsewhere", field="--quick")
    loaded = [Chain.load(p) for p in args.chains] if args.chains else None
    if loaded is not None:
        check_names(loaded, args.chains, "--chains")
    out.parent.mkdir(parents=True, exist_ok=True)
    chains = loaded if loaded is not None else profiled_chains(args.quick)
    settings = {**settings_of(args), "chain_digests": [digest(c) for c in chains]}  # before rescaling
    scales = {}
    for k, c in enumerate(chains):
        factor = 1.0
        if args.activation_rate > 0:
            factor = float(c.xbar.sum()) / args.activation_rate * c.time_units_per_second() / c.total_time()
        scales[c.name] = factor
        chains[k] = scaled(c, factor)
    fractions = list(QUICK_FRACTIONS) if args.quick else list(np.round(np.arange(0.2, 1.01, 0.1), 2))
    with resumable(out, None, settings, ("model", "bandwidth_GBps", "budget_fraction")) as kept:
        table = run(chains, args.bandwidths, fractions, args.slots, table=kept)
        rate = (f"times rescaled to {args.activation_rate / 1e9:g} GB/s of tapes" if args.activation_rate
                else "profiled times")
        note = f"{rate}; memsched {__version__}, {platform.python_implementation()} {platform.python_version()}"
        table["time_scale"] = table["model"].map(scales)
        with interrupts_deferred():  # the CSV and its figure replaced together
            write_frame(table, out)
            figure(table, note, out.with_name(out.stem))
    with pd.option_context("display.width", 160, "display.max_rows", 400):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out} and .png/.pdf")
    return 0


if __name__ == "__main__":
    sys.exit(main())

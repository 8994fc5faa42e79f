"""Offloading trade-offs: overhead versus device memory, remat only / offload only / both.

    python -m memsched.experiments.bench_offload [--quick] [--chains FILE ...] [--activation-rate BYTES_PER_S]
        [--bandwidths BYTES_PER_S ...] [--slots N]

For ResNet-50, DenseNet-121 and a GPT-2-style transformer from the zoo (small sizes, profiled
here on the CPU, or chain files given with --chains), at host-link bandwidths of 12, 25 and
50 GB/s (PCIe 3, PCIe 4, NVLink-class) and device budgets from 20% to 100% of the store-all
peak, it runs: remat-only (the chain DP), offload-only (the best of vDNN and offload-prefix)
and both (the best of rotor-offload and pofo), each replayed by the two-stream simulator, and writes
results/offload/offload_tradeoff.csv and a figure (PNG and PDF).

The compute times of a CPU profile are far longer than a GPU's, which would make any transfer
look free. So the times are rescaled until the network produces its tapes at
``--activation-rate`` bytes per second (sum of xbar over the step's forward and backward
time; default 30 GB/s, about a V100 training ResNet-50), and the scale is written in the CSV
and on the figure. Give chain files profiled on a GPU with ``--chains`` and
``--activation-rate 0`` to keep their times as they are.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from memsched.experiments.benchtable import check_out, guarded, positive, write_csv
from memsched.solvers import __version__, registry
from memsched.solvers.chain import Chain, reference_peak
from memsched.solvers.offload import OffloadInstance
from tqdm import tqdm

RESULTS = Path(__file__).resolve().parent.parent / "results" / "offload"
ZOO = {  # small sizes so that profiling takes seconds on 2 cores
    "resnet50": {"batch": 4, "image_size": 64, "width": 16},
    "densenet121": {"batch": 4, "image_size": 64, "width": 16},
    "gpt2": {"batch": 4, "seq_len": 128, "width": 128, "depth": 8, "vocab": 2048},
}
STRATEGIES = {"remat only": ["remat-only"], "offload only": ["vdnn", "offload-prefix"],
              "both": ["rotor-offload", "pofo"]}


def profiled_chains(quick: bool) -> list[Chain]:
    """Profile the zoo models into chains (smaller sizes with `quick`)."""
    from memsched.models.chain.profiler import profile_model

    chains = []
    for name, sizes in ZOO.items():
        path = RESULTS / "profiles" / f"{name}.json"
        if path.exists():
            chains.append(Chain.load(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        chain, _ = profile_model(name, repeats=2 if quick else 5, warmup=1, out=str(path), **sizes)
        chains.append(chain)
    return chains


def scaled(chain: Chain, factor: float) -> Chain:
    """A copy of `chain` with u_f, u_fa, u_fn and u_b multiplied by `factor` (x, xbar, o_f, o_fa, o_fn, o_b kept)."""
    return Chain(chain.u_f * factor, chain.u_b * factor, chain.x, chain.xbar, chain.o_f, chain.o_b,
                 name=chain.name, stage_names=chain.stage_names, meta=chain.meta, o_fa=chain.o_fa, o_fn=chain.o_fn,
                 u_fa=chain.u_fa * factor, u_fn=chain.u_fn * factor)


def run(chains: list[Chain], bandwidths: list[float], fractions: list[float], slots: int,
        rows: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """Solve each chain x bandwidth (bytes/s) x budget fraction; one row per point and strategy (remat only, offload
    only, both) with its best makespan, appended to `rows` (when given) as soon as it is solved, so a caller
    interrupted keeps the finished ones."""
    rows = [] if rows is None else rows
    grid = [(c, bw, f) for c in chains for bw in bandwidths for f in fractions]
    for chain, bw, fraction in tqdm(grid, desc="offload", unit="point"):
        inst = OffloadInstance(chain, bw)
        budget = int(reference_peak(chain) * fraction)
        for strategy, solvers in STRATEGIES.items():
            best = None
            for name in solvers:
                result = registry.solve("offload", inst, name, budget, slots=slots)
                if result.schedule is not None and (best is None or result.objective < best.objective):
                    best = result
            rows.append({"model": chain.name, "L": chain.length, "bandwidth_GBps": bw / 1e9,
                         "budget_fraction": fraction, "budget": budget, "strategy": strategy,
                         "solver": best.solver if best else None, "status": best.status if best else "infeasible",
                         "makespan": best.objective if best else None,
                         "overhead": best.objective / chain.total_time() - 1 if best else None,
                         "peak_memory": best.peak_memory if best else None})
    return pd.DataFrame(rows)


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
        fig.savefig(out.with_suffix(f".{ext}"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the offload trade-off benchmark; print a table, write results/offload/offload_tradeoff.csv and the figure
    (PNG, PDF); exit 0 (2 on a bad argument, 130 on Ctrl-C, the rows finished before it written)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", nargs="*", help="chain files to use instead of profiling the zoo")
    parser.add_argument("--activation-rate", type=positive(float, zero=True), default=30e9,
                        help="bytes/s of tapes produced per second of compute after rescaling (0: keep times)")
    parser.add_argument("--bandwidths", nargs="+", type=positive(float), default=[12e9, 25e9, 50e9])
    parser.add_argument("--slots", type=positive(int, zero=True), default=200)
    parser.add_argument("--quick", action="store_true", help="fewer budgets")
    args = parser.parse_args(argv)
    missing = [p for p in args.chains or [] if not Path(p).is_file()]
    if missing:
        parser.error(f"--chains: {missing[0]!r} is not a file")
    out = RESULTS / "offload_tradeoff.csv"
    return guarded("bench_offload", lambda: _main(args, out),
                   interrupted=f"interrupted: the finished rows are in {out} (as it was if none finished)"
                               "; the figure was not drawn")


def _main(args: argparse.Namespace, out: Path) -> int:
    """The body of `main`: `out` checked, the chains loaded (or profiled) and rescaled, the grid solved, the
    CSV, figure and table written; on Ctrl-C the rows finished so far are written to `out` before the
    interrupt goes on."""
    check_out(out, "output")
    loaded = [Chain.load(p) for p in args.chains] if args.chains else None
    out.parent.mkdir(parents=True, exist_ok=True)
    chains = loaded if loaded is not None else profiled_chains(args.quick)
    scales = {}
    for k, c in enumerate(chains):
        factor = 1.0
        if args.activation_rate > 0:
            factor = float(c.xbar.sum()) / args.activation_rate * c.time_units_per_second() / c.total_time()
        scales[c.name] = factor
        chains[k] = scaled(c, factor)
    fractions = [0.3, 0.6, 1.0] if args.quick else list(np.round(np.arange(0.2, 1.01, 0.1), 2))
    rows: list[dict[str, Any]] = []
    try:
        table = run(chains, args.bandwidths, fractions, args.slots, rows)
    except KeyboardInterrupt:
        if rows:
            write_csv([{**r, "time_scale": scales[r["model"]]} for r in rows], out, [*rows[0], "time_scale"])
        raise
    rate = (f"times rescaled to {args.activation_rate / 1e9:g} GB/s of tapes" if args.activation_rate
            else "profiled times")
    note = f"{rate}; memsched {__version__}, {platform.python_implementation()} {platform.python_version()}"
    table["time_scale"] = table["model"].map(scales)
    table.to_csv(out, index=False)
    figure(table, note, out.with_suffix(""))
    with pd.option_context("display.width", 160, "display.max_rows", 400):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out} and .png/.pdf")
    return 0


if __name__ == "__main__":
    sys.exit(main())

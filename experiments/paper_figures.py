"""Figures at the papers' sizes, from the rows of a sweep over the committed paper-size instances.

    python -m memsched.experiments.paper_figures [--results results/fig_paper_chains] [--out results/figures]
        [--stem paper_chains]

Reads ``<results>/<name>.csv`` (written by ``memsched sweep fig_paper_chains``, or
``fig_paper_graphs`` with ``--stem paper_graphs``) and draws, per
instance, the makespan relative to store-all's (1 + the rows' ``overhead``) of every solver versus the
memory budget in GB (10^9 bytes, the activation budget the solver gets, input a_0 included),
over the instance's grid from its smallest feasible budget (rotor's) to its store-all peak. Each
panel's title names the instance and the cost model its times come from (the instance file's
``meta["cost"]``: a roofline of a named GPU, counted FLOP or measured). Writes
``paper_chains.png`` and ``.pdf`` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

GB = 1e9
MARKERS = {"rotor": "o", "periodic": "s", "sqrt": "^", "revolve": "v", "store-all": "D", "cpsat": "x"}


def cost_model_of(instance_file: Path) -> str:
    """The cost model an instance file states (``meta.cost``), "measured" when it states none."""
    try:
        data = json.loads(instance_file.read_text())
        meta = data.get("meta") or {"graph": data.get("graph", {})}
    except (OSError, ValueError):
        return "unknown"
    if "graph" in meta and isinstance(meta.get("graph"), dict):  # a graph file: meta under graph.meta
        meta = meta["graph"].get("meta", {})
    cost = meta.get("cost", "measured")
    model = meta.get("cost_model")
    if isinstance(model, dict) and model.get("device"):
        return f"{cost} ({model['device']})"
    return str(cost)


def draw(rows: pd.DataFrame, costs: dict[str, str], out_dir: Path, stem: str = "paper_chains") -> list[Path]:
    """One panel per instance: overhead versus budget (GB), one line per solver (feasible rows only)."""
    instances = list(dict.fromkeys(rows["instance"]))
    cols = min(3, len(instances))
    nrows = math.ceil(len(instances) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.3 * cols, 3.3 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, instances):
        part = rows[(rows["instance"] == name) & rows["status"].isin(["optimal", "feasible"])]
        for solver, group in part.groupby("solver_label", sort=False):
            group = group.sort_values("budget")
            ax.plot(group["budget"] / GB, 1.0 + group["overhead"], marker=MARKERS.get(str(solver), "."), ms=3, lw=1,
                    label=str(solver))
        ref = rows.loc[rows["instance"] == name, "reference_peak"].max()
        ax.axvline(ref / GB, color="0.6", lw=0.8, ls=":")
        ax.set_title(f"{name}\ntimes: {costs.get(name, 'unknown')}", fontsize=7)
        ax.set_xlabel("memory budget (GB; dotted: store-all peak)", fontsize=7)
        ax.set_ylabel("makespan / store-all", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(instances):]:
        ax.axis("off")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Draw the papers' chain figure from the sweep in --results into --out; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/fig_paper_chains", help="the sweep's output folder")
    parser.add_argument("--out", default="results/figures", help="folder for the figure files")
    parser.add_argument("--stem", default="paper_chains", help="figure file name (without extension)")
    args = parser.parse_args(argv)
    folder = Path(args.results)
    table = folder / f"{folder.name}.csv"
    rows = pd.read_csv(table)
    costs = {}
    for name, source in rows[["instance", "source"]].drop_duplicates().itertuples(index=False):
        costs[name] = cost_model_of(Path(str(source))) if Path(str(source)).exists() else "unknown"
    for p in draw(rows, costs, Path(args.out), stem=args.stem):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

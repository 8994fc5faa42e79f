"""Figures at the papers' sizes, from the rows of a sweep over the committed paper-size instances.

    python -m memsched.experiments.paper_figures [--results results/fig_paper_chains] [--out results/figures]
        [--stem paper_chains]

Reads ``<results>/<name>.csv`` (written by ``memsched sweep fig_paper_chains``, or
``fig_paper_graphs`` / ``fig_paper_offload`` / ``fig_paper_pipeline`` with ``--stem paper_graphs``
/ ``paper_offload`` / ``paper_pipeline``) and draws, per instance, the makespan relative to
store-all's (1 + the rows' ``overhead``) of every solver versus the memory budget in GB (10^9
bytes, the activation budget the solver gets, input a_0 included; for offloading the device
memory), over the instance's grid from its smallest feasible budget (rotor's) to its store-all
peak. A pipeline sweep (problem ``pipeline``) is drawn as the period (the objective, in the
instance's time unit, ms) versus the memory per device, one row of panels per instance and one
column per device count P (the solver labels' ``P=<n>``). Each panel's title names the
instance and the cost model its times come from (the instance file's ``meta["cost"]``: a
roofline of a named GPU, counted FLOP or measured). Writes ``<stem>.png`` and ``.pdf`` under `--out`.

Exit 0; 2, with a one-line error naming the path and before anything is drawn, when the table is
missing, damaged, empty (a header alone) or lacks a column, or `--out` is no folder that can be made
(a file, say) or a figure's file is a folder; 130, one line, on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from memsched.experiments.figures import (  # noqa: E402
    _checked_fields,
    _checked_numbers,
    _legend,
    _save_figure,
    check_figure_paths,
    check_stem,
    literal_text,
    make_folder,
    mark_coinciding,
    model_labels,
    source_file,
)
from memsched.experiments.figures import style as solver_style  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

GB = 1e9
#: pipeline panels: one colour and marker per solver (the label's name before " P=<n>")
PIPELINE_STYLE = {"madpipe": ("C0", "o"), "pipedream": ("C1", "s"), "balance-time": ("C2", "^"),
                  "interleave-v": ("C3", "v"), "cpsat": ("k", "x"), "dag": ("C4", "D")}


def draw_pipeline(rows: pd.DataFrame, costs: dict[str, str], out_dir: Path, stem: str = "paper_pipeline") -> list[Path]:
    """One row of panels per instance, one column per device count P (the solver labels' "P=<n>"):
    the period (objective, ms per micro-batch) versus the memory per device (GB), one line per
    solver (feasible rows only), named with the model its optimal rows are optimal in
    (`plotting.labels.model_labels`); one legend for the figure, right of the panels (none over the data), and
    a line drawn exactly under another shown around it (`figures.mark_coinciding`)."""
    rows = rows.assign(_solver=rows["solver_label"].str.split(" P=").str[0],
                       _p=pd.to_numeric(rows["solver_label"].str.split(" P=").str[1], errors="coerce"))
    instances = list(dict.fromkeys(rows["instance"]))
    ps = sorted(int(p) for p in rows["_p"].dropna().unique())
    models = _solver_models(rows)
    fig, axes = plt.subplots(len(instances), len(ps), figsize=(3.6 * len(ps), 2.8 * len(instances)), squeeze=False)
    handles: dict[str, object] = {}
    drawn: list[list[tuple[str, object]]] = []
    for i, name in enumerate(instances):
        for j, p in enumerate(ps):
            ax = axes[i][j]
            part = rows[(rows["instance"] == name) & (rows["_p"] == p) & rows["status"].isin(["optimal", "feasible"])]
            drawn.append([])
            for solver, group in part.groupby("_solver", sort=False):
                colour, marker = PIPELINE_STYLE.get(str(solver), ("0.5", "."))
                group = group.sort_values("budget")
                text = models.get(str(solver), str(solver))
                (line,) = ax.plot(group["budget"] / GB, group["objective"], color=colour, marker=marker, ms=3, lw=1,
                                  ls="--" if solver == "cpsat" else "-", label=literal_text(text))
                handles.setdefault(text, line)
                drawn[-1].append((text, line))
            ax.set_title(literal_text(f"{name}, P = {p}\ntimes: {costs.get(name, 'unknown')}"), fontsize=7)
            ax.set_xlabel("memory per device (GB)", fontsize=7)
            ax.set_ylabel("period (ms per micro-batch)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    fig.tight_layout(rect=_legend(fig, list(axes.flat), handles, outside=True))
    for lines in drawn:
        mark_coinciding(lines)
    return save_figure(fig, out_dir, stem)


def _solver_models(rows: pd.DataFrame) -> dict[str, str]:
    """Pipeline solver name (``_solver``: the label before " P=<n>") -> its legend text with the model its
    optimal rows are optimal in ("madpipe (contiguous stages, 1F1B)", `plotting.labels.model_labels`), when every
    device count names the same model; else the name."""
    named: dict[str, set[str]] = {}
    for label, text in model_labels(rows).items():
        solver = label.split(" P=")[0]
        named.setdefault(solver, set()).add(text[len(label):])  # the appended " (<model>)", or ""
    return {solver: solver + tails.pop() for solver, tails in named.items() if len(tails) == 1}


def save_figure(fig: plt.Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write `fig` as ``<stem>.png`` and ``.pdf`` under `out_dir` (made when missing, `make_folder`),
    together (`figures._save_figure`: both new or both old, after a failed write or a Ctrl-C too);
    close it; return the paths.
    A folder that cannot be made or a file that cannot be written is an `InputError` naming it."""
    try:
        make_folder(out_dir)
        return _save_figure(fig, out_dir, stem, tight=False)
    finally:
        plt.close(fig)


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
    """One panel per instance: overhead versus budget (GB), one line per solver (feasible rows only),
    named with the model its optimal rows are optimal in (`plotting.labels.model_labels`); one legend for the
    figure, right of the panels (none over the data, `figures._legend`), and a line drawn exactly under
    another shown around it (`figures.mark_coinciding`)."""
    instances = list(dict.fromkeys(rows["instance"]))
    cols = min(3, len(instances))
    nrows = math.ceil(len(instances) / cols)
    shown = model_labels(rows)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.3 * cols, 3.3 * nrows), squeeze=False)
    handles: dict[str, object] = {}
    drawn: list[list[tuple[str, object]]] = []
    for ax, name in zip(axes.flat, instances):
        part = rows[(rows["instance"] == name) & rows["status"].isin(["optimal", "feasible"])]
        ax.set_title(literal_text(f"{name}\ntimes: {costs.get(name, 'unknown')}"), fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        names = part["solver"] if "solver" in part else part["solver_label"]  # the registry's name, for its style
        drawn.append([])
        for (label, solver), group in part.groupby([part["solver_label"], names], sort=False):
            group = group.sort_values("budget")  # one colour and marker per solver in every figure
            text = shown.get(str(label), str(label))
            (line,) = ax.plot(group["budget"] / GB, 1.0 + group["overhead"], ms=3, lw=1, label=literal_text(text),
                              **solver_style(str(label), str(solver)))
            handles.setdefault(text, line)
            drawn[-1].append((text, line))
        ref = rows.loc[rows["instance"] == name, "reference_peak"].max()
        ax.axvline(ref / GB, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel("memory budget (GB; dotted: store-all peak)", fontsize=7)
        ax.set_ylabel("makespan / store-all", fontsize=7)
    for ax in list(axes.flat)[len(instances):]:
        ax.axis("off")
    fig.tight_layout(rect=_legend(fig, list(axes.flat)[:len(instances)], handles, outside=True))
    for lines in drawn:
        mark_coinciding(lines)
    return save_figure(fig, out_dir, stem)


def figure_args(argv: list[str] | None, doc: str | None, results: str, results_help: str, stem: str
                ) -> argparse.Namespace:
    """The options of a figure script: --results (default `results`), --out (results/figures)
    and --stem (default `stem`, the file name without extension), parsed from `argv`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=results, help=results_help)
    parser.add_argument("--out", default="results/figures", help="folder for the figure files")
    parser.add_argument("--stem", default=stem, help="figure file name (without extension)")
    return parser.parse_args(argv)


#: the columns of a sweep table every paper figure reads
COLUMNS = ("instance", "source", "solver_label", "status", "budget")
#: the columns the chain-style figure (`draw`: chains, graphs, offloading) reads besides `COLUMNS`
CHAIN_COLUMNS = ("overhead", "reference_peak")
#: the columns the pipeline figure (`draw_pipeline`) reads besides `COLUMNS`
PIPELINE_COLUMNS = ("objective",)


def is_pipeline(rows: pd.DataFrame) -> bool:
    """True for the rows of a pipeline sweep (at least one row, and every row's ``problem`` is
    ``pipeline``): drawn by `draw_pipeline`, others by `draw`."""
    return "problem" in rows and not rows.empty and bool((rows["problem"] == "pipeline").all())


def required_columns(rows: pd.DataFrame) -> tuple[str, ...]:
    """The columns the figure of `rows` reads: `COLUMNS` and those of its kind (`is_pipeline`)."""
    return COLUMNS + (PIPELINE_COLUMNS if is_pipeline(rows) else CHAIN_COLUMNS)


def read_table(table: Path) -> pd.DataFrame:
    """The rows of the sweep table `table` (``<results>/<name>.csv``), at least one; a missing, unreadable,
    damaged or empty table (a header alone), or one without a column its figure reads (`required_columns`), is an
    `InputError` naming it."""
    if not table.is_file():
        what = "is a folder" if table.is_dir() else "not found"
        raise InputError(f"{what}: expected the sweep's table (memsched sweep writes <output>/<output>.csv; "
                         "--results names the sweep's output folder)", path=str(table))
    _checked_fields(table)
    try:
        rows = pd.read_csv(table)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as err:
        raise InputError(f"cannot read the table ({str(err).splitlines()[0] if str(err) else 'empty'})",
                         path=str(table)) from None
    missing = [c for c in required_columns(rows) if c not in rows]
    if missing:
        raise InputError(f"no column {', '.join(missing)} (not a sweep table)", path=str(table))
    if rows.empty:  # a header alone: nothing to draw
        raise InputError("no rows (the sweep has not written any yet?)", path=str(table))
    return _checked_numbers(rows, table)


def main(argv: list[str] | None = None) -> int:
    """Draw the papers' chain figure from the sweep in --results into --out; exit 0, 2 on bad input
    (one line on stderr, `run`), 130 on Ctrl-C (one line; `benchtable.guarded`)."""
    from memsched.experiments.benchtable import guarded

    args = figure_args(argv, __doc__, "results/fig_paper_chains", "the sweep's output folder", "paper_chains")
    return guarded("paper_figures", lambda: run(args),
                   interrupted=f"interrupted: each figure file under {args.out} is as it was or complete "
                               "(written atomically)")


def run(args: argparse.Namespace) -> int:
    """Check the table of --results and the figure's paths under --out (`check_figure_paths`)
    before any work, then draw; exit 0."""
    check_stem(args.stem)
    folder = Path(args.results)
    table = folder / f"{folder.name}.csv"
    rows = read_table(table)
    check_figure_paths(Path(args.out), [args.stem])
    costs = {}
    for name, source in rows[["instance", "source"]].drop_duplicates().itertuples(index=False):
        path = source_file(str(source))
        if path is None:
            print(f"note: {table}: instance {name}: source {source} not found, its cost model is drawn as unknown",
                  file=sys.stderr)
        costs[name] = cost_model_of(path) if path is not None else "unknown"
    for p in (draw_pipeline if is_pipeline(rows) else draw)(rows, costs, Path(args.out), stem=args.stem):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Figures at the papers' sizes, from the rows of a sweep over the committed paper-size instances.

    python -m memsched.experiments.paper_figures [--results results/fig_paper_chains] [--out results/figures]
        [--stem paper_chains]

Reads the table of the sweep output folder `--results`: ``<results>/<name>.csv`` (`sweep_table`), `<name>`
the sweep file's name (written by ``memsched sweep fig_paper_chains``, or
``fig_paper_graphs`` / ``fig_paper_offload`` / ``fig_paper_pipeline`` with ``--stem paper_graphs``
/ ``paper_offload`` / ``paper_pipeline``) and draws, per instance, the makespan relative to
store-all's (1 + the rows' ``overhead``) of every solver versus the memory budget in GB (10^9
bytes, the activation budget the solver gets, input a_0 included; for offloading the device
memory), over the instance's grid from its smallest feasible budget (rotor's) to its store-all
peak. A pipeline sweep (problem ``pipeline``) is drawn as the period (the objective, in the
instance's time unit, ms) versus the memory per device, one row of panels per instance and one
column per device count P (the solver labels' ``P=<n>``: a pipeline label without one is an error). Each
panel's title names the instance and the cost model its times come from (the instance file's
``meta["cost"]``: a roofline of a named GPU, counted FLOP or measured). Every solver of a figure has its
own colour and marker (`plotting.styles.distinct_styles`). A series hidden under others in a panel is drawn
so that both show: exactly under them, with larger hollow markers on a wide pale line (as ``memsched
figures`` draws it); nearly (within 2.5% of the panel's size at each of its points: rotor under cpsat), on a
wide pale line under their dashes and smaller markers; a caption under the panels names them
(`mark_hidden`). Writes ``<stem>.png`` and ``.pdf`` under `--out`.

A paper figure draws the whole grid of its sweep: a table whose sweep did not run every cell of the
committed sweep file of its name (experiments/configs/<name>.toml, cells counted as ``memsched figures``
and ``memsched sweep --list`` count them: a sweep that was stopped) is refused; where the grid cannot be
told (no committed sweep file of that name, rows of other settings) a note on stderr says so.

Exit 0; 2, with a one-line error naming the path and before anything is drawn, when the table is
missing, damaged, empty (a header alone), lacks a column, has an empty text cell a figure reads, holds
rows of several problems or a pipeline label without ``P=<n>``, lacks cells of its sweep's grid, or
`--results` or `--out` is empty, `--results` holds several sweeps' tables and none of its own name,
`--out` is no folder that can be made (a file, say) or a figure's file is a folder or a name too long;
130, one line, on Ctrl-C, also while the modules it needs are imported (matplotlib, pandas: about a
second): at its top this module imports only modules that Python's start-up or the ``memsched`` package
have loaded (os, re, sys, pathlib, typing) and the small `interrupts`, the others inside `main`'s handling of
interrupts (`interrupts.script_main`). What comes before this module runs is not
covered: Python's start-up and the import of the ``memsched`` package.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsched.experiments.interrupts import script_main

if TYPE_CHECKING:
    import argparse

    import matplotlib.pyplot as plt
    import pandas as pd

#: names this module gives for other modules' (`__getattr__`: imported on first use, not at the top)
_LAZY = {"distinct_styles": "memsched.experiments.plotting.styles", "source_file": "memsched.experiments.figures"}


def __getattr__(name: str) -> Any:
    """`distinct_styles` and `source_file`, from their modules (imported on first use: see the module docstring)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


GB = 1e9
#: pipeline panels: one colour and marker per solver (the label's name before " P=<n>")
PIPELINE_STYLE = {"madpipe": ("C0", "o"), "pipedream": ("C1", "s"), "balance-time": ("C2", "^"),
                  "interleave-v": ("C3", "v"), "cpsat": ("k", "x"), "dag": ("C4", "D")}
#: a pipeline solver label's device count: " P=<n>" (the rest of the label names the solver)
DEVICE_COUNT = re.compile(r" P=(\d+)(?=\s|$)")


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (the figures are files: no display is needed), imported on first
    use (see the module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def device_count(label: str) -> tuple[str, int] | None:
    """(solver, P) of a pipeline solver label: "madpipe P=4" -> ("madpipe", 4), "madpipe P=4 (GPipe)" ->
    ("madpipe (GPipe)", 4); None for a label without " P=<n>"."""
    found = DEVICE_COUNT.search(label)
    if found is None:
        return None
    return label[:found.start()] + label[found.end():], int(found.group(1))


def _pipeline_styles(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """`_solver` -> line keywords (`plotting.styles.distinct_styles`): the solvers of `PIPELINE_STYLE` (by label,
    else by the registry's ``solver``) first, in order of appearance, then the others."""
    from memsched.experiments.plotting.styles import distinct_styles

    names = rows["solver"] if "solver" in rows else rows["_solver"]
    pairs = list(dict.fromkeys(zip(rows["_solver"].astype(str), names.astype(str))))
    wanted = [(label, PIPELINE_STYLE.get(label, PIPELINE_STYLE.get(name))) for label, name in pairs]
    own: list[tuple[str, dict[str, Any] | None]] = [
        (label, {"color": style[0], "marker": style[1]}) for label, style in wanted if style is not None]
    return distinct_styles(own + [(label, None) for label, style in wanted if style is None])


def draw_pipeline(rows: pd.DataFrame, costs: dict[str, str], out_dir: Path, stem: str = "paper_pipeline") -> list[Path]:
    """One row of panels per instance, one column per device count P (the solver labels' "P=<n>"):
    the period (objective, ms per micro-batch) versus the memory per device (GB), one line per
    solver (feasible rows only), named with the model its optimal rows are optimal in
    (`plotting.labels.model_labels`); one legend for the figure, right of the panels (none over the data), and
    a line hidden under others shown around them, named in the caption under the panels (`mark_hidden`)."""
    from memsched.experiments.figures import _legend, literal_text

    plt = _pyplot()

    check_device_counts(rows)
    parsed = [device_count(str(label)) or ("", 0) for label in rows["solver_label"]]
    rows = rows.assign(_solver=[s for s, _ in parsed], _p=[p for _, p in parsed])
    instances = list(dict.fromkeys(rows["instance"]))
    ps = sorted(int(p) for p in rows["_p"].unique())
    models = _solver_models(rows)
    styles = _pipeline_styles(rows)
    fig, axes = plt.subplots(len(instances), len(ps), figsize=(3.6 * len(ps), 2.8 * len(instances)), squeeze=False)
    handles: dict[str, Any] = {}
    drawn: list[list[tuple[str, object]]] = []
    for i, name in enumerate(instances):
        for j, p in enumerate(ps):
            ax = axes[i][j]
            part = rows[(rows["instance"] == name) & (rows["_p"] == p) & rows["status"].isin(["optimal", "feasible"])]
            drawn.append([])
            for solver, group in part.groupby("_solver", sort=False):
                group = group.sort_values("budget")
                text = models.get(str(solver), str(solver))
                (line,) = ax.plot(group["budget"] / GB, group["objective"], ms=3, lw=1,
                                  ls="--" if solver == "cpsat" else "-", label=literal_text(text),
                                  **styles[str(solver)])
                handles.setdefault(text, line)
                drawn[-1].append((text, line))
            ax.set_title(literal_text(f"{name}, P = {p}\ntimes: {costs.get(name, 'unknown')}"), fontsize=7)
            ax.set_xlabel("memory per device (GB)", fontsize=7)
            ax.set_ylabel("period (ms per micro-batch)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    rect = _legend(fig, list(axes.flat), handles, outside=True)
    add_caption(fig, mark_hidden(list(axes.flat), drawn), rect)
    return save_figure(fig, out_dir, stem)


def _solver_models(rows: pd.DataFrame) -> dict[str, str]:
    """Pipeline solver name (``_solver``: the label without " P=<n>", `device_count`) -> its legend text with
    the model its optimal rows are optimal in, at every device count ("madpipe (contiguous stages, 1F1B)",
    `plotting.labels.model_labels` of the rows labelled with the name), when they name one; else the name."""
    from memsched.experiments.plotting.labels import model_labels

    return model_labels(rows.drop(columns=["solver"], errors="ignore").assign(solver_label=rows["_solver"]))


def check_device_counts(rows: pd.DataFrame, table: Path | None = None) -> None:
    """Every solver label of the pipeline rows `rows` names its device count (" P=<n>", `device_count`: the
    figure draws one column of panels per P); else `InputError` naming the table, the column and the row."""
    from memsched.solvers.errors import InputError

    for i, label in enumerate(rows["solver_label"]):
        if device_count(str(label)) is None:
            raise InputError(f"row {i + 2}: {str(label)!r} names no device count ' P=<n>' (the pipeline figure "
                             "draws one column of panels per P)", path=None if table is None else str(table),
                             field="solver_label")


def save_figure(fig: plt.Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write `fig` as ``<stem>.png`` and ``.pdf`` under `out_dir` (made when missing, `make_folder`),
    together (`figures._save_figure`: both new or both old, after a failed write or a Ctrl-C too);
    close it; return the paths.
    A folder that cannot be made or a file that cannot be written is an `InputError` naming it."""
    from memsched.experiments.figures import _save_figure, make_folder

    plt = _pyplot()

    try:
        make_folder(out_dir)
        return _save_figure(fig, out_dir, stem, tight=False)
    finally:
        plt.close(fig)


def cost_model_of(instance_file: Path) -> str:
    """The cost model an instance file states (``meta.cost``), "measured" when it states none."""
    import json

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
    figure, right of the panels (none over the data, `figures._legend`), and a line hidden under others
    shown around them, named in the caption under the panels (`mark_hidden`)."""
    import math

    from memsched.experiments.figures import _legend, literal_text, model_labels

    plt = _pyplot()

    instances = list(dict.fromkeys(rows["instance"]))
    cols = min(3, len(instances))
    nrows = math.ceil(len(instances) / cols)
    shown = model_labels(rows)
    styles = _chain_styles(rows)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.3 * cols, 3.3 * nrows), squeeze=False)
    handles: dict[str, Any] = {}
    drawn: list[list[tuple[str, object]]] = []
    for ax, name in zip(axes.flat, instances):
        part = rows[(rows["instance"] == name) & rows["status"].isin(["optimal", "feasible"])]
        ax.set_title(literal_text(f"{name}\ntimes: {costs.get(name, 'unknown')}"), fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        drawn.append([])
        for label, group in part.groupby(part["solver_label"], sort=False):
            group = group.sort_values("budget")  # one colour and marker per solver in every figure
            text = shown.get(str(label), str(label))
            (line,) = ax.plot(group["budget"] / GB, 1.0 + group["overhead"], ms=3, lw=1, label=literal_text(text),
                              **styles[str(label)])
            handles.setdefault(text, line)
            drawn[-1].append((text, line))
        ref = rows.loc[rows["instance"] == name, "reference_peak"].max()
        ax.axvline(ref / GB, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel("memory budget (GB; dotted: store-all peak)", fontsize=7)
        ax.set_ylabel("makespan / store-all", fontsize=7)
    for ax in list(axes.flat)[len(instances):]:
        ax.axis("off")
    rect = _legend(fig, list(axes.flat)[:len(instances)], handles, outside=True)
    add_caption(fig, mark_hidden(list(axes.flat)[:len(instances)], drawn), rect)
    return save_figure(fig, out_dir, stem)


#: the caption's font size (points) and the height of one of its lines (inches), as `memsched figures` writes it
CAPTION_FONT = 6.5
CAPTION_LINE_IN = CAPTION_FONT * 1.35 / 72


def mark_hidden(axes: list[Any], drawn: list[list[tuple[str, Any]]]) -> str:
    """Make visible, panel by panel (`axes`, each with its (legend text, line) in drawing order `drawn`), every
    series hidden under others: drawn exactly under them (`plotting.coincide.mark_coinciding`: larger hollow
    markers on a wide pale line) or nearly so (`mark_near`: the ones over it dashed with smaller markers);
    returns the caption's note lines naming them ("" when none is hidden), the first in the words of
    ``memsched figures`` (`plotting.coincide.coinciding_note`). Call after the legend is made (it keeps the
    lines' own style)."""
    from memsched.experiments.plotting.coincide import coinciding_note, mark_coinciding, mark_near, near_note

    exact: list[tuple[str, list[str]]] = []
    near: list[tuple[str, list[str]]] = []
    for ax, lines in zip(axes, drawn):
        marked = mark_coinciding(lines)
        exact += marked
        done = {text for text, _ in marked}
        near += mark_near(ax, [(text, line) for text, line in lines if text not in done])
    return (coinciding_note(exact, len(drawn)) + near_note(near, len(drawn))).strip("\n")


def add_caption(fig: Any, note: str, rect: tuple[float, float, float, float]) -> None:
    """Lay out `fig`'s panels in `rect` (figure fractions: left, bottom, right, top; `figures._legend`'s) and
    write `note` (lines, "" for none) under them in `memsched figures`' caption style (grey, 6.5 pt, wrapped
    to the figure's width, literal text): the figure is made taller by the caption's lines, so that the
    panels keep their size and the caption lies inside the saved figure (`save_figure` does not crop)."""
    import textwrap

    from memsched.experiments.figures import literal_text

    width = max(60, int(fig.get_figwidth() * 17))
    lines = [wrapped for line in note.splitlines() for wrapped in textwrap.wrap(line, width)]
    if not lines:
        fig.tight_layout(rect=rect)
        return
    height = fig.get_figheight()
    extra = len(lines) * CAPTION_LINE_IN + 0.15
    fig.set_figheight(height + extra)
    scale = height / (height + extra)
    fig.tight_layout(rect=(rect[0], extra / (height + extra), rect[2], 1 - (1 - rect[3]) * scale))
    fig.text(0.01, 0.05 / (height + extra), literal_text("\n".join(lines)), fontsize=CAPTION_FONT, color="#555555",
             ha="left", va="bottom")


def _chain_styles(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Solver label -> line keywords (`distinct_styles`): each label's `figures.style` (by label, else by the
    registry's ``solver``), those of `figures.STYLE` first, in order of appearance, then the others."""
    from memsched.experiments.figures import STYLE
    from memsched.experiments.figures import style as solver_style
    from memsched.experiments.plotting.styles import distinct_styles

    names = rows["solver"] if "solver" in rows else rows["solver_label"]  # the registry's name, for its style
    pairs = list(dict.fromkeys(zip(rows["solver_label"].astype(str), names.astype(str))))
    known = [(label, name) for label, name in pairs if label in STYLE or name in STYLE]
    others = [(label, name) for label, name in pairs if (label, name) not in known]
    return distinct_styles([(label, solver_style(label, name)) for label, name in known + others])


def figure_args(argv: list[str] | None, doc: str | None, results: str, results_help: str, stem: str
                ) -> argparse.Namespace:
    """The options of a figure script: --results (default `results`), --out (results/figures)
    and --stem (default `stem`, the file name without extension), parsed from `argv`."""
    import argparse

    from memsched.experiments.script_args import ScriptParser

    parser = ScriptParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=results, help=results_help)
    parser.add_argument("--out", default="results/figures", help="folder for the figure files")
    parser.add_argument("--stem", default=stem, help="figure file name (without extension)")
    return parser.parse_args(argv)


#: the columns of a sweep table every paper figure reads
COLUMNS = ("instance", "source", "problem", "solver_label", "status", "budget")
#: the columns of `COLUMNS` that hold text: an empty cell is an error (`checked_text`), as in `memsched figures`
TEXT_COLUMNS = ("instance", "source", "problem", "solver_label", "status")
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


def checked_text(rows: pd.DataFrame, table: Path) -> pd.DataFrame:
    """`rows` (read from `table`) when no text cell a figure reads is empty: those `memsched figures` checks
    (``sweep``, ``key``: `figures._checked_text`) and `TEXT_COLUMNS`; else `InputError` naming the file,
    the column and the row, in the words of `figures._checked_text` (an empty ``instance`` drew a panel
    titled "nan")."""
    import pandas as pd
    from memsched.experiments.figures import _checked_text
    from memsched.solvers.errors import InputError

    rows = _checked_text(rows, table)
    empty = pd.DataFrame({c: rows[c].isna() | (rows[c].astype(str).str.strip() == "") for c in TEXT_COLUMNS})
    if empty.to_numpy().any():  # the first row with an empty cell, its first such column
        i = int(empty.any(axis=1).to_numpy().argmax())
        col = TEXT_COLUMNS[int(empty.iloc[i].to_numpy().argmax())]
        raise InputError(f"row {i + 2}: empty (a figure reads it; a damaged or hand-edited sweep table)",
                         path=str(table), field=col)
    return rows


def check_one_problem(rows: pd.DataFrame, table: Path) -> None:
    """The rows of `table` are of one problem (a paper figure draws one: the pipeline figure's axes are not
    the others'); else `InputError` naming the file and the column. Pipeline rows name their device count
    (`check_device_counts`)."""
    from memsched.solvers.errors import InputError

    problems = list(dict.fromkeys(rows["problem"].astype(str)))
    if len(problems) > 1:
        raise InputError(f"rows of {len(problems)} problems ({', '.join(problems)}): a paper figure draws the "
                         "rows of one sweep of one problem", path=str(table), field="problem")
    if is_pipeline(rows):
        check_device_counts(rows, table)


def read_table(table: Path) -> pd.DataFrame:
    """The rows of the sweep table `table` (``<results>/<name>.csv``, `sweep_table`), at least one; a missing,
    unreadable, damaged or empty table (a header alone), or one without a column its figure reads
    (`required_columns`), is an `InputError` naming it; so is an empty text cell (`checked_text`), rows of
    several problems or a pipeline label without its device count (`check_one_problem`)."""
    import pandas as pd
    from memsched.experiments.figures import _checked_fields, _checked_numbers
    from memsched.experiments.sweep.store import read_table_csv
    from memsched.solvers.errors import InputError

    try:
        found = table.is_file()
    except OSError as err:  # a name too long
        raise InputError(f"not a usable path: {err.strerror}", path=str(table)[:80]) from None
    if not found:
        what = "is a folder" if table.is_dir() else "not found"
        raise InputError(f"{what}: expected the sweep's table (memsched sweep writes <output>/<name>.csv, <name> "
                         "the sweep file's; --results names the sweep's output folder)", path=str(table))
    _checked_fields(table)
    try:
        rows = read_table_csv(table)  # as `memsched figures` reads it: "NA" as a label is text
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as err:
        raise InputError(f"cannot read the table ({str(err).splitlines()[0] if str(err) else 'empty'})",
                         path=str(table)) from None
    missing = [c for c in required_columns(rows) if c not in rows]
    if missing:
        raise InputError(f"no column {', '.join(missing)} (not a sweep table)", path=str(table))
    if rows.empty:  # a header alone: nothing to draw
        raise InputError("no rows (the sweep has not written any yet?)", path=str(table))
    rows = checked_text(_checked_numbers(rows, table), table)
    check_one_problem(rows, table)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Draw the papers' chain figure from the sweep in --results into --out; exit 0, 2 on bad input
    (one line on stderr, `run`), 130 on Ctrl-C (one line; `benchtable.guarded`), also while the modules
    are imported (see the module docstring)."""
    return script_main("paper_figures", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    """`main` with its modules imported here (module docstring): a Ctrl-C before `benchtable.guarded` takes over
    leaves as `KeyboardInterrupt` (`interrupts.script_main` answers it)."""
    from memsched.experiments.benchtable import guarded

    args = figure_args(argv, __doc__, "results/fig_paper_chains", "the sweep's output folder", "paper_chains")
    return guarded("paper_figures", lambda: run(args),
                   interrupted=f"interrupted: each figure file under {args.out} is as it was or complete "
                               "(written atomically)")


def sweep_table(folder: Path) -> Path:
    """The table of the sweep output folder `folder`, ``<folder>/<name>.csv`` (`sweep.store.table_path`),
    ``<name>`` the sweep file's name: the folder's own name (made absolute: ``--results .`` inside the folder,
    or ``..``, names the folder, not ""; a link keeps its own name) when that table is there, as for
    ``memsched sweep NAME`` (results/NAME); else the one table beside its journal (``<name>.jsonl``: the
    sweep ran with ``--output`` naming another folder), or the one table there. `InputError` for a folder
    without a name (``/``) and for one holding several such tables, none of its name; with none, the
    table of the folder's name (`read_table` says it is not found)."""
    from memsched.experiments.sweep.store import table_path
    from memsched.solvers.errors import InputError

    name = Path(os.path.abspath(folder)).name
    if not name:
        raise InputError("names no sweep output folder (<output>/<name>.csv is the table)", path=str(folder),
                         field="--results")
    own = table_path(folder, name)
    try:
        if own.exists() or not folder.is_dir():
            return own
        tables = sorted(p for p in folder.glob("*.csv") if p.is_file())
    except OSError:  # a name too long: `read_table` names it
        return own
    journaled = [p for p in tables if p.with_suffix(".jsonl").is_file()]
    found = journaled or tables
    if len(found) > 1:
        raise InputError(f"holds {len(found)} sweep tables ({', '.join(p.name for p in found)}), none named "
                         f"{own.name}: --results names the output folder of one sweep", path=str(folder),
                         field="--results")
    return found[0] if found else own


def check_grid(rows: pd.DataFrame, table: Path) -> str | None:
    """Whether the rows of `table` (one sweep's, read by `read_table`) are every cell of their sweep's grid, as
    ``memsched figures`` checks its sweeps (`figures.grid_note`): the cells of the committed sweep file of
    the rows' ``sweep`` (experiments/configs/<sweep>.toml, `figures._committed_config`) with the instances
    stored beside `table` (`figures._grid_tasks`), counted by `figures.grid_cells_done`. Cells without a row
    (a sweep that was stopped: a paper figure drawn from part of its grid passes for the whole) are an
    `InputError` naming the table, how many cells ran and how to run the rest; None when every cell has a
    row; else a one-line note on what cannot be told (no committed sweep file of that name, rows of no
    cell of it)."""
    from memsched.experiments.figures import (
        FigureSpec,
        _committed_config,
        _grid_tasks,
        _shown_path,
        grid_cells_done,
    )
    from memsched.solvers.errors import InputError

    sweeps = list(dict.fromkeys(rows["sweep"].astype(str))) if "sweep" in rows else []
    if len(sweeps) != 1:
        return f"{table}: not checked whether every cell of its sweep's grid ran (rows of {len(sweeps)} sweeps)"
    spec = FigureSpec((sweeps[0],), draw, "", table.stem)
    config_path = _committed_config(spec)
    if config_path is None:
        return (f"{table}: not checked whether every cell of sweep {sweeps[0]}'s grid ran (no committed sweep file "
                f"experiments/configs/{sweeps[0]}.toml)")
    shown = _shown_path(config_path)
    tasks = _grid_tasks(config_path, table.parent)
    if isinstance(tasks, str):
        return f"{table}: not checked whether every cell of {shown} ran ({tasks})"
    done, extra = grid_cells_done(rows, tasks)
    total = len({t.key for t in tasks})
    if done == 0:
        return (f"{table}: its {len(rows)} rows are no cells of {shown} (another sweep file or other settings): "
                "not known whether every cell of its grid ran")
    if done < total:
        raise InputError(f"{done} of {total} cells of {shown} have a row, {total - done} never ran (the sweep was "
                         f"stopped or not resumed: memsched sweep {shown} --output {table.parent} runs them); a "
                         "paper figure draws the whole grid", path=str(table))
    if extra:
        return (f"{table}: every cell of {shown} has a row ({total} cells); {extra} rows of no cell of it (another "
                "sweep file or other settings) are drawn too")
    return None


def run(args: argparse.Namespace) -> int:
    """Check the table of --results and the figure's paths under --out (`check_figure_paths`)
    before any work, then draw; exit 0. A table that lacks cells of its sweep's grid is refused (`check_grid`)."""
    from memsched.experiments.figures import check_figure_paths, check_stem, source_file
    from memsched.solvers.errors import InputError

    check_stem(args.stem)
    for value, field in ((args.results, "--results"), (args.out, "--out")):
        if value == "":  # not the current folder: an empty path is bad input (as `memsched figures`)
            raise InputError("is empty, expected a folder name", field=field)
    table = sweep_table(Path(args.results))
    rows = read_table(table)
    note = check_grid(rows, table)
    check_figure_paths(Path(args.out), [args.stem])
    if note is not None:
        print(f"note: {note}", file=sys.stderr)
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

"""The papers' figures, redrawn from sweep tables under results/ (matplotlib, Agg; PNG and PDF).

Each figure reads the rows of the sweeps named in `FIGURES` (the ``sweep`` column of the
tables that `experiments.sweep` writes; the sweep files are in experiments/configs) and
states its instances, units and the versions that produced the rows. A figure whose rows are
absent is skipped with a one-line note; one whose rows do not cover its sweep's grid (a stopped
sweep) is drawn with a one-line note of its done/total cells (`grid_note`), and rows of one sweep from
two tables run with other settings are refused (`check_same_settings`).

==== ========================== ====================================================================
id   sweep (config)             figure
==== ========================== ====================================================================
main chain_solvers (default)    makespan overhead vs budget, every chain solver, built-in examples
a    fig_a_chains               overhead vs budget on ResNet-, DenseNet-, Inception-like chains
b    fig_b_solve_time           solve time vs chain length: rotor DP, MILP, CP-SAT
c    fig_c_graphs               graph rematerialization: overhead vs budget
d    fig_d_join                 join networks: DP vs heuristics
e    fig_e_offload              offloading (and offloading + rematerialization) trade-offs
f    fig_f_pipeline             pipeline period vs memory per device
g    fig_g_measured             predicted vs measured peak memory and time (executed schedules)
==== ========================== ====================================================================
"""

from __future__ import annotations

import contextvars
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from memsched.experiments.plotting.coincide import coinciding_note, mark_coinciding  # noqa: E402
from memsched.experiments.plotting.labels import model_labels  # noqa: E402
from memsched.experiments.plotting.styles import SPARE_COLOURS, distinct_styles  # noqa: E402

MIB = 2**20
#: Solver colours and markers, stable across figures (`figure_styles` gives a label whose pair another label of
#: the same figure has a free one).
STYLE: dict[str, tuple[str, str]] = {
    "rotor": ("#1f77b4", "o"), "milp": ("#d62728", "s"), "cpsat": ("#9467bd", "D"), "revolve": ("#2ca02c", "^"),
    "periodic": ("#ff7f0e", "v"), "sqrt": ("#8c564b", "P"), "store-all": ("#7f7f7f", "x"),
    "recompute-all": ("#17becf", "*"), "checkmate": ("#d62728", "s"), "checkmate-approx": ("#e377c2", "h"),
    "checkpoint-all": ("#7f7f7f", "x"), "dtr": ("#bcbd22", "<"), "greedy": ("#ff7f0e", ">"),
    "griewank": ("#2ca02c", "^"), "dtr-orders": ("#006d6f", "p"),
    # pipelines
    "madpipe": ("#1f77b4", "o"), "pipedream": ("#ff7f0e", "v"), "balance-time": ("#2ca02c", "^"),
    # join networks
    "dp": ("#1f77b4", "o"), "exact": ("#d62728", "s"), "equal": ("#ff7f0e", "v"), "proportional": ("#2ca02c", "^"),
    "sequential": ("#8c564b", "P"),
    # offloading
    "none": ("#7f7f7f", "x"), "remat-only": ("#1f77b4", "o"), "vdnn": ("#ff7f0e", "v"),
    "offload-prefix": ("#2ca02c", "^"), "rotor-offload": ("#e377c2", "h"), "pofo": ("#8c564b", "P"),
    "exact-combined": ("#d62728", "s"), "remat-only (rotor: persistent)": ("#1f77b4", "o"),
    "offload-only (store-all order)": ("#9467bd", "D"), "pofo (persistent, offloaded checkpoints)": ("#8c564b", "P"),
    "offload-exact": ("#bcbd22", "X"), "offload-exact (phase model, whole-piece transfers)": ("#bcbd22", "X"),
    # exact solvers labelled with the model they are optimal in (the sweep configs' labels)
    "cpsat (phase model)": ("#9467bd", "D"), "milp (phase model)": ("#d62728", "s"),
    "checkmate (file's order)": ("#d62728", "s"), "cpsat (<= 2 computations per node)": ("#9467bd", "D"),
}
_FALLBACK = list(SPARE_COLOURS)
FOUND = ("optimal", "feasible")


def style(label: str, name: str | None = None) -> dict[str, Any]:
    """matplotlib line keywords for a solver (by label, else its name)."""
    for key in (label, name):
        if key in STYLE:
            c, m = STYLE[key]
            return {"color": c, "marker": m}
    base, _, variant = label.partition(" ")
    if variant and base in STYLE:  # "madpipe P=4": the solver's colour, a marker and dash per variant
        h = sum(map(ord, variant))
        return {"color": STYLE[base][0], "marker": "os^Dv<>"[h % 7], "linestyle": ("-", "--", ":", "-.")[h % 4]}
    h = sum(map(ord, label))
    return {"color": _FALLBACK[h % len(_FALLBACK)], "marker": "o"}


def figure_styles(labels: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The line keywords of each solver label of one figure (`style`), every label with its own
    (colour, marker) pair (`plotting.styles.distinct_styles`): labels named in `STYLE` first (in its order),
    then the others in sorted order, each keeping `style`'s pair when no label before it has it, else taking
    a free one. Deterministic: the same labels give the same styles, whatever their order."""
    order = list(STYLE)
    ranked = sorted(set(labels), key=lambda s: (order.index(s) if s in order else len(order), str(s)))
    return distinct_styles([(label, style(str(label), str(label))) for label in ranked])


# ============================================================================ reading results
def load_results(results_dir: str | Path) -> pd.DataFrame:
    """Every sweep row in the CSV tables under `results_dir` (recursively); empty if none.

    A sweep whose table is missing but whose journal exists (an interrupted sweep) is read
    from its journal. A CSV without the sweep columns (`SWEEP_COLUMNS`) is another tool's table and
    skipped, unless it is a sweep's table (`is_sweep_table`): then a table that cannot be parsed (empty,
    not UTF-8), lacks a sweep column (a header cut or missing a name) or has a row of another field count
    is an `InputError` naming the file, as is an empty text cell that a figure reads (`empty_text_cell`:
    file, column and row) -- all before any figure is drawn. Rows of one sweep from two tables run with
    other settings are an `InputError` naming both (`check_same_settings`): a figure's median would blend
    them. Each row keeps the path of its table or journal in `TABLE_COLUMN` (in memory only)."""
    from memsched.experiments.sweep import read_journal, rows_frame
    from memsched.experiments.sweep.store import read_table_csv
    from memsched.solvers.errors import InputError

    root = Path(results_dir)
    frames: list[pd.DataFrame] = []
    seen_csv = set()
    for csv in sorted(root.rglob("*.csv")):
        if not csv.is_file():
            continue
        expected = is_sweep_table(csv)
        try:
            head = pd.read_csv(csv, nrows=0)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            if expected:
                reason = "an empty file" if isinstance(err, pd.errors.EmptyDataError) else "not a readable CSV"
                raise InputError(f"a damaged sweep table ({reason})", path=str(csv)) from None
            continue
        missing = [c for c in SWEEP_COLUMNS if c not in head.columns]
        if missing:
            if expected:
                raise InputError("no such column in the header (a damaged sweep table: a header cut short or "
                                 "missing a name)", path=str(csv), field=missing[0])
            continue
        _checked_fields(csv)
        table = read_table_csv(csv)  # "NA" as a label is text; "nan" as a number is damage (`_checked_numbers`)
        _checked_columns(csv, table)
        frames.append(_checked_text(_checked_numbers(table, csv), csv).assign(**{TABLE_COLUMN: str(csv)}))
        seen_csv.add(csv.with_suffix(""))
    for journal in sorted(root.rglob("*.jsonl")):
        if journal.with_suffix("") not in seen_csv:
            rows = list(read_journal(journal).values())
            if rows:
                frames.append(_checked_text(rows_frame(rows), journal, by_key=True)
                              .assign(**{TABLE_COLUMN: str(journal)}))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=list(SWEEP_COLUMNS))
    check_same_settings(frames)
    frame = pd.concat(frames, ignore_index=True)
    return frame.drop_duplicates(subset=["key"], keep="last").reset_index(drop=True)


#: the columns of every sweep table (`experiments.sweep` writes them): a CSV with them is read as one
SWEEP_COLUMNS = ("sweep", "key", "solver", "status")
#: in-memory column of the rows `load_results` reads (never written to a table): the path of each row's
#: table (or journal), so that a figure can rebuild its sweep's grid next to it (`grid_note`)
TABLE_COLUMN = "_table"


def check_same_settings(frames: list[pd.DataFrame]) -> None:
    """Rows of one sweep in two of `frames` (tables read by `load_results`, each with its path in
    `TABLE_COLUMN`) were run with the same settings (`settings_conflict`); else an `InputError` naming
    the sweep, what differs and both files. (``--results`` is read recursively: two runs of one sweep with
    other slots were merged, and a figure drew the median of both, a value neither run produced.) Tables
    of one sweep that agree (a grid split over folders, a copy) are read together."""
    from memsched.solvers.errors import InputError

    by_sweep: dict[str, list[pd.DataFrame]] = {}
    for frame in frames:
        for sweep, part in frame.groupby(frame["sweep"].astype(str), sort=False):
            by_sweep.setdefault(str(sweep), []).append(part)
    for sweep, parts in by_sweep.items():
        for i, a in enumerate(parts):
            for b in parts[i + 1:]:
                what = settings_conflict(a, b)
                if what is not None:
                    raise InputError(f"rows of sweep {sweep} from two tables run with other settings ({what}): "
                                     f"{a[TABLE_COLUMN].iloc[0]} and {b[TABLE_COLUMN].iloc[0]}; a figure would "
                                     "blend them: give --results a folder with one of them")


def settings_conflict(a: pd.DataFrame, b: pd.DataFrame) -> str | None:
    """What differs between the rows `a` and `b` (one sweep, two tables) where both have the same thing:
    an instance label with another ``instance_hash`` (another instance under that name), a solver label
    with other ``slots`` or ``time_limit``, or a cell (instance, budget, solver label, repeat) with other
    ``options``; None when nothing does. Columns a table lacks are not compared."""
    checks = (("instance", ("instance",), ("instance_hash",)),
              ("solver", ("solver_label",), ("slots", "time_limit")),
              ("cell", ("instance", "budget_spec", "solver_label", "repeat"), ("options",)))
    for what, by, cols in checks:
        if not all(c in a and c in b for c in (*by, *cols)):
            continue
        seen_a, seen_b = _settings(a, by, cols), _settings(b, by, cols)
        for ident in seen_a.keys() & seen_b.keys():
            if seen_a[ident] != seen_b[ident]:
                name = " ".join(ident)
                diff = "; ".join(f"{c} {_values(seen_a[ident], k)} vs {_values(seen_b[ident], k)}"
                                 for k, c in enumerate(cols) if _values(seen_a[ident], k) != _values(seen_b[ident], k))
                return f"{what} {name}: {diff}"
    return None


def _settings(rows: pd.DataFrame, by: tuple[str, ...], cols: tuple[str, ...]) -> dict[tuple[str, ...],
                                                                                         set[tuple[str, ...]]]:
    """(values of `by`) -> the set of (values of `cols`) among `rows`, every value as text (`_setting_text`:
    a number read from a CSV and from a journal compare equal)."""
    found: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for rec in rows[list(dict.fromkeys((*by, *cols)))].itertuples(index=False):
        values = dict(zip(dict.fromkeys((*by, *cols)), rec))
        ident = tuple(_setting_text(values[c]) for c in by)
        found.setdefault(ident, set()).add(tuple(_setting_text(values[c]) for c in cols))
    return found


def _setting_text(value: Any) -> str:
    """`value` (a table cell) as text for comparison: empty for none, a number in ``%g`` form."""
    if _is_missing(value):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return str(value)


def _values(settings: set[tuple[str, ...]], k: int) -> str:
    """The `k`-th values among `settings` (`_settings`), for a message: "10", or "10/500"."""
    return "/".join(sorted({s[k] or "none" for s in settings}))


def is_sweep_table(csv: Path) -> bool:
    """True when the CSV `csv` must be a sweep's table: named after a sweep a figure draws (`FIGURES`,
    ``<sweep>.csv``) or beside its sweep's journal (``<name>.jsonl``); such a file that is not a readable
    sweep table is damaged, not another tool's table to skip."""
    sweeps = {name for spec in FIGURES.values() for name in spec.sweeps}
    return csv.stem in sweeps or csv.with_suffix(".jsonl").is_file()


def empty_text_cell(rows: pd.DataFrame) -> tuple[str, Any] | None:
    """The first (column, row index) of `rows` (sweep rows) where a text column is empty that every row
    needs (``sweep``, ``key``) or that a figure drawing the row's sweep reads (`FigureSpec.columns` that are
    no number column); None when there is none. (An empty cell read as NaN failed inside a figure with an
    AttributeError or a TypeError.)"""
    from memsched.experiments.sweep.store import NUMERIC_COLUMNS

    checks: list[tuple[str, pd.Series]] = [(c, pd.Series(True, index=rows.index)) for c in ("sweep", "key")]
    sweeps = rows["sweep"] if "sweep" in rows else pd.Series(None, index=rows.index, dtype=object)
    for spec in FIGURES.values():
        mine = sweeps.isin(spec.sweeps)
        checks += [(c, mine) for c in spec.columns if c not in NUMERIC_COLUMNS]
    first: tuple[int, str] | None = None  # (position of the row, column)
    for col, mine in checks:
        if col in rows:
            empty = mine & (rows[col].isna() | (rows[col].astype(object).map(str).str.strip() == ""))
            if empty.any():
                found = (int(empty.to_numpy().argmax()), col)
                first = found if first is None or found[0] < first[0] else first
    return None if first is None else (first[1], rows.index[first[0]])


def _checked_text(frame: pd.DataFrame, path: Path, *, by_key: bool = False) -> pd.DataFrame:
    """`frame` (sweep rows read from the table or journal `path`) when no text cell a figure reads is empty
    (`empty_text_cell`); else `InputError` naming the file, the column and the row (its line in a table;
    its key, when `by_key`, in a journal)."""
    from memsched.solvers.errors import InputError

    found = empty_text_cell(frame)
    if found is None:
        return frame
    col, idx = found
    if by_key:
        where = f"the row of key {frame.at[idx, 'key']!r}" if "key" in frame and pd.notna(frame.at[idx, "key"]) \
            else "a row without a key"
    else:
        where = f"row {int(idx) + 2}"
    raise InputError(f"{where}: empty (a figure reads it; a damaged or hand-edited sweep table)", path=str(path),
                     field=col)


def _checked_fields(csv: Path) -> None:
    """Every record of the sweep table `csv` has as many fields as its header; else `InputError`
    naming the file and the line (pandas fills a truncated row with NaN, which failed deep inside a
    figure with a TypeError, and refuses a row with too many fields with a ParserError)."""
    import csv as csv_module

    from memsched.solvers.errors import InputError

    try:
        with open(csv, newline="", encoding="utf-8") as f:
            reader = csv_module.reader(f)
            header = next(reader, None)
            for record in reader:
                if record and header is not None and len(record) != len(header):  # (pandas skips blank lines)
                    raise InputError(f"{len(record)} fields, the header has {len(header)} (a truncated or damaged "
                                     "row)", path=str(csv), field=f"line {reader.line_num}")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text (a damaged table)", path=str(csv)) from None
    except csv_module.Error as err:
        raise InputError(f"unreadable CSV ({err})", path=str(csv)) from None


def _checked_columns(csv: Path, table: pd.DataFrame) -> None:
    """The sweep table `table` (read from `csv`) has every column that the figures drawing its sweeps
    (its ``sweep`` column) read (`FigureSpec.columns`); else `InputError` naming the file and the first
    missing column (a table without ``instance`` failed inside the figure with a KeyError)."""
    from memsched.solvers.errors import InputError

    sweeps = set(table["sweep"].dropna().astype(str))
    for fid, spec in FIGURES.items():
        missing = missing_columns(spec, table.columns) if sweeps & set(spec.sweeps) else []
        if missing:
            raise InputError(f"no such column (figure {fid} reads it; a damaged table, or not one memsched sweep "
                             "wrote)", path=str(csv), field=missing[0])


def missing_columns(spec: FigureSpec, columns: Iterable[str]) -> list[str]:
    """The columns figure `spec` reads (`FigureSpec.columns`) that are not among `columns`, in order."""
    present = set(columns)
    return [c for c in spec.columns if c not in present]


def _checked_numbers(frame: pd.DataFrame, csv: Path) -> pd.DataFrame:
    """`frame` (a sweep table read from `csv`) when its number columns hold finite numbers or nothing;
    else `InputError` naming the file, the column and the first bad row (a damaged or hand-edited
    table failed deep inside a figure with a pandas TypeError, or an OverflowError on ``inf`` or a
    400-digit integer: the sweep writes no non-finite number, `store.valid_row`)."""
    from memsched.experiments.sweep.store import NUMERIC_COLUMNS
    from memsched.solvers.errors import InputError

    for col in NUMERIC_COLUMNS:
        if col in frame:
            # a column of numbers at once; one pandas kept as text (a damaged cell), cell by cell: a 400-digit
            # integer there is too large (inf), not "not a number", and pd.to_numeric raises OverflowError on it
            numbers = pd.to_numeric(frame[col], errors="coerce") if pd.api.types.is_numeric_dtype(frame[col]) \
                else frame[col].map(_as_number)
            # (pandas reads the empty cells of a column it keeps as text, for a 400-digit integer, as "")
            present = frame[col].notna() & (frame[col].astype(str).str.strip() != "")
            for what, bad in (("not a number", numbers.isna() & present),
                              ("not a finite number", numbers.map(_not_finite))):  # an empty cell is NaN, fine
                if bad.any():
                    row = int(bad.idxmax())
                    raise InputError(f"row {row + 2}: {what}: {_shown_cell(frame[col][row])}", path=str(csv),
                                     field=col)
    return frame


def _as_number(value: Any) -> float:
    """One cell of a number column as a float: NaN for text (or nothing), inf for a number too large."""
    try:
        return float(pd.to_numeric(value))
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return math.nan


def _not_finite(value: Any) -> bool:
    """True for an infinite number or one too large for a float; False for NaN (an empty cell) and text."""
    try:
        return math.isinf(float(value))
    except OverflowError:
        return True
    except (TypeError, ValueError):
        return False


def _shown_cell(value: Any) -> str:
    """A cell of a table for a message: as Python writes it ('abc', inf; not np.float64(inf)), an
    integer too long to print by its number of digits."""
    from memsched.solvers.units import short_number

    plain = value.item() if hasattr(value, "item") and hasattr(value, "dtype") else value
    shown = short_number(plain) if isinstance(plain, int) else repr(plain)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def stamp(rows: pd.DataFrame) -> str:
    """One line with the versions and hosts that produced `rows`."""
    parts = []
    for col, label in (("memsched_version", "memsched"), ("numpy_version", "numpy"),
                       ("ortools_version", "ortools"), ("torch_version", "torch"), ("python_version", "Python")):
        if col in rows:
            vals = sorted({str(v) for v in rows[col].dropna()})
            if vals:
                parts.append(f"{label} {'/'.join(vals)}")
    if "host" in rows:
        hosts = sorted({str(v) for v in rows["host"].dropna()})
        if hosts:
            parts.append("host " + ("/".join(hosts) if len(hosts) <= 2 else f"{len(hosts)} hosts"))
    if "timestamp" in rows and rows["timestamp"].notna().any():
        parts.append(f"run {str(rows['timestamp'].dropna().max())[:10]}")
    return "; ".join(parts)


def _finish(fig: plt.Figure, rows: pd.DataFrame, out_dir: Path, stem: str, note: str = "") -> list[Path]:
    import textwrap

    text = stamp(rows)
    if note:
        text = f"{note}\n{text}"
    if _CAPTION_EXTRA.get():  # the sweep does not cover its grid (`grid_note`): first, before the details
        text = f"{_CAPTION_EXTRA.get()}\n{text}"
    width = max(60, int(fig.get_figwidth() * 17))
    text = literal_text("\n".join(textwrap.fill(line, width) for line in text.splitlines()))
    fig.text(0.01, -0.005, text, fontsize=6.5, color="#555555", ha="left", va="top")  # below; bbox "tight"
    try:
        make_folder(out_dir)
        return _save_figure(fig, out_dir, stem)
    finally:
        plt.close(fig)


#: the files of each figure: ``<out>/<stem>.png`` and ``<out>/<stem>.pdf``
FIGURE_EXTS = ("png", "pdf")


#: called with each figure's files (`FIGURE_EXTS` order) as soon as all of them are in place
#: (`make_figures`'s `on_saved`; None: nobody is told)
_ON_SAVED: contextvars.ContextVar[Callable[[list[Path]], None] | None] = contextvars.ContextVar(
    "memsched_figure_saved", default=None)


def _save_figure(fig: plt.Figure, out_dir: Path, stem: str, *, tight: bool = True) -> list[Path]:
    """Save `fig` as ``<out_dir>/<stem>.<ext>`` for every `FIGURE_EXTS` so that the figure's files are all
    new or all old: each is drawn in memory first (a Ctrl-C while drawing writes nothing), then every
    file is written to a temporary file beside its target and only then are they all renamed into
    place (`_write_together`), with interrupts held back (`interrupts_deferred`) from the first write
    until `_ON_SAVED` has been told, so that a Ctrl-C never leaves a PNG of one run beside a PDF of
    another, nor a figure replaced without its "wrote" lines. `tight`: as `_drawn`. Returns the paths,
    in `FIGURE_EXTS` order."""
    from memsched.experiments.cli import interrupts_deferred

    files = [(out_dir / f"{stem}.{ext}", _drawn(fig, ext, tight=tight)) for ext in FIGURE_EXTS]
    paths = [path for path, _ in files]
    with interrupts_deferred():
        _write_together(files)
        saved = _ON_SAVED.get()
        if saved is not None:
            saved(paths)
    return paths


def _drawn(fig: plt.Figure, ext: str, *, tight: bool = True) -> bytes:
    """The bytes of `fig` saved in format `ext` (the same bytes as a file saved by matplotlib). `tight`:
    cropped to what is drawn (matplotlib's ``bbox_inches="tight"``), else the figure's own size."""
    import io

    buf = io.BytesIO()
    # no creation date in the PDF, so that redrawing unchanged results gives the same file
    meta = {"CreationDate": None} if ext == "pdf" else None
    fig.savefig(buf, format=ext, dpi=150 if ext == "png" else None, bbox_inches="tight" if tight else None,
                metadata=meta)
    return buf.getvalue()


def _write_together(files: list[tuple[Path, bytes]]) -> None:
    """Write each (path, bytes) of `files` atomically (`write_atomic`), nested so that every temporary
    file is written before any is renamed into place: a failed write (a full disk) leaves every old
    file; the renames then follow one another, last file first. A path that cannot be written is an
    `InputError` naming it."""
    from memsched.solvers.jsonio import write_atomic

    if not files:
        return
    (path, data), rest = files[0], files[1:]

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)
        _write_together(rest)  # the others written (and renamed) before this file's rename

    write_atomic(path, write)


def make_folder(out_dir: Path) -> None:
    """Make the figures' folder `out_dir` (and its parents); one that cannot be made (under a file,
    ``/proc/x``, a read-only disk) is an `InputError` naming it, not an internal error."""
    from memsched.solvers.errors import InputError

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot make the folder ({err.strerror or err})", path=str(out_dir)) from None


def check_stem(stem: str) -> None:
    """`InputError` naming ``--stem`` for a name that is no plain file name (empty, hidden, ``.``, ``..``,
    or with a folder separator: it would write hidden files or fail after the figure is drawn)."""
    from memsched.solvers.errors import InputError

    if not stem or stem.startswith(".") or "/" in stem or os.sep in stem or "\0" in stem:
        raise InputError(f"{stem!r} is no file name: give a name without a folder or a leading '.' "
                         "(the folder is --out)", field="--stem")


def check_figure_paths(out_dir: Path, stems: Iterable[str]) -> None:
    """Before any figure is drawn: the folder `out_dir` can be made (`make_folder`) and no file of
    the figures `stems` (`FIGURE_EXTS`) is a folder, so that a path that cannot be written is an
    `InputError` naming it before any figure is written (not after some of them)."""
    from memsched.solvers.errors import InputError

    make_folder(out_dir)
    for stem in stems:
        for ext in FIGURE_EXTS:
            path = out_dir / f"{stem}.{ext}"
            try:
                folder = path.is_dir()
            except OSError as err:  # a name too long for the file system (ENAMETOOLONG), say
                raise InputError(f"cannot use the name ({err.strerror or err})", path=str(path)) from None
            if folder:
                raise InputError("is a folder, expected a file name (a figure)", path=str(path))


def _grid(n: int, *, width: float = 4.2, height: float = 3.3) -> tuple[plt.Figure, list[Any]]:
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(width * cols, height * nrows + 0.5), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _legend(fig: plt.Figure, axes: list[Any], handles: dict[str, Any], *,
            outside: bool = False) -> tuple[float, float, float, float]:
    """One legend: inside a single panel (unless `outside`), else to the right of the panels, over
    no data; returns the tight_layout rectangle that leaves room for it."""
    if len(axes) == 1 and not outside:
        axes[0].legend(handles.values(), [literal_text(k) for k in handles], fontsize=7.5, frameon=False)
        return (0, 0, 1, 0.95)
    fig.legend(handles.values(), [literal_text(k) for k in handles], loc="upper right", fontsize=7.5, frameon=False,
               bbox_to_anchor=(1.0, 0.93))
    # room for the longest label: a 7.5 pt character is about 0.06 in wide, the marker 0.6 in
    width_in = 0.6 + 0.06 * max((len(str(k)) for k in handles), default=0)
    return (0, 0, max(0.55, min(0.9, 1 - width_in / fig.get_figwidth())), 0.95)


def _label_of(rows: pd.DataFrame) -> list[str]:
    """The solver label of each of `rows` (``solver_label``, else ``solver``), as the figures draw them."""
    return list(rows["solver_label"].fillna(rows["solver"]))


def _solvers_in(rows: pd.DataFrame) -> list[str]:
    order = list(STYLE)
    labels = list(dict.fromkeys(_label_of(rows)))
    return sorted(labels, key=lambda s: (order.index(s) if s in order else len(order), s))


def clip_text(text: Any, limit: int) -> str:
    """`text` in at most `limit` characters: whole when it fits, else cut at a word boundary (a word longer
    than the cut is cut) with "..." (a note's message, not cut mid-word)."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = text[:max(limit - 3, 1)]
    if not text[len(cut)].isspace() and " " in cut:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:-(") + "..."


def budget_percent(rows: pd.DataFrame) -> pd.Series:
    """The budget in % of the reference peak: the nominal value of "X%" budgets (not the
    floored byte count), else budget / reference peak."""
    spec = rows["budget_spec"].astype(str)
    nominal = pd.to_numeric(spec.str.rstrip("%").where(spec.str.endswith("%")), errors="coerce")
    return nominal.fillna(100 * rows["budget_fraction"].astype(float))


def _budget_sort(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text.rstrip("%")), text) if text.endswith("%") else (1, float(text), text)
    except ValueError:
        return (2, 0.0, text)


def _mem_unit(values: Iterable[float]) -> tuple[float, str]:
    m = max([v for v in values if v is not None and not pd.isna(v)] or [1])
    for scale, unit in ((2**30, "GiB"), (MIB, "MiB"), (2**10, "KiB")):
        if m >= 2 * scale:
            return scale, unit
    return 1, "bytes"


def literal_text(text: Any) -> str:
    """`text` as matplotlib draws it literally: every ``$`` escaped (``\\$``), so that a ``$...$`` pair in an
    instance name, a solver label or a note is neither typeset as math nor, when no valid math, an error
    (the rule of `experiments.plotting.draw.literal_text`, not imported here to keep this module light)."""
    return str(text).replace("$", r"\$")


def size_text(n: float, unit: str | None) -> str:
    """A size `n` in the memory unit `unit` of its instance file (``meta.units.memory``; None:
    bytes) for a title: bytes scaled to binary units ("35.03 KiB", "57 bytes"); in another byte
    unit, the number in that unit and its size in binary units ("168 MB (160.2 MiB)"); in a unit
    that is no byte unit, the number and the unit ("17 slots")."""
    from memsched.solvers.units import MEMORY_UNIT_BYTES

    per = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit else 1
    if per is None:
        return f"{n:.6g} {unit}"
    scale, binary = _mem_unit([n * per])
    scaled = f"{n * per / scale:.4g} {binary}"
    return scaled if per == 1 else f"{n:.6g} {unit} ({scaled})"


#: in-memory column of the rows a figure draws (never written to a table): the memory unit of each
#: row's instance file (`with_memory_units`; None: bytes)
UNIT_COLUMN = "_memory_unit"
#: in-memory column beside `UNIT_COLUMN`: the time unit of each row's instance file, hence of its objective
#: (`with_memory_units`, `units.time_unit`: "ms" for a PipeDream profile; None when none is known)
TIME_UNIT_COLUMN = "_time_unit"
#: figure (f)'s period axis when its panel's rows name no time unit, or several (`period_label`)
PERIOD_LABEL = "period (time per micro-batch, instance unit)"


def _unit_of(rows: pd.DataFrame) -> str | None:
    """The memory unit of the instance of `rows` (one instance; `UNIT_COLUMN`), None for bytes."""
    units = rows[UNIT_COLUMN].dropna() if UNIT_COLUMN in rows else ()
    return str(units.iloc[0]) if len(units) else None


def period_label(rows: pd.DataFrame) -> str:
    """Figure (f)'s period axis for the rows of one panel: "period (ms per micro-batch)" when the time unit of
    every row's instance is known (`TIME_UNIT_COLUMN`) and the same, else `PERIOD_LABEL` (the units differ, or
    one is not known: a file not found, no such column, no rows)."""
    if TIME_UNIT_COLUMN not in rows or rows.empty or rows[TIME_UNIT_COLUMN].isna().any():
        return PERIOD_LABEL
    units = set(rows[TIME_UNIT_COLUMN].astype(str))
    return f"period ({units.pop()} per micro-batch)" if len(units) == 1 else PERIOD_LABEL


def with_memory_units(rows: pd.DataFrame, results_dir: str | Path | None = None) -> pd.DataFrame:
    """`rows` with `UNIT_COLUMN`: the memory unit (``meta.units.memory``, None: bytes) of each row's
    instance, read from its stored file (``<sweep output>/instances/<label>-<instance_hash>.<ext>``
    under `results_dir`), else from the file its ``source`` names (`source_file`); and with
    `TIME_UNIT_COLUMN`, the time unit of that file (`file_units`). Sweep rows keep
    sizes (``reference_peak``, ``budget``) in that unit and name no unit of their own; an instance
    whose file is not found or not read counts as bytes (the rule of a file without a unit), with no
    time unit known."""
    if rows.empty:
        return rows.assign(**{UNIT_COLUMN: None, TIME_UNIT_COLUMN: None})
    stored = _stored_instances(Path(results_dir)) if results_dir is not None else {}
    cols = [c for c in ("instance_hash", "source") if c in rows]
    # an empty hash or source (NaN, which astype(str) keeps under pandas 3) names no file: ""
    text = rows[cols].astype(object).where(rows[cols].notna(), "").astype(str)
    keys = text.agg("\0".join, axis=1) if cols else pd.Series("", index=rows.index)
    units: dict[str, tuple[str | None, str | None]] = {}
    for key, row in zip(keys, text.itertuples(index=False)):
        if key not in units:
            found = dict(zip(cols, row))
            path = stored.get(found.get("instance_hash", "")) or source_file(found.get("source", ""))
            units[key] = file_units(path) if path is not None else (None, None)
    return rows.assign(**{UNIT_COLUMN: keys.map(lambda k: units[k][0]),
                          TIME_UNIT_COLUMN: keys.map(lambda k: units[k][1])})


def _stored_instances(root: Path) -> dict[str, Path]:
    """instance hash -> stored instance file, over every sweep's ``instances/`` folder under `root`
    (files named ``<label>-<hash>.<ext>``, `experiments.sweep.instance_store`)."""
    import re

    found: dict[str, Path] = {}
    for path in sorted(root.rglob("instances/*")):
        match = re.search(r"-([0-9a-f]{16})$", path.stem)
        if match and path.is_file():
            found.setdefault(match.group(1), path)
    return found


def file_memory_unit(path: Path) -> str | None:
    """The memory unit an instance file states (`units.memory_unit` of the loaded instance; a join
    network without one of its own: its first branch's), None when it states none or cannot be read."""
    return file_units(path)[0]


def file_units(path: Path) -> tuple[str | None, str | None]:
    """(memory unit, time unit) of an instance file, read once as the problem its format names: the memory unit
    of `file_memory_unit` and the unit of its times, hence of its objective (`units.time_unit`: ``meta.units.time``,
    a chain's default ms, a PipeDream profile's ms); (None, None) for a file that cannot be read."""
    from memsched.solvers.errors import InputError
    from memsched.solvers.formats import load_instance
    from memsched.solvers.units import memory_unit, time_unit

    try:
        problem, instance = load_instance(path)
    except (InputError, OSError, ValueError, ImportError):
        return None, None
    unit = memory_unit(instance)
    branches = getattr(instance, "branches", None)
    if unit is None and branches:
        unit = memory_unit(branches[0])
    return unit, time_unit(problem, instance)


def source_file(source: str) -> Path | None:
    """The file a sweep row's ``source`` names (`sweep.instances.file_source`: relative to the
    repository when inside it, whatever the working directory), or None when there is none (a
    generator's call, a profiled network)."""
    from memsched.experiments.sweep.config import ROOT

    try:
        path = Path(source)
        path = path if path.is_absolute() else ROOT / path
        return path if path.is_file() else None
    except (OSError, ValueError):  # a name too long, a NUL byte: no file
        return None


def _profile_text(source: str) -> str:
    """'resnet18 batch=2 image_size=64 width=16 on cpu' from a profile_model source string."""
    import json

    try:
        params = json.loads(source[source.index("(") + 1: source.rindex(")")])
    except (ValueError, json.JSONDecodeError):
        return source
    name = params.pop("model", "?")
    device = params.pop("device", "default device")
    return f"{name} " + " ".join(f"{k}={v}" for k, v in params.items()) + f" on {device}"


# ============================================================================ figure bodies
CHAIN_NOTE = ("overhead = makespan / (sum of forward and backward times) - 1; budgets count every byte, the input "
              "included, in % of the store-all peak; missing points: no schedule within the budget")
GRAPH_NOTE = ("overhead = sum of cost_cpu of the schedule / sum of cost_cpu - 1; budgets in % of the peak of computing "
              "each node once in the file's order; missing points: no schedule within the budget (or time limit)")


#: the claim of the overhead figures' notes about a point not drawn (`not_run_caveat`, `overhead_vs_budget` add to it)
MISSING_NO_SCHEDULE = "missing points: no schedule within the budget"
#: what `overhead_vs_budget` adds to `MISSING_NO_SCHEDULE` when a solver was not run on an instance (`not_run_note`)
NOT_RUN_HINT = "the solver not run or not applicable there (lines below)"
#: `MISSING_NO_SCHEDULE` with the figure (c) note's "(or time limit)" after it
_MISSING_CLAIM = re.escape(MISSING_NO_SCHEDULE) + r"(?: \(or time limit\))?"


def not_run_note(rows: pd.DataFrame, shown: dict[str, str], max_lengths: dict[str, int] | None = None) -> str:
    """The note lines of an overhead figure naming the (solver, instance) pairs of `rows` (a sweep table's
    rows) whose missing points are no "no schedule within the budget": the solver has no row on an instance
    that other solvers' rows have (the sweep skipped the cell: a solver's ``max_length`` below the instance's
    size writes no row), or only ``unsupported`` rows there (the solver does not handle that instance); "" when
    there is none. One line per reason and instances: "not run (max_length 12): milp, cpsat on homogeneous20
    (size 20), random30 (size 30)" when `max_lengths` (solver label -> its sweep file's ``max_length``) gives a
    limit below the size of every instance the solver lacks and not below one it ran on, else "not run (no
    rows): ..."; "not applicable
    (<first message>): revolve on tiny (size 4), ...". `shown`: legend text of each label (`model_labels`).
    Sizes as in the rows' ``size`` (stages, nodes)."""
    if rows.empty:
        return ""
    labels = rows["solver_label"].fillna(rows["solver"])
    instances = list(dict.fromkeys(rows["instance"]))
    sizes = {inst: _first_size(rows[rows["instance"] == inst]) for inst in instances}
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # (why, instances) -> the solvers' legend texts
    for label in _solvers_in(rows):
        mine = rows[labels == label]
        missing = tuple(i for i in instances if i not in set(mine["instance"]))
        if missing:
            limit = (max_lengths or {}).get(label)
            ran = [sizes[i] for i in set(mine["instance"])]
            above = limit is not None and all(sizes[i] is not None and sizes[i] > limit for i in missing) \
                and all(v is None or v <= limit for v in ran)  # else the rows are not of that sweep file
            groups.setdefault((f"not run (max_length {limit})" if above else "not run (no rows)", missing),
                              []).append(shown.get(label, label))
        unsupported = mine.groupby("instance", sort=False)["status"].agg(lambda v: bool((v == "unsupported").all()))
        skipped = tuple(i for i in instances if unsupported.get(i, False))
        if skipped:
            msgs = mine.loc[mine["status"] == "unsupported", "message"].dropna().astype(str)
            why = f"not applicable ({clip_text(msgs.iloc[0], 90)})" if len(msgs) else "not applicable"
            groups.setdefault((why, skipped), []).append(shown.get(label, label))
    return "".join(f"\n{why}: {', '.join(names)} on {', '.join(_sized(i, sizes[i]) for i in missing)}"
                   for (why, missing), names in groups.items())


def _first_size(rows: pd.DataFrame) -> float | None:
    """The first ``size`` of `rows` (an instance's stages or nodes), None when none is given."""
    size = pd.to_numeric(rows["size"], errors="coerce").dropna()
    return float(size.iloc[0]) if len(size) else None


def _sized(instance: str, size: float | None) -> str:
    """'homogeneous20 (size 20)'; the name alone when the size is not known."""
    return f"{instance} (size {size:g})" if size is not None else str(instance)


def overhead_vs_budget(rows: pd.DataFrame, out_dir: Path, stem: str, title: str, *,
                       objective_label: str = "makespan overhead (%)", note: str = CHAIN_NOTE,
                       off_scale: tuple[str, ...] = ("recompute-all",),
                       max_lengths: dict[str, int] | None = None) -> list[Path]:
    """One panel per instance: overhead (objective / no-saving objective - 1, %) versus the
    budget (% of the instance's reference peak), one line per solver (rotor-paper style).
    Solvers in `off_scale` (recompute-all, whose overhead dwarfs the others) are left out and
    their overhead is given in the note. A solver with no row on an instance, or only ``unsupported``
    rows there, was not run there: the note says so (`not_run_note`; `max_lengths`: solver label ->
    its sweep file's ``max_length``, the reason given when the instance is larger), and its "missing
    points" then names that case beside "no schedule within the budget"."""
    rows = rows.assign(budget_percent=budget_percent(rows))
    hidden = rows[rows["solver_label"].fillna(rows["solver"]).isin(off_scale) & rows["status"].isin(FOUND)]
    rows_all = rows
    rows = rows[~rows.index.isin(hidden.index)]
    instances = list(dict.fromkeys(rows["instance"]))
    shown = model_labels(rows_all)
    styles = figure_styles(_label_of(rows[rows["status"].isin(FOUND)]))
    fig, axes = _grid(len(instances))
    handles: dict[str, Any] = {}
    drawn: list[list[tuple[str, Any]]] = []
    for ax, inst in zip(axes, instances):
        r = rows[rows["instance"] == inst]
        ref = r["reference_peak"].dropna()
        use_overhead = r["overhead"].notna().any()
        drawn.append([])
        for label in _solvers_in(r):
            s = r[(r["solver_label"].fillna(r["solver"]) == label) & r["status"].isin(FOUND)]
            if s.empty:
                continue
            s = s.groupby("budget_percent", as_index=False).agg(y=("overhead" if use_overhead else "objective",
                                                                   "median"))
            y = s["y"] * (100 if use_overhead else 1)
            text = shown.get(label, label)
            (line,) = ax.plot(s["budget_percent"], y, label=text, lw=1.3, ms=4.5, **styles[label])
            handles.setdefault(text, line)
            drawn[-1].append((text, line))
        size = r["size"].dropna()
        ref_text = f", ref. peak {size_text(float(ref.iloc[0]), _unit_of(r))}" if len(ref) else ""
        ax.set_title(literal_text(f"{inst} (size {int(size.iloc[0]) if len(size) else '?'}{ref_text})"), fontsize=8.5)
        ax.set_xlabel("memory budget (% of reference peak)", fontsize=8)
        ax.set_ylabel(objective_label if use_overhead else "objective (instance time unit)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7.5)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=_legend(fig, axes, handles))
    note += coinciding_note([m for lines in drawn for m in mark_coinciding(lines)], len(axes))
    profiled = [_profile_text(str(v)) for v in dict.fromkeys(rows_all["source"].dropna())
                if str(v).startswith(("memsched.models.chain.profiler", "models.chain.profiler"))]
    if profiled:
        note += ("\nchains profiled by models.chain.profiler (times in ms, sizes in bytes): "
                 + clip_text("; ".join(profiled), 300))
    labels = rows_all["solver_label"].fillna(rows_all["solver"])
    unsupported = sorted({lab for lab in labels
                          if rows_all.loc[labels == lab, "status"].isin(["unsupported", "error"]).all()})
    if unsupported:
        msgs = rows_all.loc[labels.isin(unsupported), "message"].dropna().astype(str)
        why = f" ({clip_text(msgs.iloc[0], 90)})" if len(msgs) else ""
        note += f"\nnot applicable here: {', '.join(unsupported)}{why}"
    not_run = not_run_note(rows_all[~labels.isin(unsupported)], shown, max_lengths)
    if not_run:
        note = re.sub(_MISSING_CLAIM, lambda m: f"{m.group(0)}, or {NOT_RUN_HINT}", note, count=1) + not_run
    if len(hidden) and hidden["overhead"].notna().any():
        parts = [f"{inst} {100 * v:.0f}%" for inst, v in hidden.groupby("instance", sort=False)["overhead"].median()
                 .items()]
        note += f"\noff scale, not drawn: {', '.join(off_scale)} ({'; '.join(parts)})"
    return _finish(fig, rows_all, out_dir, stem, note)


#: the statuses whose solve time figure (b) draws: the solver ran to an answer or to its time limit
TIMED = ("optimal", "feasible", "infeasible", "timeout")
#: figure (b): a solve time of 0 s or less (below the clock's resolution) is drawn at this floor (s)
TIME_FLOOR_S = 1e-6


def solve_time_vs_size(rows: pd.DataFrame, out_dir: Path, stem: str, title: str, *,
                       max_lengths: dict[str, int] | None = None) -> list[Path]:
    """Solve time (s, log scale) versus instance size, one line per solver and budget; each point's marker
    tells its answer (`solve_kind`): filled, proven optimal; hollow, not proven optimal (the time limit, or
    repeats that disagree); a cross, proven infeasible (no schedule within the budget: the time is the time to
    tell). Only rows that ran to an answer or to the time limit (`TIMED`) are drawn; the others (``error``,
    ``unsupported``) are listed in the note, and a time of 0 s or less is drawn at `TIME_FLOOR_S` (stated in
    the note), not lost off the log axis. A solver run on fewer sizes than the others is named in the note
    (`size_limit_note`; `max_lengths`: solver label -> its sweep file's ``max_length``)."""
    labels_all = rows["solver_label"].fillna(rows["solver"])
    shown = model_labels(rows)
    timed = rows[rows["status"].isin(TIMED)]
    styles = figure_styles(_label_of(timed))
    budgets = list(dict.fromkeys(rows["budget_spec"]))
    fig, axes = _grid(len(budgets), width=6.0 if len(budgets) == 1 else 4.6, height=3.8)
    handles: dict[str, Any] = {}
    floored = 0
    kinds: set[str] = set()
    for ax, b in zip(axes, budgets):
        r = timed[timed["budget_spec"] == b]
        for label in _solvers_in(r):
            s = r[r["solver_label"].fillna(r["solver"]) == label]
            g = s.groupby("size").agg(t=("solve_time_s", "median"), kind=("status", solve_kind)).reset_index()
            low = g["t"] <= 0
            floored += int(low.sum())
            g["t"] = g["t"].where(~low, TIME_FLOOR_S)
            kinds |= set(g["kind"])
            text = shown.get(label, label)
            handles.setdefault(text, _solve_time_points(ax, g, styles[label], text))
        limits = sorted({float(v) for v in rows.loc[rows["budget_spec"] == b, "time_limit"].dropna()})
        for lim in limits:
            ax.axhline(lim, color="#999999", ls=":", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(literal_text(f"budget {b} of the store-all peak"), fontsize=8.5)
        ax.set_xlabel("chain length L (stages)", fontsize=8)
        ax.set_ylabel("solve time (s, median over repeats)", fontsize=8)
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(labelsize=7.5)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=_legend(fig, axes, handles))
    inst = ", ".join(dict.fromkeys(rows["instance"]))
    note = f"instances: {clip_text(inst, 150)}; {marker_legend(kinds)}"
    if floored:
        note += f"; {floored} median solve time(s) of 0 s drawn at {TIME_FLOOR_S:g} s (log axis)"
    note += size_limit_note(rows, shown, max_lengths)
    note += _untimed_note(rows[~rows["status"].isin(TIMED)], labels_all, shown)
    return _finish(fig, rows, out_dir, stem, note)


#: figure (b)'s answer of the rows of one solver at one size (`solve_kind`) -> what the caption says of its marker
SOLVE_KINDS = {"optimal": "filled markers: proven optimal",
               "open": "hollow markers: not proven optimal within the time limit (dotted)",
               "infeasible": "crosses: proven infeasible (no schedule within the budget; the time is the time to "
                             "tell)"}


def solve_kind(statuses: pd.Series) -> str:
    """The answer figure (b) draws for the rows of one solver at one size (their ``status``es, one per repeat):
    "infeasible" when every one is ``infeasible``, "optimal" when every one is ``optimal`` or ``infeasible``
    (repeats that disagree on feasibility: the solver proved both; not expected), else "open" (a ``feasible``
    or ``timeout`` answer: optimality not proven)."""
    values = set(statuses.astype(str))
    if values == {"infeasible"}:
        return "infeasible"
    return "optimal" if values <= {"optimal", "infeasible"} else "open"


def marker_legend(kinds: Iterable[str]) -> str:
    """Figure (b)'s caption entry for its markers: filled and hollow always (hollow: the time limit, dotted),
    the cross of infeasible answers when `kinds` (of `solve_kind`) has one."""
    shown = ["optimal", "open", *(["infeasible"] if "infeasible" in set(kinds) else [])]
    return "; ".join(SOLVE_KINDS[k] for k in shown)


def _solve_time_points(ax: Any, g: pd.DataFrame, kw: dict[str, Any], label: str) -> Any:
    """Draw one solver's solve times on `ax` (`g`: ``size``, ``t`` (s), ``kind`` of `solve_kind` per size,
    sorted by size): the line through every point without markers (labelled `label`, the solver's legend
    text), then per kind its markers (`SOLVE_KINDS`: the solver's marker filled, hollow, or a cross in its
    colour; "+" for a solver whose marker is a cross), unclipped so that a marker at an edge is whole.
    Returns the legend handle (the solver's line and marker)."""
    from matplotlib.lines import Line2D

    base = {k: v for k, v in kw.items() if k != "marker"}
    ax.plot(g["size"], g["t"], lw=1.3, label=label, **base)
    colour, marker = kw["color"], kw.get("marker", "o")
    looks = {"optimal": {"marker": marker, "ms": 5, "mfc": colour, "mec": colour},
             "open": {"marker": marker, "ms": 6.5, "mfc": "white", "mec": colour, "mew": 1.2},
             "infeasible": {"marker": "+" if marker in ("x", "X") else "x", "ms": 7, "mec": colour, "mew": 1.6}}
    for kind, look in looks.items():
        pts = g[g["kind"] == kind]
        if len(pts):
            ax.plot(pts["size"], pts["t"], ls="none", clip_on=False, zorder=3, **look)
    return Line2D([], [], lw=1.3, ms=5, label=label, **kw)


def size_limit_note(rows: pd.DataFrame, shown: dict[str, str], max_lengths: dict[str, int] | None = None) -> str:
    """Figure (b)'s note line naming each solver with no row at some sizes (chain lengths) of `rows` that other
    solvers ran: "milp (phase model), cpsat (phase model): run up to L = 20 (max_length)" when `max_lengths`
    (solver label -> its sweep file's ``max_length``) gives a limit below every size it lacks and not below
    a size it has, else "no rows at L = ..."; "" when every solver has rows at every size. `shown`: legend
    text per label."""
    labels = rows["solver_label"].fillna(rows["solver"])
    size = pd.to_numeric(rows["size"], errors="coerce")
    every = sorted(size.dropna().unique())
    groups: dict[str, list[str]] = {}
    for label in _solvers_in(rows):
        have = set(size[labels == label].dropna())
        missing = [v for v in every if v not in have]
        if not missing:
            continue
        limit = (max_lengths or {}).get(label)
        if limit is not None and all(v > limit for v in missing) and all(v <= limit for v in have):
            why = f"run up to L = {limit} (max_length)"
        else:
            why = f"no rows at L = {', '.join(f'{v:g}' for v in missing)}"
        groups.setdefault(why, []).append(shown.get(label, label))
    return "".join(f"\n{', '.join(names)}: {why}" for why, names in groups.items())


def _untimed_note(untimed: pd.DataFrame, labels: pd.Series, shown: dict[str, str]) -> str:
    """The note line of figure (b) for the rows `untimed` whose solve time is not drawn (their status is
    not in `TIMED`: ``error``, ``unsupported``): per solver, its statuses with their counts and sizes, and
    a first message; "" when there are none. `labels`: each row's solver label; `shown`: `model_labels`."""
    if untimed.empty:
        return ""
    parts = []
    for label, group in untimed.groupby(labels[untimed.index], sort=False):
        counts = ", ".join(f"{status} x{n}" for status, n in group["status"].astype(str).value_counts().items())
        sizes = ", ".join(f"{v:g}" for v in sorted(pd.to_numeric(group["size"], errors="coerce").dropna().unique()))
        msgs = group["message"].dropna().astype(str)
        why = f": {clip_text(msgs.iloc[0], 90)}" if len(msgs) else ""
        parts.append(f"{shown.get(str(label), label)} ({counts}{f' at L = {sizes}' if sizes else ''}{why})")
    return "\nno solve time to draw, not drawn: " + "; ".join(parts)


def period_vs_memory(rows: pd.DataFrame, out_dir: Path, stem: str, title: str) -> list[Path]:
    """Pipeline period (objective, in the instance file's time unit) versus memory per device, one panel per
    instance; the period axis names that unit (`period_label`)."""
    instances = list(dict.fromkeys(rows["instance"]))
    shown = model_labels(rows)
    styles = figure_styles(_label_of(rows[rows["status"].isin(FOUND)]))
    fig, axes = _grid(len(instances))
    handles: dict[str, Any] = {}
    drawn: list[list[tuple[str, Any]]] = []
    for ax, inst in zip(axes, instances):
        r = rows[rows["instance"] == inst]
        scale, unit = _mem_unit(r["budget"])
        drawn.append([])
        for label in _solvers_in(r):
            s = r[(r["solver_label"].fillna(r["solver"]) == label) & r["status"].isin(FOUND)]
            if s.empty:
                continue
            s = s.groupby("budget", as_index=False).agg(y=("objective", "median"))
            text = shown.get(label, label)
            (line,) = ax.plot(s["budget"] / scale, s["y"], label=text, lw=1.3, ms=4.5, drawstyle="steps-post",
                              **styles[label])
            handles.setdefault(text, line)
            drawn[-1].append((text, line))
        ax.set_title(literal_text(inst), fontsize=8.5)
        ax.set_xlabel(f"memory per device ({unit})", fontsize=8)
        ax.set_ylabel(period_label(r), fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7.5)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=_legend(fig, axes, handles))
    marked = coinciding_note([m for lines in drawn for m in mark_coinciding(lines)], len(axes))
    opts = ", ".join(sorted({str(v) for v in rows["options"].dropna()}))
    return _finish(fig, rows, out_dir, stem, f"solver options: {opts}{marked}")


def predicted_vs_measured(rows: pd.DataFrame, out_dir: Path, stem: str, title: str) -> list[Path]:
    """Figure (g): measured / predicted memory (tracker and independent method) and time with
    spread bars, every executed problem (`experiments.figure_g.measured_ratios`)."""
    from .figure_g import measured_ratios

    # instance names are drawn as tick labels there: literally (`literal_text`), as in the other figures
    rows = rows.assign(instance=rows["instance"].map(literal_text, na_action="ignore"))
    return measured_ratios(rows, out_dir, stem, title)


def not_measured_note(rows: pd.DataFrame) -> str:
    """Figure (g)'s note naming the rows it cannot draw (`experiments.figure_g.not_drawn_note`)."""
    from .figure_g import not_drawn_note

    return not_drawn_note(rows)


# ============================================================================ the registry
@dataclass(frozen=True)
class FigureSpec:
    """A figure: the sweeps it reads, what keeps a row, how it is drawn, its title."""

    sweeps: tuple[str, ...]
    draw: Callable[..., list[Path]]
    title: str
    stem: str
    problem: str | None = None
    needs: str | None = None      # a column that must have values (e.g. measured_peak)
    options: tuple[tuple[str, Any], ...] = ()   # keyword arguments of `draw`
    #: the note naming rows whose run ended in status ``error`` (a schedule found, its execution failed), for a
    #: figure of executed schedules; None: such rows count as "no schedule" in `skip_note`
    failed_note: Callable[[pd.DataFrame], str] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of a sweep table this figure's drawing reads and `render` does not fill in when
        absent (`DRAW_COLUMNS`; none for another drawing function)."""
        return DRAW_COLUMNS.get(self.draw, ())


#: drawing function -> the table columns it reads (`render` fills in the others, e.g. ``overhead``, whose
#: absence draws the objective instead, and ``reference_peak``)
DRAW_COLUMNS: dict[Callable[..., list[Path]], tuple[str, ...]] = {
    overhead_vs_budget: ("instance", "solver", "status", "budget_spec", "objective"),
    solve_time_vs_size: ("instance", "solver", "status", "budget_spec", "size", "solve_time_s"),
    period_vs_memory: ("instance", "solver", "status", "budget", "objective"),
    predicted_vs_measured: ("instance", "problem", "budget_spec"),
}


FIGURES: dict[str, FigureSpec] = {
    "main": FigureSpec(("chain_solvers",), overhead_vs_budget,
                       "Chain rematerialization on the built-in examples: makespan overhead vs memory budget",
                       "main_overhead", "chain"),
    "a": FigureSpec(("fig_a_chains",), overhead_vs_budget,
                    "(a) Makespan overhead vs memory budget on ResNet-, DenseNet-, Inception-like chains",
                    "fig_a_overhead_chains", "chain"),
    "b": FigureSpec(("fig_b_solve_time",), solve_time_vs_size,
                    "(b) Solve time vs chain length: rotor DP, MILP, CP-SAT", "fig_b_solve_time", "chain"),
    "c": FigureSpec(("fig_c_graphs",), overhead_vs_budget,
                    "(c) Graph rematerialization: compute overhead vs memory budget", "fig_c_graphs", "graph",
                    options=(("objective_label", "compute overhead (%)"), ("note", GRAPH_NOTE))),
    "d": FigureSpec(("fig_d_join",), overhead_vs_budget,
                    "(d) Join networks: dynamic program vs heuristics", "fig_d_join", "join",
                    options=(("note", CHAIN_NOTE.replace("forward and backward times", "all branches' forward and "
                                                         "backward times and the loss")),)),
    "e": FigureSpec(("fig_e_offload",), overhead_vs_budget,
                    "(e) Offloading and rematerialization: makespan overhead vs memory budget", "fig_e_offload",
                    "offload", options=(("note", CHAIN_NOTE + "; host link as given in the sweep (bandwidth)"),)),
    "f": FigureSpec(("fig_f_pipeline",), period_vs_memory,
                    "(f) Pipelined model parallelism: period vs memory per device", "fig_f_pipeline", "pipeline"),
    "g": FigureSpec(("fig_g_measured",), predicted_vs_measured,
                    "(g) Executed schedules (chain, join, offload, graph): measured / predicted peak memory and "
                    "step time", "fig_g_measured", None,  # rows without a measurement: named in its note
                    failed_note=not_measured_note),
}


def figure_rows(rows: pd.DataFrame, spec: FigureSpec) -> pd.DataFrame:
    """The rows a figure draws (its sweeps, its problem, the needed column present)."""
    if rows.empty or "sweep" not in rows:
        return rows.iloc[0:0]
    r = rows[rows["sweep"].isin(spec.sweeps)]
    if spec.problem is not None and "problem" in r:
        r = r[r["problem"] == spec.problem]
    if spec.needs is not None:
        r = r[r[spec.needs].notna()] if spec.needs in r else r.iloc[0:0]
    return r


def render(figure_id: str, rows: pd.DataFrame, out_dir: str | Path, *,
           grid: str | None = None) -> tuple[list[Path], str | None]:
    """Draw one figure from `rows`: (paths written, None) or ([], a one-line note if skipped).

    `grid`: the note of `grid_note` (the figure's sweep does not cover its grid), drawn in the caption,
    whose "missing points: no schedule" then also names cells not run; None: `grid_note` of `rows`
    (nothing for rows not read by `load_results`)."""
    spec = FIGURES[figure_id]
    r = figure_rows(rows, spec)
    note = skip_note(figure_id, r)
    if note is not None:
        return [], note
    if grid is None:
        grid = grid_note(figure_id, rows)
    missing = missing_columns(spec, r.columns)
    if missing:  # rows not read by `load_results` (which names the table)
        from memsched.solvers.errors import InputError

        raise InputError(f"the rows of figure {figure_id} have no column {missing[0]!r}", field=missing[0])
    empty = empty_text_cell(r)
    if empty is not None:  # rows not read by `load_results` (which names the table and the line)
        from memsched.solvers.errors import InputError

        raise InputError(f"the rows of figure {figure_id}: row {empty[1]!r} has an empty {empty[0]!r}",
                         field=empty[0])
    for col in ("solver_label", "source", "message", "overhead", "budget_fraction", "reference_peak", "size",
                "time_limit", "options", "measured_time_ms", "device", "grad_check"):
        if col not in r:
            r = r.assign(**{col: None})
    if UNIT_COLUMN not in r:  # rows not read by `make_figures`: units from the files the sources name
        r = with_memory_units(r)
    options = dict(spec.options)
    if spec.draw in (overhead_vs_budget, solve_time_vs_size):
        options.setdefault("max_lengths", solver_max_lengths(spec))
    if grid and spec.draw is overhead_vs_budget:
        options["note"] = not_run_caveat(str(options.get("note", CHAIN_NOTE)), grid)
    token = _CAPTION_EXTRA.set(grid or "")
    try:
        return spec.draw(r, Path(out_dir), spec.stem, spec.title, **options), None
    finally:
        _CAPTION_EXTRA.reset(token)


#: a line `_finish` adds to the caption of the figure being drawn (`render`: the `grid_note`)
_CAPTION_EXTRA: contextvars.ContextVar[str] = contextvars.ContextVar("memsched_caption_extra", default="")


#: how `grid_note` starts the note of a sweep whose every cell has a row, beside rows of no cell of its file
EVERY_CELL_RAN = "every cell of"


def not_run_caveat(note: str, grid: str = "") -> str:
    """`note` (a caption) whose claim that a missing point is a cell without a schedule also names cells
    that never ran (a sweep that does not cover its grid, `grid`: its `grid_note`); when every cell of
    the grid has a row (rows of no cell beside them), the caption says only that those other rows' missing
    points are not known to be cells that ran."""
    if grid.partition(": ")[2].startswith(EVERY_CELL_RAN):
        return note.replace("missing points: no schedule within the budget",
                            "missing points: no schedule within the budget (rows of no cell of the sweep file: "
                            "not known, first line)")
    return note.replace("missing points: no schedule within the budget",
                        "missing points: no schedule within the budget, or a cell that never ran (first line)")


def grid_note(figure_id: str, rows: pd.DataFrame) -> str | None:
    """A one-line note when the rows of figure `figure_id`'s sweep (of `rows`, read by `load_results`)
    are not every cell of its grid; None when they are, or when `rows` name no table (`TABLE_COLUMN`).

    The grid is rebuilt as ``memsched sweep --list`` does it: from the committed sweep file of the
    sweep (experiments/configs, `_config_of`), its stored instances read from the ``instances/`` folder
    beside the first table (nothing is built or stored: a model instance not stored there leaves the
    grid unchecked rather than profiling it). A row whose status means no schedule is a cell that ran; a
    cell without a row never ran. Rows of no cell of that file (another sweep file, other settings) leave
    the grid unknown, and the note says so."""
    spec = FIGURES[figure_id]
    if rows.empty or TABLE_COLUMN not in rows or "sweep" not in rows:
        return None
    mine = rows[rows["sweep"].isin(spec.sweeps) & rows[TABLE_COLUMN].notna()]
    if mine.empty:
        return None
    sweep = ", ".join(spec.sweeps)
    config_path = _committed_config(spec)
    folder = Path(str(mine[TABLE_COLUMN].iloc[0])).parent
    tasks = _grid_tasks(config_path, folder) if config_path is not None else None
    shown = _shown_path(config_path) if config_path is not None else f"experiments/configs/{_config_of(spec)}.toml"
    if isinstance(tasks, str) or tasks is None:
        why = tasks or f"no sweep file {shown}"
        return f"sweep {sweep}: not checked whether every cell of its grid ran ({why})"
    done, extra = grid_cells_done(mine, tasks)
    total = len({t.key for t in tasks})
    if done == total and extra == 0:
        return None
    if done == 0:
        return (f"sweep {sweep}: its {len(mine)} rows are no cells of {shown} (another sweep file or other "
                "settings): not known whether every cell of its grid ran")
    if done == total:  # every cell ran; the grid of the other rows is not known
        return (f"sweep {sweep}: {EVERY_CELL_RAN} {shown} has a row ({total} cells); {extra} rows of no cell of it "
                "(another sweep file or other settings): not known whether every cell of their grid ran")
    others = f"; {extra} rows of no cell of it" if extra else ""
    return (f"sweep {sweep}: {done} of {total} cells of {shown} have a row, {total - done} never ran (the sweep "
            f"was stopped or not resumed: memsched sweep {shown} --output {folder} runs them){others}")


def grid_cells_done(rows: pd.DataFrame, tasks: list[Any]) -> tuple[int, int]:
    """(cells of `tasks`, the grid, that have a row among `rows`; rows of no cell) as ``--list`` counts
    them (`verify.rekeyed`, strict: a row under an older key of the same cell counts)."""
    from memsched.experiments.sweep.verify import rekeyed

    records = {}
    for rec in rows.drop(columns=[c for c in rows if str(c).startswith("_")]).to_dict("records"):
        plain = {k: (None if _is_missing(v) else v) for k, v in rec.items()}
        records[str(plain.get("key"))] = plain
    taken: dict[str, str] = {}
    found = rekeyed(records, tasks, taken, strict=True)
    keys = {t.key for t in tasks}
    done = {k for k in keys if k in found}
    used = {taken.get(k, k) for k in done}  # the stored keys of the rows that stand for a cell
    return len(done), len([k for k in records if k not in used])


def _is_missing(value: Any) -> bool:
    """Whether a table cell is empty (NaN or None; a CSV reads an empty cell as NaN, a journal as None)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _committed_config(spec: FigureSpec) -> Path | None:
    """The committed sweep file of figure `spec`'s sweep (experiments/configs/<`_config_of`>.toml), or None."""
    from memsched.experiments.sweep.config import CONFIGS

    for ext in (".toml", ".yaml", ".yml"):
        path = CONFIGS / f"{_config_of(spec)}{ext}"
        if path.is_file():
            return path
    return None


def solver_max_lengths(spec: FigureSpec) -> dict[str, int]:
    """Solver label -> ``max_length`` of the solvers of figure `spec`'s committed sweep file that have one
    (`_committed_config`; the sweep writes no row for a cell whose instance is larger); {} when there is no
    such file or it does not load. The reason a figure's note gives for a solver not run on an instance."""
    from memsched.experiments.sweep import load_config
    from memsched.solvers.errors import InputError

    path = _committed_config(spec)
    if path is None:
        return {}
    try:
        config = load_config(path)
    except (InputError, ImportError, OSError, ValueError):
        return {}
    return {s.label: s.max_length for s in config.solvers if s.max_length is not None}


def _shown_path(path: Path) -> str:
    """`path` relative to the repository when inside it (as the notes name sweep files), else as is."""
    from memsched.experiments.sweep.config import ROOT

    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _grid_tasks(config_path: Path, folder: Path) -> list[Any] | str:
    """The cells of the sweep file `config_path` (`build_tasks`) with the instances stored in
    ``<folder>/instances`` (read only); or why they cannot be listed here (a short phrase): the file or
    an instance does not load, or a model instance is not stored there (it would be profiled)."""
    from memsched.experiments.sweep import InstanceStore, build_tasks, load_config
    from memsched.solvers.errors import InputError, first_line

    try:
        config = load_config(config_path)
        store = InstanceStore(folder / "instances", readonly=True)
        threads = config.measure["threads"]
        if any(spec.kind == "model" and store.built(spec, threads=threads) is None for spec in config.instances):
            return f"a model instance of {_shown_path(config_path)} is not stored in {folder / 'instances'}"
        return build_tasks(config, notes=[], store=store)
    except (InputError, ImportError, OSError, ValueError) as err:
        return f"{_shown_path(config_path)}: {first_line(err, 120)}"


def skip_note(figure_id: str, rows: pd.DataFrame) -> str | None:
    """Why figure `figure_id` is not drawn from its rows `rows` (`figure_rows`): a one-line note,
    or None when it is drawn. Figure (g) with only error rows (failed executions, `figure_g`) names
    them as its note would (`FigureSpec.failed_note`)."""
    spec = FIGURES[figure_id]
    if rows.empty:
        return (f"figure {figure_id}: skipped, no rows of sweep {', '.join(spec.sweeps)} "
                f"(run: memsched sweep experiments/configs/{_config_of(spec)}.toml)")
    if spec.needs is None and not rows["status"].isin(FOUND).any():
        if spec.failed_note is not None and (rows["status"] == "error").any():  # every execution failed
            return f"figure {figure_id}: skipped, no run of sweep {', '.join(spec.sweeps)} was measured: " + \
                spec.failed_note(rows)
        return f"figure {figure_id}: skipped, no run of sweep {', '.join(spec.sweeps)} found a schedule"
    return None


def _config_of(spec: FigureSpec) -> str:
    return "default" if spec.sweeps == ("chain_solvers",) else spec.sweeps[0]


def make_figures(results_dir: str | Path = "results", out_dir: str | Path | None = None,
                 only: Iterable[str] | None = None, *, on_notes: Callable[[list[str]], None] | None = None,
                 on_saved: Callable[[list[Path]], None] | None = None) -> tuple[list[Path], list[str]]:
    """Render every figure (or those in `only`) from the tables under `results_dir` into
    `out_dir` (default ``<results_dir>/figures``); returns (paths written, notes). Sizes in titles
    are in the unit of each instance's stored file (`with_memory_units`).

    Before any figure is drawn, the folder is made when a figure will be drawn, and its paths
    checked (`check_figure_paths`): a folder that cannot be made or a figure's file that is a
    folder is an `InputError` naming the path (exit 2), with no figure written. The notes (skipped
    figures, grids not covered) are known then too and given to `on_notes`; `on_saved` gets each
    figure's files as soon as they are in place (`_save_figure`: a figure's files are all new or all
    old), so that a run stopped by a Ctrl-C can still say which files it replaced."""
    rows = load_results(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir) / "figures"
    ids = list(dict.fromkeys(only or FIGURES))  # each figure once, in the order first asked
    skipped = {fid: skip_note(fid, figure_rows(rows, FIGURES[fid])) for fid in ids}
    drawn = [fid for fid in ids if skipped[fid] is None]
    if drawn:
        check_figure_paths(out, [FIGURES[fid].stem for fid in drawn])
        rows = with_memory_units(rows, results_dir)
    grids = {fid: grid_note(fid, rows) for fid in drawn}
    notes = [skipped[fid] or f"figure {fid}: {grids[fid]}" for fid in ids if skipped[fid] or grids.get(fid)]
    if on_notes is not None:
        on_notes(list(notes))
    written: list[Path] = []
    token = _ON_SAVED.set(on_saved)
    try:
        for fid in drawn:
            paths, _ = render(fid, rows, out, grid=grids[fid] or "")  # no note: the same `skip_note` as above
            written += paths
    finally:
        _ON_SAVED.reset(token)
    return written, notes


__all__ = ["FIGURES", "FigureSpec", "load_results", "render", "make_figures", "figure_rows", "stamp",
           "overhead_vs_budget", "solve_time_vs_size", "period_vs_memory", "predicted_vs_measured", "style",
           "size_text", "with_memory_units", "source_file", "model_labels", "mark_coinciding", "clip_text",
           "is_sweep_table", "empty_text_cell", "grid_note", "check_same_settings", "settings_conflict",
           "TABLE_COLUMN", "figure_styles", "period_label", "PERIOD_LABEL", "TIME_UNIT_COLUMN", "file_units"]

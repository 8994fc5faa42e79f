"""Where rows go: the journal (``<name>.jsonl``, append-only) and the table (``<name>.csv``)."""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_atomic

if TYPE_CHECKING:
    import pandas as pd

#: Columns every row has, in table order (extra keys follow, sorted).
ROW_COLUMNS = [
    "sweep", "key", "instance", "problem", "source", "instance_hash", "size", "budget_spec", "budget", "reference_peak",
    "budget_fraction", "solver", "solver_label", "slots", "time_limit", "options", "repeat", "execute",
    "status", "objective", "objective_name", "baseline_objective", "overhead", "lower_bound", "gap",
    "peak_memory", "min_budget", "solve_time_s", "scope", "message",
    "measured_time_ms", "measured_peak", "memory_ratio", "time_ratio", "grad_check", "device",
    "memsched_version", "numpy_version", "ortools_version", "torch_version", "python_version",
    "host", "pid", "timestamp",
]
#: Columns that hold numbers (or nothing); a table read back with anything else there is damaged.
NUMERIC_COLUMNS = ("size", "budget", "reference_peak", "budget_fraction", "slots", "time_limit", "repeat", "objective",
                   "baseline_objective", "overhead", "lower_bound", "gap", "peak_memory", "min_budget", "solve_time_s",
                   "measured_time_ms", "measured_peak", "memory_ratio", "time_ratio",
                   # an executed cell's (`cell._execute` and `models.run.execute_schedule`; empty in the rows
                   # of a cell that did not execute), read as numbers by figure (g)
                   "independent_peak", "independent_ratio", "predicted_peak", "tracker_predicted_peak",
                   "independent_predicted_peak", "predicted_makespan", "compared_makespan",
                   "time_ms_min", "time_ms_q1", "time_ms_q3", "time_ms_max", "time_ratio_min", "time_ratio_max",
                   "threads", "warmup", "time_repeats", "load_1min")
#: Columns that hold text (or nothing): a table is read back with them as text, as the journal had them
#: (a version "1.10" or a hash "0123" stays as written).
TEXT_COLUMNS = ("sweep", "key", "instance", "problem", "source", "instance_hash", "budget_spec", "solver",
                "solver_label", "options", "status", "objective_name", "scope", "message", "device", "memsched_version",
                "numpy_version", "ortools_version", "torch_version", "python_version", "host", "timestamp")
#: Status of a row whose solver rejected the instance (besides the solvers' own statuses and "error").
UNSUPPORTED = "unsupported"
#: Columns that change from one run of the same cell to the next (ignored when comparing tables): the solve time,
#: an executed cell's measurements (time and its spread, both peaks and their ratios, the load), where and when.
VOLATILE_COLUMNS = ("solve_time_s", "measured_time_ms", "time_ratio", "memory_ratio", "measured_peak",
                    "independent_peak", "independent_ratio", "time_ms_min", "time_ms_q1", "time_ms_q3", "time_ms_max",
                    "time_ratio_min", "time_ratio_max", "load_1min", "host", "pid", "timestamp")


SWEEP_JOURNAL = "the sweep's journal"


def journal_path(out_dir: Path, name: str) -> Path:
    """Path of the sweep's journal (one JSON row per line): ``<out_dir>/<name>.jsonl``."""
    return out_dir / f"{name}.jsonl"


def table_path(out_dir: Path, name: str, ext: str = "csv") -> Path:
    """Path of the sweep's table: ``<out_dir>/<name>.<ext>``."""
    return out_dir / f"{name}.{ext}"


def written_paths(out_dir: Path, name: str) -> dict[Path, str]:
    """The files that a run of sweep `name` writes in `out_dir`, with what each is: the journal,
    the table (and its Parquet copy when pyarrow is there, as `write_table` writes it)."""
    from importlib.util import find_spec

    paths = {journal_path(out_dir, name): SWEEP_JOURNAL, table_path(out_dir, name): "the sweep's table"}
    if find_spec("pyarrow") is not None:
        paths[table_path(out_dir, name, "parquet")] = "the sweep's Parquet table"
    return paths


def check_written_paths(out_dir: Path, name: str) -> None:
    """Before any work: no file that sweep `name` writes in `out_dir` (`written_paths`) is a
    folder; else `InputError` naming it (it failed as an internal error, or once the cells had run)."""
    for path, what in written_paths(out_dir, name).items():
        if path.is_dir():
            raise InputError(f"is a folder, expected a file ({what})", path=str(path))


def make_folder(folder: Path, what: str) -> None:
    """Make `folder` (and its parents); one that cannot be made (a file is in the way, a read-only
    disk) is an `InputError` naming it and saying what it is for."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot make the folder of {what} ({err.strerror or err})", path=str(folder)) from None


#: whether a row read back from a journal is one its writer writes (`valid_row` for the sweep's)
RowCheck = Callable[[Any], bool]


def _row(line: bytes, valid: RowCheck) -> dict[str, Any] | None:
    """The row of one journal line, or None when it is not a complete row (torn, or not `valid`)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, an integer of over 4300 digits, nesting too deep
        return None
    return row if valid(row) else None


def valid_row(row: Any) -> bool:
    """Whether `row` is one the sweep writes: a dict with a text ``key`` and finite numbers (or nothing)
    in every `NUMERIC_COLUMNS` column, a whole one in ``repeat`` (else a damaged or hand-edited row,
    whose cell runs again). The sweep writes non-finite floats as nothing (`cell._stamp`), so NaN,
    Infinity or 1e400 (read back as inf) in a journal or table is damage."""
    if not isinstance(row, dict) or not isinstance(row.get("key"), str) or not row["key"]:
        return False
    for col in NUMERIC_COLUMNS:
        value = row.get(col)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not (math.isfinite(value) and (col != "repeat" or value.is_integer())):
            return False
    return True


def plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with numpy scalars (as a table read by pandas may hold) as Python numbers, so that it
    is journaled as the sweep wrote it (not as text, which `valid_row` refuses in a number column)."""
    return {k: v.item() if hasattr(v, "item") and hasattr(v, "dtype") else v for k, v in row.items()}


def read_journal(path: Path, valid: RowCheck = valid_row) -> dict[str, dict[str, Any]]:
    """Finished rows by key; a later row of the same key wins (`valid`: which rows count, the sweep's
    `valid_row` by default; every row is a dict with a text ``key``).

    A last line that is a complete row counts even without its newline (the kill came between
    the row and its newline; `Journal` then adds the newline); a torn last line is ignored
    (`Journal` cuts it); an unreadable line elsewhere (not JSON, or text in a number column) is
    reported and ignored, so that a resumed sweep runs that cell again.
    """
    rows: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return rows
    lines = path.read_bytes().split(b"\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        row = _row(line, valid)
        if row is None:
            if n < len(lines) - 1:
                print(f"warning: {path}: unreadable line {n + 1} ignored", file=sys.stderr)
            continue
        rows[row["key"]] = row
    return rows


def _line(row: dict[str, Any]) -> bytes:
    """One journal line: `row` as JSON (sorted keys) and its newline."""
    return (json.dumps(row, sort_keys=True, default=str) + "\n").encode()


def _journal_error(path: Path, err: OSError, what: str = SWEEP_JOURNAL, field: str | None = None) -> InputError:
    """The one-line error of a journal that cannot be written (a full disk, no permission): names it
    (and the `field` that gave its path, if any)."""
    return InputError(f"cannot write {what} ({err.strerror or err})", path=str(path), field=field)


def seed_journal(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write a new journal at `path` holding `rows` (the rows of a committed table, when there is no
    journal), atomically: a stop meanwhile leaves no journal, never part of one. `InputError`
    naming it when it cannot be written."""
    data = b"".join(_line(r) for r in rows)
    _atomic(path, lambda tmp: tmp.write_bytes(data))


class Journal:
    """Append-only JSON-lines file of finished rows; each append is one write, fsync'ed (the file
    is unbuffered: nothing is left to write when it is closed).

    Opening it repairs the end of a journal left by a killed run, the same way `read_journal`
    reads it: a complete last row without its newline gets the newline (never dropped), a torn
    last line is cut (so the next row starts on a line of its own). A journal that cannot be
    opened (a folder in its place, no permission) or written (a full disk) is an `InputError`
    naming it (exit 2 on the command line). `what` names the journal in those messages, `field` the
    option that gave its path; `valid` says which rows are complete (`read_journal`).
    """

    def __init__(self, path: Path, *, what: str = SWEEP_JOURNAL, field: str | None = None,
                 valid: RowCheck = valid_row) -> None:
        self.path, self.what, self.field, self.valid = path, what, field, valid
        make_folder(path.parent, what)
        try:
            self._repair()
            self._f = path.open("ab", buffering=0)
        except OSError as err:
            raise self.error_for(err) from None

    def error_for(self, err: OSError) -> InputError:
        """The one-line `InputError` of `err` from this journal's file (a folder in its place, a full disk)."""
        if self.path.is_dir():
            return InputError(f"is a folder, expected a file ({self.what})", path=str(self.path), field=self.field)
        return _journal_error(self.path, err, self.what, self.field)

    def _repair(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb+") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return
            start = data.rfind(b"\n") + 1
            if _row(data[start:], self.valid) is not None:
                f.seek(0, os.SEEK_END)
                f.write(b"\n")
            else:
                f.truncate(start)
            f.flush()
            os.fsync(f.fileno())

    def append(self, row: dict[str, Any]) -> None:
        """Append `row` as one JSON line and fsync it, so a finished run survives an interruption."""
        self.extend([row])

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append `rows`, one JSON line each, in one write, and fsync them. A write that fails part
        way (a full disk) leaves a torn last line, which `read_journal` ignores and the next
        `Journal` cuts."""
        data = memoryview(b"".join(_line(r) for r in rows))
        try:
            while data:
                written = self._f.write(data)
                if not written:
                    raise OSError(errno.EIO, "the journal took no bytes")
                data = data[written:]
            os.fsync(self._f.fileno())
        except OSError as err:
            raise self.error_for(err) from None

    def close(self) -> None:
        """Close the journal file (`InputError` naming it when that fails)."""
        try:
            self._f.close()
        except OSError as err:
            raise self.error_for(err) from None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def rows_frame(rows: Iterable[dict[str, Any]]):
    """A pandas DataFrame with `ROW_COLUMNS` first, then any other keys (sorted)."""
    import pandas as pd

    rows = list(rows)
    extra = sorted({k for r in rows for k in r} - set(ROW_COLUMNS))
    return pd.DataFrame(rows, columns=ROW_COLUMNS + extra)


def read_table_csv(source: Path | IO[str], **options: Any) -> pd.DataFrame:
    """The sweep table `source` (a path, or its text as a file) as pandas reads it for every reader of a
    sweep table (`verify.table_rows`, ``memsched figures``, the paper figures), `options` passed to
    `pandas.read_csv` (``nrows=0``: the header). Only an empty cell is missing: the cell text ``NA``,
    ``null``, ``None``, ``nan`` or ``N/A`` stays text (pandas' default `na_values` made an instance
    labelled ``NA`` an empty cell, and a number cell ``nan`` pass as nothing, where `valid_row` and
    the figures' checks refuse it as damage: the sweep writes no NaN). `TEXT_COLUMNS` are read as text,
    as the journal holds them (a label ``007`` or a version ``1.10`` stays as written)."""
    import pandas as pd

    return pd.read_csv(source, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=False, na_values=[""],
                       **options)


def write_table(rows: list[dict[str, Any]], out_dir: Path, name: str) -> list[Path]:
    """Write ``<name>.csv`` (and ``.parquet`` with pyarrow) atomically; returns the paths."""
    frame = rows_frame(rows)
    make_folder(out_dir, "the sweep's table")
    written = []
    csv = table_path(out_dir, name)
    _atomic(csv, lambda tmp: frame.to_csv(tmp, index=False))
    written.append(csv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        pq = table_path(out_dir, name, "parquet")
        pframe = frame.copy()
        for col in pframe.columns:  # mixed object columns (None and str) as strings
            if pframe[col].dtype == object:
                pframe[col] = pframe[col].map(lambda v: None if v is None else str(v))
        _atomic(pq, lambda tmp: pframe.to_parquet(tmp, index=False))
        written.append(pq)
    return written


def _atomic(path: Path, write: Callable[[Path], Any]) -> None:
    def durable(tmp: Path) -> None:  # on disk before the rename: a crash leaves the old table or the new
        write(tmp)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())

    write_atomic(path, durable)


def compare_tables(a, b, ignore: Iterable[str] = VOLATILE_COLUMNS):
    """Rows of two sweep tables (DataFrames) without the volatile columns, sorted by key,
    for equality checks; returns the two normalised frames."""
    cols = [c for c in a.columns if c not in set(ignore)]
    na = a[cols].sort_values("key").reset_index(drop=True)
    nb = b[[c for c in cols if c in b.columns]].sort_values("key").reset_index(drop=True)
    return na, nb

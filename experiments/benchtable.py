"""The ends of every benchmark script (`experiments/bench_*.py`): its arguments checked before any
work (`check_out`, `positive`, `guarded`: one line and exit 2 for bad input, one line and exit 130
for Ctrl-C, SIGTERM or SIGHUP), the CSV under results/ (written atomically, so an interrupted run never
leaves half a file) and the table printed beside it.

Resuming (`resumable`, `Resumable`): a bench that collects rows cell by cell (one cell: one solver
run, one measured point) keeps the rows of each cell in ``<out stem>.partial.csv`` beside its table
(`partial_path`) as the cell finishes (appended), never in the table itself, so a complete table is
never replaced by a partial one and a Ctrl-C, a kill or a crash loses at most the cell running; the
same command run again takes the finished cells from that file (only when it was written with the
same settings; a row cut short by a kill or a full disk, or edited since (a value of a kind its column
never held, such as text where a number was written, or bytes that are not UTF-8), is left out with the
rest of its cell, which runs again, and a line on stderr says so; a file whose header was edited is not
resumed), runs the rest, writes the complete table atomically and
removes the partial file. A bench that prints a line per row gives `resumable` its line function (``line``: the
line from the row alone): the rows taken from the partial file are then printed where they belong, as
when they ran, so the printed table of a resumed run is whole. Figures go through `save_figure`,
frames through `write_frame`: both atomic."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal


def guarded(name: str, body: Callable[[], int], *, interrupted: str = "interrupted") -> int:
    """Run a benchmark's `body` (its exit status) as a command: a Ctrl-C prints ``NAME: <interrupted>``
    (say there what was kept, e.g. "interrupted: the rows finished so far are in results/x.csv") and
    returns 130; bad input (`InputError`, raised by the checks below or by the solvers) prints
    ``NAME: error: <message>`` and returns 2. Neither prints a traceback. SIGTERM and SIGHUP (``kill``,
    ``timeout``, a closed terminal) act as a Ctrl-C meanwhile (`cli.terminate_as_interrupt`, as for the
    ``memsched`` commands and main_job; one the caller ignores stays ignored), and an error that came
    with an interrupt (an import it broke) is that interrupt. A Ctrl-C before this handling is in place
    (while a script imports torch, say) is `interrupts.script_main`'s to answer."""
    from memsched.experiments.cli import terminate_as_interrupt
    from memsched.solvers.errors import InputError

    def say(text: str) -> None:
        with contextlib.suppress(KeyboardInterrupt):  # a second interrupt while it is written: the line cut short
            print(text, file=sys.stderr)

    # the answers are printed inside too: a second SIGTERM then cuts the line short, it does not kill silently
    with terminate_as_interrupt() as stopped:
        try:
            try:
                return body()
            except Exception as err:
                if stopped():  # e.g. numpy's ImportError for an interrupted import of its C extension
                    raise KeyboardInterrupt from err
                raise
        except Interrupted as err:  # says itself what was kept (`resumable`)
            say(f"\n{name}: interrupted: {err}")
            return 130
        except KeyboardInterrupt:
            say(f"\n{name}: {interrupted}")
            return 130
        except InputError as err:
            say(f"{name}: error: {err}")
            return 2


def check_out(path: str | Path, field: str = "--out", *, partial: bool = True) -> None:
    """`InputError` (naming `field`) unless `write_csv` can write `path` after the work: not a folder,
    and its nearest existing parent folder is writable (missing folders are created then); with
    `partial`, its partial file (`partial_path`, written and removed by `resumable`) no folder either."""
    from memsched.solvers.errors import InputError

    target = Path(path)
    if str(path) == "" or target.is_dir():
        raise InputError("is a folder, expected a file name" if str(path) else "is empty", path=str(path), field=field)
    if partial and partial_path(target).is_dir():
        raise InputError(f"its partial file {str(partial_path(target))!r} is a folder", path=str(path), field=field)
    folder = target.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InputError(f"folder {str(folder)!r} is not writable", path=str(path), field=field)


def figure_beside(out: str | Path, suffix: str = ".png", field: str = "--out", table: str = ".csv") -> Path:
    """The path of the figure a bench writes beside its table `out`: `out` with `suffix` (``.png``,
    ``.pdf``) for its extension, checked as `check_out` checks `out`. `InputError` naming `field` when
    that is `out` itself (``--out x.png``: the figure would replace the table) or its partial file; the
    message suggests the table's usual extension `table` (``.csv``, ``.json``)."""
    from memsched.solvers.errors import InputError

    out = Path(out)
    fig = out.with_suffix(suffix)
    if fig.absolute() in (out.absolute(), partial_path(out).absolute()):
        raise InputError(f"the figure would be written over the table: give the table a name not ending in {suffix} "
                         f"(e.g. {table})", path=str(out), field=field)
    check_out(fig, field, partial=False)
    return fig


def read_table(path: str | Path, *, field: str = "--out", required: Sequence[str] = (),
               known: Sequence[str] | None = None, of: str = "") -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of the CSV at `path` that a bench reads back (a table it wrote, to resume, merge or
    redraw): every value text, every row with exactly the header's fields. `InputError` naming the file
    and `field` (one line, exit 2 on the command line; raised before any row is returned) when it cannot
    be read, is not UTF-8 or not CSV, has a row with more or fewer fields than its header, lacks a column
    of `required`, or (with `known`) has a column not in `known`; `of` names the bench in those messages
    ("not a CSV of bench_x")."""
    from memsched.solvers.errors import InputError

    def bad(why: str) -> InputError:
        return InputError(why, path=str(path), field=field)

    whose = f" (not a CSV of {of})" if of else ""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as err:
        raise bad(f"cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise bad(f"not UTF-8 text (byte {err.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)  # an open quote at the end too
    try:
        header = next(reader, [])
        records = [(reader.line_num, r) for r in reader if r]
    except csv.Error as err:
        raise bad(f"line {reader.line_num}: not CSV ({err}){whose}") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise bad(f"no column {', '.join(missing)}{whose}")
    extra = [c for c in header if known is not None and c not in known]
    if extra:
        raise bad(f"column {', '.join(map(repr, extra))} is not one of {of or 'the bench'}'s")
    for line, record in records:
        if len(record) != len(header):
            raise bad(f"line {line}: {len(record)} fields, its header has {len(header)}{whose}")
    return header, [dict(zip(header, record)) for _, record in records]


def positive(kind: Callable[[str], Any] = float, *, zero: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: `kind` of the text, refused unless > 0 (>= 0 with `zero`): by the scripts'
    `script_args.ScriptParser`, one line on stderr and exit 2."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value >= 0 if zero else value > 0):  # NaN fails too
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number {'>= 0' if zero else '> 0'}")
        return value

    parse.__name__ = kind.__name__ if hasattr(kind, "__name__") else "number"
    return parse


def write_csv(rows: Iterable[Mapping[str, Any]], path: str | Path, fields: Sequence[str], *,
              extrasaction: Literal["raise", "ignore"] = "raise") -> Path:
    """Write `rows` under the header `fields` to `path` (parents created) through a temporary
    file renamed into place; `extrasaction` as for ``csv.DictWriter``. Returns the path."""
    from memsched.solvers.jsonio import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(fields), extrasaction=extrasaction)
            writer.writeheader()
            writer.writerows(rows)

    write_atomic(path, write)
    return path


def print_and_write_frame(frame: Any, path: str | Path, float_format: Callable[[float], str],
                          width: int | None = None, max_colwidth: int | None = None) -> Path:
    """Print the pandas DataFrame `frame` as a table (floats through `float_format`; pandas'
    display width and column width when given), write it to the CSV `path` and say so."""
    import pandas as pd

    options: list[Any] = []
    if width is not None:
        options += ["display.width", width]
    if max_colwidth is not None:
        options += ["display.max_colwidth", max_colwidth]
    if options:
        with pd.option_context(*options):
            print(frame.to_string(index=False, float_format=float_format))
    else:
        print(frame.to_string(index=False, float_format=float_format))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_frame(frame, out)
    print(f"wrote {out}")
    return out


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C that says what was kept (its text, e.g. "3 finished rows kept in results/x.partial.csv;
    the same command resumes from them"): `guarded` prints it after ``NAME: interrupted:``."""


def partial_path(out: str | Path) -> Path:
    """Where an interrupted run of a bench writing the table `out` keeps its finished rows: beside it,
    ``x.csv`` -> ``x.partial.csv`` (any other name: ``<name>.partial.csv``)."""
    out = Path(out)
    stem = out.name[:-len(".csv")] if out.name.endswith(".csv") else out.name
    return out.with_name(f"{stem}.partial.csv")


#: the first line of a partial file: this text, then a JSON object: the settings of the run (``settings``) and
#: the kinds of value each column holds (``columns``, `_kind`), in the header's order
_SETTINGS_LINE = "# memsched partial table; settings: "

#: the kind of an empty value of a partial file (a row without that field)
_ABSENT = "absent"


def _json(value: Any) -> Any:
    """`value` as JSON can hold it: a numpy scalar as its Python value, anything else unknown as text."""
    return value.item() if hasattr(value, "item") else str(value)


def _text(value: Any) -> str:
    """`value` as a partial file holds it: a text as it is when `_cell` reads it back so (readable),
    anything else (and a text that reads as JSON, is empty or holds a carriage return, which the CSV
    writer would leave unquoted) as JSON."""
    if isinstance(value, str) and value and "\r" not in value:
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, default=_json)


def _cell(text: str) -> Any:
    """A value of a partial file read back (`_text`: JSON, or a text as it is), so a row comes back as it was."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _kind(text: str) -> str:
    """The kind of the value a partial file holds as `text` (`_cell`): ``text``, ``number`` (int or float,
    NaN and infinities too), ``bool``, ``null``, ``other`` (a list or object), or `_ABSENT` (empty)."""
    if text == "":
        return _ABSENT
    value = _cell(text)
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text" if isinstance(value, str) else "null" if value is None else "other"


def _surrogate(text: str) -> bool:
    """Whether `text` holds a byte that was not UTF-8 (decoded with ``surrogateescape``)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _key_part(value: Any) -> str:
    """A cell's key value as compared (1.0 and 1 differ; a number and its text do not)."""
    return str(value)


def _record(values: Sequence[str]) -> str:
    """One record of a partial file as its writer writes it (``csv``'s excel dialect, ``\\n`` ending it)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _records(text: str) -> Iterator[tuple[list[str], bool]]:
    """The CSV records of `text` (a quoted value may span lines), each with whether it is whole: exactly
    the text its writer writes for it (`_record`), newline included. A record cut short (the end of a file
    that a kill or a full disk left: no newline, an open quote) or garbled is not, nor is the rest of a
    text that the ``csv`` module cannot read (one record then). Blank lines are skipped."""
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(lines)
    start = 0
    try:
        for record in reader:
            raw = "".join(lines[start:reader.line_num])
            start = reader.line_num
            if record:
                yield record, raw == _record(record)
    except csv.Error:
        yield [], False


class _Run:
    """Consecutive rows of one cell in a partial file (a cell's rows are written together); `tainted`: a
    damaged record beside them may have been one of them."""

    def __init__(self, key: tuple[str, ...], row: dict[str, Any]) -> None:
        self.key, self.rows, self.tainted = key, [row], False


class Resumable:
    """The rows of one bench run, cell by cell, with those of an interrupted earlier run of the same
    settings (`partial_path`) reused. `rows`: this run's rows in cell order (reused and new); `key`: the
    fields naming a row's cell; `fields`: the partial file's header (None: the rows' keys, first seen
    first). The partial file is a CSV whose first line holds the settings and the kinds of value each
    column holds (`_kind`: text, number, ...; a column's kinds are those of the rows written) and whose
    values are texts as they are and anything else as JSON (`_text`), so that a row read back equals the
    row written: a value of another kind (text where a number was written) is damage, as a cut row is.
    `line`: a bench's printed line of a row, from the row alone (None: the bench prints no line per row);
    `kept` prints the line of each row it takes from the partial file, so that a resumed run prints every
    row (the bench prints those it makes itself). Invariant: it only ever holds whole cells (a cell's rows
    are added at once).

    Each cell's rows reach the partial file as the cell finishes (`add`: one write of those rows at the end
    of the file as last written, so a cell's cost does not grow with the table; the first write of a run,
    or one after a damaged file was read, writes the whole file atomically, replacing that of a run with
    other settings). A kill, an out-of-memory stop or a full disk then loses at most the cell being
    written: a later read leaves its rows out (`_read`)."""

    def __init__(self, out: str | Path, fields: Sequence[str] | None, settings: Mapping[str, Any],
                 key: Sequence[str], line: Callable[[dict[str, Any]], str] | None = None) -> None:
        from memsched.experiments.cli import interrupts_deferred  # imported now: no import while interrupted

        self._deferred = interrupts_deferred
        self.out = Path(out)
        self.partial = partial_path(out)
        self.fields = list(fields) if fields is not None else None
        self.settings = json.dumps(settings, sort_keys=True, default=str)
        self.key = list(key)
        self.line = line
        self.rows: list[dict[str, Any]] = []
        self.reused = 0
        self.bar: Any = None  # a tqdm bar moved by one per cell done (`resumable`'s `progress`)
        # the partial file as this run last wrote (or read) it: its length in bytes, None when it is not known
        # to hold every finished row in whole records (then the next write rewrites it whole), and its header
        self._size: int | None = None
        self._header: list[str] = []
        self._kinds: dict[str, set[str]] = {}  # the kinds of value each column of the file holds (`_kind`)
        self._warned = False  # a write of the partial file failed: said once
        self._kept: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self._resumed = self._read()
        for row in self._resumed:
            self._kept.setdefault(self._key_of(row), []).append(row)

    def _key_of(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(_key_part(row.get(name)) for name in self.key)

    def _read(self) -> list[dict[str, Any]]:
        """The rows of the partial file when it holds this run's settings and fields (a note on stderr
        either way), else none. A damaged record (cut short by a kill or a full disk, more or fewer fields
        than the header, garbled: `_records`; edited: `_edited`) is left out with the rest of its cell (its
        key's rows beside it, or where the cut took the key, the rows of the cells beside it), so that the cell
        runs again;
        a cell found twice counts once (its last whole rows). A line on stderr says how many were left out."""
        if not self.partial.is_file():
            return []
        try:
            data = self.partial.read_bytes()
        except OSError:
            data = b""
        first, _, body = data.decode("utf-8", "surrogateescape").partition("\n")
        records = _records(body)
        header, whole = next(records, ([], False))
        fields = self.fields if self.fields is not None else header
        kinds = self._columns(first)
        if not (whole and kinds is not None and list(kinds) == header and header[:len(fields)] == fields
                and all(name in header for name in self.key)):
            print(f"note: {self.partial} is not from a run with these settings (or its first lines were edited): "
                  "not resumed (this run's first finished cell replaces it)", file=sys.stderr)
            return []
        where = [header.index(name) for name in self.key]
        items: list[_Run | tuple[str, ...] | None] = []  # runs, and damaged records: their key, or None
        for record, whole in records:
            if whole and len(record) == len(header) and not self._edited(record, header, kinds):
                row = {k: _cell(v) for k, v in zip(header, record) if v != ""}
                last = items[-1] if items else None
                if isinstance(last, _Run) and last.key == self._key_of(row):
                    last.rows.append(row)
                else:
                    items.append(_Run(self._key_of(row), row))
            elif len(record) <= len(header) and max(where, default=-1) < len(record) - 1 and not any(
                    self._edited([record[i]], [header[i]], kinds) for i in where):
                # cut (or garbled, or edited) after the key's fields: that cell's rows beside it go too
                items.append(tuple(_key_part(_cell(record[i]) if record[i] else None) for i in where))
            else:
                items.append(None)
        damaged = 0
        for i, item in enumerate(items):
            if isinstance(item, _Run):
                continue
            damaged += 1
            before = next((r for r in reversed(items[:i]) if isinstance(r, _Run)), None)
            after = next((r for r in items[i + 1:] if isinstance(r, _Run)), None)
            for run in (before, after):
                if run is not None and (item is None or run.key == item):
                    run.tainted = True
        chosen: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        runs = [item for item in items if isinstance(item, _Run)]
        for run in runs:
            if run.tainted:
                damaged += len(run.rows)
            else:
                chosen.pop(run.key, None)  # a later whole occurrence of the cell wins
                chosen[run.key] = run.rows
        rows = [row for cell in chosen.values() for row in cell]
        if damaged:
            print(f"note: {self.partial}: {damaged} damaged rows left out (a row cut short by a kill or a full "
                  "disk, garbled or edited, and the rest of its cell): their cells run again", file=sys.stderr)
        elif len(chosen) == len(runs):  # whole and each cell once: this run's rows go on after them
            self._size, self._header, self._kinds = len(data), header, kinds
        print(f"resuming from {self.partial} ({len(rows)} finished rows)", file=sys.stderr)
        return rows

    def _first_line(self, kinds: Mapping[str, set[str]]) -> str:
        """The settings line of a partial file whose columns hold `kinds` (`_SETTINGS_LINE`), newline included."""
        columns = json.dumps({k: sorted(v) for k, v in kinds.items()})
        return f'{_SETTINGS_LINE}{{"settings": {self.settings}, "columns": {columns}}}\n'

    def _columns(self, first: str) -> dict[str, set[str]] | None:
        """The kinds of each column that the settings line `first` gives, None unless it holds this run's settings
        (and is whole)."""
        start = f'{_SETTINGS_LINE}{{"settings": {self.settings}, "columns": '
        if not (first.startswith(start) and first.endswith("}")):
            return None
        try:
            columns = json.loads(first[len(start):-1])
        except ValueError:
            return None
        if not (isinstance(columns, dict) and all(isinstance(v, list) for v in columns.values())):
            return None
        return {k: set(map(str, v)) for k, v in columns.items()}

    @staticmethod
    def _edited(record: Sequence[str], header: Sequence[str], kinds: Mapping[str, set[str]]) -> bool:
        """Whether a record's values are not as this run's writer wrote them: a byte that is not UTF-8, or a value of
        a kind its column never held (text where a number was written, an empty value where every row had one)."""
        return any(_surrogate(v) or _kind(v) not in kinds.get(k, ()) for k, v in zip(header, record))

    def kept(self, *values: Any) -> list[dict[str, Any]] | None:
        """The rows of the cell named by `values` (in `key` order) that an interrupted run finished,
        now added to `rows` (and their lines printed, with `line`), else None (the cell is to be run; its
        rows go to `add`)."""
        found = self._kept.pop(tuple(_key_part(v) for v in values), None)
        if found is not None:
            self.rows.extend(found)
            self.reused += len(found)
            if self.line is not None:
                for row in found:
                    print(self.line(row), flush=True)
            if self.bar is not None:
                self.bar.update()
        return found

    def take_all(self) -> list[dict[str, Any]] | None:
        """For a bench that keeps its whole table in the partial file (rewriting it with `keep` as it
        goes): every row that file holds, in its order (now `rows`), else None (none to resume)."""
        if not self._resumed:
            return None
        self.rows = list(self._resumed)
        self.reused = len(self.rows)
        self._kept.clear()
        return list(self.rows)

    def add(self, *rows: dict[str, Any]) -> None:
        """Add one finished cell's rows (all of them at once: the partial file keeps whole cells), and
        write them to the partial file (`Resumable`: appended; a Ctrl-C meanwhile waits until they are
        written). A failed write (a full disk) is said once on stderr and does not stop the run: the next
        cell's write rewrites the whole file."""
        from memsched.solvers.errors import InputError

        self.rows.extend(rows)
        try:
            with self._deferred():
                self._append(rows)
        except (OSError, InputError) as err:
            self._size = None
            if not self._warned:
                self._warned = True
                print(f"note: cannot write {self.partial} ({err}): its finished rows are kept in memory only "
                      "until a write succeeds", file=sys.stderr)
        if self.bar is not None:
            self.bar.update()

    def _append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write `rows` after the partial file's last whole record; the whole file (`keep`) when it is not
        this run's to append to (`_size` None) or a row has a field its header lacks."""
        size = self._size
        if size is None or any(k not in self._header for row in rows for k in row):
            self.keep()
            return
        data, kinds = self._encode(rows, self._header)
        if any(not kinds[k] <= self._kinds.get(k, set()) for k in kinds):  # a kind its first line does not name
            self.keep()
            return
        self._size = None  # until the rows are written
        with self.partial.open("r+b") as fh:
            fh.seek(size)
            fh.write(data)
            fh.truncate()  # bytes of a write that failed part way, if any
        self._size = size + len(data)

    @staticmethod
    def _encode(rows: Iterable[Mapping[str, Any]], header: Sequence[str]) -> tuple[bytes, dict[str, set[str]]]:
        """`rows` as records of a partial file with `header` (a missing value: empty), UTF-8, and the kinds of
        value each column of them holds (`_kind`: what `_read` accepts back)."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(header), lineterminator="\n")
        kinds: dict[str, set[str]] = {k: set() for k in header}
        for row in rows:
            texts = {k: _text(v) for k, v in row.items()}  # `_text`, so that None, "" and 1 / "1" come back apart
            for k in header:
                kinds[k].add(_kind(texts.get(k, "")))
            writer.writerow(texts)
        return buf.getvalue().encode("utf-8", "surrogateescape"), kinds

    def cell(self, key: Sequence[Any], make: Callable[[], dict[str, Any] | list[dict[str, Any]]]
             ) -> list[dict[str, Any]]:
        """The rows of the cell named by `key` (`key` order): those kept, else ``make()`` (a row or a
        list of rows), added."""
        found = self.kept(*key)
        if found is None:
            made = make()
            found = [made] if isinstance(made, dict) else list(made)
            self.add(*found)
        return found

    def unvisited(self) -> list[dict[str, Any]]:
        """The rows of the earlier run's cells that this run has not reached yet (still finished work)."""
        return [row for rows in self._kept.values() for row in rows]

    def finished(self) -> int:
        """How many finished rows the partial file holds: this run's and the earlier run's not reached yet."""
        return len(self.rows) + len(self.unvisited())

    def keep(self) -> Path:
        """Write the whole partial file (atomically, the settings line first): `rows`, then those of the
        earlier run's cells not reached yet (`unvisited`: a cell rerun before them, one that had left no
        row, must not drop them); returns its path. `add` does it when needed; a bench that changes rows
        it added (or sets `rows`) calls it to write them."""
        from memsched.solvers.jsonio import write_atomic

        rows = [*self.rows, *self.unvisited()]
        fields = list(dict.fromkeys([*(self.fields or ()), *(k for r in rows for k in r)]))  # extras kept too
        body, kinds = self._encode(rows, fields)
        data = (self._first_line(kinds) + _record(fields)).encode("utf-8", "surrogateescape") + body
        self._size = None
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        path = write_atomic(self.partial, lambda tmp: tmp.write_bytes(data))
        self._size, self._header, self._kinds = len(data), fields, kinds
        return path


def _file_state(path: Path) -> tuple[int, ...] | None:
    """What tells whether the file `path` was (re)written since: its device, inode, size and modification
    time (ns; an atomic write renames a new file into place, so the inode changes too), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def resumable(out: str | Path, fields: Sequence[str] | None, settings: Mapping[str, Any], key: Sequence[str],
              *, bar: str | None = None, total: int | None = None,
              line: Callable[[dict[str, Any]], str] | None = None) -> Iterator[Resumable]:
    """A `Resumable` for the bench writing the table `out` (`settings`: JSON-able, whatever changes the
    rows; `key`: the fields naming a cell). Write the complete table inside the block: leaving it
    normally removes the partial file. The rows of each cell finished inside are in the partial file as
    soon as it finishes (`Resumable.add`), so that a Ctrl-C, a kill or a crash keeps them there, not in
    `out` (which stays as it was, unless the block had written it already: the Ctrl-C message then says
    so); a Ctrl-C goes on as an `Interrupted` saying where they are (`guarded` prints it); with none
    finished, any earlier partial file stays as it was. `bar`: the label of a progress bar on stderr
    (`progress`) counting the cells done (of `total` when given). `line`: the bench's printed line of a row
    (`Resumable`: the rows taken from the partial file are printed too)."""
    from memsched.experiments.cli import interrupts_deferred  # imported now: no import while interrupted

    table = Resumable(out, fields, settings, key, line)
    before = _file_state(table.out)
    try:
        if bar is not None:
            table.bar = progress(desc=bar, total=total)
        yield table
    except KeyboardInterrupt:
        try:
            with interrupts_deferred():  # a second Ctrl-C waits until the partial file is in place
                if table.bar is not None:
                    table.bar.close()
                # the block may have written the complete table before the Ctrl-C (e.g. while a figure was drawn)
                state = (f"{table.out} was written before the interrupt" if _file_state(table.out) != before
                         else f"{table.out} is unchanged")
                if table.rows and table._size is None:  # not all in the file yet (a failed write, or `rows` set)
                    table.keep()
        except KeyboardInterrupt:
            pass
        if not table.rows:
            left = len(table.unvisited())
            kept = f"; {table.partial} still holds {left} finished rows" if left else ""
            raise Interrupted(f"nothing finished; {state}{kept}") from None
        raise Interrupted(f"{table.finished()} finished rows kept in {table.partial} ({state}); "
                          "the same command resumes from them") from None
    finally:
        if table.bar is not None:
            table.bar.close()
    table.partial.unlink(missing_ok=True)


def progress(iterable: Iterable[Any] | None = None, *, desc: str, total: int | None = None,
             unit: str = "cell") -> Any:
    """A tqdm progress bar on stderr (`desc`; `total` steps of `unit`, None: counted only) over
    `iterable`, or to move by hand (``.update()``) without one; also a context manager that closes
    it. Left on screen only while it runs."""
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)


def write_frame(frame: Any, path: str | Path, **to_csv: Any) -> Path:
    """Write the pandas DataFrame `frame` to the CSV `path` (parents created; no index unless
    ``index=True`` is passed; other `to_csv` options as pandas') through a temporary file renamed into
    place: a failure or Ctrl-C leaves the old file. Returns the path."""
    from memsched.solvers.jsonio import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    to_csv.setdefault("index", False)
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, **to_csv))


def save_figure(fig: Any, path: str | Path, **savefig: Any) -> Path:
    """Save the matplotlib figure `fig` to `path` (format from its suffix unless ``format`` is given;
    other `savefig` options as matplotlib's, e.g. ``dpi``): drawn in memory first, then written through
    a temporary file renamed into place, so a failure or Ctrl-C leaves the old file. Returns the path."""
    import io

    from memsched.solvers.jsonio import write_atomic

    path = Path(path)
    savefig.setdefault("format", path.suffix.lstrip(".") or None)
    buf = io.BytesIO()
    fig.savefig(buf, **savefig)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, lambda tmp: tmp.write_bytes(buf.getvalue()))


def settings_of(args: argparse.Namespace, *omit: str) -> dict[str, Any]:
    """A bench's options as `resumable` settings: every argument but the output paths (``out``,
    ``output``, ``figure``) and `omit` (those that do not change the rows)."""
    skip = {"out", "output", "figure", *omit}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip}

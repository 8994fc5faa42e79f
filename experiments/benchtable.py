"""The ends of every benchmark script (`experiments/bench_*.py`): its arguments checked before any
work (`check_out`, `positive`, `guarded`: one line and exit 2 for bad input, one line and exit 130
for Ctrl-C), the CSV under results/ (written atomically, so an interrupted run never leaves half a
file) and the table printed beside it."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal


def guarded(name: str, body: Callable[[], int], *, interrupted: str = "interrupted") -> int:
    """Run a benchmark's `body` (its exit status) as a command: a Ctrl-C prints ``NAME: <interrupted>``
    (say there what was kept, e.g. "interrupted: the rows finished so far are in results/x.csv") and
    returns 130; bad input (`InputError`, raised by the checks below or by the solvers) prints
    ``NAME: error: <message>`` and returns 2. Neither prints a traceback."""
    from memsched.solvers.errors import InputError

    try:
        return body()
    except KeyboardInterrupt:
        print(f"\n{name}: {interrupted}", file=sys.stderr)
        return 130
    except InputError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2


def check_out(path: str | Path, field: str = "--out") -> None:
    """`InputError` (naming `field`) unless `write_csv` can write `path` after the work: not a folder,
    and its nearest existing parent folder is writable (missing folders are created then)."""
    from memsched.solvers.errors import InputError

    target = Path(path)
    if str(path) == "" or target.is_dir():
        raise InputError("is a folder, expected a file name" if str(path) else "is empty", path=str(path), field=field)
    folder = target.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InputError(f"folder {str(folder)!r} is not writable", path=str(path), field=field)


@contextlib.contextmanager
def kept_on_interrupt(rows: list[dict[str, Any]], path: str | Path, fields: Sequence[str] | None = None
                      ) -> Iterator[list[dict[str, Any]]]:
    """Inside, a Ctrl-C writes the rows finished so far (`rows`, filled by the body) to `path` under
    `fields` (default: the first row's keys) before the interrupt goes on; with none finished the file
    stays as it was (`guarded` then prints the one line and returns 130)."""
    try:
        yield rows
    except KeyboardInterrupt:
        if rows:
            write_csv(rows, path, list(fields) if fields is not None else list(rows[0]))
        raise


def rows_in_scratch(prefix: str, measure: Callable[[Path, list[dict[str, Any]]], None], path: str | Path,
                    fields: Sequence[str]) -> list[dict[str, Any]]:
    """The rows `measure(work, rows)` appends, run in a fresh scratch folder `work` (name starting with
    `prefix`, removed after, whatever happens); a Ctrl-C writes the rows finished so far to `path`
    under `fields` first (`kept_on_interrupt`)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    rows: list[dict[str, Any]] = []
    try:
        with kept_on_interrupt(rows, path, fields):
            measure(work, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


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
    frame.to_csv(out, index=False)
    print(f"wrote {out}")
    return out

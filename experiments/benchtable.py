"""The output end of every benchmark script (`experiments/bench_*.py`): the CSV under results/
(written atomically, so an interrupted run never leaves half a file) and the table printed beside it."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal


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

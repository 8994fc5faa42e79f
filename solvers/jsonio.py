"""Reading and writing the JSON files of every problem, with one-line errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import InputError


def read_json(path: str | Path) -> Any:
    """The parsed content of `path`; a missing or unreadable file or invalid JSON is an
    `InputError` naming the file (and the line and column for JSON errors)."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", path=path) from None
    except OSError as err:
        raise InputError(f"cannot read ({err.strerror})", path=path) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON at line {err.lineno} column {err.colno}: {err.msg}", path=path) from None


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 1) -> None:
    """Write `data` to a temporary file beside `path`, then rename it into place: a reader
    never sees half a file, and a crash leaves the old file intact."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent) + "\n")
    tmp.replace(path)

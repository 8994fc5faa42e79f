"""Reading and writing the JSON files of every problem, with one-line errors naming the file.

`read_text` is the one place that reads an input file: it turns every failure (missing,
a folder, unreadable, not UTF-8) into an `InputError` naming the file, and it reads a pipe
(``<(cmd)``, ``/dev/stdin``, or ``-`` for standard input) once, keeping its text so that a
second read of the same path (format detection, then loading) sees the same content.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

from .errors import InputError

#: text of the pipes already read, by path (a pipe can be read only once)
_PIPES: dict[str, str] = {}


def is_stream(path: str | Path) -> bool:
    """True for ``-`` (standard input) and for paths that are pipes or character devices."""
    if str(path) == "-":
        return True
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of `path` (``-`` is standard input). A missing file, a folder, an
    unreadable file or bytes that are not UTF-8 are an `InputError` naming the file; a pipe is
    read once and its text kept for the next call with the same path."""
    path = str(path)
    if path in _PIPES:
        return _PIPES[path]
    stream = is_stream(path)
    try:
        if path == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", path=path) from None
    except OSError as err:
        raise InputError(f"cannot read ({err.strerror})", path=path) from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is dropped
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})", path=path) from None
    if stream:
        _PIPES[path] = text
    return text


def read_json(path: str | Path) -> Any:
    """The parsed content of `path` (see `read_text`); a missing or unreadable file, bytes that
    are not UTF-8 or invalid JSON are an `InputError` naming the file (and the line and column
    for JSON errors)."""
    path = str(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON at line {err.lineno} column {err.colno}: {err.msg}", path=path) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path=path) from None


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 1) -> None:
    """Write `data` to a temporary file beside `path`, then rename it into place: a reader
    never sees half a file, and a crash leaves the old file intact."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent) + "\n")
    tmp.replace(path)

"""Reading and writing the JSON files of every problem, with one-line errors naming the file.

`read_text` is the one place that reads an input file: it turns every failure (missing,
a folder, unreadable, not UTF-8) into an `InputError` naming the file, and it reads a pipe
(``<(cmd)``, ``/dev/stdin``, or ``-`` for standard input) once, keeping its text so that a
second read of the same path (format detection, then loading) sees the same content.
`parse_json` is the one JSON parse of the loaders (`read_json`, and the loaders that read the
text first): every failure is an `InputError` naming the file. `warn_unknown` is how every loader
reports a key it does not read (an `UnknownFieldWarning`: the file still loads).
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import sys
import tempfile
import warnings
from collections.abc import Callable, Collection
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from .errors import InputError


class UnknownFieldWarning(UserWarning):
    """A key of an instance file that its loader does not read (a misspelt optional field would
    otherwise fall back to its default in silence); the file loads all the same, the key ignored.
    The message is one line: ``<file>: <JSON path>.<key> is not a field of <what> (ignored; did
    you mean <close match>?)``. The command line prints it as ``memsched <cmd>: warning: ...``."""


def warn_unknown(obj: dict[str, Any], accepted: Collection[str], path: str, where: str, what: str, *,
                 near_only: bool = False) -> None:
    """One `UnknownFieldWarning` per key of the JSON object `obj` (at the JSON path `where` of the
    file `path`; "" for the top level) that is not among `accepted`, the keys its loader reads,
    with the closest of them as a suggestion (`difflib.get_close_matches`). `what` names the
    object ("a chain stage"). With `near_only` (a free-form object, ``meta``, of which the loader
    reads a few keys; `what` then names the reader, "the chain loader") only keys close to an
    accepted one (ratio >= 0.8) are reported. Keys are
    reported in the file's order; prints nothing itself (solvers/ never prints)."""
    if obj.keys() <= set(accepted):  # the common case, cheap on a graph of 20,000 nodes
        return
    for key in obj:
        if key in accepted:
            continue
        close = get_close_matches(key, list(accepted), n=1, cutoff=0.8 if near_only else 0.6)
        if near_only and not close:
            continue
        shown = key if key.isprintable() and 0 < len(key) <= 80 else repr(key)[:80]
        place = where if where.isprintable() else repr(where)[1:-1]  # a stage name's newline: still one line
        at = f"{place}.{shown}" if where else shown
        hint = f"; did you mean {close[0]}?" if close else ""
        text = (f"{at} is not read by {what} (ignored{hint})" if near_only
                else f"{at} is not a field of {what} (ignored{hint})")
        warnings.warn(f"{path}: {text}", UnknownFieldWarning, stacklevel=3)


def warns_once_loaded(load: Callable[..., Any]) -> Callable[..., Any]:
    """`load` (a loader) with the `UnknownFieldWarning`s it gives held back until it returns: a file that
    does not load gives its one error line only, never warnings about the keys of a file it could not read
    (a chain file read as a graph warned about six top-level keys, then failed). Other warnings pass as
    they came; nested loaders (an offload instance's chain) hand theirs to the outer one."""

    @functools.wraps(load)
    def loaded(*args: Any, **kwargs: Any) -> Any:
        failure: BaseException | None = None
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("always")
            try:
                out = load(*args, **kwargs)
            except BaseException as err:  # Ctrl-C included: raised again below, as it came
                failure = err
        for w in held:
            if failure is None or not issubclass(w.category, UnknownFieldWarning):
                warnings.warn(w.message, stacklevel=2)
        if failure is not None:
            raise failure
        return out

    return loaded


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
    for JSON errors, `parse_json`)."""
    path = str(path)
    return parse_json(read_text(path), path)


def parse_json(text: str, path: str | Path) -> Any:
    """The parsed JSON `text` of the file `path`, the one JSON parser of every loader: invalid JSON
    (with its line and column), nesting too deep for Python's parser, an integer of more than
    4300 digits (Python's limit) and a string (key or value) that is not valid Unicode (a lone
    surrogate escape such as ``"\\ud800"``: valid JSON that no UTF-8 output can hold; `check_unicode`)
    are each a one-line `InputError` naming `path`, never another error."""
    path = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON at line {err.lineno} column {err.colno}: {err.msg}", path=path) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path=path) from None
    except ValueError:  # json's only other failure: an integer of more than 4300 digits (Python's limit)
        raise InputError("invalid JSON: a number of more than 4300 digits", path=path) from None
    if _may_hold_surrogates(text):
        check_unicode(data, path)
    return data


#: a JSON escape of a UTF-16 surrogate (\ud800 to \udfff), the only way a lone one gets into parsed text
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _may_hold_surrogates(text: str) -> bool:
    """False when the parsed `text` surely holds no surrogate: it encodes as UTF-8 and has no
    surrogate escape (a cheap test that spares large files the walk of `check_unicode`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return _SURROGATE_ESCAPE.search(text) is not None


def check_unicode(data: Any, path: str) -> None:
    """`InputError` naming `path` and the JSON path (``nodes[3].id``) of the first string, key or
    value, of the parsed `data` that cannot be encoded as UTF-8 (a lone surrogate: it would crash
    every output later). Walks on an explicit stack (no recursion limit)."""
    stack: list[tuple[Any, str, bool]] = [(data, "", False)]  # (item, its JSON path, whether it is a key)
    while stack:
        item, where, is_key = stack.pop()
        if isinstance(item, str):
            _check_string(item, path, where or None, f"the key {item!r}" if is_key else "the string")
        elif isinstance(item, dict):
            for key, value in reversed(list(item.items())):  # pushed backwards: popped in the file's order
                stack.append((value, f"{where}.{key}" if where else str(key), False))
                stack.append((key, where, True))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{k}]", False) for k, value in reversed(list(enumerate(item))))


def _check_string(text: str, path: str, where: str | None, what: str) -> None:
    """`InputError` at `where` when `text` (described as `what`) cannot be encoded as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = ord(text[err.start])
        raise InputError(f"{what} holds a lone surrogate \\u{bad:04x}, which is not valid Unicode",
                         path=path, field=where) from None


#: the most bytes of the target's name kept in its temporary file's name (``.<name>.XXXXXXXX.tmp``): with
#: the dots, mkstemp's 8 random characters and ``.tmp`` (14 bytes) it stays within a file name's 255 bytes
#: (NAME_MAX), so that a legal name of 242 to 255 bytes is written too (its temporary name is truncated)
TMP_NAME_BYTES = 230


def check_holds_schedule(data: Any, path: str, body: str) -> None:
    """`InputError` naming `path` and its ``schedule`` field when `data` is a result object (``memsched
    solve --json`` or ``partition --json``) of an infeasible or timed-out run, whose ``schedule`` is null,
    and holds no schedule body of its own (`body`: ``ops``, ``sequence`` or ``stages``, absent or empty)."""
    if isinstance(data, dict) and "schedule" in data and data["schedule"] is None and not data.get(body):
        raise InputError(f"holds no schedule (status {data.get('status')!r})", path=path, field="schedule")


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Write a file at `path` with ``write(tmp)`` into a fresh temporary file beside it, then
    rename that into place: a reader never sees half a file, and a failure leaves the old file
    intact. A link is followed (the file it names is replaced, the link stays); a target that is
    not a regular file (``/dev/null``, a pipe, also behind a link: ``/dev/stdout``, ``/dev/fd/63``
    of ``-o >(cmd)``) is written directly at `path`, never replaced. The temporary file's name
    (`tmp_prefix`) stays within 255 bytes whatever the target's. The new file gets the old file's
    permissions, else the usual ones (0666 less the umask). Returns the path written; a folder that
    refuses the file is an `InputError` naming `path`."""
    given = Path(path)
    try:
        if _is_special(given):  # a device or a pipe: nothing to replace (os.stat follows /dev/fd links)
            write(given)
            return given
        target = Path(os.path.realpath(given)) if given.is_symlink() else given
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=tmp_prefix(target.name), suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
        try:
            write(tmp)
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as err:
        raise InputError(f"cannot write ({err.strerror or err})", path=str(given)) from None
    return target


def _is_special(path: Path) -> bool:
    """True when `path`, links followed, exists and is no regular file: a device or a pipe, written
    directly (a folder too: writing it fails, naming it). ``os.stat``, not `os.path.realpath`: a
    ``/dev/fd`` link to a pipe resolves to ``/proc/PID/fd/pipe:[N]``, which names no file."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing (a new file), a link loop, a NUL in the name
        return False
    return not stat.S_ISREG(mode)


def tmp_prefix(name: str) -> str:
    """The prefix ``.<name>.`` of the temporary file written beside the file `name`, its name cut to
    `TMP_NAME_BYTES` bytes (as the file system counts them, `os.fsencode`) when longer."""
    raw = os.fsencode(name)
    if len(raw) > TMP_NAME_BYTES:
        name = os.fsdecode(raw[:TMP_NAME_BYTES])  # a character cut in two: its bytes stay bytes (surrogateescape)
    return f".{name}."


def write_text_atomic(path: str | Path, text: str) -> Path:
    """`write_atomic` of UTF-8 `text`."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 1) -> Path:
    """`write_atomic` of `data` as JSON (one trailing newline)."""
    return write_text_atomic(path, json.dumps(data, indent=indent) + "\n")


def _umask() -> int:
    """The process's file-creation mask (read by setting it, then set back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask

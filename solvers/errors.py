"""Errors shared by every problem of memsched.

They carry enough context (file, field) for the command line to print one clear line
and exit with the codes of docs/cli.md: 2 for bad input, 1 for an infeasible budget.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any


class InputError(ValueError):
    """A bad instance, schedule or option; `str(err)` is a complete one-line message."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None):
        self.message = message  # without the "path: field: " prefix
        self.path = path
        self.field = field
        where = ""
        if path is not None:
            where = f"{path}: "
        if field is not None:
            where += f"{field}: "
        super().__init__(f"{where}{message}")


def article(word: str) -> str:
    """`word` after its indefinite article, for messages: "an offload", "a chain"."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def first_line(err: BaseException, width: int = 200) -> str:
    """The first line of an error's message, at most `width` characters (torch's messages run to
    many lines; a message of bad input is one line)."""
    text = str(err).strip()
    return text.splitlines()[0][:width] if text else ""


#: How messages spell the arguments of the call being checked: "cli" (``--time-limit``, ``--option
#: scale``; the default, for the command line) or "python" (``time_limit``, ``scale``: the keyword
#: arguments of memsched's facade, set by `python_spelling`).
_SPELLING: contextvars.ContextVar[str] = contextvars.ContextVar("memsched_spelling", default="cli")


@contextlib.contextmanager
def python_spelling() -> Iterator[None]:
    """Inside, `flag` and `option_field` spell arguments as Python does (the facade, `memsched.api`)."""
    token = _SPELLING.set("python")
    try:
        yield
    finally:
        _SPELLING.reset(token)


def flag(name: str, value: Any = None) -> str:
    """Argument `name` (its Python spelling, ``time_limit``) as the caller wrote it, for a message's
    field or hint: ``--time-limit`` on the command line, ``time_limit`` in Python
    (`python_spelling`); with a `value`, ``--slots 500`` or ``slots=500``."""
    if _SPELLING.get() == "python":
        return name if value is None else f"{name}={value!r}"
    dashed = "--" + name.replace("_", "-")
    return dashed if value is None else f"{dashed} {value}"


def option_field(key: str, value: Any = None) -> str:
    """Solver option `key` as the caller wrote it: ``--option scale`` (``--option scale=2``) on the
    command line, the keyword argument ``scale`` (``scale=2``) of `memsched.solve` in Python."""
    if _SPELLING.get() == "python":
        return key if value is None else f"{key}={value!r}"
    return f"--option {key}" if value is None else f"--option {key}={value}"


class InfeasibleError(RuntimeError):
    """No schedule fits the budget. `min_budget` is the smallest feasible budget when known."""

    def __init__(self, message: str, *, min_budget: int | None = None):
        self.min_budget = min_budget
        if min_budget is not None:
            message = f"{message} (smallest feasible budget: {min_budget} bytes)"
        super().__init__(message)

"""Errors shared by every problem of memsched.

They carry enough context (file, field) for the command line to print one clear line
and exit with the codes of docs/cli.md: 2 for bad input, 1 for an infeasible budget.
"""

from __future__ import annotations


class InputError(ValueError):
    """A bad instance, schedule or option; `str(err)` is a complete one-line message."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None):
        self.path = path
        self.field = field
        where = ""
        if path is not None:
            where = f"{path}: "
        if field is not None:
            where += f"{field}: "
        super().__init__(f"{where}{message}")


def first_line(err: BaseException, width: int = 200) -> str:
    """The first line of an error's message, at most `width` characters (torch's messages run to
    many lines; a message of bad input is one line)."""
    text = str(err).strip()
    return text.splitlines()[0][:width] if text else ""


class InfeasibleError(RuntimeError):
    """No schedule fits the budget. `min_budget` is the smallest feasible budget when known."""

    def __init__(self, message: str, *, min_budget: int | None = None):
        self.min_budget = min_budget
        if min_budget is not None:
            message = f"{message} (smallest feasible budget: {min_budget} bytes)"
        super().__init__(message)

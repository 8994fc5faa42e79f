"""Parsing of sizes, budgets and bandwidths given by users ("1.5GB", "800MiB", "60%", "12GB/s").

Decimal units (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB) powers
of 1024. A plain number is bytes. A budget may also be a percentage of a reference peak
(the store-all peak for chains, the given-order peak for graphs).
"""

from __future__ import annotations

import math
import re

from .errors import InputError

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float, *, field: str = "size") -> int:
    """Bytes in `text` ("1500000000", "1.5GB", "800MiB"), rounded down to an integer."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0 or not math.isfinite(text):
            raise InputError(f"must be a non-negative number of bytes, got {text!r}", field=field)
        return int(text)
    match = _SIZE.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise InputError(
            f"cannot read {text!r} as a size (examples: 1500000000, 1.5GB, 800MiB)", field=field
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def parse_budget(text: str | int | float, reference: int | None, *, field: str = "--budget") -> int:
    """Budget in bytes. "X%" means X percent of `reference` (the store-all peak, say)."""
    if isinstance(text, str) and text.strip().endswith("%"):
        try:
            percent = float(text.strip()[:-1])
        except ValueError:
            raise InputError(f"cannot read {text!r} as a percentage", field=field) from None
        if percent < 0 or not math.isfinite(percent):
            raise InputError(f"percentage must be non-negative, got {text!r}", field=field)
        if reference is None:
            raise InputError("a percentage budget needs a reference peak", field=field)
        return int(math.floor(reference * percent / 100.0))
    return parse_size(text, field=field)


def parse_bandwidth(text: str | int | float, *, field: str = "--bandwidth") -> float:
    """Bytes per second in `text` ("12GB/s", "25e9", "800MiB/s")."""
    if isinstance(text, str) and text.strip().lower().endswith("/s"):
        text = text.strip()[:-2]
    value = parse_size(text, field=field)
    if value <= 0:
        raise InputError("bandwidth must be positive", field=field)
    return float(value)


def format_bytes(n: float) -> str:
    """Human form of a size in bytes, binary units (for tables and messages)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"

"""Parsing of sizes, budgets and bandwidths given by users ("1.5GB", "800MiB", "60%", "12GB/s").

Decimal units (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB) powers
of 1024. A plain number is bytes. A budget may also be a percentage of a reference peak
(the store-all peak for chains, the given-order peak for graphs).

Limits: every size, budget and bandwidth is at most `MAX_BYTES` (1 PiB) and every time in a
file at most `MAX_TIME` (in the file's time unit), so that sums over an instance stay exact in
int64 and finite in float64; `check_number` applies them to the numbers read from files.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .errors import InputError, flag

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
#: largest size, budget or bandwidth accepted (bytes; bytes/s): 1 PiB, far above any device
MAX_BYTES = 2**50
#: bytes per memory unit an instance file may name (``meta.units.memory``, case-insensitive):
#: the schedule figure and the facade's summaries scale sizes by it
MEMORY_UNIT_BYTES = {"bytes": 1, "byte": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
                     "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
#: the byte units of `MEMORY_UNIT_BYTES` as messages name them (case-insensitive in a file)
ACCEPTED_MEMORY_UNITS = "bytes, kB, MB, GB, TB, KiB, MiB, GiB, TiB"
#: byte units too large for an instance file's sizes (lower case): one of them is 10^15 bytes or more, about the
#: 1 PiB that bounds every size (`MAX_BYTES`), so `MEMORY_UNIT_BYTES` stops at TB / TiB
TOO_LARGE_MEMORY_UNITS = frozenset(f"{p}{i}b" for p in "pezyrq" for i in ("", "i"))
#: largest time accepted in a file (its time unit): sums over 10^6 operations stay finite
MAX_TIME = 1e15
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float, *, field: str = "size") -> int:
    """Bytes in `text` ("1500000000", "1.5GB", "800MiB"), rounded down to an integer; a string is converted
    exactly ("33.3MB" is 33300000 bytes, not the float product's 33299999)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0 or (isinstance(text, float) and math.isnan(text)):  # (math.isfinite overflows on huge ints)
            raise InputError(f"must be a non-negative number of bytes, got {short_number(text)}", field=field)
        if text > MAX_BYTES:  # infinity and integers of any size included
            raise InputError(f"{short_number(text)} is too large (at most {MAX_BYTES} bytes, 1 PiB)", field=field)
        return int(text)
    match = _SIZE.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise InputError(
            f"cannot read {text!r} as a size (examples: 1500000000, 1.5GB, 800MiB)", field=field
        )
    return _at_most(_exact_floor(match.group(1), _UNITS[match.group(2).lower()]), text, field)


def _exact_floor(number: str, unit: int) -> int:
    """floor(`number` x `unit`) computed exactly (`number` a decimal string of `_SIZE`, `unit` bytes per unit):
    "33.3" x 10^6 is 33300000, where the float product is 33299999.999... Values beyond `MAX_BYTES` come back
    as something above it (the caller refuses them) without building the integer of a huge exponent ("1e400")."""
    approx = float(number) * unit
    if not approx <= 2 * MAX_BYTES:  # inf included: too large, whatever the exact value
        return 2 * MAX_BYTES + 1
    if approx == 0.0:  # zero, or below the smallest float ("1e-400"): less than a byte either way
        return 0
    # here |exponent| is bounded by the digits written (the value is within float range), so Fraction is cheap
    return math.floor(Fraction(number) * unit)


def _at_most(value: int, text: object, field: str) -> int:
    if value > MAX_BYTES:
        raise InputError(f"{text!r} is too large (at most {MAX_BYTES} bytes, 1 PiB)", field=field)
    return value


def memory_unit(instance: Any) -> str | None:
    """The unit of an instance's sizes, ``meta["units"]["memory"]`` ("KiB", "MB", ...), or None
    (bytes). An offloading instance has no meta of its own: its chain's states the unit."""
    meta = getattr(instance, "meta", None)
    if meta is None:
        meta = getattr(getattr(instance, "chain", None), "meta", None)
    return meta_memory_unit(meta)


def meta_memory_unit(meta: Any) -> str | None:
    """``units.memory`` of a file's or an instance's `meta` object ("KiB", "slots"), or None (bytes) when
    it names none (no ``units``, no ``memory``, or `meta` no object)."""
    units = meta.get("units") if isinstance(meta, dict) else None
    unit = units.get("memory") if isinstance(units, dict) else None
    return str(unit) if unit else None


#: the time unit of a chain, join or offloading file whose ``meta.units.time`` names none (docs/chain.md,
#: join.md, offload.md: ms); a graph's costs (``cost_cpu``: "the file's unit (ms, MFLOP, ...)", docs/graph.md)
#: have no default unit and stay unnamed, as in its schedule figures (`experiments.plotting.timeline.units_of`)
DEFAULT_TIME_UNIT = "ms"


def time_unit(problem: str, instance: Any) -> str | None:
    """The unit of `instance`'s times, hence of its objective (a makespan, a pipeline's period), read as
    `problem`, as its schedule figures name it: ``meta.units.time`` when the file states one (an offloading
    instance's chain's; a join that states none: its first branch's), else `DEFAULT_TIME_UNIT` for a chain,
    join or offloading instance; a pipeline's unit of ``time_unit`` seconds by its name ("ms" for 1e-3, the
    name its file states when two names share the value: "us" or "µs"). None when no unit is known: a graph
    that states none, a pipeline timed in a unit without a name (built in Python)."""
    if problem == "offload":
        instance = getattr(instance, "chain", instance)
    stated = _stated_time_unit(getattr(instance, "meta", None))
    if problem == "pipeline":
        return _pipeline_time_unit(getattr(instance, "time_unit", None), stated)
    branches = getattr(instance, "branches", None) if problem == "join" else None
    if stated is None and branches:
        stated = _stated_time_unit(getattr(branches[0], "meta", None))
    if stated is None and problem in ("chain", "join", "offload"):
        return DEFAULT_TIME_UNIT
    return _printable(stated)


def _stated_time_unit(meta: Any) -> str | None:
    """``units.time`` of an instance's `meta` object as written ("ms", "MFLOP"), None when it names none."""
    units = meta.get("units") if isinstance(meta, dict) else None
    unit = units.get("time") if isinstance(units, dict) else None
    return str(unit) if unit else None


def _pipeline_time_unit(seconds: Any, stated: str | None) -> str | None:
    """The name of a pipeline's time unit of `seconds` seconds: `stated` (its file's ``meta.units.time``)
    when that unit is `seconds` long, else the first name of that length, None when none is."""
    from .chain.instance import TIME_UNITS  # (lazily: chain.instance imports this module)

    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        return None
    names = [name for name, per_second in TIME_UNITS.items() if math.isclose(seconds * per_second, 1.0, rel_tol=1e-12)]
    return stated if stated in names else next(iter(names), None)


def max_size(unit: str | None = None) -> int:
    """The largest size (or budget) a file may state in its memory unit `unit` (None: bytes): 1 PiB
    (`MAX_BYTES`) converted into a byte unit and rounded down (2^50 // 1000 in kB), the number 2^50 itself in
    a unit that is no byte unit (``slots``). `size_limit` words it for messages."""
    per = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit is not None else 1
    return MAX_BYTES if per is None else MAX_BYTES // per


def size_limit(unit: str | None = None) -> str:
    """The limit of a file's sizes, in their memory unit `unit` (None: bytes), for the message of a size
    (or a sum of sizes) above it: ``1125899906842624 bytes (1 PiB)``; in a byte unit 1 PiB converted, rounded
    down as sizes are integers (``1099511627776 KiB (1 PiB)``, ``1125 TB (1 PiB is 1125.899906842624 TB)``:
    a size of n units passes when n x bytes per unit <= `MAX_BYTES`, that is n <= `MAX_BYTES` // bytes per
    unit); in a unit that is no byte unit the numbers as written (``1125899906842624 slots (2^50)``)."""
    per = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit is not None else 1
    if per is None:  # no byte unit: `MAX_BYTES` caps the numbers themselves
        return f"{_in_unit(max_size(unit), None, _printable(unit))} (2^50)"
    shown = _in_unit(max_size(unit), per, None)
    if MAX_BYTES % per == 0:
        return f"{shown} (1 PiB)"
    return f"{shown} (1 PiB is {Decimal(MAX_BYTES) / per} {_BYTE_UNIT_NAMES[per]})"


def _printable(unit: str | None) -> str | None:
    """`unit` as a message shows it: as written, or its repr when it holds a character that would break the
    one-line message (a newline, a tab: a file may name any unit that starts with a letter)."""
    return unit if unit is None or unit.strip().isprintable() else repr(unit.strip())


def unit_bytes(instance: Any) -> int | None:
    """Bytes per size unit of `instance` (`memory_unit`; 1 for bytes), None for a unit that is no
    byte unit (sizes in "slots", say: a budget can then not be given as "1.5GB")."""
    unit = memory_unit(instance)
    return 1 if unit is None else MEMORY_UNIT_BYTES.get(unit.strip().lower())


def byte_unit(instance: Any, why: str, *, path: str | None = None) -> int:
    """`unit_bytes` of an instance whose sizes must be bytes for `why` (offloading, pipelines):
    `InputError` naming ``meta.units.memory`` (and `path`) for a unit that is no byte unit
    (`unsupported_memory_unit`: the message names the accepted units)."""
    per = unit_bytes(instance)
    if per is None:
        raise InputError(f"{why} {unsupported_memory_unit(memory_unit(instance))}", path=path,
                         field="meta.units.memory")
    return per


def unsupported_memory_unit(unit: str | None) -> str:
    """The end of a one-line message for a memory unit outside `MEMORY_UNIT_BYTES` ("slots", "PiB"): it
    names the accepted byte units (`ACCEPTED_MEMORY_UNITS`) and, for a byte unit too large to count
    sizes in (`TOO_LARGE_MEMORY_UNITS`: PB, PiB, EiB, ...), says so, as every size is at most 1 PiB."""
    text = f"needs sizes in a byte unit, one of {ACCEPTED_MEMORY_UNITS} (case-insensitive), got {unit!r}"
    if is_too_large_memory_unit(unit):
        text += f", {_TOO_LARGE}"
    return text


#: why a unit of `TOO_LARGE_MEMORY_UNITS` is refused, in every message that refuses one
_TOO_LARGE = "a byte unit too large to be supported (every size is at most 1 PiB)"


def is_too_large_memory_unit(unit: str | None) -> bool:
    """True when `unit` (a file's ``meta.units.memory``) names a byte unit of `TOO_LARGE_MEMORY_UNITS`
    ("PiB", "pb", " EiB ": case and surrounding blanks ignored)."""
    return isinstance(unit, str) and unit.strip().lower() in TOO_LARGE_MEMORY_UNITS


def check_not_too_large_memory_unit(unit: str, *, path: str | None, field: str) -> None:
    """The memory-unit rule every instance loader applies (through `chain.instance.check_memory_unit`): a
    file's ``meta.units.memory`` naming a byte unit of `TOO_LARGE_MEMORY_UNITS` (PB, PiB, EiB, ...) is an
    `InputError` naming `path` and `field`, whatever the command (a "PiB" is no unit that is no byte unit,
    "slots", whose numbers would be read as they are written)."""
    if is_too_large_memory_unit(unit):
        raise InputError(f"got {unit.strip()!r}, {_TOO_LARGE}; give sizes in one of {ACCEPTED_MEMORY_UNITS} "
                         "(case-insensitive)", path=path, field=field)


def format_size(n: float, instance: Any = None) -> str:
    """Human form of `n` sizes in the unit of `instance` (`format_bytes` of n x bytes per unit; a
    unit that is no byte unit is named as is: "17 slots")."""
    per = unit_bytes(instance)
    return format_bytes(n * per) if per is not None else f"{short_number(n)} {memory_unit(instance)}"


def _has_suffix(text: object) -> bool:
    """True for a size string with a unit ("1.5GB", "800 MiB"; not "1500" nor a number)."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    return bool(match and match.group(2))


def _exact_number(text: str, value: float) -> Fraction:
    """The number `text` (which reads as the float `value`) as written: "2.8" is 14/5, not the float nearest it
    (2.8% of 43,000,000 bytes is 1,204,000, where the float product floors to 1,203,999)."""
    try:
        return Fraction(text.strip().replace("_", ""))
    except (ValueError, ZeroDivisionError):  # a spelling float reads and Fraction does not: the float's own value
        return Fraction(value)


def parse_budget(text: str | int | float, reference: int | None, *, field: str | None = None,
                 per_unit: int | None = 1) -> int:
    """Budget in the instance's size unit (bytes unless its file says otherwise, `unit_bytes`):
    a number is in that unit, a size string ("1.5GB") is converted into it with `per_unit` bytes
    per unit (rounded down; None: the instance's unit is no byte unit, an `InputError`), "X%"
    means X percent of `reference` (the store-all peak, say). Errors name `field` (default: the
    budget argument, ``--budget`` or ``budget``: `errors.flag`)."""
    field = field or flag("budget")
    if per_unit != 1 and _has_suffix(text):
        if per_unit is None:
            raise InputError(f"{text!r}: this instance's sizes are in no byte unit: give the budget as a number "
                             "in its unit or a share (\"60%\")", field=field)
        return parse_size(text, field=field) // per_unit
    if isinstance(text, str) and text.strip().endswith("%"):
        try:
            percent = float(text.strip()[:-1])
        except ValueError:
            raise InputError(f"cannot read {text!r} as a percentage", field=field) from None
        if math.isnan(percent):
            raise InputError(f"cannot read {text!r} as a percentage", field=field)
        if percent < 0:
            raise InputError(f"percentage must be non-negative, got {text!r}", field=field)
        if math.isinf(percent):  # "1e400%": beyond any reference peak's share of MAX_BYTES
            raise InputError(f"{text!r} is too large (at most {MAX_BYTES} bytes, 1 PiB)", field=field)
        if reference is None:
            raise InputError("a percentage budget needs a reference peak", field=field)
        # 0.0 (or below the smallest float: "1e-999999999"): no Fraction of 10**999999999 digits, the share is 0
        share = _exact_number(text.strip()[:-1], percent) if percent else Fraction(0)
        return _at_most(math.floor(reference * min(share, Fraction(10**18)) / 100), text, field)
    return parse_size(text, field=field)


def parse_positive_budget(text: str | int | float, reference: int | None, *, field: str | None = None,
                          per_unit: int | None = 1, unit: str | None = None) -> int:
    """`parse_budget`, and at least one unit of the instance's sizes: the one rule of every budget
    (the facade's and the commands'). NaN, zero and negatives "must be positive"; a positive budget
    that rounds down to 0 units says it is less than one unit, naming the unit: `unit` (the
    instance's ``meta.units.memory``, `memory_unit`), else the byte unit of `per_unit` (1: bytes;
    None: "this instance's sizes"). A number is in that unit (0.5, likely meant as a share, says
    so); a size string ("0.5MB") is converted into it; a percentage names the reference peak in it.
    A bool is no budget."""
    field = field or flag("budget")
    if isinstance(text, bool):
        raise InputError(f"not a budget: {text!r}", field=field)
    if isinstance(text, numbers.Real) and not text > 0:  # NaN, zero, negative (compared exactly: 10**400 is fine)
        raise InputError(f"must be positive, got {short_number(text)}", field=field)
    value = parse_budget(text, reference, field=field, per_unit=per_unit)
    if value > 0:
        return value
    raise InputError(_below_one_unit(text, reference, per_unit, unit), field=field)


#: the name of each byte unit in messages, by bytes per unit (`MEMORY_UNIT_BYTES`' values)
_BYTE_UNIT_NAMES = {1: "byte", 2**10: "KiB", 2**20: "MiB", 2**30: "GiB", 2**40: "TiB",
                    10**3: "kB", 10**6: "MB", 10**9: "GB", 10**12: "TB"}


def _unit_label(per_unit: int | None, unit: str | None) -> str | None:
    """The name of an instance's size unit in messages: `unit` ("kib" -> "KiB", "bytes" -> "byte",
    "slots" as is), else the byte unit of `per_unit` bytes per unit; None when neither names one."""
    if unit is not None and unit.strip():
        per = MEMORY_UNIT_BYTES.get(unit.strip().lower())
        return _BYTE_UNIT_NAMES[per] if per is not None else unit.strip()
    return _BYTE_UNIT_NAMES.get(per_unit) if per_unit is not None else None


def _one_unit(per_unit: int | None, unit: str | None) -> str:
    """ "one KiB, the memory unit of this instance" (or "one byte" when the caller stated no unit:
    `per_unit` 1 and no `unit`), the smallest budget, for a message."""
    label = _unit_label(per_unit, unit)
    if label is None:
        return "one unit of this instance's sizes"
    if unit is None and per_unit == 1:
        return "one byte"
    if label in _BYTE_UNIT_NAMES.values():
        return f"one {label}, the memory unit of this instance"
    return f"one unit of this instance's sizes ({label})"


def _in_unit(n: int, per_unit: int | None, unit: str | None) -> str:
    """`n` sizes with their unit, for a message: "59290 KiB", "59290 bytes", "17 slots"."""
    label = _unit_label(per_unit, unit)
    if label is None:
        return f"{n} in this instance's size unit"
    return f"{n} bytes" if label == "byte" else f"{n} {label}"


def _below_one_unit(text: str | int | float, reference: int | None, per_unit: int | None, unit: str | None) -> str:
    """The message for a budget `text` that `parse_budget` rounded down to 0 units: "must be
    positive" when it is 0, else that it is less than one unit (`_one_unit`)."""
    one = _one_unit(per_unit, unit)
    if isinstance(text, str) and text.strip().endswith("%") and reference is not None:
        return f"{text.strip()} of the reference peak ({_in_unit(reference, per_unit, unit)}) is less than {one}; " \
               "give a larger share"
    match = _SIZE.match(text) if isinstance(text, str) else None
    amount = float(text) if isinstance(text, numbers.Real) else float(match.group(1)) if match else 0.0
    if not amount > 0:
        return f"must be positive, got {text!r}"
    shown = short_number(text) if isinstance(text, numbers.Real) else repr(text)
    if _has_suffix(text):
        return f"{shown} is less than {one}"
    where = "bytes" if unit is None and per_unit == 1 else "in that unit"
    return f"{shown} is less than {one} (a number is {where}; write \"50%\" for a share of the reference peak)"


#: smallest bandwidth accepted (bytes/s; ``--bandwidth`` and ``host_link.bandwidth`` alike): a byte in about 32 years,
#: far below any real link, and high enough that every transfer time stays finite
MIN_BANDWIDTH = 1e-9


def parse_bandwidth(text: str | int | float, *, field: str | None = None) -> float:
    """Bytes per second in `text` ("12GB/s", "25e9", "800MiB/s", "2.7", "0.5"), a float: fractions of a byte per
    second are kept, as ``host_link.bandwidth`` keeps them in a file, with the file's rule (in `MIN_BANDWIDTH`..
    `MAX_BYTES`); errors name `field` (default: ``--bandwidth`` or ``bandwidth``, `errors.flag`)."""
    field = field or flag("bandwidth")
    if isinstance(text, bool):
        raise InputError(f"not a bandwidth: {text!r}", field=field)
    if isinstance(text, numbers.Real):
        value = float(text) if abs(text) <= MAX_BYTES else math.inf  # (float() overflows on huge ints)
    else:
        spec = str(text).strip()
        spec = spec[:-2] if spec.lower().endswith("/s") else spec
        match = _SIZE.match(spec)
        if not match or match.group(2).lower() not in _UNITS:
            raise InputError(f"cannot read {text!r} as a bandwidth (examples: 12GB/s, 25e9, 800MiB/s)", field=field)
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not MIN_BANDWIDTH <= value <= MAX_BYTES:  # NaN fails too
        shown = short_number(text) if isinstance(text, int) else repr(text)
        raise InputError(f"bandwidth must be a number of bytes/s in {MIN_BANDWIDTH:g}..{MAX_BYTES}, got {shown}",
                         field=field)
    return value


def format_bytes(n: float) -> str:
    """Human form of a size in bytes, binary units (for tables and messages)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def check_number(value: object, *, path: str | None, field: str, integer: bool = False,
                 time: bool = False, unit: str | None = None) -> float | int:
    """A number read from a file, validated: not a boolean, finite, non-negative, at most
    `MAX_BYTES` (sizes, as written) or `MAX_TIME` (times, ``time=True``), an integer when `integer`.
    Returns an int for integers, else a float; an `InputError` names `path` and `field`, and words a
    size's limit and integrality in the file's memory unit `unit` (``meta.units.memory``; None: bytes,
    `size_limit`). A size in a byte unit larger than a byte passes here up to `MAX_BYTES` units, the
    caller then checks it once in bytes (`chain.instance.check_bytes`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number, got {value!r}", path=path, field=field)
    if value < 0 or (isinstance(value, float) and not math.isfinite(value)):  # (an int of any size is finite)
        raise InputError(f"must be a non-negative finite number, got {short_number(value)}", path=path, field=field)
    limit = MAX_TIME if time else MAX_BYTES
    if value > limit:
        what = f"{MAX_TIME:g} (the file's time unit)" if time else size_limit(unit)
        raise InputError(f"{short_number(value)} is too large (at most {what})", path=path, field=field)
    if integer:
        if float(value) != math.floor(value):
            raise InputError(f"must be an integer number of {size_unit_name(unit)}, got {value!r}", path=path,
                             field=field)
        return int(value)
    return float(value)


def size_unit_name(unit: str | None) -> str:
    """A file's memory unit `unit` (None: bytes) as messages name it after a number of sizes: "bytes"
    ("B", "byte" alike), "KiB" ("kib" alike), "slots" as written (its repr if it would break the line)."""
    label = _unit_label(1, _printable(unit))
    return "bytes" if label in (None, "byte") else label


def plain_number(value: Any) -> Any:
    """A numpy scalar (an entry of an instance's array) as the Python int or float `check_number` reads,
    so that the `check` of an instance built in Python applies its file's rule; any other value unchanged."""
    return value.item() if hasattr(value, "item") and callable(value.item) else value


def short_number(value: float | int) -> str:
    """`value` for a message: its repr, or the size of an integer too long to print (Python
    refuses to print integers of more than 4300 digits)."""
    if isinstance(value, int) and abs(value).bit_length() > 64:
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


def check_int(value: object, field: str, low: int = 1, high: int | None = None) -> int:
    """`value` as an int in low..high (`high` None: no upper bound); a bool, a float (2.7, 2.0), a
    string or None is an `InputError` naming `field`, as is an integer out of range."""
    span = f"in {low}..{high}" if high is not None else f">= {low}"
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low
            or (high is not None and int(value) > high)):
        shown = short_number(value) if isinstance(value, int) else repr(value)
        raise InputError(f"must be an integer {span}, got {shown if len(shown) <= 80 else shown[:77] + '...'}",
                         field=field)
    return int(value)


def parse_seconds(text: str, *, allow_zero: bool = False) -> float:
    """A duration in seconds from the command line: finite, positive (or >= 0 when
    `allow_zero`). Raises `ValueError` with a one-line message (argparse reports it)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"must be a {'non-negative' if allow_zero else 'positive'} finite number of seconds, "
                         f"got {text!r}")
    return value


def size_array(value: Any, name: str) -> Any:
    """`value` as an int64 array of sizes (bytes, or the instance's memory unit), the same array when it is
    one already. Floats must be whole and at most `MAX_BYTES` in magnitude (2.0, not 2.5, NaN, inf or
    1e20): an `InputError` naming the entry (``x[3]``) and quoting the value given, instead of a silent
    truncation or a wrapped-around int64. (numpy is imported here: `memsched solvers` reads this module
    without it.)"""
    import numpy as np

    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~(np.abs(arr) <= MAX_BYTES) | (arr != np.floor(arr)))  # NaN fails the first test
        if bad.size:
            i = int(bad[0])
            raise InputError(f"must be an integer number of bytes in 0..{MAX_BYTES}, got {arr.flat[i].item()!r}",
                             field=f"{name}[{i}]" if arr.ndim == 1 else name)
    try:
        return np.asarray(arr, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be an array of integers, got {value!r:.80}", field=name) from None

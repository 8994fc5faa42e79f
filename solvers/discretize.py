"""Memory discretisation and time ticks, written once for every exact model and DP.

**Slots.** With ``slots = N > 0`` and a budget of more than N size units, memory is counted in
N slots of ``budget / N`` units and every size is rounded *up* (exactly, in integer arithmetic
on the float's exact value), so a schedule that fits N slots fits the real budget. A budget of
at most N units, or ``slots = 0``, keeps exact sizes (integers are then finer than slots).
The rounding can make a budget look infeasible or a schedule look slower than it is: the
*exact-size guard* (`solvers.exact.layer`) checks every exact answer against the problem's
fast solvers replayed at exact sizes, and a model's "optimal" is then "optimal for N slots".

**Ticks.** CP-SAT needs integer times: `tick_scale` picks the coarsest power of ten (ticks
per time unit) in which every duration is whole (then the model is exact), else about
`max_ticks` ticks for the longest duration (durations are rounded up: a model's schedule
is never faster in the simulator than in the model). `integer_costs` does the same for
objective coefficients: exactly by 10^k when costs have few decimals, else rounded to nearest
(``exact`` says whether any rounding happened; `rounding_error` gives each cost's error).
"Whole" is relative (`is_whole`: float noise of 1e-9 of the value forgiven, no absolute floor), so
durations of 1e-12 units are scaled like durations of seconds, never rounded to 0 as "whole".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np

from .errors import InputError, flag


def check_slots(slots: int | None, default: int = 500) -> int:
    """The slot count a solver was asked for (`default` for None): InputError naming the slots
    (``--slots``, or ``slots`` in Python: `errors.flag`) when it is negative."""
    n = default if slots is None else int(slots)
    if n < 0:
        raise InputError(f"slots must be >= 0, got {n}", field=flag("slots"))
    return n


def effective_slots(budget: int, slots: int | None) -> int:
    """The slot count really used: 0 (exact sizes) when ``slots <= 0`` or budget <= slots."""
    slots = int(slots or 0)
    return 0 if slots <= 0 or int(budget) <= slots else slots


def slot_size(budget: int, slots: int | None) -> float:
    """Size units per slot (1.0 with exact sizes)."""
    n = effective_slots(budget, slots)
    return int(budget) / n if n else 1.0


def round_up(sizes: Iterable[float] | np.ndarray, slot: float) -> np.ndarray:
    """Sizes in slots of `slot` units, rounded up exactly (int64). ``slot = 1`` keeps integers."""
    arr = np.asarray(list(sizes) if not isinstance(sizes, np.ndarray) else sizes)
    if slot == 1.0:
        return np.ceil(arr - 1e-9).astype(np.int64)
    exact = Fraction(slot)
    num, den = exact.numerator, exact.denominator
    return np.array([-((-int(v) * den) // num) for v in arr.ravel()], dtype=np.int64).reshape(arr.shape)


def discretise_sizes(sizes: Sequence[float] | np.ndarray, budget: int,
                     slots: int | None) -> tuple[np.ndarray, int, float]:
    """``(sizes in slots, capacity, slot)``: capacity = N slots, or the budget itself with exact sizes."""
    n = effective_slots(budget, slots)
    slot = slot_size(budget, slots)
    return round_up(sizes, slot), (n if n else int(budget)), slot


def size_in_slots(budget: int, slots: int | None):  # noqa: ANN201 (a small closure)
    """A function ``bytes -> slots`` (rounded up) for one budget and slot count."""
    slot = slot_size(budget, slots)
    if slot == 1.0:
        return lambda b: int(math.ceil(b - 1e-9))
    exact = Fraction(slot)
    num, den = exact.numerator, exact.denominator
    return lambda b: -((-int(b) * den) // num)


def capacity(budget: int, slots: int | None) -> int:
    """The budget in the model's unit: N slots when discretised, else the budget in bytes."""
    n = effective_slots(budget, slots)
    return n if n else int(budget)


def scope_text(slots: int) -> str:
    """How the sizes of a model were counted, for `SolveResult.scope`."""
    return "exact sizes" if not slots else f"sizes rounded up to {slots} slots of the budget"


#: relative float noise `is_whole` forgives: x is whole when within WHOLE_RTOL * |x| of an integer
WHOLE_RTOL = 1e-9


def is_whole(values: Sequence[float] | np.ndarray) -> bool:
    """Whether every value is an integer up to float noise of `WHOLE_RTOL` *relative* to itself (no
    absolute floor: 3e-12 is not the whole number 0, while 0.0 and 3.0000000000000004 are whole)."""
    arr = np.asarray(values, dtype=float)
    return bool(np.all(np.abs(arr - np.round(arr)) <= WHOLE_RTOL * np.abs(arr)))


def tick_scale(durations: Iterable[float], *, max_ticks: float = 10_000, powers: int = 5) -> tuple[float, bool]:
    """(ticks per time unit, exact): the coarsest 10^k making every duration whole (`is_whole`: relative,
    so durations of 1e-12 units are never taken as 0 ticks), k from k0 to k0 + `powers` - 1, where k0 =
    max(0, -floor(log10(longest))) starts the candidates at the magnitude of the longest duration; else
    about `max_ticks` ticks for the longest one (then exact only when every duration is whole there).

    So the grid does not depend on the time unit: durations whose longest is in [1, 10) time units and
    the same durations x 10^-m (m >= 0) get scales exactly 10^m apart and the same ticks, as do any that fall
    back to about `max_ticks` ticks. A longest of at least one time unit keeps k0 = 0 (ordinary durations
    see the candidates 10^0 .. 10^(powers-1), as before), so for a longest of 10^j .. 10^(j+1) units
    the x 10^-m copy's candidates sit j powers lower: it gets the same ticks unless every duration is a
    multiple of 10 (then coarser ticks, still exact) or whole only at some 10^k with k > powers - 1 - j
    (then it falls back). Zero durations count for nothing; with none positive the scale is 1 (exact)."""
    times = np.array([float(t) for t in durations], dtype=float)
    longest = float(np.max(np.abs(times), initial=0.0))
    # 1e-9 of a decade forgiven: a longest of 1 - 1e-15 (float noise) is the power of ten it stands for,
    # and no skipped k (< k0) could have made the durations whole
    k0 = max(0, -math.floor(math.log10(longest) + 1e-9)) if longest > 0 else 0
    for k in range(k0, min(k0 + powers, 309)):  # (10.0 ** 309 overflows)
        s = 10.0 ** k
        if is_whole(times * s):
            return s, True
    longest = max(longest, 1e-300)
    s = float(10 ** math.ceil(math.log10(max_ticks / longest) - 1e-9))  # noise forgiven, as for k0
    return s, is_whole(times * s)


def to_ticks(value: float, scale: float) -> int:
    """Whole ticks, rounded up; float noise below 1e-9 tick is forgiven (the simulators treat
    such noise as simultaneity)."""
    return int(math.ceil(value * scale - 1e-9))


#: significant digits CP-SAT's objective keeps when costs cannot be scaled exactly (`integer_costs`): a
#: rounded cost is off by at most 5e-10 of the largest, so a model optimal for the rounded costs is
#: within the 1e-6 relative gap of an optimum (`GAP_TOLERANCE`) unless recomputations multiply it
CPSAT_COST_DIGITS = 9
#: relative gap within which a model solved on rounded costs still counts as proven optimal (the
#: backends' own tolerance, `exact.milp_runner.settle`)
GAP_TOLERANCE = 1e-6
#: `integer_costs` scales exactly by 10^k only while the largest cost stays at most this many ticks
EXACT_COST_TICKS = 10**9
#: the largest power of ten `integer_costs` scales by (its scale is a float: 10.0 ** 309 overflows)
MAX_COST_POWER = 308


def integer_costs(costs: Sequence[float] | np.ndarray, digits: int = 6) -> tuple[list[int], float, bool]:
    """Costs as integers ``round(c * scale)``: unchanged (scale 1) when they already are; else scaled by
    the coarsest 10^k that makes every cost whole (`is_whole`: float noise of 1e-9 relative forgiven,
    no absolute floor, so costs of 1e-12 units get 10^12, not 0) while the largest stays within
    `EXACT_COST_TICKS` (e.g. costs with three decimals: 10^3); else by about `digits` significant
    digits of the largest cost, rounded (costs far below the largest may round to 0). Returns
    (ints, scale, exact); exact is never True when a nonzero cost became 0; with exact False the
    error of each cost is at most 0.5 / scale (`rounding_error` totals it).

    As in `tick_scale`, the candidate powers start at the largest cost's magnitude (k0 = max(1,
    -floor(log10(largest))): no smaller 10^k could make a cost below 10^-k whole), so costs x 10^-m
    get a scale exactly 10^m finer and the same integers (the model, and the schedule it picks, does
    not depend on the time unit) while that scale stays a float. It stops at 10^`MAX_COST_POWER`
    (callers divide by it): costs that need more (a largest below about 1e-299 units with nine
    digits, 1e-308 with whole multiples of it) keep fewer digits, and subnormal ones may round to 0
    (``exact`` False then; the callers' bounds allow for the rounding)."""
    arr = np.asarray(costs, dtype=float)
    if arr.size == 0 or is_whole(arr):
        return [int(round(c)) for c in arr], 1.0, True
    top = float(np.max(np.abs(arr))) or 1.0
    k0 = max(1, -math.floor(math.log10(top) + 1e-9))  # noise forgiven as in `tick_scale`; k = 0 is done
    for k in range(k0, MAX_COST_POWER + 1):  # ends at the break: top * 10^k0 is below 10
        scale = 10.0 ** k
        if top * scale > EXACT_COST_TICKS:
            break
        scaled = arr * scale
        if is_whole(scaled):
            return [int(round(c)) for c in scaled], scale, True
    scale = 10.0 ** min(digits - math.ceil(math.log10(top)), MAX_COST_POWER)
    ints = [int(round(c * scale)) for c in arr]
    lost = any(c != 0 and i == 0 for c, i in zip(arr, ints))  # a nonzero cost rounded to 0
    exact = bool(np.all(np.abs(arr * scale - np.round(arr * scale)) < 1e-6)) and not lost
    return ints, scale, exact


def rounding_error(costs: Sequence[float] | np.ndarray, ints: Sequence[int], scale: float) -> list[float]:
    """|c - int / scale| per cost (time units): what `integer_costs` changed; a model that counts
    cost c_i x_i times is off by at most sum_i x_i |error_i| in the real units."""
    return [abs(float(c) - int(i) / scale) for c, i in zip(costs, ints)]

"""`brute_force_hrevolve`, the ground truth the H-Revolve DP is tested against, checks its inputs as
the DP does: l = -1 gave a cost of 0.0, 2.5 gave inf ("no schedule"), True was read as 1, and a
negative u_f made its search endless (docs/offload.md: a bool, a fraction, NaN or infinity is an
`InputError` naming the argument)."""

from __future__ import annotations

import math

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.offload.hrevolve import hrevolve_cost
from memsched.solvers.offload.hrevolve_brute import brute_force_hrevolve


@pytest.mark.parametrize("l", [-1, 2.5, True, math.nan, math.inf, "3"])
def test_a_bad_length_is_refused_as_the_dp_refuses_it(l: object) -> None:
    with pytest.raises(InputError, match="chain length"):
        brute_force_hrevolve(l, [(1, 0, 0)])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="chain length"):
        hrevolve_cost(l, [(1, 0, 0)])  # type: ignore[arg-type]


@pytest.mark.parametrize(("u_f", "u_b"), [(-1.0, 1.0), (1.0, -0.5), (math.nan, 1.0), (1.0, math.inf)])
def test_a_bad_step_cost_is_refused(u_f: float, u_b: float) -> None:
    with pytest.raises(ValueError, match="u_f and u_b"):
        brute_force_hrevolve(3, [(1, 0, 0)], u_f=u_f, u_b=u_b)


def test_an_integral_float_length_is_read_as_the_dp_reads_it() -> None:
    assert brute_force_hrevolve(3.0, [(2, 0, 0)]) == brute_force_hrevolve(3, [(2, 0, 0)])  # type: ignore[arg-type]
    assert brute_force_hrevolve(3, [(2, 0, 0)]) == hrevolve_cost(3, [(2, 0, 0)])

"""CP-SAT 9.15's presolve sums a row's Boolean coefficients in a 32-bit int (or-tools issue #5293):
past 2^31 it drops an enforcement literal (one it may have extracted itself from a plain row), so
models with exact sizes in bytes proved wrong optima and false infeasibles. The rows handed to
CP-SAT now stay within `cpsat_runner.ROW_LIMIT` (`fit_row`, `fit_linear`)."""

from __future__ import annotations

import itertools
import random

from memsched.solvers.chain import cpsat as chain_cpsat
from memsched.solvers.chain import milp as chain_milp
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact.options import Deadline
from memsched.solvers.offload import exact_free
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.offload.instance import OffloadInstance
from memsched.solvers.offload.simulator import simulate
from ortools.sat.python import cp_model

BIG = 10**9


def _holds(coefs: list[int], lo: int | None, hi: int | None, x: tuple[int, ...]) -> bool:
    v = sum(c * b for c, b in zip(coefs, x))
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def test_fit_row_rounds_into_a_relaxation_or_a_restriction() -> None:
    """Brute force over 0/1 vectors: rows rounded up admit only solutions of the original row,
    rows rounded down every one; exact rows the same ones; every row within the limit."""
    from memsched.solvers.exact.cpsat_runner import fit_row

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 5)
        coefs = [rng.randint(-60, 60) for _ in range(n)]
        lo = rng.choice([None, rng.randint(-60, 60)])
        hi = rng.choice([None, rng.randint(-60, 120)]) if lo is not None else rng.randint(-60, 120)
        limit = rng.randint(n + 1, 40)
        for up in (True, False):
            rows, exact = fit_row(coefs, lo, hi, up=up, limit=limit)
            assert all(sum(abs(c) for c in cs) <= limit for cs, _, _ in rows)
            for x in itertools.product((0, 1), repeat=n):
                real = _holds(coefs, lo, hi, x)
                fitted = all(_holds(cs, a, b, x) for cs, a, b in rows)
                if exact:
                    assert fitted == real
                elif up:
                    assert not fitted or real
                else:
                    assert fitted or not real


def test_fit_linear_rewrites_a_memory_row_in_place() -> None:
    from memsched.solvers.exact.cpsat_runner import ROW_LIMIT, fit_linear

    m = cp_model.CpModel()
    x = [m.new_bool_var("") for _ in range(3)]
    exact_row = m.add(6 * BIG * x[0] + 9 * BIG * x[1] - 3 * BIG * x[2] <= 10 * BIG)
    assert fit_linear(m, exact_row, up=True)  # by the gcd 3e9: exact
    assert list(exact_row.proto.linear.coeffs) == [2, 3, -1]
    assert list(exact_row.proto.linear.domain)[1] == 3
    odd = m.add((3 * BIG + 1) * x[0] + (2 * BIG + 7) * x[1] <= 4 * BIG)
    assert not fit_linear(m, odd, up=True)
    assert sum(abs(c) for c in odd.proto.linear.coeffs) <= ROW_LIMIT


def test_chain_cpsat_exact_sizes_proves_the_optimum() -> None:
    """Sizes ~1e9-1e10 bytes (slots=0): CP-SAT's presolve proved a wrong optimum (39, where the rotor
    start, 36, fits), the answer fell back to rotor as `feasible`; presolve off proves 36 optimal."""
    chain = random_chain(7, 1, size_range=(BIG, 10 * BIG), integer_times=True)
    budget = 63569157373
    res = chain_cpsat.solve_cpsat(chain, budget, time_limit=20, slots=0)
    off = chain_cpsat.solve_cpsat(chain, budget, time_limit=20, slots=0, parameters="cp_model_presolve:false")
    assert off.status == "optimal"
    assert res.status == "optimal"
    assert res.objective == off.objective
    assert res.peak_memory is not None and res.peak_memory <= budget


def test_chain_milp_on_cpsat_exact_sizes_proves_the_optimum() -> None:
    """The same chain through the linear phase model on CP-SAT (`milp --option backend=cp-sat`):
    it proved a wrong optimum (its answer fell back to rotor's 36 with a bound of 30)."""
    chain = random_chain(7, 1, size_range=(BIG, 10 * BIG), integer_times=True)
    budget = 63569157373
    res = chain_milp.solve_milp(chain, budget, time_limit=20, slots=0, backend="cp-sat")
    scip = chain_milp.solve_milp(chain, budget, time_limit=20, slots=0, backend="scip")
    assert scip.status == "optimal"
    assert res.status == "optimal" and res.objective == scip.objective
    assert res.lower_bound == res.objective
    assert "rounded for CP-SAT" in res.scope


def test_linear_to_cpsat_rounds_big_rows_into_a_relaxation_or_a_restriction() -> None:
    """max 2a + 2b + c with 0.6e9 (a + b) + 0.55e9 c <= 1.2e9 (Booleans): the optimum a = b = 1
    (sum 1.2e9). Past the limit the row is rounded: the relaxation keeps that optimum and may admit
    more (its plan must be checked), the restriction admits only real plans; both stay within it."""
    from memsched.solvers.exact.cpsat_runner import ROW_LIMIT, linear_to_cpsat, max_row_sum, rounded_rows, run_cpsat
    from memsched.solvers.exact.linear import LinearModel

    lm = LinearModel()
    a, b, c = (lm.var(0, 1, True) for _ in range(3))
    lm.add([a, b, c], [600_000_001, 600_000_001, 550_000_000], ub=1_200_000_002)
    lm.objective = {a: -2.0, b: -2.0, c: -1.0}
    assert rounded_rows(lm) == 1
    for up in (False, True):
        cp, xs, offset, scale = linear_to_cpsat(lm, up=up)
        assert max_row_sum(cp) <= ROW_LIMIT
        run = run_cpsat(cp, Deadline(20), variables=xs, offset=offset, scale=scale)
        assert run.status == "optimal" and run.values is not None
        if up:
            assert lm.violated(run.values) == 0
        else:
            assert run.objective <= -4.0  # a relaxation: never above the real optimum
    small = LinearModel()
    x = small.var(0, 1, True)
    small.add([x], [3], ub=2)
    assert rounded_rows(small) == 0


def _free_instance() -> tuple[OffloadInstance, int]:
    return random_offload(3, 4, size_range=(BIG, 10 * BIG), integer_times=True), 40952800155


def test_offload_exact_no_false_infeasible_at_exact_sizes() -> None:
    """offload-exact at exact sizes without a warm start answered `infeasible`; pofo's schedule
    (20.67) fits, and the model (presolve off) has 20.6714."""
    inst, budget = _free_instance()
    res = exact_free.solve_offload_exact(inst, budget, time_limit=20, slots=0, warm_start=False)
    assert res.status in ("optimal", "feasible")
    assert res.objective is not None and res.objective <= 20.6714 + 1e-6
    assert res.schedule is not None
    assert simulate(inst, res.schedule, budget).valid


def test_offload_exact_memory_rows_within_the_limit() -> None:
    from memsched.solvers.exact.cpsat_runner import ROW_LIMIT

    inst, budget = _free_instance()
    dchain, M = discretise(inst.chain, budget, 0)
    model = exact_free.FreeOrderModel(inst, dchain, M, 10000.0, Deadline(30))
    assert model.memory_rows
    for ct in model.memory_rows:
        assert sum(abs(int(c)) for c in ct.proto.linear.coeffs) <= ROW_LIMIT
    assert not model.rows_exact  # random sizes in bytes: rounded (up), so no proof from this model alone


def test_join_cpsat_exact_sizes_proves_every_order() -> None:
    """Sizes ~1e9-1e10 bytes (slots=0): presolve proved order [0, 1] optimal at 47 where 44 fits (the
    answer fell back to the DP's 44 as `feasible`); both orders are now solved to their optimum."""
    from memsched.solvers.join import cpsat as join_cpsat
    from memsched.solvers.join.generate import random_join

    join = random_join([3, 4], 27, size_range=(BIG, 10 * BIG), integer_times=True)
    budget = 77439939579
    res = join_cpsat.solve_cpsat(join, budget, time_limit=20, slots=0)
    assert res.status == "optimal"
    assert res.objective == 44.0
    by_order = {tuple(o["order"]): o for o in res.details["orders"]}
    assert by_order[(0, 1)]["makespan"] == 44.0
    assert res.peak_memory is not None and res.peak_memory <= budget


def test_offload_exact_fine_scale_keeps_time_rows_within_the_limit() -> None:
    """`scale=1e9` (ticks per time unit; allowed up to 1e12 ticks in all): the time rows' Boolean
    coefficients (durations in ticks) passed 2^31 and CP-SAT proved a 40.55 plan optimal in its
    model where 28 (every op once, no wait) fits; the tick is now coarsened for CP-SAT."""
    inst = random_offload(6, 1, size_range=(BIG, 10 * BIG), integer_times=True)
    budget = 88343393118
    res = exact_free.solve_offload_exact(inst, budget, time_limit=20, slots=0, scale=1e9, warm_start=False)
    assert res.status in ("optimal", "feasible")
    assert res.objective is not None and res.objective <= 28.0 + 1e-6


def test_checkmate_cpsat_at_exact_sizes_is_a_relaxation_in_units() -> None:
    """Checkmate's model on CP-SAT with sizes ~1e9-1e10 (slots=0): sizes and budget are divided
    into units that keep every row within the limit (a relaxation whose plan is replayed at exact
    sizes); its answers agree with SCIP's on the same exact-size model."""
    import numpy as np
    from memsched.solvers.graph.generate import random_dag
    from memsched.solvers.graph.milp import cpsat_unit, solve_checkmate
    from memsched.solvers.graph.simulator import simulate

    g = random_dag(8, seed=0)
    g.cost_ram = np.random.default_rng(0).integers(BIG, 10 * BIG, g.n)
    g.workspace = np.zeros(g.n, dtype=np.int64)
    top = simulate(g, list(range(g.n)), 10**13).peak_memory
    budget = int(top * 0.8)
    unit = cpsat_unit(g.cost_ram, budget, g.workspace)
    assert unit > 1 and cpsat_unit(g.cost_ram // unit, budget // unit, g.workspace) == 1
    res = solve_checkmate(g, budget, backend="cpsat", slots=0, time_limit=20)
    scip = solve_checkmate(g, budget, backend="scip", slots=0, time_limit=20)
    assert res.details["cpsat_unit"] == unit and "units of" in res.scope
    assert res.details["model_status"] == scip.details["model_status"] == "optimal"
    assert (res.status, res.objective) == (scip.status, scip.objective)
    assert res.peak_memory is not None and res.peak_memory <= budget

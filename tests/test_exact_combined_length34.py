"""`exact-combined` refuses a chain longer than it enumerates (`MAX_LENGTH`) at once, before the
warm start's fast solvers run, with a one-line error naming the chain's ``stages``."""

from __future__ import annotations

import pytest
from conftest import run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.exact import layer
from memsched.solvers.offload import exact_combined
from memsched.solvers.offload.generate import random_offload


def test_too_long_a_chain_is_refused_before_any_fast_solver(monkeypatch: pytest.MonkeyPatch):
    inst = random_offload(exact_combined.MAX_LENGTH + 1, 1, transfer_ratio=0.3, integer_times=True)

    def no_fast_solvers(*args, **kwargs):
        raise AssertionError("the warm start ran before the length was checked")

    monkeypatch.setattr(layer, "run_fast", no_fast_solvers)
    with pytest.raises(InputError) as err:
        exact_combined.solve_exact_combined(inst, 10**6, time_limit=5)
    assert err.value.field == "stages" and f"L <= {exact_combined.MAX_LENGTH}" in str(err.value)


def test_cli_error_is_one_line_exit_2(tmp_path):
    path = tmp_path / "long.json"
    random_offload(exact_combined.MAX_LENGTH + 1, 1, transfer_ratio=0.3, integer_times=True).save(str(path))
    res = run_cli("solve", path, "--solver", "exact-combined", "--budget", "80%", "--time-limit", "5")
    assert res.code == 2
    assert len(res.err.strip().splitlines()) == 1 and "stages:" in res.err


def test_longest_chain_is_still_solved():
    inst = random_offload(3, 1, transfer_ratio=0.3, integer_times=True)
    res = exact_combined.solve_exact_combined(inst, 10**6, time_limit=5)
    assert res.status in ("optimal", "feasible")

"""`sweep --verify` flags a stored ``min_budget`` that HEAD no longer gives (results/fig_e_offload's
rotor-offload rows kept a least budget after the solver had withdrawn it, and verified "same"),
and still does not judge a stored row without one."""

from __future__ import annotations

from memsched.experiments.sweep.verify import differing


def row(min_budget: object) -> dict[str, object]:
    return {"status": "infeasible", "objective": None, "min_budget": min_budget}


def test_a_withdrawn_min_budget_differs() -> None:
    assert differing(row(687210496.0), row(None)) == ("min_budget",)
    assert differing(row(687210496.0), row(float("nan"))) == ("min_budget",)


def test_a_row_without_one_is_not_judged_on_it() -> None:
    assert differing(row(None), row(21)) == ()
    assert differing(row(float("nan")), row(None)) == ()


def test_both_present_compare_as_before() -> None:
    assert differing(row(21.0), row(21)) == ()
    assert differing(row(21), row(22)) == ("min_budget",)

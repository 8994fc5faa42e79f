"""Offload `milp` solves a model in ticks (1/scale time units): its log (and the best and bound it reports to the
progress line) are in time units, as offload cpsat's are; before, the log's objective was in ticks (16666.0 for a
makespan of 16.67) and the live bound 1000 times the makespan."""

from __future__ import annotations

from typing import Any

import pytest
from memsched.solvers import progress, registry
from memsched.solvers.offload import reference_peak
from memsched.solvers.offload.generate import random_offload


def test_the_log_and_the_reported_bound_are_in_time_units(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = random_offload(3, 1, bandwidth=1000)
    seen: list[dict[str, Any]] = []
    real = progress.report

    def spy(*args: Any, **kw: Any) -> None:
        if "best" in kw:
            seen.append(kw)
        real(*args, **kw)

    monkeypatch.setattr("memsched.solvers.offload.milp.report", spy)
    res = registry.solve("offload", inst, "milp", reference_peak(inst), slots=0, warm_start=False)
    assert res.status in ("optimal", "feasible") and res.objective is not None
    for _t, objective, bound in res.log:
        for value in (objective, bound):
            assert value is None or value <= res.objective * 1.01 + 1e-9, res.log
    assert seen and all(s["bound"] is None or s["bound"] <= res.objective * 1.01 for s in seen), seen
    assert res.details["model_makespan"] == pytest.approx(res.objective, rel=0.01)

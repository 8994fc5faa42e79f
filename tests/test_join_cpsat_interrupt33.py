"""A Ctrl-C answered by the exact layer ends the join `cpsat` solve: the backward orders left are not
run. The loop over orders never asked `interrupted()`, so after an interrupted first order it solved
the five others of crossmodal3 (the command line answered after 12-24 s, not at once as docs/cli.md
says), and SIGTERM alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.exact.interrupt import answer_on_interrupt, note_interrupt
from memsched.solvers.join import cpsat as join_cpsat
from memsched.solvers.join.instance import Join

JOIN = Path(registry.__file__).parent / "data" / "join" / "crossmodal3.json"


def test_an_interrupt_in_one_order_ends_the_order_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    join = Join.load(JOIN)
    budget = int(0.8 * registry.solve("join", join, "store-all", 10**15).peak_memory)
    real = join_cpsat._run_order
    runs: list[Any] = []

    def interrupted_run(*args: Any, **kwargs: Any) -> Any:  # the backend came back from a Ctrl-C
        runs.append(args[0])
        note_interrupt()
        return real(*args, **kwargs)

    monkeypatch.setattr(join_cpsat, "_run_order", interrupted_run)
    with answer_on_interrupt():
        res = registry.solve("join", join, "cpsat", budget, time_limit=20.0)
    assert res.details["interrupted"]
    assert len(res.details["orders"]) == 1 and res.details["orders_not_run"] == 5
    assert len(runs) == 1  # no rounded-rows retry either
    assert res.schedule is not None and "interrupted" in res.message


def test_without_an_interrupt_every_order_runs() -> None:
    join = Join.load(JOIN.with_name("tiny.json"))
    budget = int(0.8 * registry.solve("join", join, "store-all", 10**15).peak_memory)
    with answer_on_interrupt():
        res = registry.solve("join", join, "cpsat", budget, time_limit=60.0)
    assert "interrupted" not in res.details
    assert len(res.details["orders"]) == 2 and res.details["orders_not_run"] == 0

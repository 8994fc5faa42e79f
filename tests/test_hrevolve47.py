"""H-Revolve's search over level orders keeps what it found on a Ctrl-C (the best order finished, marked
interrupted; `memsched hrevolve` prints it and exits 130) and shows a live line on a terminal; the Python API
refuses malformed levels and step costs with an `InputError` naming the level or the cost, while the command
line's answers to bad input are unchanged.

The interrupts are raised deterministically: a progress watcher (`solvers.progress.watching`) raises
`KeyboardInterrupt` when the search reports the stage of a given order; the one real SIGINT is sent only once
the terminal's progress line shows a best cost (the first order has finished)."""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from conftest import ROOT, one_line_refusal, run_cli, sigint_as_in_a_terminal
from memsched.solvers.errors import InputError
from memsched.solvers.exact.interrupt import answer_on_interrupt, interrupted
from memsched.solvers.offload.hrevolve import (
    HRevolveInstance,
    check_step_costs,
    simulate_hrevolve,
    solve_hrevolve,
)
from memsched.solvers.progress import Progress, watching

#: three levels whose costs are incomparable (writes rise, reads fall): 3! = 6 orders are searched
LEVELS = ((1, 0.0, 9.0), (1, 1.0, 8.0), (1, 2.0, 7.0))
CLI_LEVELS = [arg for slots, w, r in LEVELS for arg in ("--level", f"{slots},{w:g},{r:g}")]


def ctrl_c_at(stage: str) -> Callable[[Progress], None]:
    """A progress watcher that raises `KeyboardInterrupt` (a Ctrl-C) when the search enters `stage`."""
    def watch(p: Progress) -> None:
        if p.stage == stage:
            raise KeyboardInterrupt
    return watch


@contextmanager
def ctrl_c_during(stage: str) -> Iterator[None]:
    with watching(ctrl_c_at(stage)):
        yield


# --------------------------------------------------------------------------------------------------------------
# Ctrl-C in the search over orders: the Python API
# --------------------------------------------------------------------------------------------------------------


def test_a_ctrl_c_after_the_first_order_answers_with_it() -> None:
    inst = HRevolveInstance(6, LEVELS, 3.0, 2.0)
    full = solve_hrevolve(inst)
    assert full.details["orders"] == 6 and full.details["orders_tried"] == 6
    with answer_on_interrupt(), ctrl_c_during("level order 2/6"):
        res = solve_hrevolve(inst)
        assert interrupted()  # recorded in the block, as the exact solvers record theirs
    assert res.details["interrupted"] is True
    assert res.status == "feasible"
    assert res.details["orders_tried"] == 1 and res.details["orders"] == 6
    assert "interrupted" in res.message and "1 of 6" in res.message
    assert "1 (interrupted) of the 6 level orders" in res.scope
    assert res.schedule is not None and res.objective is not None
    assert res.objective >= full.objective  # one order of six: no better than the best of all
    replay = simulate_hrevolve(6, LEVELS, res.schedule.ops, 3.0, 2.0)
    assert replay.cost == pytest.approx(res.objective)


def test_a_ctrl_c_before_any_order_finished_answers_without_a_schedule() -> None:
    inst = HRevolveInstance(6, LEVELS)
    with answer_on_interrupt(), ctrl_c_during("level order 1/6"):
        res = solve_hrevolve(inst)
    assert res.status == "timeout" and res.schedule is None and res.objective is None
    assert res.details["interrupted"] is True
    assert res.details["orders_tried"] == 0 and res.details["orders"] == 6


def test_outside_answer_on_interrupt_a_ctrl_c_is_raised() -> None:
    inst = HRevolveInstance(6, LEVELS)
    with ctrl_c_during("level order 2/6"), pytest.raises(KeyboardInterrupt):
        solve_hrevolve(inst)


def test_progress_reports_each_order_and_the_best_so_far() -> None:
    seen: list[Progress] = []
    with watching(seen.append):
        res = solve_hrevolve(HRevolveInstance(6, LEVELS, 3.0, 2.0))
    stages = [p.stage for p in seen]
    assert [f"level order {i}/6" for i in range(1, 7)] == list(dict.fromkeys(stages))
    assert seen[-1].best == pytest.approx(res.objective)


# --------------------------------------------------------------------------------------------------------------
# Ctrl-C: the command
# --------------------------------------------------------------------------------------------------------------


def test_the_command_prints_what_the_search_had_and_exits_130() -> None:
    with ctrl_c_during("level order 2/6"):
        res = run_cli("hrevolve", "6", *CLI_LEVELS, "--json")
    assert res.code == 130, res.err
    answer = json.loads(res.out)
    assert answer["status"] == "feasible" and answer["interrupted"] is True
    assert answer["orders_tried"] == 1 and answer["orders"] == 6
    assert answer["cost"] is not None and answer["schedule"]["ops"]
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and "(feasible)" in lines[0], res.err


def test_the_command_in_text_form_prints_the_answer_too() -> None:
    with ctrl_c_during("level order 3/6"):
        res = run_cli("hrevolve", "6", *CLI_LEVELS)
    assert res.code == 130, res.err
    assert res.out.startswith("status    feasible")
    assert "2 (interrupted) of the 6 level orders" in res.out
    assert any(line.startswith("cost ") for line in res.out.splitlines())
    assert any(line.startswith("schedule ") for line in res.out.splitlines())


def test_the_command_without_a_finished_order_says_so_and_exits_130() -> None:
    with ctrl_c_during("level order 1/6"):
        res = run_cli("hrevolve", "6", *CLI_LEVELS, "--json")
    assert res.code == 130, res.err
    answer = json.loads(res.out)
    assert answer["status"] == "timeout" and answer["schedule"] is None and answer["interrupted"] is True
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "(no schedule)" in lines[0] and "infeasible" not in lines[0], res.err


def _read_until(fd: int, needle: bytes, proc: subprocess.Popen, timeout: float) -> bytes:
    """What the terminal `fd` shows until it contains `needle` (fails after `timeout` s or when `proc` ended)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline, f"no {needle!r} within {timeout} s: {seen[-300:]!r}"
        assert proc.poll() is None, seen[-300:]
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # EIO: the command closed the terminal (it ended)
                pytest.fail(f"the command ended before showing {needle!r}: {seen[-300:]!r}")
    return seen


def test_a_real_ctrl_c_on_a_terminal_keeps_the_orders_finished() -> None:
    levels = [arg for k in range(5) for arg in ("--level", f"inf,{k},{9 - k}")]  # 120 orders: tens of seconds
    main_fd, term_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memsched", "hrevolve", "300", *levels, "--json"],
                            stdout=subprocess.PIPE, stderr=term_fd, cwd=ROOT, preexec_fn=sigint_as_in_a_terminal)
    os.close(term_fd)
    try:
        shown = _read_until(main_fd, b"| best ", proc, timeout=120)  # the live line: the first order has finished
        assert b"level order " in shown
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main_fd)
    assert proc.returncode == 130
    answer = json.loads(out)
    assert answer["status"] == "feasible" and answer["interrupted"] is True
    assert 1 <= answer["orders_tried"] < answer["orders"] == 120


# --------------------------------------------------------------------------------------------------------------
# Malformed levels and step costs in the Python API
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [(1, "2", 0), (1, 0), (1, None, 0), (1, True, False), (1, 0, True), (1, 0, 0, 0),
                                   "1,0,0", 5, None, (1, 10**400, 0)])
def test_a_malformed_level_is_an_input_error_naming_it(level: object) -> None:
    with pytest.raises(InputError) as err:
        HRevolveInstance(3, ((2, 0.0, 0.0), level))  # type: ignore[arg-type]
    assert err.value.field == "level 1"
    assert str(err.value).startswith("level 1: ")


@pytest.mark.parametrize(("u_f", "u_b", "field"), [("1", 1.0, "u_f"), (1.0, None, "u_b"), (True, 1.0, "u_f"),
                                                   (1.0, False, "u_b"), (-1.0, 1.0, "u_f"), (1.0, float("inf"), "u_b")])
def test_a_bad_step_cost_is_an_input_error_naming_it(u_f: object, u_b: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        check_step_costs(u_f, u_b)  # type: ignore[arg-type]
    assert err.value.field == field
    with pytest.raises(InputError):
        HRevolveInstance(3, ((1, 0.0, 0.0),), u_f, u_b)  # type: ignore[arg-type]


def test_numbers_of_any_real_type_are_still_accepted() -> None:
    inst = HRevolveInstance(3, ((np.int64(2), np.float32(1.5), 2), (None, 3, np.float64(4.0))), np.float64(1.0), 2)
    assert inst.levels[0] == (2, 1.5, 2.0) and inst.levels[1] == (None, 3.0, 4.0)
    assert all(type(x) is float for lev in inst.levels for x in lev[1:])


# --------------------------------------------------------------------------------------------------------------
# The command's answers to bad input are unchanged
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "text"), [
    (["4", "--level", "1,0"], "--level: expected SLOTS,WRITE,READ (3 fields), got '1,0'"),
    (["4", "--level", "1,x,0"], "--level: expected SLOTS,WRITE,READ, got '1,x,0'"),
    (["4", "--level", "1,nan,0"], "--level: write and read costs must be a finite number >= 0 and <= 1e+15"),
    (["4", "--level", "1,1e16,0"], "--level: write and read costs must be a finite number >= 0 and <= 1e+15"),
    (["4", "--level", "1,0,0", "--uf", "-1"], "argument --uf: must be a finite number >= 0"),
    (["600", "--level", "1,0,0"], "argument length: must be an integer in 0..500"),
])
def test_bad_input_on_the_command_line_is_answered_as_before(argv: list[str], text: str) -> None:
    one_line_refusal(run_cli("hrevolve", *argv), text)


def test_no_slot_is_still_infeasible_with_exit_1() -> None:
    res = run_cli("hrevolve", "3", "--level", "0,0,0")
    assert res.code == 1
    assert res.out.startswith("status    infeasible")
    assert "infeasible: a chain of length >= 1 needs at least one storage slot" in res.err

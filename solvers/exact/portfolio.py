"""Race MILP backends on one `LinearModel`, each in its own process; the first proof ends the race.

SCIP and HiGHS prove different instances first (results/bench_chain_exact.csv: HiGHS proves the
chain phase model of L = 50 at the mid budget in 53 s where SCIP needs 132 s; SCIP ends the tight
budget of L = 30 at a smaller gap), and neither uses a second core on these models. Raced on
the two cores they prove L = 50 mid in 56.5 s (HiGHS's proof) and end L = 30 tight at SCIP's 1.68%. With
``workers >= 2`` the chain `milp` runs both at once (`backend="portfolio"`).

Each backend runs `milp_runner.run_milp` in a forked child process (as the exact layer's
optional seeds do: no start-up cost, and no re-import of the caller's ``__main__``, which the
``spawn`` method needs and a notebook or a piped script does not have) under the caller's
`Deadline`. When one backend proves optimality or infeasibility the others are terminated;
otherwise every backend runs to the limit. The merged answer (`merge_runs`):

- the solution is the best any backend returned; the bound is the largest any backend proved
  (each is a bound of the same model), capped at that solution;
- ``optimal`` when a backend proved it, or when the best solution and the largest bound meet within
  the relative gap (a proof split between two backends is still a proof); else ``feasible``
  with a solution, ``infeasible`` only as a backend's proof, ``timeout`` otherwise.

On Ctrl-C (`solvers.exact.interrupt`) every child stops its backend and answers with what it
has; the merged answer is returned inside `answer_on_interrupt`, else `KeyboardInterrupt` is
raised once the children have answered. A child that has not answered `INTERRUPT_GRACE_S` (2.5 s)
after the Ctrl-C (HiGHS's root LP ignores it: Checkmate's HiGHS on a U-Net answered 8-12 s after
it) is killed with its process group and counts as stopped without an answer: the caller answers
with what it has (its warm start, its root bound).

Where no child process can be forked (a daemonic worker such as a sweep's pool worker, a platform
without ``fork``) the first backend runs alone in this process; `BackendRun.backend_status` says
which happened.

`run_isolated` runs one backend the same way, for its hard deadline: a child still running
`GRACE_S` after the limit is killed. SCIP's presolve and HiGHS's first root LP do not look at
their clock or at an interrupt on large models (Checkmate's model of a 400-node random layered
graph, 2.6 million nonzeros, 30 s limit: SCIP and HiGHS were still running 30 s after it,
results/bench_model_memory.csv; in an earlier run SCIP answered after 174 s, and HiGHS after
88 s on a 300-node graph, 1.5 million nonzeros), so in this process they would hold the caller
past its limit; nor does handing a model of that size to the CBC program (OR-Tools' MPS export and
the file: a 25 s limit held for 30.75 s). A killed backend's incumbent is lost (the caller keeps
its warm start).

Each child leads a process group of its own, and stopping a child stops its group: the CBC
program a child started would otherwise run on, orphaned, to its own limit. A Ctrl-C at the
terminal therefore reaches the children only through this process, which passes it on, once per
child (a second Ctrl-C could otherwise hit a child while it sends its answer: a traceback, and the
answer lost); a child ignores SIGINT once its backend has returned. A child dies with this process
(`interrupt.die_with_parent`: ``PR_SET_PDEATHSIG`` on Linux), so that even a ``kill -9`` of the
caller leaves no backend running to its limit. A Ctrl-C that comes while a child is forked is raised
here once the fork is over and the child is in the race, stopped with the others
(`solvers.processes.signals_held_during_fork`; in an at-fork hook it was printed and lost, and the
race went on).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import cast

from ..processes import release_held_signals, signals_held_during_fork
from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, gap_closed
from .cbc_cmd import STOP_WAIT_S
from .interrupt import die_with_parent, interrupt_signals, stop_on_interrupt
from .layer import can_fork
from .linear import LinearModel
from .milp_runner import REL_GAP, BackendRun, not_started, run_milp
from .options import Deadline, DeadlineExceeded, ExactOptions

#: the backends raced by default: one SCIP and one HiGHS process
DEFAULT_BACKENDS = ("scip", "highs")
#: seconds a child may take past the deadline to report (emitting its answer) before it is killed; the
#: caller is to keep max(1.1 x limit, limit + 2 s) (bench_time_limits: at 2 s a silent HiGHS child once
#: held the chain portfolio 12.2 s for 10 s)
GRACE_S = 1.0
#: seconds a child may take to answer after a Ctrl-C was passed on to it before its process group is killed
#: (HiGHS's root LP and SCIP's presolve do not look at an interrupt on large models: Checkmate's HiGHS on a
#: U-Net graph answered 8-12 s after it); half a second more than the CBC program is given in a child
#: (`cbc_cmd.STOP_WAIT_S`), so that an incumbent CBC writes at the end of its 2 s still reaches the answer
INTERRUPT_GRACE_S = STOP_WAIT_S + 0.5
#: seconds between two looks, while the answers are awaited, at whether a Ctrl-C was passed on
POLL_S = 0.1


def _child(conn: Connection, model: LinearModel, backend: str, deadline: Deadline, options: ExactOptions,
           hint: list[float] | None, hint_feasible: bool, rel_gap: float, feasibility_only: bool = False,
           fallback: bool = True) -> None:
    """Process body: solve and send the `BackendRun` (without its backend object) to the parent; `fallback`
    as `run_milp`'s (off in a race: the other backend already runs beside this one).
    The child leads its own process group, so that stopping it stops what it started too, and dies
    with its parent. It starts with the interrupt signals held (`run_portfolio`): an interrupt
    that came since the fork is raised once the child leads its group, as one in the backend
    would be. Once the backend has returned, SIGINT is ignored: the answer is sent whatever
    comes (a KeyboardInterrupt in ``conn.send`` was a traceback and a lost answer)."""
    _own_group(0)
    parent = mp.parent_process()
    die_with_parent(None if parent is None else parent.pid)
    run: BackendRun | None = None
    try:
        release_held_signals()
        run = run_milp(model, backend, deadline, options, hint=hint, hint_feasible=hint_feasible, rel_gap=rel_gap,
                       feasibility_only=feasibility_only, fallback=fallback)
        _ignore_sigint()
        run.solver = None
    except DeadlineExceeded:
        run = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="time limit reached while emitting the model")
    except KeyboardInterrupt:  # interrupted outside the backend's search: the parent raises it or answers
        _ignore_sigint()
        if run is None:  # (an answer already returned is kept)
            run = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="interrupted")
        run.solver = None
    except Exception as exc:  # noqa: BLE001 (reported to the parent as an answer-less run)
        run = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status=f"failed: {type(exc).__name__}: {exc}")
    _ignore_sigint()
    conn.send(run)
    conn.close()


def _ignore_sigint() -> None:
    """SIGINT ignored from now on in this (child) process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _proof(run: BackendRun) -> bool:
    return run.status in (OPTIMAL, INFEASIBLE)


def run_isolated(model: LinearModel, backend: str, deadline: Deadline, options: ExactOptions, *,
                 hint: list[float] | None = None, hint_feasible: bool = False, rel_gap: float = REL_GAP,
                 feasibility_only: bool = False, watched: bool = False) -> BackendRun:
    """`run_milp` with `backend` in a forked child that is killed `GRACE_S` after the
    deadline (module docstring); in this process where no child can be forked."""
    return run_portfolio(model, deadline, options, backends=(backend,), hint=hint, hint_feasible=hint_feasible,
                         rel_gap=rel_gap, feasibility_only=feasibility_only, watched=watched, isolate=True)


def run_portfolio(model: LinearModel, deadline: Deadline, options: ExactOptions, *,
                  backends: Sequence[str] = DEFAULT_BACKENDS, hint: list[float] | None = None,
                  hint_feasible: bool = False, rel_gap: float = REL_GAP, feasibility_only: bool = False,
                  watched: bool = False, isolate: bool = False, grace: float = GRACE_S) -> BackendRun:
    """Race `backends` (names of `milp_runner.MILP_BACKENDS`) on `model` within `deadline`, one
    process and one thread each (HiGHS gets the workers left over); the merged `BackendRun`.
    `watched`: as `run_milp`'s (each backend's answer is reported as it arrives). A single backend
    runs in this process unless `isolate` (`run_isolated`). A child without an answer `grace`
    seconds after the deadline is killed."""
    if (len(backends) < 2 and not isolate) or not can_fork():
        run = run_milp(model, backends[0], deadline, options, hint=hint, hint_feasible=hint_feasible, rel_gap=rel_gap,
                       feasibility_only=feasibility_only, watched=watched)
        if len(backends) >= 2 or isolate:
            run.backend_status = f"{backends[0]} alone (no child process can be forked here): {run.backend_status}"
        return run
    if (skipped := not_started(deadline)) is not None:  # no child forked for nothing
        return skipped
    report(f"search ({' + '.join(backends)}, {len(backends)} process{'es' if len(backends) > 1 else ''})")
    spare = max(1, options.workers - (len(backends) - 1))
    ctx = mp.get_context("fork")
    children: dict[Connection, tuple[str, mp.process.BaseProcess]] = {}
    try:
        for backend in backends:
            threads = spare if backend == "highs" else 1
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, daemon=True,
                               args=(send, model, backend, deadline, replace(options, workers=threads), hint,
                                     hint_feasible, rel_gap, feasibility_only, len(backends) < 2))
            # a Ctrl-C during the fork is raised after it, once the child is known to `_stop`
            with signals_held_during_fork(interrupt_signals()):
                try:
                    proc.start()
                finally:
                    send.close()
                _own_group(cast(int, proc.pid))
                children[receive] = (backend, proc)
        interrupter = _interrupter(children)
        with stop_on_interrupt(interrupter):  # each child stops its backend and answers, or is killed
            runs = _collect(children, deadline, watched, grace, interrupter)
    finally:  # a proof, the limit, or an interrupt (Ctrl-C in a notebook): no backend outlives the call
        _stop(children)
    if len(runs) == 1:  # `run_isolated`: the backend's own answer
        return next(iter(runs.values()))
    return merge_runs(runs, deadline.elapsed(), rel_gap)


class _Interrupter:
    """The `stop` of the race (called from `stop_on_interrupt`'s watcher thread): SIGINT to each child still
    running, once (in their own process groups, the children hear Ctrl-C only from here; each stops its
    backend and answers; a second SIGINT could only break a child that is sending its answer). `asked_at`:
    the `time.monotonic()` of the first call, None before (`_collect` then waits `INTERRUPT_GRACE_S` more)."""

    def __init__(self, children: dict[Connection, tuple[str, mp.process.BaseProcess]]) -> None:
        self.children = children
        self.told: set[int] = set()
        self.asked_at: float | None = None

    def __call__(self) -> None:
        if self.asked_at is None:
            self.asked_at = time.monotonic()
        for _, proc in self.children.values():
            if proc.pid is not None and proc.pid not in self.told and proc.is_alive():
                self.told.add(proc.pid)
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGINT)


def _interrupter(children: dict[Connection, tuple[str, mp.process.BaseProcess]]) -> _Interrupter:
    """The `stop` of the race over `children` (`_Interrupter`)."""
    return _Interrupter(children)


def _collect(children: dict[Connection, tuple[str, mp.process.BaseProcess]], deadline: Deadline,
             watched: bool = False, grace: float = GRACE_S,
             interrupter: _Interrupter | None = None) -> dict[str, BackendRun]:
    """The backends' answers, until one is a proof, all have answered, or the deadline (plus
    `grace` seconds) has passed, or `INTERRUPT_GRACE_S` seconds since `interrupter` passed a Ctrl-C on;
    a backend without an answer by then counts as stopped (``timeout``); after a Ctrl-C its process group
    is killed at once (a backend that ignores the interrupt, HiGHS in its root LP, would hold the answer)."""
    runs: dict[str, BackendRun] = {}
    left = deadline.left()
    end = None if left is None else time.monotonic() + max(0.0, left) + grace
    pending = dict(children)
    while pending and not any(_proof(r) for r in runs.values()):
        stop = _end_of_wait(end, interrupter)
        timeout = None if stop is None else max(0.0, stop - time.monotonic())
        if interrupter is not None:  # the Ctrl-C comes in another thread: look again every POLL_S
            timeout = POLL_S if timeout is None else min(timeout, POLL_S)
        ready = wait(list(pending), timeout)
        if not ready:
            if stop is not None and time.monotonic() >= stop:
                break
            continue
        for item in ready:
            conn = cast(Connection, item)
            backend, _ = pending.pop(conn)
            try:
                runs[backend] = run = cast(BackendRun, conn.recv())
            except (EOFError, OSError):
                runs[backend] = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="ended without an answer")
                continue
            if watched and run.values is not None:
                report(f"search: {backend} answered ({run.status})", best=run.objective, bound=run.bound)
    provers = [backend for backend, run in runs.items() if _proof(run)]
    why = f"stopped: {provers[0]} proved first" if provers else f"stopped: no answer {grace:g} s after the time limit"
    if not provers and interrupter is not None and interrupter.asked_at is not None:
        why = f"killed: no answer {INTERRUPT_GRACE_S:g} s after the Ctrl-C"
        for _, proc in pending.values():  # (`_stop` would first wait 2 s for a SIGTERM that it ignores too)
            _signal_group(proc, signal.SIGKILL)
    for backend, _ in pending.values():
        runs[backend] = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status=why)
    return runs


def _end_of_wait(end: float | None, interrupter: _Interrupter | None) -> float | None:
    """The `time.monotonic()` at which `_collect` stops waiting: `end` (the deadline plus its grace; None:
    none), or `INTERRUPT_GRACE_S` after a Ctrl-C was passed on, whichever comes first."""
    asked = None if interrupter is None else interrupter.asked_at
    if asked is None:
        return end
    return asked + INTERRUPT_GRACE_S if end is None else min(end, asked + INTERRUPT_GRACE_S)


def _own_group(pid: int) -> None:
    """Make process `pid` (0: this one) the leader of a process group of its own. Called by the
    child and, against the race, by the parent; the call that comes second fails harmlessly."""
    try:
        os.setpgid(pid, 0)
    except OSError:
        pass


def _signal_group(proc: mp.process.BaseProcess, sig: int) -> None:
    """Send `sig` to the child's process group (the child and any program it started, such as
    the CBC program), or to the child alone when it leads no group."""
    if proc.pid is None:
        return
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        try:
            os.kill(proc.pid, sig)
        except OSError:
            pass


def _stop(children: dict[Connection, tuple[str, mp.process.BaseProcess]]) -> None:
    """Stop the children and what they started (the CBC program: orphaned, it would run to its
    own limit); reap them; close the pipes. A child that has answered is ending anyway. The
    groups are signalled before any child is reaped, while its pid (the group's id) is still
    the child's."""
    for _, proc in children.values():
        _signal_group(proc, signal.SIGTERM)
    for conn, (_, proc) in children.items():
        proc.join(timeout=2.0)
        if proc.is_alive():
            _signal_group(proc, signal.SIGKILL)
            proc.join()
        conn.close()


def merge_runs(runs: dict[str, BackendRun], wall: float, rel_gap: float = REL_GAP) -> BackendRun:
    """One `BackendRun` from the backends' (see the module docstring), `wall` seconds into the
    deadline; `backend_status` names the backend of the schedule kept, then lists each one's."""
    found = {b: r for b, r in runs.items() if r.found and r.objective is not None}
    bounds = [r.bound for r in runs.values() if r.bound is not None]
    status_text = "; ".join(f"{b}: {r.status} ({r.backend_status})" for b, r in runs.items())
    merged = BackendRun(TIMEOUT, wall=wall, backend_status=status_text,
                        build_s=max((r.build_s for r in runs.values()), default=0.0))
    merged.log = sorted((p for r in runs.values() for p in r.log), key=lambda point: point[0])
    if found:
        best_backend, best = min(found.items(), key=lambda item: item[1].objective)  # type: ignore[arg-type,return-value]
        objective = float(best.objective)  # type: ignore[arg-type]
        bound = max(bounds) if bounds else None
        if bound is not None:
            bound = min(bound, objective)
        proven = best.status == OPTIMAL or (
            gap_closed(objective, bound, max(1e-6, rel_gap)))
        merged.status = OPTIMAL if proven else FEASIBLE
        merged.values, merged.objective, merged.bound = best.values, objective, bound
        merged.backend_status = f"best from {best_backend}; {status_text}"
        return merged
    if any(r.status == INFEASIBLE for r in runs.values()):
        merged.status = INFEASIBLE
    return merged


__all__ = ["DEFAULT_BACKENDS", "merge_runs", "run_isolated", "run_portfolio"]

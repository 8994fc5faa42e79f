"""CBC held to a wall-clock deadline: the model is exported (MPS) and solved by the CBC program
in a child process with ``-timeMode elapsed``, and the child is killed if it overruns.

Why: OR-Tools' in-process CBC counts the time limit in *CPU* seconds and cannot be
interrupted, so on a loaded machine a 30 s limit ran for 257 s of wall time (measured: a 4 s
limit took 14 s of wall time at load 10 on 2 cores, CPU 5.2 s). CBC's own ``timeMode elapsed``
counts wall-clock time; the kill is the backstop for phases that do not look at the clock.

The program is the CBC shipped with PuLP (or ``cbc`` on the PATH); `cbc_program` is None when
neither exists, and `milp_runner` then falls back to the in-process CBC (CPU-time limit).

Ctrl-C (SIGINT to this process, as a notebook's "interrupt kernel" sends it) is passed on to the
program, which stops its search and writes its incumbent (`interrupt.stop_on_interrupt`,
`_stopper`): the answer is then the program's, as for SCIP or CP-SAT, and the program does
not outlive the call, nor this process (``PR_SET_PDEATHSIG`` on Linux, `interrupt.parent_death_hook`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ..processes import release_held_signals, signals_held_during_fork
from .interrupt import interrupt_signals, interrupted, parent_death_hook, stop_on_interrupt
from .linear import LinearModel

#: seconds given to the CBC program past its own limit before it is killed
KILL_GRACE_S = 1.0
#: seconds set aside for starting the program and reading the model
START_S = 0.2
#: at an interrupt: seconds from the first SIGINT to the program until it is killed (in its branch and bound CBC
#: stops and writes its incumbent within this; while it reads and presolves a model it ignores SIGINT, and each
#: second waited there is a second of delay: 10 s made a Ctrl-C on a 75,000-variable model answer 10.5 s late)
STOP_WAIT_S = 2.0


@functools.lru_cache(maxsize=1)
def cbc_program() -> str | None:
    """Path of a CBC executable (PuLP's bundled one first, then ``cbc`` on the PATH), or None. OR-Tools'
    linear solver is loaded before PuLP, whose import brings highspy's HiGHS into the global symbol scope
    (`milp_runner`'s docstring: an OR-Tools loaded after it crashed in pywraplp's HiGHS)."""
    with contextlib.suppress(ImportError):
        from ortools.linear_solver import pywraplp  # noqa: F401
    try:
        with warnings.catch_warnings():  # PuLP 3 deprecates the class, not the bundled program
            warnings.simplefilter("ignore", DeprecationWarning)
            from pulp.apis import PULP_CBC_CMD

            path = PULP_CBC_CMD().path
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return str(path)
    except Exception:  # PuLP missing or without its binary
        pass
    return shutil.which("cbc")


@dataclass
class CbcAnswer:
    """What the CBC program returned: `status` (optimal / feasible / infeasible / timeout),
    `values` (by column index, None without a solution), CBC's objective and bound (CBC's
    units: the caller shifts them by its own objective), and how it ended. `failed`: the program ended
    without its solution file, not killed at the deadline nor at a Ctrl-C (a crash: CBC 2.10 aborted on
    ``std::bad_alloc`` on a 4-stage chain's model at exact sizes, exit -6, after 0.2 s of 20)."""

    status: str
    values: list[float] | None = None
    objective: float | None = None
    bound: float | None = None
    ended: str = ""
    failed: bool = False


def solve_mps(mps: str, num_vars: int, limit_s: float | None, *, rel_gap: float, threads: int = 1,
              hint: list[float] | None = None, names: list[str] | None = None, verbose: bool = False,
              program: str | None = None, seed: int = 0) -> CbcAnswer:
    """Solve the minimisation in `mps` (free MPS, `model_to_mps`, columns named ``names`` in
    index order) with at most `limit_s` seconds of wall-clock time (None: no
    limit). `hint` is a complete assignment given as CBC's MIP start. The gap is relative only
    (``-allowableGap 0``); the objective is expected in a normal range (`milp_runner.objective_scale`).
    `seed` > 0 is CBC's ``-randomSeed`` and ``-randomCbcSeed`` (0: CBC's default search)."""
    program = program or cbc_program()
    if program is None:
        raise RuntimeError("no CBC program (PuLP's bundled cbc or cbc on the PATH)")
    # OR-Tools writes an empty NAME, which CBC's reader takes for a broken header
    mps = re.sub(r"^NAME[ \t]*$", "NAME model", mps, count=1, flags=re.M)
    with tempfile.TemporaryDirectory(prefix="memsched-cbc-") as tmp:
        model_path = os.path.join(tmp, "model.mps")
        sol_path = os.path.join(tmp, "model.sol")
        with open(model_path, "w") as f:
            f.write(mps)
        args = [program, model_path, "-ratioGap", repr(float(rel_gap)), "-allowableGap", "0",
                "-threads", str(max(1, threads))]
        if seed:
            args += ["-randomSeed", str(int(seed)), "-randomCbcSeed", str(int(seed))]
        sec = None if limit_s is None else max(0.01, float(limit_s) - START_S)
        if sec is not None:
            args += ["-timeMode", "elapsed", "-sec", repr(sec)]
        if hint is not None and names is not None:
            start_path = os.path.join(tmp, "start.sol")
            with open(start_path, "w") as f:
                f.write("Stopped on iterations - objective value 0\n")
                for i, (name, v) in enumerate(zip(names, hint)):
                    f.write(f"{i} {name} {float(v)!r} 0\n")
            args += ["-mips", start_path]
        args += ["-solve", "-solu", sol_path]
        signals = interrupt_signals()
        proc: subprocess.Popen[str] | None = None
        try:
            with signals_held_during_fork(signals):  # a Ctrl-C during the fork is raised after it
                proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
                                        preexec_fn=_child_setup(signals))
            try:
                with stop_on_interrupt(_stopper(proc), repeat=True):
                    out, _ = proc.communicate(timeout=None if limit_s is None else max(0.0, limit_s) + KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                return CbcAnswer("timeout", ended="killed at the deadline")
        finally:  # an exception on the way (a KeyboardInterrupt outside `answer_on_interrupt`): no orphan
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        if verbose:
            print(out, file=sys.stderr)  # standard output holds `memsched solve --json`'s answer
        if not os.path.exists(sol_path):
            return CbcAnswer("timeout", ended=f"no solution file (exit {proc.returncode})", failed=not interrupted())
        with open(sol_path) as f:
            lines = f.read().splitlines()
    return _parse(lines, out, num_vars, names, sec)


def _at_time_limit(out: str, sec: float | None) -> bool:
    """Whether CBC's log `out` shows the run used at least 90% of its `sec` seconds of wall clock.
    CBC 2.10 stopped by its clock inside preprocessing's cut generators reports "Cut generators
    found to be infeasible", then "Integer infeasible" on a feasible model (measured: a 5-node
    Checkmate model under ``-sec 0.01``, about one run in 15): its "infeasible" is then no proof."""
    if sec is None:
        return False
    wall = _number(out, "(Wallclock seconds):")
    return wall is None or wall >= 0.9 * sec


def _child_setup(signals: list[int]) -> Callable[[], None]:
    """The program's ``preexec_fn`` (run in the child between fork and exec): the interrupt `signals`,
    held over the fork (`signals_held_during_fork`), get the handling exec would give them (ignored
    where this process ignores them, else the default; an interrupt held since the fork ends the
    child here: this process heard it too), then the program is made to die with this process
    (`parent_death_hook`, even on SIGKILL: never orphaned to run to its limit)."""
    handling = {sig: signal.SIG_IGN if signal.getsignal(sig) == signal.SIG_IGN else signal.SIG_DFL
                for sig in signals}
    die = parent_death_hook()

    def setup() -> None:
        release_held_signals(handling)
        if die is not None:
            die()

    return setup


def _stopper(proc: subprocess.Popen) -> Callable[[], None]:
    """The `stop` of the CBC program at an interrupt, keeping its incumbent where it can: CBC ends
    its search on SIGINT and still writes its solution file, but forgets a SIGINT that comes before
    its branch and bound starts (presolve, root: measured, one sent 0.05-0.5 s after the start
    was ignored to the limit). Called again every `interrupt.STOP_REPEAT_S` seconds
    (``stop_on_interrupt(repeat=True)``), it sends SIGINT each time, and kills the program once
    `STOP_WAIT_S` seconds have passed since the first (then without an answer)."""
    first: list[float] = []

    def stop() -> None:
        now = time.monotonic()
        if not first:
            first.append(now)
        if proc.poll() is not None:
            return
        if now - first[0] >= STOP_WAIT_S:
            proc.kill()
            return
        try:
            proc.send_signal(signal.SIGINT)
        except OSError:
            pass

    return stop


def _parse(lines: list[str], out: str, num_vars: int, names: list[str] | None, sec: float | None = None) -> CbcAnswer:
    """Read CBC's solution file (`lines`) and log (`out`) of a run given `sec` seconds (``-sec``)."""
    head = lines[0] if lines else ""
    ended = head.split(" - ")[0].strip()
    if head.startswith("Infeasible") or head.startswith("Integer infeasible"):
        if _at_time_limit(out, sec):
            return CbcAnswer("timeout", ended=f"{ended} at its time limit (not a proof)")
        return CbcAnswer("infeasible", ended=ended)
    has_solution = "objective value" in head and "no integer solution" not in head \
        and "No feasible solution found" not in out and not head.startswith(("Unbounded", "Integer unbounded"))
    if not has_solution:
        return CbcAnswer("timeout", ended=ended)
    index = {n: i for i, n in enumerate(names)} if names is not None else None
    values = [0.0] * num_vars
    for line in lines[1:]:
        parts = line.split()
        if len(parts) < 3:
            continue
        if parts[0] == "**":  # CBC marks values outside their bounds
            parts = parts[1:]
        i = index.get(parts[1], -1) if index is not None else int(parts[0])
        if 0 <= i < num_vars:
            values[i] = float(parts[2])
    objective = _number(out, "Objective value:")
    bound = _number(out, "Lower bound:")
    status = "optimal" if head.startswith("Optimal") else "feasible"
    return CbcAnswer(status, values=values, objective=objective, bound=bound, ended=ended)


def _number(text: str, label: str) -> float | None:
    """The number after `label` in CBC's summary, or None."""
    m = re.search(re.escape(label) + r"\s*(\S+)", text)
    if m is None:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    return v if math.isfinite(v) and abs(v) < 1e19 else None


def column_name(i: int) -> str:
    """The MPS name of variable `i` (OR-Tools' form, which `solve_mps` reads the solution by)."""
    return f"auto_v_{i:09d}"


def _num(value: float) -> str:
    """`value` in full: the shortest text that reads back as the same double (OR-Tools 9.15's MPS
    export writes 6 significant digits: 6000.204 became 6000.2, a row scaled by 2^-9 lost its
    coefficients, and CBC then "proved" optima of another model)."""
    return repr(float(value))


def model_to_mps(model: LinearModel, *, feasibility_only: bool = False,
                 check: Callable[[], None] | None = None) -> str:
    """`model` in free MPS format, every number written in full (`_num`): columns `column_name`,
    rows ``r<k>`` scaled as `milp_runner.row_scale` scales them for the other backends (by a power
    of two: exact), integer columns between INTORG/INTEND markers, explicit bounds on every column.
    The objective offset is left out (the caller evaluates the objective on the model); a row with
    no finite side is left out; with `feasibility_only` the objective is empty. `check` is called
    every 4096 rows (a deadline's ``check``, which raises when the time is spent)."""
    from .milp_runner import row_scale

    rows: list[tuple[str, str, float, float | None, list[int], list[float]]] = []
    for k, (idx, coef, lo, hi) in enumerate(model.rows):
        if check is not None and k % 4096 == 0:
            check()
        scale = row_scale(coef)
        lo_s, hi_s = lo * scale, hi * scale
        if math.isinf(lo) and math.isinf(hi):
            continue
        if lo == hi:
            kind, rhs, rng = "E", hi_s, None
        elif math.isinf(lo):
            kind, rhs, rng = "L", hi_s, None
        elif math.isinf(hi):
            kind, rhs, rng = "G", lo_s, None
        else:
            kind, rhs, rng = "L", hi_s, hi_s - lo_s
        rows.append((f"r{k}", kind, rhs, rng, idx, [c * scale for c in coef]))
    entries: list[list[tuple[str, float]]] = [[] for _ in range(model.num_vars)]
    if not feasibility_only:
        for i, c in model.objective.items():
            entries[i].append(("obj", c))
    for name, _, _, _, idx, coef in rows:
        for i, c in zip(idx, coef):
            if c != 0.0:
                entries[i].append((name, c))
    out = ["NAME model", "ROWS", " N  obj", *(f" {kind}  {name}" for name, kind, *_ in rows), "COLUMNS"]
    integer = False
    for i, col in enumerate(entries):
        if model.integer[i] != integer:
            integer = model.integer[i]
            out.append(f"    MARKER  'MARKER'  '{'INTORG' if integer else 'INTEND'}'")
        out += [f"    {column_name(i)}  {row}  {_num(c)}" for row, c in col] or [f"    {column_name(i)}  obj  0.0"]
    if integer:
        out.append("    MARKER  'MARKER'  'INTEND'")
    out.append("RHS")
    out += [f"    RHS  {name}  {_num(rhs)}" for name, _, rhs, _, _, _ in rows if rhs != 0.0]
    if any(rng is not None for *_, rng, _, _ in rows):
        out.append("RANGES")
        out += [f"    RNG  {name}  {_num(rng)}" for name, _, _, rng, _, _ in rows if rng is not None]
    out.append("BOUNDS")
    for i, (lo, hi) in enumerate(zip(model.lb, model.ub)):
        name = column_name(i)
        if lo == hi:
            out.append(f" FX BND  {name}  {_num(lo)}")
            continue
        out.append(f" MI BND  {name}" if math.isinf(lo) else f" LO BND  {name}  {_num(lo)}")
        out.append(f" PL BND  {name}" if math.isinf(hi) else f" UP BND  {name}  {_num(hi)}")
    out.append("ENDATA")
    return "\n".join(out) + "\n"


__all__ = ["CbcAnswer", "KILL_GRACE_S", "cbc_program", "column_name", "model_to_mps", "solve_mps"]

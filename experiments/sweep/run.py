"""Running a sweep: the cells not yet journaled, on local processes or a Dask cluster, then the table."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, first_line, flag
from memsched.solvers.processes import stop_signals

from .cell import failed_row, run_task
from .config import SweepConfig, load_config
from .grid import Task, build_tasks
from .instance_store import InstanceStore, check_folder
from .lock import LOCK_NAME, SweepLock, check_lock_path
from .pool import WorkerPool
from .store import (
    Journal,
    check_written_paths,
    journal_path,
    read_journal,
    seed_journal,
    table_path,
    write_table,
)
from .verify import rekeyed, resumable_rows


@dataclass
class SweepOutcome:
    """What `run_sweep` did: every row of the grid that is done, in grid order, and counts."""

    rows: list[dict[str, Any]]
    total: int
    resumed: int
    ran: int
    errors: int
    notes: list[str]
    paths: list[Path]
    interrupted: bool = False
    #: (problem, instance) of each instance of the grid by its row name (``instance``): what a
    #: caller needs to state the rows' units (`memsched.sweep` of a sweep file)
    instances: dict[str, tuple[str, Any]] = field(default_factory=dict)

    @property
    def error_rows(self) -> int:
        """The ``error`` rows of the table written (`rows`): those run now (`errors`) and those
        resumed from the journal (a resume keeps an error row, it does not run its cell again)."""
        return sum(row.get("status") == "error" for row in self.rows)


class SweepInterrupted(KeyboardInterrupt):
    """A running sweep stopped by Ctrl-C, SIGTERM or SIGHUP (`run_sweep`), after its finished rows
    were kept and its table written; its message is the line said on the stop, ``interrupted: N/M
    rows kept in JOURNAL; HINT``. A `KeyboardInterrupt`, so that callers that catch that still do."""


def _local_results(tasks: list[Task], workers: int, isolate: bool) -> Iterator[dict[str, Any]]:
    """Rows of `tasks` as they finish: in worker processes (`pool.WorkerPool`), or in this
    process when `isolate` is false and one worker is asked for."""
    if not isolate and workers <= 1:
        for t in tasks:
            yield run_task(t)
        return
    yield from WorkerPool(min(workers, len(tasks)), run_task).results(tasks, crashed=failed_row)


class _Noted:
    """SIGINT raises `KeyboardInterrupt`, as Python's default handler does, and is remembered."""

    def __init__(self) -> None:
        self.seen = False

    def handler(self, signum: int, frame: Any) -> None:
        self.seen = True
        raise KeyboardInterrupt


_NOTED: _Noted | None = None  # the note of the outermost `startup_interrupts` now open


@contextlib.contextmanager
def startup_interrupts() -> Iterator[Callable[[], bool]]:
    """Inside, a Ctrl-C (SIGINT) raises `KeyboardInterrupt` as usual and is also noted: the
    callable given tells whether one came. Reading a sweep file imports OR-Tools and pandas, and
    a `KeyboardInterrupt` raised inside a native module's initialisation or a class's
    ``__set_name__`` surfaces as an `ImportError` or a `RuntimeError` (reported as bad input or an
    internal error), or is swallowed where unimportable solvers are skipped; with the note, the
    caller reports the interrupt it was (`run_sweep` and ``memsched sweep``: `KeyboardInterrupt`,
    exit 130). Nested uses share the outermost note. No-op (never noted) outside the main thread
    or where SIGINT is ignored."""
    global _NOTED
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield lambda: False
        return
    outer = _NOTED
    note = outer or _Noted()
    old = signal.signal(signal.SIGINT, note.handler)
    _NOTED = note
    try:
        yield lambda: note.seen
    finally:
        signal.signal(signal.SIGINT, old)
        _NOTED = outer


def _interrupt_noted() -> bool:
    """Whether a Ctrl-C came since the outermost `startup_interrupts` opened."""
    return _NOTED is not None and _NOTED.seen


class _Stop:
    """SIGINT, SIGTERM and SIGHUP (`solvers.processes.stop_signals`) stop the sweep with `KeyboardInterrupt`,
    but never while a row is being journaled (the signal is held until the row and its newline
    are on disk). Once the cells are done or stopped (`quiet`: the workers are killed, the table
    written), a signal is noted (`asked`), not raised, so that the table is written whole: a
    first one there stops the sweep once it is (exit 130, as a stop while the cells run), and any
    further one is ignored. A signal the caller set to be ignored (``SIG_IGN``: a background job's
    SIGINT, ``nohup``'s SIGHUP) is left ignored: it neither stops the sweep nor is held."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}
        self._critical = False
        self._quiet = False
        self._pending = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self._critical or self._quiet:
            self._pending = True
            return
        raise KeyboardInterrupt

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in stop_signals():
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    @contextlib.contextmanager
    def journaling(self) -> Iterator[None]:
        self._critical = True
        try:
            yield
        finally:
            self._critical = False
        if self._pending:
            raise KeyboardInterrupt

    def quiet(self) -> None:
        """From now on a signal is noted (`asked`), never raised."""
        self._quiet = True

    @property
    def asked(self) -> bool:
        """Whether a signal came while `quiet` (or one held by `journaling` was not raised yet)."""
        return self._pending

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


def check_output(out: Path, field: str, *, create: bool, writable: bool = True) -> None:
    """The output folder, before any work: not a file nor under one, and writable unless
    `writable` is false (`check_output_dir`; false for ``--list`` and ``--verify``, which only
    read it), and for a run made now (the sweep would make it at once), so that a folder that
    cannot be made (``/proc/x``, a read-only disk) is bad input naming `field`, not a failure
    half-way."""
    from ..commands._checks import check_output_dir

    if "\0" in str(out):  # no path holds one (os functions raise ValueError)
        raise InputError("a folder path cannot hold a NUL character", path=repr(str(out)), field=field)
    try:
        check_output_dir(str(out), field, writable=writable)
    except InputError:
        raise
    except (ValueError, OSError) as err:  # a name too long to look up
        raise InputError(f"not a usable folder: {getattr(err, 'strerror', None) or first_line(err)}",
                         path=str(out), field=field) from None
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as err:
            raise InputError(f"cannot make the folder: {getattr(err, 'strerror', None) or first_line(err)}",
                             path=str(out), field=field) from None


def check_sweep_paths(out: Path, name: str) -> None:
    """Before any work (no instance stored, no cell run): the paths that sweep `name` writes in its
    output folder `out` can be written: the journal, the table (`store.check_written_paths`), the
    lock file (`lock.check_lock_path`) are not folders, ``instances`` is not a file
    (`instance_store.check_folder`); else `InputError` naming the path (exit 2)."""
    check_written_paths(out, name)
    check_lock_path(out)
    check_folder(out / "instances")


def _absent_folders(out: Path) -> list[Path]:
    """The folders of path `out` (itself, then its parents) that do not exist yet, innermost first."""
    absent = []
    for p in (out, *out.parents):
        try:
            if p.exists():
                break
        except (OSError, ValueError):  # a name too long, a NUL: no such folder (`check_output` refuses it)
            pass
        absent.append(p)
    return absent


@contextlib.contextmanager
def unmade_on_error(out: Path) -> Iterator[None]:
    """Inside, the output folder `out` (and its parents) may be made (`check_output`); when an
    exception leaves (bad input found after the folder was made: an instance that cannot be read),
    the folders that did not exist on entry are removed again if they are empty, innermost first,
    so that bad input leaves no folder behind. A folder holding anything (a journal, rows, the
    lock of another sweep) is kept, and one that existed on entry is never removed."""
    absent = _absent_folders(Path(out))
    try:
        yield
    except BaseException:
        for p in absent:
            try:
                p.rmdir()
            except (OSError, ValueError):
                break  # not empty (or gone, or no usable path): keep it and its parents
        raise


@contextlib.contextmanager
def stored_undone_on_bad_input(folder: Path, lock: Path | None = None) -> Iterator[None]:
    """Inside, with the output folder locked, instances are read and stored under `folder`
    (``<output>/instances``, `instance_store`); when an exception leaves (an `InputError` of a bad
    instance, or any other failure: no cell has run, nothing is journaled; not a
    `KeyboardInterrupt`, which keeps what was built), what was stored inside is undone: files that were not in
    `folder` on entry are removed, its ``index.json`` is put back as it was (removed when new), and
    `folder` itself is removed when it was made inside and is empty. `lock`: the lock file, when
    this run made it, removed too (while still held, so that no other sweep can take it in
    between). Files that were there on entry are never removed."""
    from memsched.solvers.jsonio import write_atomic

    from .instance_store import INDEX

    existed = folder.is_dir()
    before = {q.name for q in folder.iterdir()} if existed else set()
    index = folder / INDEX
    old_index = index.read_bytes() if index.is_file() else None
    try:
        yield
    except Exception:
        if folder.is_dir():
            for q in folder.iterdir():
                if q.name not in before and q.is_file():
                    q.unlink(missing_ok=True)
            if old_index is not None and (not index.is_file() or index.read_bytes() != old_index):
                write_atomic(index, lambda tmp: tmp.write_bytes(old_index))
            if not existed:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        if lock is not None:
            lock.unlink(missing_ok=True)
        raise


#: seconds that a Dask scheduler given by its address has to answer (`scheduler_client`)
CONNECT_TIMEOUT_S = 30


def check_scheduler(scheduler: Any) -> None:
    """A scheduler address is one Dask can read (``tcp://host:8786``, ``host:8786``), checked
    before any work (``--fresh`` would otherwise discard the journal, then fail); `InputError`
    naming ``--scheduler``. A `dask.distributed.Client` is taken as it is."""
    if not isinstance(scheduler, str):
        return
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
        from distributed.comm.registry import get_backend
    except ImportError:
        raise InputError("a Dask scheduler needs dask.distributed (pip install 'dask[distributed]')",
                         field=flag("scheduler")) from None
    try:
        scheme, location = parse_address(scheduler)
        get_backend(scheme)
        if scheme != "inproc":
            _, port = parse_host_port(location)
            if not 0 < int(port) < 65536:
                raise ValueError(f"port {port} out of range")
    except (ValueError, TypeError) as err:
        raise InputError(f"not a Dask scheduler address ({err}); expected e.g. tcp://host:8786",
                         path=scheduler, field=flag("scheduler")) from None


@contextlib.contextmanager
def scheduler_client(scheduler: Any) -> Iterator[Any]:
    """The `dask.distributed.Client` that runs the cells, connected before any work: None for no
    scheduler, a Client as it is (the caller closes it), an address (`check_scheduler`) connected
    within `CONNECT_TIMEOUT_S` seconds and closed on exit. An address that cannot be reached is an
    `InputError` naming ``--scheduler``, raised before the sweep makes, writes or discards
    anything (``--fresh`` used to discard the journal first, then fail to connect)."""
    check_scheduler(scheduler)
    if not isinstance(scheduler, str):
        yield scheduler
        return
    try:
        client = _connected_client(scheduler)
    except (asyncio.TimeoutError, TimeoutError):  # connected, no handshake in time (a stopped scheduler)
        raise InputError(f"cannot reach the Dask scheduler: no answer after {CONNECT_TIMEOUT_S} s",
                         path=scheduler, field=flag("scheduler")) from None
    except OSError as err:  # refused, unknown host, no connection in time
        raise InputError(f"cannot reach the Dask scheduler: {first_line(err) or type(err).__name__}",
                         path=scheduler, field=flag("scheduler")) from None
    except Exception as err:  # noqa: BLE001  (a scheme Dask lists but cannot use here: inproc, tls, ucx)
        raise InputError(f"cannot connect to the Dask scheduler ({type(err).__name__}: "
                         f"{first_line(err) or 'no message'}); give a tcp://host:port address",
                         path=scheduler, field=flag("scheduler")) from None
    try:
        yield client
    finally:
        with _dask_quiet(), contextlib.suppress(Exception):  # closing after a lost scheduler fails, and says so
            client.close()


def _connected_client(address: str) -> Any:
    """A `dask.distributed.Client` of `address`, connected and registered within
    `CONNECT_TIMEOUT_S` seconds in all, else `asyncio.TimeoutError` (`OSError` when the TCP
    connection itself fails). Dask's own ``timeout`` bounds only the TCP connect: a peer that
    accepts the connection and never answers (a stopped scheduler, any silent listener) would
    leave its handshake waiting forever. The whole start runs under Dask's ``sync`` deadline,
    which cancels it on the client's event loop; the half-made client is then closed (its loop
    thread stopped), so nothing of it is left running."""
    from dask.distributed import Client

    class _DeadlineClient(Client):  # type: ignore[misc]
        def start(self, **kwargs: Any) -> None:
            try:  # (`sync` takes `callback_timeout` for itself: an overall deadline on `_start`)
                super().start(callback_timeout=CONNECT_TIMEOUT_S, **kwargs)
            except BaseException:
                with _dask_quiet(), contextlib.suppress(Exception):
                    self.close(timeout=CONNECT_TIMEOUT_S)
                raise

    return _DeadlineClient(address, timeout=CONNECT_TIMEOUT_S)


class SchedulerLost(InputError):
    """The Dask scheduler went away (or cancelled the cells) during a sweep. `run_sweep` raises it
    once the finished rows are journaled and the table is written: rerun to resume, as after a
    scheduler that could not be reached at the start (both name ``--scheduler``: exit 2)."""


class _Lost(Exception):
    """Raised by `_dask_results` when the cluster can give no more rows; `why` says what happened."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


#: loggers silenced while cells run on Dask (`_dask_quiet`)
_DASK_LOGGERS = ("distributed", "tornado")


@contextlib.contextmanager
def _dask_quiet() -> Iterator[None]:
    """Inside, Dask's own log records (``distributed``, ``tornado``) are dropped: a lost scheduler
    makes the client log dozens of lines of tracebacks on stderr, when the sweep says in one line
    what happened (`SchedulerLost`), and a dead worker is its cell's ``error`` row."""
    import logging

    def drop(record: logging.LogRecord) -> bool:
        return False

    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if name.split(".")[0] in _DASK_LOGGERS]
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


def dask_key(token: str, task: Task) -> str:
    """The Dask key of `task`'s cell in the sweep run `token` (a random hex string, one per run):
    the row key `Task.key` alone is not unique on a shared cluster, since it leaves out where an
    instance file outside the repository lies (so a moved folder resumes): two sweeps of copies of
    one file would get the same key, and Dask would hand the second the first one's task (its row,
    with the first sweep's ``source``). The resume key `Task.key` is unchanged."""
    return f"memsched-{token}-{task.key}-{task.position}"


def _dask_results(tasks: list[Task], client: Any, *, serial: bool = False) -> Iterator[dict[str, Any]]:
    """Rows of `tasks` as they finish on the Dask cluster of `client` (`scheduler_client`); the
    cells not finished are cancelled when the iteration ends: those not started never run, but a
    cell already running is not stopped (Dask cannot interrupt a task's thread): it finishes in
    the background on its worker, up to its time limit, and its row is dropped. `serial`: one
    cell at a time (each submitted once the one before has finished), as executing cells run locally (a Dask worker
    runs its tasks in threads, where executions would be timed together, and torch's profilers
    of two threads crash the worker). A cell whose task failed (its worker died again and again,
    `KilledWorker`, or the task raised) gives an ``error`` row, as a dead local worker does; a
    cell cancelled (the scheduler lost) or whose row cannot be fetched raises `_Lost`. Dask's
    logs are silenced meanwhile (`_dask_quiet`). Each call's Dask keys are its own (`dask_key`)."""
    from dask.distributed import as_completed

    token = uuid.uuid4().hex

    def submit(t: Task) -> Any:
        return client.submit(run_task, t, pure=False, key=dask_key(token, t))

    with _dask_quiet():
        submitted: list[Any] = []
        try:
            if serial:
                for t in tasks:
                    fut = submit(t)
                    submitted.append(fut)
                    yield _dask_row(fut, t)
            else:
                futures = {submit(t): t for t in tasks}
                submitted = list(futures)
                for fut in as_completed(submitted):
                    yield _dask_row(fut, futures[fut])
        finally:
            with contextlib.suppress(Exception):  # a lost scheduler cannot cancel anything
                client.cancel(submitted)


def _dask_row(fut: Any, task: Task) -> dict[str, Any]:
    """The row of `task` from its Dask future `fut` (waiting for it): an ``error`` row when the
    task failed; `_Lost` when it was cancelled or its row cannot be fetched."""
    from concurrent.futures import CancelledError

    try:
        return dict(fut.result())
    except CancelledError as err:
        reason = getattr(err, "reason", None) or "no reason given"
        raise _Lost(f"cells cancelled: {reason}") from None
    except Exception as err:
        if fut.status != "error":  # the row was there, but could not be fetched
            raise _Lost(f"{type(err).__name__}: {first_line(err)}") from None
        return failed_row(task, f"the Dask task failed: {type(err).__name__}: {first_line(err, 400)}")


def run_sweep(config: SweepConfig | str | Path, *, output: str | Path | None = None, workers: int | None = None,
              scheduler: Any = None, progress: bool = True, fresh: bool = False, isolate: bool = True,
              reprofile: bool = False, on_row: Callable[[dict[str, Any]], None] | None = None,
              resume_hint: str = "rerun to resume", say: Callable[[str], None] | None = None) -> SweepOutcome:
    """Run (or resume) a sweep: the rows of every cell not yet in the journal, then the table.

    `workers`: local worker processes (default: the file's ``workers``, else the CPU count).
    Cells run in worker processes even for one worker, so that a stop reaches them (see
    `pool`); ``isolate=False`` with one worker runs them in this process instead.
    `scheduler`: a Dask scheduler address ("tcp://host:8786", connected before anything else is
    done: `scheduler_client`) or a `dask.distributed.Client`.
    `on_row(row)` is called after each row is journaled (tests use it to simulate a crash).
    `fresh` discards the journal first (everything is run again); without it, a table with no
    journal beside it (a fresh clone of a committed table) gives its rows to a new journal first
    (`_seed_from_table`), so they are resumed, not lost. Instances are stored under
    ``<output>/instances/`` and reused (`instance_store`); `reprofile` builds them again.

    The output folder is checked first (`check_output`: `InputError` naming ``output`` for a
    file, a path under a file, a folder that cannot be made), then the paths written in it
    (`check_sweep_paths`: a folder in place of the journal, table or lock file, a file in place of
    ``instances``, is an `InputError` naming it, before any instance is stored). Only one sweep at
    a time writes to an output folder (`lock.SweepLock`; a second one gets `InputError`). A Ctrl-C while starting
    is a `KeyboardInterrupt` whatever an import made of it (`startup_interrupts`). A stop (Ctrl-C,
    SIGTERM or SIGHUP unless the caller ignores them, or an exception) kills the running cells
    (on a Dask cluster it cancels them: a cell already running finishes in the background on its
    worker, up to its time limit, see `_dask_results`), which are not journaled, keeps every
    finished row, writes the table from the journal (so the two agree) and re-raises
    (`SweepInterrupted`, a `KeyboardInterrupt`, for a signal: exit 130 on the command line); its
    message, ``interrupted: N/M rows kept in JOURNAL; HINT``, ends with `resume_hint`, what to run
    to resume (a job that reruns everything by default says its flag), and is said once the table
    is written, while further signals are still ignored. A signal once the cells are done (the
    workers stopped, the table written) is such a stop too, after the table is written whole
    (`_Stop.quiet`), unless another failure is on its way up. `say(line)` (default: printed on stderr;
    ``memsched sweep`` prints it as its one line, ``memsched sweep: interrupted: ...``; the Python
    API ``memsched.sweep`` passes `say_nothing`: the exception it raises carries the line).
    A journal that cannot be written (a full disk) is an `InputError` naming it, once the table is
    written from the rows journaled before.
    """
    with startup_interrupts() as interrupted:
        try:
            if not isinstance(config, SweepConfig):
                config = load_config(config)
            out_dir = config.output_dir(output)
            if workers is None:
                workers = config.workers or os.cpu_count() or 1
            with scheduler_client(scheduler) as client, unmade_on_error(out_dir):
                check_output(out_dir, "output", create=True)  # (the command line checks it first, naming its flag)
                check_sweep_paths(out_dir, config.name)
                lock_made = not (out_dir / LOCK_NAME).exists()
                with SweepLock(out_dir, config.name) as lock:
                    return _run_locked(config, out_dir, client, workers=workers, progress=progress, fresh=fresh,
                                       isolate=isolate, reprofile=reprofile, on_row=on_row,
                                       made=lock.path if lock_made else None, resume_hint=resume_hint, say=say)
        except Exception as err:
            if interrupted():  # a Ctrl-C while starting, wrapped by an import (`startup_interrupts`)
                raise KeyboardInterrupt from err
            raise


def _run_locked(config: SweepConfig, out_dir: Path, client: Any, *, workers: int, progress: bool, fresh: bool,
                isolate: bool, reprofile: bool, on_row: Callable[[dict[str, Any]], None] | None,
                made: Path | None = None, resume_hint: str = "rerun to resume",
                say: Callable[[str], None] | None = None) -> SweepOutcome:
    """`run_sweep` once the scheduler is reached, the output folder made and locked (`made`: the
    lock file, when this run made it)."""
    notes: list[str] = []
    jpath = journal_path(out_dir, config.name)
    with stored_undone_on_bad_input(out_dir / "instances", made):
        tasks = build_tasks(config, notes=notes, store=InstanceStore(out_dir / "instances", rebuild=reprofile))
        # a table that cannot be resumed is bad input too: read here, so that it leaves nothing behind
        seed = None if fresh or jpath.exists() else _table_seed(out_dir, config.name)
    if _interrupt_noted():  # a Ctrl-C that an import swallowed (a solver skipped as not importable): stop
        raise KeyboardInterrupt  # before anything is discarded or run
    if fresh:
        jpath.unlink(missing_ok=True)
    elif seed is not None:
        _seed_from_table(out_dir, config.name, seed, notes)
    journal = Journal(jpath)  # repairs the end of a killed run's journal before it is read
    try:
        done = _resumed(journal, tasks, notes)
    except BaseException:
        with contextlib.suppress(InputError):
            journal.close()
        raise
    todo = [t for t in tasks if t.key not in done]
    serial = any(t.execute for t in todo)  # measured times: one executing run at a time
    if serial and client is not None and len(todo) > 1:
        notes.append("cells execute schedules: one cell at a time on the Dask cluster, so that runs are timed alone")
    elif serial and workers > 1:
        notes.append(f"cells execute schedules: one worker instead of {workers}, so that runs are timed alone")
        workers = 1
    resumed = len(tasks) - len(todo)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), initial=resumed, desc=config.name, unit="run", file=sys.stderr)
    ran = errors = 0
    stopped: SweepInterrupted | None = None  # the stop's exception, once its line is said
    interrupted = False
    journal_error: InputError | None = None
    failed = False  # an exception other than a stop or a lost scheduler leaves the loop
    lost: str | None = None
    results: Iterator[dict[str, Any]] = iter(())
    with _Stop() as stop:
        try:
            if todo:
                results = (_dask_results(todo, client, serial=serial) if client is not None
                           else _local_results(todo, workers, isolate))
            for row in results:
                with stop.journaling():
                    journal.append(row)
                    ran += 1
                    errors += row.get("status") == "error"
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"{row['instance']} {row['solver_label']} {row['status']}",
                                        refresh=False)
                if on_row is not None:
                    on_row(row)
        except KeyboardInterrupt:
            interrupted = True  # raised again below as `SweepInterrupted`, once the table is written
        except _Lost as err:
            lost = err.why
        except InputError as err:  # the journal cannot be written (a full disk)
            journal_error = err
            failed = True
            raise
        except BaseException:
            failed = True
            raise
        finally:
            stop.quiet()  # a signal from here on is noted: the table is written whole, then the stop said
            close = getattr(results, "close", None)
            if close is not None:
                close()  # kills the workers: their running cells give no row
            try:  # a journal that cannot be closed (a full disk) still leaves the table written
                journal.close()
            except InputError as err:
                journal_error = journal_error or err
            if bar is not None:
                bar.close()
            final = read_journal(jpath)
            rows = [final[t.key] for t in tasks if t.key in final]
            paths = _write_table(rows, out_dir, config.name, journal_error) if (rows or jpath.exists()) else []
            # a signal that came once the cells were done is a stop too, unless a failure is on its way up
            interrupted = interrupted or (stop.asked and not failed)
            if interrupted:  # said while further signals are ignored (`_Stop.quiet`): never lost to a second one
                stopped = SweepInterrupted(f"interrupted: {len(rows)}/{len(tasks)} rows kept in {jpath}; "
                                           f"{resume_hint}")
                (say or _say)(str(stopped))
    if stopped is not None:
        raise stopped
    if journal_error is not None:
        raise journal_error
    if lost is not None:
        address = getattr(getattr(client, "scheduler", None), "address", None)
        raise SchedulerLost(f"lost the Dask scheduler during the sweep ({lost}): {len(rows)}/{len(tasks)} rows kept "
                            f"in {jpath}; {resume_hint}", path=address, field=flag("scheduler"))
    instances = {t.loaded.label: (t.loaded.problem, t.loaded.instance) for t in tasks}
    return SweepOutcome(rows, len(tasks), resumed, ran, errors, notes, paths, instances=instances)


def _say(line: str) -> None:
    """`run_sweep`'s default `say`: `line` on stderr."""
    print(line, file=sys.stderr)


def say_nothing(line: str) -> None:
    """A `say` for `run_sweep` that says nothing: for a caller that reports the stop from the
    `SweepInterrupted` raised, whose message is `line` (``memsched.sweep``: a notebook shows it once)."""


def _write_table(rows: list[dict[str, Any]], out_dir: Path, name: str, journal_error: InputError | None) -> list[Path]:
    """`store.write_table`; when the journal could not be written either (`journal_error`: a full
    disk), a failure is that error, saying that the table is not written either (the old one is
    left as it was), rather than the table's alone."""
    try:
        return write_table(rows, out_dir, name)
    except InputError as err:
        if journal_error is None:
            raise
        raise InputError(f"{journal_error.message}; the table is not written either ({err})",
                         path=journal_error.path, field=journal_error.field) from None


def _table_seed(out_dir: Path, name: str) -> tuple[list[dict[str, Any]], int] | None:
    """With no journal (journals are not committed: a fresh clone) but a table ``<name>.csv``, the
    table's rows that a run resumes and how many damaged rows it left out (`verify.resumable_rows`),
    None when there is no table or no row to take; a table that cannot be read as the sweep's is an
    `InputError` naming it. Reads only: `_seed_from_table` writes the journal."""
    csv = table_path(out_dir, name)
    if not csv.is_file():
        return None
    good, damaged = resumable_rows(csv, "cannot read the sweep's table to resume its rows")
    return (good, damaged) if good or damaged else None


def _seed_from_table(out_dir: Path, name: str, seed: tuple[list[dict[str, Any]], int], notes: list[str]) -> None:
    """A new journal holding the table's rows `seed` (`_table_seed`: good rows, damaged count;
    `store.seed_journal`), so that a run resumes the rows that ``--verify`` reads
    (`verify.stored_rows`) and a stop, which writes the table from the journal, keeps them. Rows
    that are not the sweep's (a number column holding text) are left out: their cells run again.
    Says what it did in `notes`."""
    good, damaged = seed
    seed_journal(journal_path(out_dir, name), good)
    notes.append(f"no journal: the {len(good)} rows of {table_path(out_dir, name).name} are taken as done "
                 f"(--fresh runs every cell)" + (f"; {damaged} unreadable rows run again" if damaged else ""))


def _resumed(journal: Journal, tasks: list[Task], notes: list[str]) -> dict[str, dict[str, Any]]:
    """The journal's finished rows by key, as ``--verify`` reads them (`verify.rekeyed`, strict: a
    row is never taken for a cell it may not be): a row stored under an older key of a cell of
    `tasks` (another ``source``) is journaled again under the cell's key, so that the table
    written from the journal has it. Rows of no cell of the grid
    are kept in the journal and left out of the table; `notes` says how many."""
    stored = read_journal(journal.path)
    taken: dict[str, str] = {}
    done = rekeyed(stored, tasks, taken, strict=True)
    if taken:
        journal.extend(done[k] for k in taken)
    grid_keys = {t.key for t in tasks}
    old_keys = set(taken.values())
    stale = sum(1 for k in stored if k not in grid_keys and k not in old_keys)
    if stale:
        notes.append(f"{stale} journal rows are not in this grid (parameters changed); kept in {journal.path.name}, "
                     f"left out of the table")
    return done

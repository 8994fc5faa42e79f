"""Running a sweep: the cells not yet journaled, on local processes or a Dask cluster, then the table."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, first_line, flag

from .cell import failed_row, run_task
from .config import SweepConfig, load_config
from .grid import Task, build_tasks
from .instance_store import InstanceStore
from .lock import SweepLock
from .pool import WorkerPool
from .store import Journal, journal_path, read_journal, write_table


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


def _local_results(tasks: list[Task], workers: int, isolate: bool) -> Iterator[dict[str, Any]]:
    """Rows of `tasks` as they finish: in worker processes (`pool.WorkerPool`), or in this
    process when `isolate` is false and one worker is asked for."""
    if not isolate and workers <= 1:
        for t in tasks:
            yield run_task(t)
        return
    yield from WorkerPool(min(workers, len(tasks)), run_task).results(tasks, crashed=failed_row)


class _Stop:
    """SIGINT and SIGTERM stop the sweep with `KeyboardInterrupt`, but never while a row is
    being journaled (the signal is held until the row and its newline are on disk); once the
    sweep is stopping, further signals are ignored until the table is written."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}
        self._critical = False
        self._pending = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self._critical:
            self._pending = True
            return
        raise KeyboardInterrupt

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
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
        for sig in self._old:
            signal.signal(sig, signal.SIG_IGN)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


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
    from dask.distributed import Client

    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError) as err:  # refused, unknown host, no answer in time
        raise InputError(f"cannot reach the Dask scheduler: {first_line(err) or type(err).__name__}",
                         path=scheduler, field=flag("scheduler")) from None
    try:
        yield client
    finally:
        client.close()


def _dask_results(tasks: list[Task], client: Any) -> Iterator[dict[str, Any]]:
    """Rows of `tasks` as they finish on the Dask cluster of `client` (`scheduler_client`); the
    cells not finished are cancelled when the iteration ends."""
    from dask.distributed import as_completed

    futures = [client.submit(run_task, t, pure=False, key=f"memsched-{t.key}-{t.position}") for t in tasks]
    try:
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.cancel(futures)


def run_sweep(config: SweepConfig | str | Path, *, output: str | Path | None = None, workers: int | None = None,
              scheduler: Any = None, progress: bool = True, fresh: bool = False, isolate: bool = True,
              reprofile: bool = False, on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepOutcome:
    """Run (or resume) a sweep: the rows of every cell not yet in the journal, then the table.

    `workers`: local worker processes (default: the file's ``workers``, else the CPU count).
    Cells run in worker processes even for one worker, so that a stop reaches them (see
    `pool`); ``isolate=False`` with one worker runs them in this process instead.
    `scheduler`: a Dask scheduler address ("tcp://host:8786", connected before anything else is
    done: `scheduler_client`) or a `dask.distributed.Client`.
    `on_row(row)` is called after each row is journaled (tests use it to simulate a crash).
    `fresh` discards the journal first (everything is run again). Instances are stored under
    ``<output>/instances/`` and reused (`instance_store`); `reprofile` builds them again.

    Only one sweep at a time writes to an output folder (`lock.SweepLock`; a second one gets
    `InputError`). A stop (Ctrl-C, SIGTERM, or an exception) kills the running cells, which are
    not journaled, keeps every finished row, writes the table from the journal (so the two
    agree) and re-raises (`KeyboardInterrupt` for a signal: exit 130 on the command line).
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    notes: list[str] = []
    out_dir = config.output_dir(output)
    jpath = journal_path(out_dir, config.name)
    if workers is None:
        workers = config.workers or os.cpu_count() or 1
    with scheduler_client(scheduler) as client, SweepLock(out_dir, config.name):
        tasks = build_tasks(config, notes=notes, store=InstanceStore(out_dir / "instances", rebuild=reprofile))
        if fresh and jpath.exists():
            jpath.unlink()
        journal = Journal(jpath)  # repairs the end of a killed run's journal before it is read
        done = read_journal(jpath)
        grid_keys = {t.key for t in tasks}
        stale = sum(1 for k in done if k not in grid_keys)
        if stale:
            notes.append(f"{stale} journal rows are not in this grid (parameters changed); kept in {jpath.name}, "
                         f"left out of the table")
        todo = [t for t in tasks if t.key not in done]
        if workers > 1 and any(t.execute for t in todo):  # measured times: one executing run at a time
            notes.append(f"cells execute schedules: one worker instead of {workers}, so that runs are timed alone")
            workers = 1
        resumed = len(tasks) - len(todo)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(tasks), initial=resumed, desc=config.name, unit="run", file=sys.stderr)
        ran = errors = 0
        interrupted = False
        results: Iterator[dict[str, Any]] = iter(())
        with _Stop() as stop:
            try:
                if todo:
                    results = (_dask_results(todo, client) if client is not None
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
                interrupted = True
                raise
            finally:
                stop.quiet()
                close = getattr(results, "close", None)
                if close is not None:
                    close()  # kills the workers: their running cells give no row
                journal.close()
                if bar is not None:
                    bar.close()
                final = read_journal(jpath)
                rows = [final[t.key] for t in tasks if t.key in final]
                paths = write_table(rows, out_dir, config.name) if (rows or jpath.exists()) else []
                if interrupted:
                    print(f"interrupted: {len(rows)}/{len(tasks)} rows kept in {jpath}; rerun to resume",
                          file=sys.stderr)
    return SweepOutcome(rows, len(tasks), resumed, ran, errors, notes, paths)

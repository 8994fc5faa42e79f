"""Running a sweep: the cells not yet journaled, on local processes or a Dask cluster, then the table."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

from .cell import run_task
from .config import SweepConfig, load_config
from .grid import Task, build_tasks
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


def _local_results(tasks: list[Task], workers: int) -> Iterator[dict[str, Any]]:
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield run_task(t)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")  # portable, and safe with threads (torch, ortools)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx)
    futures = [pool.submit(run_task, t) for t in tasks]
    try:
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _dask_results(tasks: list[Task], scheduler: str) -> Iterator[dict[str, Any]]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError("a Dask scheduler needs dask.distributed (pip install 'dask[distributed]')",
                         field="--scheduler") from None
    try:
        client = Client(scheduler, timeout=30) if isinstance(scheduler, str) else scheduler
    except OSError as err:
        raise InputError(f"cannot reach the Dask scheduler {scheduler!r}: {err}", field="--scheduler") from None
    own = isinstance(scheduler, str)
    futures = [client.submit(run_task, t, pure=False, key=f"memsched-{t.key}-{t.position}") for t in tasks]
    try:
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.cancel(futures)
        if own:
            client.close()


def run_sweep(config: SweepConfig | str | Path, *, output: str | Path | None = None, workers: int | None = None,
              scheduler: Any = None, progress: bool = True, fresh: bool = False,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepOutcome:
    """Run (or resume) a sweep: the rows of every cell not yet in the journal, then the table.

    `workers`: local processes (default: the file's ``workers``, else the CPU count; 1 runs in
    this process). `scheduler`: a Dask scheduler address ("tcp://host:8786") or a
    `dask.distributed.Client`. `on_row(row)` is called after each row is journaled (tests use
    it to simulate a crash). `fresh` discards the journal first (everything is run again).
    The table is written even when the sweep is interrupted.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    notes: list[str] = []
    tasks = build_tasks(config, notes=notes)
    out_dir = config.output_dir(output)
    jpath = journal_path(out_dir, config.name)
    if fresh and jpath.exists():
        jpath.unlink()
    done = read_journal(jpath)
    grid_keys = {t.key for t in tasks}
    stale = sum(1 for k in done if k not in grid_keys)
    if stale:
        notes.append(f"{stale} journal rows are not in this grid (parameters changed); kept in {jpath.name}, "
                     f"left out of the table")
    todo = [t for t in tasks if t.key not in done]
    resumed = len(tasks) - len(todo)
    if workers is None:
        workers = config.workers or os.cpu_count() or 1
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), initial=resumed, desc=config.name, unit="run", file=sys.stderr)
    ran = errors = 0
    interrupted = False
    try:
        with Journal(jpath) as journal:
            results = _dask_results(todo, scheduler) if scheduler is not None else _local_results(todo, workers)
            if todo:
                for row in results:
                    journal.append(row)
                    done[row["key"]] = row
                    ran += 1
                    errors += row.get("status") == "error"
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(f"{row['instance']} {row['solver_label']} {row['status']}", refresh=False)
                    if on_row is not None:
                        on_row(row)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if bar is not None:
            bar.close()
        rows = [done[t.key] for t in tasks if t.key in done]
        paths = write_table(rows, out_dir, config.name) if (rows or jpath.exists()) else []
        if interrupted:
            print(f"interrupted: {len(rows)}/{len(tasks)} rows kept in {jpath}; rerun to resume", file=sys.stderr)
    return SweepOutcome(rows, len(tasks), resumed, ran, errors, notes, paths)

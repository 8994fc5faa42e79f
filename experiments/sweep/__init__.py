"""Experiment sweeps: a grid of (instance, budget, solver) runs, one row each, resumable.

A sweep file (TOML, or YAML by extension) states the grid::

    name = "fig_a_chains"            # rows' "sweep" column and the file names (default: the stem)
    description = "..."
    output = "results/fig_a"         # default results/<name>; --output overrides
    budgets = ["40%", "60%", "1GiB"] # bytes, units, or a percentage of the reference peak
    repeats = 1                      # runs of each cell (repeat index is part of the row key)
    workers = 2                      # default parallelism, 1..512 (--workers overrides)
    execute = false                  # run each schedule for real (model instances only)

    [defaults]                       # applied to every solver entry
    slots = 500
    time_limit = 30

    [[instances]]
    example = "cnn12"                # solvers/data/examples/cnn12.json
    [[instances]]
    file = "path/to/chain.json"      # chain, graph, join, pipeline files (solvers.formats)
    [[instances]]
    generate = "chain"               # solvers.chain.generate.random_chain(L, seed, ...)
    L = 20
    seed = 0                         # (any failure of the generator is bad input naming the entry)
    [[instances]]
    generate = "chain"               # a generated chain as an offload instance: the entry's host
    L = 20                           # link (latency 0), as for a chain file; or use
    problem = "offload"              # generate = "offload.random_offload"
    bandwidth = "12GB/s"
    [[instances]]
    model = "resnet18"               # a zoo network, or your own "mynet.py:build" (models.network); needs torch
    batch = 2
    image_size = 64
    budgets = ["50%"]                # any instance may override the sweep's budgets

    [[solvers]]
    name = "rotor"
    slots = 500
    time_limit = 10
    options = { }                    # solver-specific keyword options (as --option; checked
                                     # when the file is read: names and types)
    max_length = 12                  # optional: skip instances with more stages / nodes
    label = "rotor-500"              # optional: distinguishes two entries of one solver
    problems = ["chain"]             # optional: only instances of these problems (default: every
                                     # problem the solver exists in; at least one of those, or
                                     # the entry would run no cell)
    shared_table = true              # rotor only (refused in another solver's entry; from
                                     # [defaults] the others ignore it): one DP table (that of
                                     # the instance's largest budget below its store-all peak)
                                     # answers all its budgets: one DP instead of one per
                                     # budget, at that budget's slot size (coarser for the
                                     # smaller budgets; scope and the options column say so).
                                     # Default false.

Relative file paths are read against the sweep file's folder, then the current folder.

Every run gives one row (`ROW_COLUMNS` first, then any extra keys): its parameters, the
content hash of its instance file, the status, objective (makespan, or period for pipelines),
lower bound, gap, peak memory, solve time, measured values when executed, the versions of
memsched, numpy, ortools, torch and Python, the host and a UTC timestamp.

Output folder (``results/<name>`` by default), one module each:

- ``<name>.jsonl`` (`store`): the journal. Each finished row is appended at once (one write,
  flushed and fsync'ed); a rerun runs only the cells whose key is not there. A killed run's
  last line is kept when it is a complete row and cut when torn.
- ``<name>.csv`` (and ``.parquet`` with pyarrow) (`store`): rewritten atomically from the
  journal, in grid order, whenever the sweep ends (also when no cell was left to run), fails or
  is stopped. ``--list`` and ``--verify`` say when the table on disk is not the journal's rows
  of the grid (`verify.table_stale`).
- ``instances/`` (`instance_store`): every instance as a file named by its content hash;
  built instances (generated, profiled) are reused by later runs, ``--reprofile`` rebuilds.
- ``.sweep.lock`` (`lock`): a second sweep on the same folder is refused while one runs.

Cells run in worker processes (`pool`; ``workers`` of them) outside the terminal's process
group, or on a Dask cluster given a scheduler address (`dask.distributed.Client`; executing
cells one at a time there too); the rows are the same either way (a cell whose Dask task
fails, `KilledWorker`, is an ``error`` row, as one whose local worker dies; a lost scheduler
is `run.SchedulerLost` once the finished rows are kept). Ctrl-C (or SIGTERM, SIGHUP; one the caller
ignores stays ignored) stops the sweep:
running cells are killed and not journaled, finished rows are kept, the table is written,
exit 130 (also while it starts: `run.startup_interrupts`). Workers die with the sweep
(also on ``kill -9``). Modules: `config` (the file), `instances` and `instance_store`, `grid`
(cells and keys), `cell` (one run), `pool`, `run` (`run_sweep`), `store`, `lock`.
Bad sweep files raise `InputError` naming the file and the key (YAML too: a key given twice in
a table, or one that is not a string, is refused as TOML refuses it).
"""

from .cell import run_task, versions
from .config import (
           CONFIGS,
           EXAMPLES,
           ROOT,
           InstanceSpec,
           SolverSpec,
           SweepConfig,
           find_config,
           load_config,
           read_sweep_file,
)
from .grid import Task, build_tasks, row_key
from .instance_store import InstanceStore
from .instances import LoadedInstance, load_instance_spec
from .run import SchedulerLost, SweepOutcome, run_sweep
from .store import (
           ROW_COLUMNS,
           UNSUPPORTED,
           VOLATILE_COLUMNS,
           Journal,
           compare_tables,
           journal_path,
           read_journal,
           rows_frame,
           table_path,
           write_table,
)

__all__ = ["InstanceStore", "SweepConfig", "InstanceSpec", "SolverSpec", "Task", "SweepOutcome", "SchedulerLost",
           "LoadedInstance",
           "load_config",
           "read_sweep_file", "build_tasks", "row_key", "load_instance_spec", "run_task", "run_sweep", "read_journal",
           "journal_path", "table_path", "Journal", "write_table", "rows_frame", "compare_tables", "find_config",
           "versions", "ROW_COLUMNS", "VOLATILE_COLUMNS", "UNSUPPORTED", "ROOT", "EXAMPLES", "CONFIGS"]

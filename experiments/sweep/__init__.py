"""Experiment sweeps: a grid of (instance, budget, solver) runs, one row each, resumable.

A sweep file (TOML, or YAML by extension) states the grid::

    name = "fig_a_chains"            # rows' "sweep" column and the file names (default: the stem)
    description = "..."
    output = "results/fig_a"         # default results/<name>; --output overrides
    budgets = ["40%", "60%", "1GiB"] # bytes, units, or a percentage of the reference peak
    repeats = 1                      # runs of each cell (repeat index is part of the row key)
    workers = 2                      # default parallelism (--workers overrides)
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
    seed = 0
    [[instances]]
    model = "resnet18"               # a zoo network, profiled by models.chain.profiler (needs torch)
    batch = 2
    image_size = 64
    budgets = ["50%"]                # any instance may override the sweep's budgets

    [[solvers]]
    name = "rotor"
    slots = 500
    time_limit = 10
    options = { }                    # solver-specific keyword options
    max_length = 12                  # optional: skip instances with more stages / nodes
    label = "rotor-500"              # optional: distinguishes two entries of one solver

Relative file paths are read against the sweep file's folder, then the current folder.

Every run gives one row (`ROW_COLUMNS` first, then any extra keys): its parameters, the
status, objective (makespan, or period for pipelines), lower bound, gap, peak memory, solve
time, measured values when executed, the versions of memsched, numpy, ortools, torch and
Python, the host and a UTC timestamp. Each finished row is appended to ``<name>.jsonl`` in
the output folder at once (flushed and fsync'ed); a rerun reads that journal, ignores a torn
last line, and runs only the cells whose key is not there. The table ``<name>.csv`` (and
``<name>.parquet`` when pyarrow is present) is rewritten atomically (temporary file, then
rename) from the journal, in grid order, whenever the sweep ends or is interrupted.

Runs go to local processes (`concurrent.futures.ProcessPoolExecutor`) or, given a scheduler
address, to a Dask cluster (`dask.distributed.Client`); the rows are the same either way.
Bad sweep files raise `InputError` naming the file and the key.
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
from .instances import LoadedInstance, load_instance_spec
from .run import SweepOutcome, run_sweep
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

__all__ = ["SweepConfig", "InstanceSpec", "SolverSpec", "Task", "SweepOutcome", "LoadedInstance", "load_config",
           "read_sweep_file", "build_tasks", "row_key", "load_instance_spec", "run_task", "run_sweep", "read_journal",
           "journal_path", "table_path", "Journal", "write_table", "rows_frame", "compare_tables", "find_config",
           "versions", "ROW_COLUMNS", "VOLATILE_COLUMNS", "UNSUPPORTED", "ROOT", "EXAMPLES", "CONFIGS"]

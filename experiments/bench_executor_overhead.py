"""The chain executor's fixed cost per step: what running a schedule adds to plain autograd
when the blocks do almost no work (issue #20, item 1: a store-all step should cost what a plain
step costs).

    python -m memsched.experiments.bench_executor_overhead [--stages 4,8,16,32] [--repeats 400]
        [--out results/bench_executor_overhead.csv]

For each L of ``--stages``: a chain of L tiny blocks (``nn.Linear(4, 4)``, batch 2) and a
mean-squared loss, one thread. ``plain``: ``loss_fn(seq(x.clone()), t).backward()``;
``executor``: `models.chain.executor.ChainExecutor` running the store-all schedule (F_all(0..L-1),
Loss, B(L-1..0)), ``input_grad=False``, its own clock (``time_ms`` of the step: the ops only,
not the set-up before them nor the gradient copies after). Both start from parameter gradients
None and are timed alternately, ``--repeats`` steps each, on the thread's CPU clock; the least
time of each is kept (µs), as the blocks' own work is a few µs and what varies between steps is
interference only. ``overhead_us`` = executor - plain, ``per_stage_us`` = that / L: the cost a
step of an L-stage chain pays over plain autograd whatever its blocks are (Python per
operation, and entering autograd's engine once per B instead of once per step). Divided by a
real step's time it bounds the executor's share of a measured store-all overhead. ``load``: the
1-minute load average at the start of the row.

Ctrl-C is one line and exit 130 (the finished rows kept beside --out; the same command resumes from
them, printing them too), also while torch is imported: this module imports it only once the arguments
are checked, inside `main`'s handling of interrupts (`interrupts.script_main`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from memsched.experiments.benchtable import check_out, guarded, resumable, write_csv
from memsched.experiments.interrupts import script_main
from memsched.experiments.script_args import ScriptParser

if TYPE_CHECKING:
    import torch

COLUMNS = ("stages", "plain_us", "executor_us", "overhead_us", "per_stage_us", "repeats", "load")


def measure(L: int, repeats: int) -> dict:
    """One row: least step times (µs) of plain autograd and of the executor's store-all schedule."""
    import torch
    from memsched.models.chain.executor import ChainExecutor
    from memsched.solvers.chain.baselines import store_all_schedule
    from torch import nn

    torch.manual_seed(0)
    blocks = [nn.Linear(4, 4) for _ in range(L)]
    seq = nn.Sequential(*blocks)
    params = list(seq.parameters())
    x, t = torch.randn(2, 4), torch.randn(2, 4)

    def loss_fn(y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((y - target) ** 2).mean()

    ops = store_all_schedule(L)
    executor = ChainExecutor(blocks, loss_fn, input_grad=False)

    def plain() -> float:
        for p in params:
            p.grad = None
        t0 = time.thread_time()
        loss_fn(seq(x.clone()), t).backward()
        return (time.thread_time() - t0) * 1e6

    def ours() -> float:
        for p in params:
            p.grad = None
        step = executor.step(ops, x, t, seed=None, measure_memory=False, measure_time=True, clock="thread")
        return float(step.time_ms) * 1e3

    load = round(os.getloadavg()[0], 2)
    plain(), ours()  # warm-up
    a, b = [], []
    for _ in range(repeats):
        a.append(plain())
        b.append(ours())
    p, e = min(a), min(b)
    return {"stages": L, "plain_us": round(p, 1), "executor_us": round(e, 1), "overhead_us": round(e - p, 1),
            "per_stage_us": round((e - p) / L, 1), "repeats": repeats, "load": load}


def _line(row: dict[str, Any]) -> str:
    """The printed line of a row: every column and its value (µs), from the row alone."""
    return "  ".join(f"{k} {v}" for k, v in row.items())


def main(argv: list[str] | None = None) -> int:
    """Measure each chain length, print the table, write the CSV; exit 0 (2 on a bad argument, 130 on Ctrl-C:
    the CSV as it was, the finished rows kept beside it for a rerun to resume from), also while torch is imported
    (one line, `interrupts.script_main`: torch is imported once the arguments are checked)."""
    return script_main("bench_executor_overhead", lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    """`main`: the arguments checked (no torch needed), then `_main` under `benchtable.guarded`."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default="4,8,16,32", help="comma-separated chain lengths L >= 1")
    parser.add_argument("--repeats", type=int, default=400, help="timed steps of each kind per length")
    parser.add_argument("--out", default="results/bench_executor_overhead.csv")
    args = parser.parse_args(argv)
    try:
        lengths = [int(s) for s in args.stages.split(",") if s]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1 or args.repeats < 1:
        print(f"bench_executor_overhead: --stages {args.stages!r} / --repeats {args.repeats}: "
              "lengths must be integers >= 1 and repeats >= 1", file=sys.stderr)
        return 2
    return guarded("bench_executor_overhead", lambda: _main(lengths, args.repeats, args.out))


def _main(lengths: list[int], repeats: int, out: str) -> int:
    """The body of `main`: `out` checked, one row per length measured and written; on Ctrl-C the rows
    finished so far are kept beside `out` and a rerun resumes from them (`benchtable.resumable`, which prints
    their lines too)."""
    import torch  # once the arguments are checked: a usage error needs no torch (a second or so)

    check_out(out)
    torch.set_num_threads(1)
    with resumable(out, COLUMNS, {"repeats": repeats}, ("stages",), line=_line) as table:
        for L in lengths:
            if table.kept(L) is None:
                row = measure(L, repeats)
                table.add(row)
                print(_line(row), flush=True)
        written = write_csv(table.rows, out, COLUMNS)
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

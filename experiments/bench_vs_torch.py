"""memsched against the tools users pick instead: same model, same tracker, CPU, one thread.

    python -m memsched.experiments.bench_vs_torch [--models gpt2,resnet50] [--sizes small,medium,large]
        [--budgets 6] [--repeats 5] [--rounds 11] [--segments all|K,K,..] [--compile aot|inductor|aot,inductor|none]
        [--compile-budgets 1.0,0.8,0.6,0.4,0.2,0.0] [--only-compile] [--no-probe] [--update] [--replot]
        [--out results/bench_vs_torch.csv]

For each model and size, one training step (forward, loss, backward; weights and their
gradients not counted) is run by

- ``torch``: plain autograd, no checkpointing (the reference: time overhead 0, its gradients);
- ``checkpoint-per-block``: ``torch.utils.checkpoint.checkpoint(block, a, use_reentrant=False)``
  around every block;
- ``checkpoint_sequential``: ``torch.utils.checkpoint.checkpoint_sequential`` with k segments,
  every k from 2 to L, or the counts of ``--segments`` (each k a point of its curve; the best k
  is the curve's frontier);
- ``torch.compile`` with ``activation_memory_budget`` at each of ``--compile-budgets``
  (`experiments.vs_torch_compile`, which says what is measured): ``torch.compile(aot_eager,
  min-cut)`` (``--compile aot``, default: inductor's partitioner, graphs run eagerly, so its time
  is not inductor's) and ``torch.compile(inductor)`` (``--compile inductor``: allocator peak
  only); a failure is a row. ``--only-compile`` runs plain torch (the time reference, not
  written) and these rows only, and with ``--update`` replaces only them;
- ``rockmate``: a failed row with the reason (it does not run on this CPU; see ROCKMATE);
- ``memsched-block`` / ``memsched-layer``: the chain profiled at ``--granularity block`` /
  ``layer`` (`models.chain.profiler`, thread CPU time; ``layer`` splits transformer blocks into their halves and
  moves GPT-2's projection into the loss stage, `models.zoo.split`; planned with the tracker's
  transient overheads, `models.chain.overheads.tracker_chain`, as it is the measure every tool is
  compared on; profiled with early release in B(i), ``release=True``, docs/chain.md), rotor's
  schedule (`solvers.chain.dp`, 20000 slots) run by `models.chain.executor.ChainExecutor`
  (``input_grad=False``, as a plain step; ``release=True``: each B(i) gives up delta_{i+1} and
  a_{i+1} before its backward, as one ``loss.backward()`` does). Budgets: rotor's smallest feasible budget, 2% above
  it, `--budgets` evenly up to the store-all peak, and the measured peak of every point of the
  other tools (the comparison at the memory they reach; a point within 0.5% of a smaller one
  shares its budget: with 3% bins GPT medium's checkpoint_sequential k = 8, 26.45 MiB, shared
  per-block's 26.07 MiB budget and memsched's nearest point was planned below per-block's peak).

Memory: ``peak_bytes`` is the peak of `models.memory.LiveTensorTracker` over the step (the input
is copied inside the tracked region by every tool); ``alloc_peak`` (unless ``--no-probe``) is
the CPU allocator's peak of the same step (`models.alloc_probe.AllocatorProbe`: every c10
allocation, kernel scratch and inductor's buffers included) after one warm-up step; ``predicted_peak``
(memsched rows) is the simulator's prediction of ``peak_bytes`` (the tracker's, `tracker_predicted_peak`). Time: the
timed steps of every point of a model and size run in `--rounds` rounds, one step of each point
per round in a new random order, each right after a step of plain torch (a paired comparison),
parameter gradients set to None before each, on the thread's CPU clock (``time.thread_time``;
one thread runs autograd's CPU backward too; glibc's malloc thresholds pinned:
`experiments.steady_malloc`). ``overhead`` is the median over the rounds of the step's time over
the plain step's just before it, less 1: on this shared machine a plain GPT step's time drifts
by up to 40% within seconds (no page fault: the other core's jobs), which the ratio of two
neighbouring steps cancels and the ratio of two medians taken minutes apart does not
(``overhead_unpaired``: time_ms / torch's time_ms - 1, kept beside it); plain torch's own
``overhead`` (two plain steps) is the noise left. ``time_ms``: median of the point's times,
``time_min_ms``: their least. ``overhead_ci``: half-width of an approximate 95% confidence
interval of the paired overhead (`median_ci`); the summary's ``curve_within_noise`` counts a
point of another tool against memsched only when it is below every memsched point at no more
memory by more than 2% and by more than the two intervals (their notches do not overlap).
``plan_s``: memsched's profiling plus solving time (torch.compile's compile time, wall clock; 0
for the others). ``grad_ok``: every parameter gradient allclose to plain autograd's (rtol 1e-4, atol
1e-6) with the same seed. ``load``: the 1-minute load average when the model and size started.
Writes the CSV, a summary CSV beside it (``<out>_summary.csv``, `vs_torch_report.verdicts`: per
model and size, whether memsched's curve lies on or below every other tool's and which points
break it, on the paired and on the unpaired overheads, and
whether its smallest peak is at most checkpoint-per-block's; with the head-to-head duels of
`experiments.vs_torch_duel` (``<out>_duels.csv``, where present) also after them: a run drops the
duels of the points it replaces, with ``--only-compile`` those of torch.compile's points only;
``--update``: replaces the rows of the models and sizes run, keeps the others; ``--replot``: runs
nothing and leaves ``--out`` as it is, redraws the figure and summaries from it; a value that is
not a number where one belongs, in ``--out`` or the duels, is one line and exit 2) and a figure
(time overhead against peak memory, one curve per tool, its colour and marker the same in every
panel; a second row of panels on the allocator's peaks) next to it, and prints, per model and
size, each tool's smallest peak with its overhead and the other tools' points that no memsched
point matches.

Ctrl-C is one line and exit 130 (the models and sizes finished kept beside --out, resumed from and
printed by the same command run again), also while torch is imported (a second or so): this module
and `vs_torch_compile` import torch only inside functions, torch once the arguments are checked,
inside `main`'s handling of interrupts (`interrupts.script_main`).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsched.experiments.benchtable import (
    check_out,
    figure_beside,
    guarded,
    positive,
    resumable,
    settings_of,
    write_csv,
)
from memsched.experiments.interrupts import script_main
from memsched.experiments.script_args import ScriptParser
from memsched.experiments.vs_torch_report import (
    DUEL_COLUMNS,
    SUMMARY_COLUMNS,
    duels_path,
    figure,
    read_rows,
    summary,
    verdicts,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    Step = Callable[[torch.Tensor], torch.Tensor]  # input copy -> loss

COLUMNS = ("model", "size", "tool", "setting", "status", "peak_bytes", "alloc_peak", "time_ms", "overhead",
           "overhead_unpaired", "overhead_ci", "time_min_ms", "plan_s", "grad_ok", "predicted_peak", "budget", "load",
           "rounds")
#: the columns a CSV of this script must have to be read back (--update, --replot): older ones may lack the others
COLUMNS_READ = ("model", "size", "tool")
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt2": {"tiny": dict(batch=2, seq_len=16, width=32, depth=2, vocab=64),
             "small": dict(batch=2, seq_len=128, width=128, depth=6, vocab=2000),
             "medium": dict(batch=2, seq_len=256, width=192, depth=6, vocab=4000),
             "large": dict(batch=4, seq_len=256, width=256, depth=6, vocab=5000)},  # issue #20's GPT
    "resnet50": {"tiny": dict(batch=2, image_size=32, width=8, depth=1),
                 "small": dict(batch=2, image_size=64, depth=2),
                 "medium": dict(batch=2, image_size=96),
                 "large": dict(batch=4, image_size=128)},  # issue #20's ResNet-50
}
ROCKMATE = ("not run: rockmate 2.0.0 needs rkgb>=2.0.0, whose only PyPI release (2.0.0) ships rkgb/__init__.py and "
            "rkgb/rkgb.py without the rkgb.core and rkgb.lowlevel packages rkgb.py imports (ModuleNotFoundError); "
            "rockmate 1.0.1 (with rkgb 1.0.1) solves its blocks with Gurobi only (gurobipy, a commercial solver) "
            "and its compiler saves the CUDA RNG state (torch.cuda), so it does not run on this CPU")
INDUCTOR_NOT_RUN = ("not run (--compile inductor not given): inductor compiles here (gcc 12), but with a cold "
                    "cache at load 5-7 GPT-2 small took 238 s at budget 1.0 and neither GPT-2 small at 0.5 nor "
                    "ResNet-50 small finished within 300 s (each budget compiles anew); the min-cut partitioner "
                    "it uses is measured without it: torch.compile(aot_eager, min-cut)")


@dataclass
class Point:
    """One measured point: its CSV row, and `timer` (one untracked step; returns ms of thread CPU time)."""

    row: dict[str, Any]
    timer: Callable[[], float] | None = None
    times: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # time / plain torch's time just before it


def _params(blocks: list[nn.Module]) -> list[nn.Parameter]:
    seen: dict[int, nn.Parameter] = {}
    for b in blocks:
        for p in b.parameters():
            seen.setdefault(id(p), p)
    return list(seen.values())


def _grads(params: list[nn.Parameter]) -> list[torch.Tensor | None]:
    return [p.grad.detach().clone() if p.grad is not None else None for p in params]


def _same(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> bool:
    import torch

    return all((u is None) == (v is None) and (u is None or torch.allclose(u, v, rtol=1e-4, atol=1e-6))
               for u, v in zip(a, b))


def memory(step: Step, x: torch.Tensor, params: list[nn.Parameter], probe: bool, seed: int = 0,
           tracker: type | None = None) -> tuple[int, int | None, list[torch.Tensor | None]]:
    """(tracker peak bytes, allocator peak bytes or None, gradients) of one step of `step`,
    parameter gradients allocated before it (as the executor does); `tracker`: the tracker's
    class (default `LiveTensorTracker`)."""
    import torch
    from memsched.models.memory import LiveTensorTracker

    def run() -> None:
        for p in params:
            p.grad = torch.zeros_like(p)
        torch.manual_seed(seed)

    alloc = None
    if probe:
        from memsched.models.alloc_probe import AllocatorProbe

        run()
        step(x.clone()).backward()  # warm-up: lazily allocated kernel caches are not the step's memory
        run()
        with AllocatorProbe() as pr:
            step(x.clone()).backward()
        alloc = pr.peak
    run()
    with (tracker or LiveTensorTracker)() as mem:
        step(x.clone()).backward()
    return mem.peak, alloc, _grads(params)


def timer_of(step: Step, x: torch.Tensor, params: list[nn.Parameter], seed: int = 0) -> Callable[[], float]:
    """One untracked step of `step` from parameter gradients None: ms of the thread's CPU time."""
    import torch

    def one() -> float:
        for p in params:
            p.grad = None
        torch.manual_seed(seed)
        t0 = time.thread_time()
        step(x.clone()).backward()
        return (time.thread_time() - t0) * 1e3
    return one


def torch_points(base: dict, model: Any, probe: bool, compile_kinds: list[str] | None = None, segments: str = "all",
                 compile_budgets: tuple[float, ...] = (), twin: Any = None, only_compile: bool = False
                 ) -> tuple[list[Point], list]:
    """Points of plain torch, checkpoint per block, checkpoint_sequential (every k from 2 to L, or
    the k <= L of the comma-separated `segments`; none with `only_compile`), torch.compile
    (`vs_torch_compile.compile_points`: backend kinds, budgets, dropout-free `twin`); and the
    reference gradients (plain torch's)."""
    from memsched.experiments.vs_torch_compile import DEFAULT_BUDGETS, compile_points
    from torch import nn
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    blocks, loss_fn, x, target = model.blocks, model.loss_fn, model.example_input, model.target
    params = _params(blocks)
    L = len(blocks)
    seq = nn.Sequential(*blocks)

    def plain(a: torch.Tensor) -> torch.Tensor:
        return loss_fn(seq(a), target)

    def per_block(a: torch.Tensor) -> torch.Tensor:
        for b in blocks:
            a = checkpoint(b, a, use_reentrant=False)
        return loss_fn(a, target)

    def sequential(k: int) -> Step:
        return lambda a: loss_fn(checkpoint_sequential(seq, k, a, use_reentrant=False), target)

    cases: list[tuple[str, str, Step]] = [("torch", "no checkpointing", plain),
                                          ("checkpoint-per-block", f"{L} blocks", per_block)]
    ks = range(2, L + 1) if segments == "all" else sorted({int(k) for k in segments.split(",") if 2 <= int(k) <= L})
    cases = cases[:1] if only_compile else cases
    cases += [] if only_compile else [("checkpoint_sequential", f"segments={k}", sequential(k)) for k in ks]
    points, ref = [], []
    for tool, setting, step in cases:
        peak, alloc, g = memory(step, x, params, probe)
        ref = ref or g
        points.append(Point({**base, "tool": tool, "setting": setting, "status": "ok", "peak_bytes": peak,
                             "alloc_peak": alloc, "plan_s": 0.0, "grad_ok": _same(g, ref)}, timer_of(step, x, params)))
    if compile_kinds:
        points += compile_points(base, seq, loss_fn, x, target, params, ref, list(compile_kinds),
                                 tuple(compile_budgets or DEFAULT_BUDGETS), twin, probe)
    return points, ref


def target_peaks(points: list[Point], bin_ratio: float = 1.005) -> list[int]:
    """The other tools' tracker peaks (plain torch's excepted) as budgets for memsched, one per bin:
    a peak within `bin_ratio` of a smaller one kept is left out (nearly the same schedule)."""
    kept: list[int] = []
    for peak in sorted({p.row["peak_bytes"] for p in points if p.row.get("peak_bytes") is not None
                        and p.row["tool"] != "torch"}):
        if not kept or peak > bin_ratio * kept[-1]:
            kept.append(peak)
    return kept


def memsched_points(base: dict, name: str, sizes: dict, granularity: str, n_budgets: int, repeats: int,
                    ref: list, probe: bool, targets: list[int], spread: bool = True, dedupe: bool = True
                    ) -> list[Point]:
    """rotor at its smallest budget, 2% above, `n_budgets` evenly to the store-all peak and at
    each peak in `targets` below it, run by the executor; without `spread`, only at each feasible
    peak of `targets` (capped at the store-all peak); `dedupe`: a budget whose schedule a smaller
    one has already is left out."""
    from memsched.models.chain.executor import ChainExecutor
    from memsched.models.chain.overheads import released_loss_chain, tracker_chain
    from memsched.models.chain.profiler import profile_chain
    from memsched.models.zoo import build_model
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor

    model = build_model(name, granularity=granularity, **sizes)
    params = _params(model.blocks)
    t0 = time.perf_counter()
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=repeats,
                          clock="thread", release=True)  # the steps' clock: other processes do not inflate it
    profile_s = time.perf_counter() - t0
    # plan in the tracker's units, the measure every tool is compared on (a CPU profile charges the
    # allocator's overheads, convolution scratch included, which the tracker does not see)
    # and with the loss and each B(i) as the executor runs them (a_L freed after the loss's forward:
    # released_loss_chain; delta_{i+1} and a_{i+1} released early in B(i): release=True)
    chain = tracker_chain(released_loss_chain(chain), release=True)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    executor = ChainExecutor(model.blocks, model.loss_fn, input_grad=False, release=True)
    budgets = {lo, min(hi, lo + lo // 50)} | {lo + (hi - lo) * k // max(1, n_budgets - 1) for k in range(1, n_budgets)}
    budgets |= {t for t in targets if lo <= t < hi}
    budgets = budgets if spread else {min(t, hi) for t in targets if t >= lo}
    points, seen = [], set()
    for budget in sorted(budgets):
        res = solve_rotor(chain, budget, slots=20000)
        row = {**base, "tool": f"memsched-{granularity}", "setting": f"rotor, {chain.length} stages",
               "budget": budget, "status": res.status, "plan_s": profile_s + res.solve_time_s}
        if res.schedule is None:
            points.append(Point(row))
            continue
        ops = tuple(res.schedule.ops)
        if dedupe and ops in seen:  # the same schedule as a smaller budget's: nothing new to measure
            continue
        seen.add(ops)
        step = executor.step(res.schedule, model.example_input, model.target, chain=chain, seed=0,
                             measure_memory=True, measure_time=False, independent=probe)
        # the prediction of what peak_bytes measures (the tracker's: no CPU RNG states, which only the allocator sees)
        row.update(peak_bytes=step.peak_memory, alloc_peak=step.independent_peak,
                   predicted_peak=step.tracker_predicted_peak or step.predicted_peak,
                   grad_ok=_same(_grads(params), ref))

        def one(schedule=res.schedule) -> float:
            return float(executor.step(schedule, model.example_input, model.target, seed=0, measure_memory=False,
                                       measure_time=True, time_repeats=1, clock="thread").time_ms)
        points.append(Point(row, one))
    return points


def time_rounds(points: list[Point], rounds: int, reference: Point, seed: int = 0) -> None:
    """`rounds` rounds, each timing every point once, in a new random order (seeded), each step
    right after a step of `reference` (plain torch): ``time_ms`` = the median of a point's times,
    ``time_min_ms`` their least (ms), ``overhead`` = the median of its ratios to the reference
    step just before it, less 1 (the reference's own is the noise of that ratio)."""
    timed = [p for p in points if p.timer is not None]  # each ran (measured) before: warm
    assert reference.timer is not None
    rng = random.Random(seed)
    for _ in range(rounds):
        for p in rng.sample(timed, len(timed)):
            before = reference.timer()
            p.times.append(p.timer())
            p.ratios.append(p.times[-1] / before)
    for p in timed:
        p.row.update(time_ms=statistics.median(p.times), time_min_ms=min(p.times),
                     overhead=statistics.median(p.ratios) - 1, overhead_ci=median_ci(p.ratios), rounds=rounds)


def median_ci(values: list[float]) -> float:
    """Half-width of an approximate 95% confidence interval of the median of `values`:
    1.57 IQR / sqrt(n) (McGill, Tukey and Larsen's notches); 0 for fewer than 4 values."""
    if len(values) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4)
    return 1.57 * (q3 - q1) / len(values) ** 0.5


def run_one(name: str, size: str, args: argparse.Namespace) -> list[dict]:
    """Every tool's rows for one model and size (printed as they come)."""
    from memsched.models.zoo import build_model

    sizes = SIZES[name][size]
    base = {"model": name, "size": size, "load": round(os.getloadavg()[0], 2)}
    kinds = _kinds(args.compile)
    twin = (lambda dtype: build_model(name, dropout=0.0, dtype=dtype, **sizes)) if kinds else None  # grad checks
    points, ref = torch_points(base, build_model(name, **sizes), args.probe, kinds, args.segments,
                               _budgets(args.compile_budgets), twin, args.only_compile)
    targets = target_peaks(points)
    for gran in () if args.only_compile else ("block", "layer"):
        points += memsched_points(base, name, sizes, gran, args.budgets, args.repeats, ref, args.probe, targets)
    time_rounds(points, args.rounds, points[0])  # points[0]: plain torch
    rows = [p.row for p in points]
    if not args.only_compile:
        rows.append({**base, "tool": "rockmate", "setting": "PyPI 2.0.0 / 1.0.1", "status": ROCKMATE})
    if "inductor" not in kinds:
        rows.append({**base, "tool": "torch.compile(inductor)", "setting": "activation_memory_budget",
                     "status": INDUCTOR_NOT_RUN})
    plain_ms = next(r["time_ms"] for r in rows if r["tool"] == "torch")
    for r in rows:
        if r.get("time_ms") is not None:
            r["overhead_unpaired"] = r["time_ms"] / plain_ms - 1
        print(_line(r), flush=True)
    return [r for r in rows if not (args.only_compile and r["tool"] == "torch")]


def _line(r: dict[str, Any]) -> str:
    """The printed line of a tool's row (peak in MiB, overhead in %, planning time in s), from the row alone: a
    row read back from a partial file prints as when it ran."""
    peak = f"{r['peak_bytes'] / 2**20:8.2f} MiB" if r.get("peak_bytes") is not None else " " * 12
    over = f"{100 * r['overhead']:+7.1f}%" if r.get("overhead") is not None else " " * 8
    return (f"{r['model']:>8} {r['size']:>6} {r['tool']:>22} {r['setting']:>30} {peak} {over} "
            f"plan {r.get('plan_s') or 0:6.2f}s grad {r.get('grad_ok')} {r['status'][:60]}")


def _kinds(text: str) -> list[str]:
    """``--compile``'s backend kinds ("none" or comma-separated aot, inductor); ValueError otherwise."""
    from memsched.experiments.vs_torch_compile import BACKENDS

    kinds = [k for k in text.split(",") if k and k != "none"]
    for k in kinds:
        if k not in BACKENDS:
            raise ValueError(f"--compile: unknown backend {k!r} (aot, inductor or none)")
    return kinds


def _segments(text: str) -> str:
    """``--segments``: "all" or comma-separated segment counts k >= 2 (integers, read as `torch_points` reads
    them; a k above a model's L is skipped for that model), returned as given; ValueError otherwise (a 0 or a 1
    dropped every point silently, a word failed only once the first model was built)."""
    if text == "all":
        return text
    try:
        counts = [int(k) for k in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        raise ValueError(f"--segments: {text!r} is neither all nor a comma-separated list of integers >= 2")
    return text


def _budgets(text: str) -> tuple[float, ...]:
    """``--compile-budgets``: comma-separated activation memory budgets in [0, 1]; ValueError otherwise."""
    budgets = tuple(float(b) for b in text.split(",") if b)
    if not budgets or any(not 0.0 <= b <= 1.0 for b in budgets):
        raise ValueError(f"--compile-budgets: {text!r} is not a list of budgets in [0, 1]")
    return budgets


def main(argv: list[str] | None = None) -> int:
    """Compare rotor schedules run by ChainExecutor with torch checkpointing (memory and step time); print a table,
    write the CSV (``--out``) and the figure; exit 0, 2 on an unknown model/size, none at all (an empty ``--models``
    or ``--sizes``, nothing written) or a bad argument or CSV, 130 on Ctrl-C
    (the files as they were, the models and sizes finished before it kept beside --out for a rerun to resume
    from), also while torch is imported (one line, `interrupts.script_main`: torch is imported once the arguments
    are checked, inside the handling of interrupts)."""
    return script_main("bench_vs_torch", lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    """`main`: the arguments checked (no torch needed), then `_main` under `benchtable.guarded`."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,resnet50")
    parser.add_argument("--sizes", default="small", help="comma-separated: tiny (tests), small, medium, large")
    parser.add_argument("--budgets", type=positive(int), default=6, help="evenly spaced rotor budgets per granularity")
    parser.add_argument("--repeats", type=positive(int), default=5, help="profiling repetitions (memsched's chain)")
    parser.add_argument("--rounds", type=positive(int), default=11,
                        help="timing rounds (each point's step after a plain one)")
    parser.add_argument("--threads", type=positive(int), default=1)
    parser.add_argument("--segments", default="all", help="checkpoint_sequential's segment counts: all (2..L) or "
                        "a comma-separated list")
    parser.add_argument("--compile", nargs="?", const="inductor", default="aot",
                        help="torch.compile backends with activation_memory_budget: comma-separated aot (default: "
                        "aot_eager_decomp_partition), inductor (also the bare flag), or none")
    parser.add_argument("--compile-budgets", default="1.0,0.8,0.6,0.4,0.2,0.0",
                        help="torch.compile's activation_memory_budget values (comma-separated, in [0, 1])")
    parser.add_argument("--only-compile", action="store_true", help="only plain torch (time reference, not written) "
                        "and torch.compile; with --update replace only its rows")
    parser.add_argument("--no-probe", dest="probe", action="store_false", help="skip the allocator's peaks")
    parser.add_argument("--update", action="store_true", help="keep the CSV's rows of other models and sizes")
    parser.add_argument("--replot", action="store_true", help="run nothing: redraw the figure and summary of --out")
    parser.add_argument("--out", default="results/bench_vs_torch.csv")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.replot:
        if not out.exists():
            print(f"bench_vs_torch: {out} does not exist", file=sys.stderr)
            return 2
        args.models = args.sizes = ""
    pairs = [(n, s) for n in args.models.split(",") for s in args.sizes.split(",") if n and s]
    if not pairs and not args.replot:  # nothing to run: --out would be wiped to its header, then no figure
        print(f"bench_vs_torch: --models {args.models!r} and --sizes {args.sizes!r} name no model and size",
              file=sys.stderr)
        return 2
    for name, size in pairs:
        if name not in SIZES or size not in SIZES[name]:
            print(f"bench_vs_torch: unknown model/size {name}/{size}", file=sys.stderr)
            return 2
    try:
        _kinds(args.compile), _budgets(args.compile_budgets), _segments(args.segments)
    except ValueError as err:
        print(f"bench_vs_torch: {err}", file=sys.stderr)
        return 2
    return guarded("bench_vs_torch", lambda: _main(args, out, pairs))


def _main(args: argparse.Namespace, out: Path, pairs: list[tuple[str, str]]) -> int:
    """The body of `main`: --out checked, each model and size run, the CSV, figure and summaries written (with
    --replot nothing run and --out left as it is: the figure and summaries drawn from it, `InputError` if it has
    no row);
    on Ctrl-C the files stay as they were and the models and sizes finished so far are kept beside --out, from
    which the same command run again resumes (`benchtable.resumable`, one cell per model and size)."""
    check_out(out)
    png = figure_beside(out)  # checked before any work: not --out itself
    if (args.update or args.replot) and out.exists():  # its rows are kept: read them before any work
        _drawable(read_rows(out, COLUMNS_READ), out, args.replot)
    duels = read_rows(duels_path(out), field="duels") if duels_path(out).exists() else []
    if not args.replot:  # --replot runs nothing and leaves --out as it is (it rewrote it, dropping columns)
        import torch  # once the arguments are checked: a usage error needs no torch (a second or so)

        torch.set_num_threads(args.threads)
        with resumable(out, COLUMNS, {**settings_of(args, "update", "replot"), "pairs": pairs}, ("model", "size"),
                       line=_line) as table:
            for name, size in pairs:
                if table.kept(name, size) is None:
                    table.add(*run_one(name, size, args))
            duels = _write_rows(table.rows, out, pairs, args)
    rows = read_rows(out, COLUMNS_READ)
    figure(rows, png)
    for line in summary(rows, duels):
        print(line)
    verdict_path = write_csv(verdicts(rows, duels), out.with_name(f"{out.stem}_summary.csv"), SUMMARY_COLUMNS)
    print(f"wrote {png} and {verdict_path}" if args.replot else f"wrote {out}, {png} and {verdict_path}")
    return 0


def _drawable(rows: list[dict], out: Path, replot: bool) -> None:
    """`InputError` naming `out` when ``--replot`` has no row of it to draw (a header alone: no panel)."""
    if replot and not rows:
        from memsched.solvers.errors import InputError

        raise InputError("no rows to redraw (a header alone)", path=str(out), field="--out")


def _replaced(row: dict[str, Any], pairs: list[tuple[str, str]], only_compile: bool) -> bool:
    """Whether a run of `pairs` replaces `row` (a row of the CSV or of the duels beside it, whose ``tool`` is the
    point's): every row of those models and sizes, only torch.compile's with ``--only-compile``."""
    return (row["model"], row["size"]) in set(pairs) and (not only_compile or row["tool"].startswith("torch.compile"))


def _write_rows(rows: list[dict], out: Path, pairs: list[tuple[str, str]], args: argparse.Namespace) -> list[dict]:
    """Write `rows` (those of the models and sizes `pairs`) to `out`: with ``--update`` after the rows of `out`
    they do not replace (`_replaced`); drop the duels of the points replaced (stale now) from the duels CSV
    beside it, with ``--only-compile`` those of torch.compile's points only. Returns the duels kept."""
    if args.update and out.exists():
        rows = [r for r in read_rows(out, COLUMNS_READ) if not _replaced(r, pairs, args.only_compile)] + rows
    write_csv(rows, out, COLUMNS, extrasaction="ignore")
    duels = read_rows(duels_path(out), field="duels") if duels_path(out).exists() else []
    if any(_replaced(d, pairs, args.only_compile) for d in duels):  # duels of the points just replaced: stale
        columns = tuple(dict.fromkeys([*DUEL_COLUMNS, *duels[0]]))  # the file's own columns kept (vs_torch_duel's)
        duels = [d for d in duels if not _replaced(d, pairs, args.only_compile)]
        write_csv(duels, duels_path(out), columns)
    return duels


if __name__ == "__main__":
    from memsched.experiments.steady_malloc import run_with_pinned_malloc

    sys.exit(run_with_pinned_malloc("memsched.experiments.bench_vs_torch", main))  # steady step times

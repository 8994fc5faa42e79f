"""memsched against the tools users pick instead: same model, same tracker, CPU, one thread.

    python -m memsched.experiments.bench_vs_torch [--models gpt2,resnet50] [--sizes small]
        [--budgets 8] [--repeats 5] [--compile] [--out results/bench_vs_torch.csv]

For each model and size, one training step (forward, loss, backward; weights and their
gradients not counted) is run by

- ``torch``: plain autograd, no checkpointing (the reference: time overhead 0, its gradients);
- ``checkpoint-per-block``: ``torch.utils.checkpoint.checkpoint(block, a, use_reentrant=False)``
  around every block;
- ``checkpoint_sequential``: ``torch.utils.checkpoint.checkpoint_sequential`` with k segments,
  every k from 2 to L (each k a point of its curve; the best k is the curve's frontier);
- ``torch.compile`` with ``torch._functorch.config.activation_memory_budget`` in
  {1.0, 0.5, 0.2} (with ``--compile``; inductor needs a C++ compiler on CPU; failures are rows);
- ``memsched-block`` / ``memsched-layer``: the chain profiled at ``--granularity block`` /
  ``layer`` (`models.chain.profiler`, per-mode forward overheads), rotor's schedule
  (`solvers.chain.dp`, 2000 slots) at `--budgets` budgets from its smallest feasible budget to the
  store-all peak, run by `models.chain.executor.ChainExecutor` (``input_grad=False``, as a plain
  step).

Memory: the peak of `models.memory.LiveTensorTracker` over the step (the input is copied inside
the tracked region by every tool), bytes. Time: median over `--repeats` untracked steps, parameter
gradients set to None before each (ms of the thread's CPU time, ``time.thread_time``: with one
thread autograd's CPU backward runs in the calling thread, and other processes sharing the cores
do not inflate it); ``overhead`` = time / torch's time - 1. ``plan_s``:
memsched's profiling plus solving time (the torch tools plan nothing; torch.compile's compile
time is reported there; on this CPU it runs, compiling 1-2 min a budget, but the live-tensor
tracker does not see the buffers inductor's generated code allocates, so its peaks are not
comparable and it is off by default). ``grad_ok``: every parameter gradient allclose to plain autograd's
(rtol 1e-4, atol 1e-6) with the same seed. Rockmate 2.0: the PyPI release depends on rkgb 2.0.0,
whose source distribution ships without its ``rkgb.core`` package, so it does not import; it is
listed as a failed row. Writes the CSV and a figure (time overhead against peak memory, one curve
per tool) next to it, and prints a summary per model: whether some memsched point is at most as
high in both peak and time as each other tool's point, and memsched's smallest budget against
checkpoint-per-block's peak.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

COLUMNS = ("model", "size", "tool", "setting", "status", "peak_bytes", "time_ms", "overhead", "plan_s", "grad_ok",
           "predicted_peak", "budget")
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt2": {"tiny": dict(batch=2, seq_len=16, width=32, depth=2, vocab=64),
             "small": dict(batch=2, seq_len=128, width=128, depth=6, vocab=2000),
             "medium": dict(batch=4, seq_len=256, width=256, depth=6, vocab=5000),
             "large": dict(batch=4, seq_len=512, width=384, depth=8, vocab=10000)},
    "resnet50": {"tiny": dict(batch=2, image_size=32, width=8, depth=1),
                 "small": dict(batch=2, image_size=64, depth=2),
                 "medium": dict(batch=4, image_size=96),
                 "large": dict(batch=4, image_size=128)},
}
Step = Callable[[torch.Tensor], torch.Tensor]  # input copy -> loss


def _params(blocks: list[nn.Module]) -> list[nn.Parameter]:
    seen: dict[int, nn.Parameter] = {}
    for b in blocks:
        for p in b.parameters():
            seen.setdefault(id(p), p)
    return list(seen.values())


def measure(step: Step, x: torch.Tensor, params: list[nn.Parameter], repeats: int,
            seed: int = 0) -> tuple[int, float, list[torch.Tensor]]:
    """(peak bytes of the tracked step, median ms of untracked steps, gradients)."""
    from memsched.models.memory import LiveTensorTracker

    for p in params:
        p.grad = torch.zeros_like(p)
    torch.manual_seed(seed)
    with LiveTensorTracker() as mem:
        step(x.clone()).backward()
    peak = mem.peak
    times = []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        torch.manual_seed(seed)
        t0 = time.thread_time()
        step(x.clone()).backward()
        times.append((time.thread_time() - t0) * 1e3)
    return peak, statistics.median(times), [p.grad.detach().clone() if p.grad is not None else None for p in params]


def _same(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> bool:
    return all((u is None) == (v is None) and (u is None or torch.allclose(u, v, rtol=1e-4, atol=1e-6))
               for u, v in zip(a, b))


def torch_rows(name: str, size: str, model: Any, repeats: int, with_compile: bool) -> tuple[list[dict], Any]:
    """Rows of plain torch, checkpoint per block, checkpoint_sequential (every k), torch.compile."""
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

    rows = []
    peak, ms, ref = measure(plain, x, params, repeats)
    base = {"model": name, "size": size}
    rows.append({**base, "tool": "torch", "setting": "no checkpointing", "status": "ok", "peak_bytes": peak,
                 "time_ms": ms, "plan_s": 0.0, "grad_ok": True})
    cases: list[tuple[str, str, Step]] = [("checkpoint-per-block", f"{L} blocks", per_block)]
    cases += [("checkpoint_sequential", f"segments={k}", sequential(k)) for k in range(2, L + 1)]
    for tool, setting, step in cases:
        p, t, g = measure(step, x, params, repeats)
        rows.append({**base, "tool": tool, "setting": setting, "status": "ok", "peak_bytes": p, "time_ms": t,
                     "plan_s": 0.0, "grad_ok": _same(g, ref)})
    if with_compile:
        rows += compile_rows(base, seq, loss_fn, x, target, params, ref, repeats)
    return rows, ref


def compile_rows(base: dict, seq: nn.Module, loss_fn: Any, x: torch.Tensor, target: Any,
                 params: list[nn.Parameter], ref: list, repeats: int) -> list[dict]:
    """torch.compile at three activation memory budgets (a failed row when it does not run)."""
    import torch._dynamo
    import torch._functorch.config as fconfig

    rows = []
    for budget in (1.0, 0.5, 0.2):
        torch._dynamo.reset()
        row = {**base, "tool": "torch.compile", "setting": f"activation_memory_budget={budget}"}
        try:
            fconfig.activation_memory_budget = budget
            compiled = torch.compile(seq)
            t0 = time.perf_counter()
            loss_fn(compiled(x.clone()), target).backward()  # compiles
            plan = time.perf_counter() - t0
            p, t, g = measure(lambda a, c=compiled: loss_fn(c(a), target), x, params, repeats)
            row.update(status="ok", peak_bytes=p, time_ms=t, plan_s=plan, grad_ok=_same(g, ref))
        except Exception as err:  # noqa: BLE001 - any failure of the tool is a result row
            row.update(status=f"failed: {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")
        finally:
            fconfig.activation_memory_budget = 1.0
        rows.append(row)
    return rows


def memsched_rows(name: str, size: str, sizes: dict, granularity: str, n_budgets: int, repeats: int,
                  ref: list) -> list[dict]:
    """rotor at `n_budgets` budgets from its smallest to the store-all peak, run by the executor."""
    from memsched.models.chain.executor import ChainExecutor
    from memsched.models.chain.profiler import profile_chain
    from memsched.models.zoo import build_model
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor

    model = build_model(name, granularity=granularity, **sizes)
    params = _params(model.blocks)
    t0 = time.perf_counter()
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=repeats)
    profile_s = time.perf_counter() - t0
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    executor = ChainExecutor(model.blocks, model.loss_fn, input_grad=False)
    rows = []
    # the smallest budget (where the slot rounding may leave only the least-memory schedule), 2%
    # above it (the DP's optimum at 2000 slots), then evenly up to the store-all peak
    budgets = sorted({lo, min(hi, lo + lo // 50)} | {lo + (hi - lo) * k // max(1, n_budgets - 1)
                                                     for k in range(1, n_budgets)})
    for budget in budgets:
        res = solve_rotor(chain, budget, slots=2000)
        row = {"model": name, "size": size, "tool": f"memsched-{granularity}", "setting": f"rotor, {chain.length} "
               f"stages", "budget": budget, "status": res.status, "plan_s": profile_s + res.solve_time_s}
        if res.schedule is None:
            rows.append(row)
            continue
        step = executor.step(res.schedule, model.example_input, model.target, chain=chain, seed=0,
                             measure_memory=True, measure_time=True, time_repeats=repeats, clock="thread")
        grads = [p.grad.detach().clone() if p.grad is not None else None for p in params]
        row.update(peak_bytes=step.peak_memory, time_ms=step.time_ms, grad_ok=_same(grads, ref),
                   predicted_peak=step.predicted_peak)
        rows.append(row)
    return rows


def dominance_summary(rows: list[dict]) -> list[str]:
    """Per (model, size): other tools' points not matched by a memsched point (peak and time both
    at most theirs, 2% time noise allowed), and memsched's least peak against checkpoint-per-block's."""
    out = []
    for key in sorted({(r["model"], r["size"]) for r in rows}):
        rs = [r for r in rows if (r["model"], r["size"]) == key and r.get("peak_bytes") is not None]
        ours = [r for r in rs if r["tool"].startswith("memsched")]
        theirs = [r for r in rs if not r["tool"].startswith("memsched") and r["tool"] != "torch"]
        beaten = [r for r in theirs if not any(o["peak_bytes"] <= r["peak_bytes"] and
                                               o["time_ms"] <= 1.02 * r["time_ms"] for o in ours)]
        per_block = [r["peak_bytes"] for r in theirs if r["tool"] == "checkpoint-per-block"]
        least = min((o["peak_bytes"] for o in ours), default=None)
        out.append(f"{key[0]} {key[1]}: memsched's smallest measured peak {least} B vs checkpoint-per-block "
                   f"{per_block[0] if per_block else None} B; points of other tools no memsched point matches: "
                   + (", ".join(f"{r['tool']} {r['setting']}" for r in beaten) or "none"))
    return out


def figure(rows: list[dict], path: Path) -> None:
    """Time overhead (%) against peak memory (MB), one curve per tool, one panel per model/size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(r["model"], r["size"]) for r in rows})
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        rs = [r for r in rows if (r["model"], r["size"]) == key and r.get("peak_bytes") is not None]
        for tool in dict.fromkeys(r["tool"] for r in rs):
            pts = sorted((r["peak_bytes"] / 2**20, 100 * r["overhead"]) for r in rs if r["tool"] == tool)
            style = "o-" if len(pts) > 1 else "s"
            ax.plot([p for p, _ in pts], [o for _, o in pts], style, label=tool, markersize=4)
        ax.set_title(f"{key[0]} ({key[1]})")
        ax.set_xlabel("peak activation memory (MB, live-tensor tracker)")
        ax.set_ylabel("time overhead vs plain torch (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """Compare rotor schedules run by ChainExecutor with torch checkpointing (memory and step time); print a table,
    write the CSV (``--out``); exit 0, 2 on an unknown model/size."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,resnet50")
    parser.add_argument("--sizes", default="small", help="comma-separated: tiny (tests), small, medium, large")
    parser.add_argument("--budgets", type=int, default=8, help="rotor budgets per granularity")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per point (median)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="also torch.compile with activation_memory_budget")
    parser.add_argument("--out", default="results/bench_vs_torch.csv")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from memsched.models.zoo import build_model

    rows: list[dict] = []
    for name in args.models.split(","):
        for size in args.sizes.split(","):
            if name not in SIZES or size not in SIZES[name]:
                print(f"bench_vs_torch: unknown model/size {name}/{size}", file=sys.stderr)
                return 2
            sizes = SIZES[name][size]
            model = build_model(name, **sizes)
            trows, ref = torch_rows(name, size, model, args.repeats, args.compile)
            rows += trows
            rows.append({"model": name, "size": size, "tool": "rockmate 2.0", "setting": "PyPI 2.0.0",
                         "status": "failed: rkgb 2.0.0 from PyPI ships without rkgb.core (does not import)"})
            for gran in ("block", "layer"):
                rows += memsched_rows(name, size, sizes, gran, args.budgets, args.repeats, ref)
            plain_ms = next(r["time_ms"] for r in trows if r["tool"] == "torch")
            for r in rows:
                if (r["model"], r["size"]) == (name, size) and r.get("time_ms") is not None:
                    r["overhead"] = r["time_ms"] / plain_ms - 1
            for r in rows:
                if (r["model"], r["size"]) == (name, size):
                    peak = f"{r['peak_bytes'] / 2**20:8.2f} MB" if r.get("peak_bytes") is not None else " " * 11
                    over = f"{100 * r['overhead']:+7.1f}%" if r.get("overhead") is not None else " " * 8
                    print(f"{name:>8} {size:>6} {r['tool']:>22} {r['setting']:>30} {peak} {over} "
                          f"plan {r.get('plan_s') or 0:6.2f}s grad {r.get('grad_ok')} {r['status']}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    figure(rows, out.with_suffix(".png"))
    for line in dominance_summary(rows):
        print(line)
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

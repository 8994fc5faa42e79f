"""torch.compile's rows of `experiments.bench_vs_torch`: the activation-memory-budget partitioner.

torch.compile trains with a partition of the joint forward/backward graph chosen by AOTAutograd's
min-cut rematerialisation partitioner (``torch._functorch.partitioners.min_cut_rematerialization_partition``);
``torch._functorch.config.activation_memory_budget`` = b in [0, 1] makes it solve a knapsack so that
the saved activations are at most b times those of its runtime-optimised partition (b = 1), the
rest recomputed in the backward (b = 0: recompute everything recomputable). Two backends:

- ``aot`` (tool ``torch.compile(aot_eager, min-cut)``): the registered backend
  ``aot_eager_decomp_partition``: inductor's decompositions and the same partitioner
  (``min_cut_rematerialization_partition(compiler="inductor")``) that inductor gets, the two
  graphs then run op by op in eager PyTorch (no kernel fusion, no generated code). Its memory
  is the partitioner's schedule; its time is not inductor's (decomposed ops run unfused, so its
  overhead is mostly that of running small ops one by one). Compiling takes seconds to a minute.
- ``inductor`` (tool ``torch.compile(inductor)``): the default backend, C++ kernels built with the
  machine's compiler (minutes per budget on a loaded 2-core CPU with a cold cache).

Memory: the live-tensor tracker, a ``TorchDispatchMode``, makes torch.compile fall back to
eager (Dynamo skips frames while a user dispatch mode is active), so under it a compiled step
is plain autograd. `CompiledTracker` declares ``ignore_compile_internals``: the compiled
artifacts run, and the tracker sees their ops. For ``aot`` every tensor is an aten op's output,
so ``peak_bytes`` is filled (it agrees with the allocator's peak: docs/chain.md); inductor's
generated code allocates its buffers outside the dispatcher, so its ``peak_bytes`` stays empty
and it is compared on ``alloc_peak`` (``--no-probe`` measures no allocator peak, for these rows
too: an inductor row then has no peak, and its status says so).

Gradients: a model with dropout (GPT-2) draws other random numbers under torch.compile
(decomposed dropout; the partitioner never recomputes random ops), so its gradients cannot
equal plain autograd's; they are checked on a dropout-free copy (same weights and batch, the
same backend and budget; the row's status says so). Decompositions reorder float32 sums (batch
norm), so the check is per tensor ``||g - g_ref||_2 <= 1e-3 ||g_ref||_2`` (`close_normwise`):
ResNet-50 (tiny) differs by up to 2.4e-4 in float32 and 6e-12 in float64, i.e. by rounding.
When the float32 check fails (ResNet-50 medium: up to 4%, deep batch norm over few values per
channel), it is redone in float64 on a dropout-free copy (within 1e-9) and the status says so.
``plan_s`` is the compile time (the first step, forward and backward, wall clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

    Step = Callable[[torch.Tensor], torch.Tensor]

__all__ = [
    "twin_check",
    "BACKENDS",
    "TOOLS",
    "DEFAULT_BUDGETS",
    "NO_PEAK",
    "CompiledTracker",  # noqa: F822  (made on first use: `__getattr__`)
    "close_normwise",
    "compile_step",
    "compile_points",
]

BACKENDS = {"aot": "aot_eager_decomp_partition", "inductor": "inductor"}
TOOLS = {"aot": "torch.compile(aot_eager, min-cut)", "inductor": "torch.compile(inductor)"}
DEFAULT_BUDGETS = (1.0, 0.8, 0.6, 0.4, 0.2, 0.0)
#: the status of an inductor row measured with ``--no-probe``: its one peak is the allocator's
NO_PEAK = "ok (no peak: inductor's is the allocator's only, not measured with --no-probe)"
GRAD_RTOL = 1e-3
GRAD_RTOL_64 = 1e-9
#: `CompiledTracker`, made on first use (`_compiled_tracker`)
_TRACKER: list[type] = []


def __getattr__(name: str) -> Any:
    """`CompiledTracker`, made on first use: this module imports torch only inside its functions, so that
    `bench_vs_torch`, which imports it, reads its arguments without torch (a second or so)."""
    if name == "CompiledTracker":
        return _compiled_tracker()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _compiled_tracker() -> type:
    """``CompiledTracker``: a `LiveTensorTracker` under which torch.compile runs its compiled artifacts (instead
    of falling back to eager): it sees the aten ops those artifacts dispatch (bytes). One class, made once."""
    if not _TRACKER:
        from memsched.models.memory import LiveTensorTracker

        class CompiledTracker(LiveTensorTracker):
            """`LiveTensorTracker` under which torch.compile runs its compiled artifacts (module docstring)."""

            @classmethod
            def ignore_compile_internals(cls) -> bool:
                """Let Dynamo compile and run compiled code while this mode is active."""
                return True

        CompiledTracker.__module__, CompiledTracker.__qualname__ = __name__, "CompiledTracker"
        _TRACKER.append(CompiledTracker)
    return _TRACKER[0]


def close_normwise(a: list[torch.Tensor | None], b: list[torch.Tensor | None], rtol: float = GRAD_RTOL) -> bool:
    """Every tensor of `a` within ``rtol`` of `b`'s in the 2-norm (``||u - v|| <= rtol ||v||``;
    both None counts as equal)."""
    return len(a) == len(b) and all(
        (u is None) == (v is None) and (u is None or float((u - v).norm()) <= rtol * float(v.norm()) + 1e-12)
        for u, v in zip(a, b)
    )


def has_dropout(modules: list[nn.Module]) -> bool:
    """Whether any module holds a dropout with probability > 0 (then torch.compile's random
    numbers differ from eager's)."""
    from torch import nn

    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for b in modules for m in b.modules())


def compile_step(
    seq: nn.Module, loss_fn: Any, x: torch.Tensor, target: Any, backend: str, budget: float
) -> tuple[Step, float, list]:
    """torch.compile `seq` with `backend` (a name of `BACKENDS`' values) at activation memory
    budget `budget`, compiled by one step (forward, loss, backward) from `x`: (the step, the
    compile time in s, the list of graphs Dynamo handed the backend, which grows if it
    recompiles). Each call compiles afresh (its own backend object, so no cache entry is shared
    with another budget's)."""
    import torch._dynamo
    import torch._functorch.config as fconfig

    graphs: list = []

    def counting(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs)

    compiled = torch.compile(seq, backend=counting)
    with fconfig.patch(activation_memory_budget=budget):  # the partitioner reads it while compiling
        t0 = time.perf_counter()
        loss_fn(compiled(x.clone()), target).backward()
        plan = time.perf_counter() - t0
    return (lambda a: loss_fn(compiled(a), target)), plan, graphs


def compile_points(
    base: dict,
    seq: nn.Module,
    loss_fn: Any,
    x: torch.Tensor,
    target: Any,
    params: list[nn.Parameter],
    ref: list,
    kinds: list[str],
    budgets: tuple[float, ...],
    twin: Callable[[torch.dtype], Any] | None = None,
    probe: bool = True,
) -> list:
    """Points (`bench_vs_torch.Point`) of torch.compile for each backend kind of `kinds` ("aot",
    "inductor") at each budget; a failure is a row with its reason. `ref`: plain autograd's
    gradients; `twin(dtype)`: a dropout-free build of the same model (``ZooModel``) in `dtype`,
    used for the gradient check when `seq` has dropout (float32), and when a float32 check
    fails (float64, `GRAD_RTOL_64`: the decompositions' float32 reordering, amplified by a deep
    network, is then told apart from a wrong gradient). `probe`: measure the allocator's peak (``alloc_peak``;
    without it, ``--no-probe``, inductor's rows have no peak at all, which their status says)."""
    import torch._dynamo
    from memsched.experiments.bench_vs_torch import Point, memory, timer_of
    from memsched.models.memory import LiveTensorTracker

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 1024)
    twin32 = twin(torch.float32) if twin is not None and has_dropout(list(seq)) else None
    points = []
    for kind in kinds:
        for budget in budgets:
            row = {**base, "tool": TOOLS[kind], "setting": f"activation_memory_budget={budget}"}
            try:
                step, plan, graphs = compile_step(seq, loss_fn, x, target, BACKENDS[kind], budget)
                tracker = _compiled_tracker() if kind == "aot" else LiveTensorTracker
                n = len(graphs)  # more than 1: graph breaks (each graph partitioned at the budget)
                peak, alloc, g = memory(step, x, params, probe=probe, tracker=tracker)
                if len(graphs) != n:  # a recompilation would run at the default budget
                    raise RuntimeError(f"recompiled while measured ({n} -> {len(graphs)} graphs)")
                status = "ok" if kind == "aot" else "ok (allocator peak only)" if probe else NO_PEAK
                status += f" ({n} graphs)" if n != 1 else ""
                if twin32 is not None:
                    grad_ok = twin_check(twin32, BACKENDS[kind], budget, tracker, GRAD_RTOL)
                    status += " (gradients checked on a dropout-free copy)"
                else:
                    grad_ok = close_normwise(g, ref)
                if not grad_ok and twin is not None:
                    grad_ok = twin_check(twin(torch.float64), BACKENDS[kind], budget, tracker, GRAD_RTOL_64)
                    status += " (float32 check failed; gradients checked in float64, dropout-free)"
                row.update(
                    status=status,
                    peak_bytes=peak if kind == "aot" else None,
                    alloc_peak=alloc,
                    plan_s=plan,
                    grad_ok=grad_ok,
                )
                points.append(Point(row, _guarded(timer_of(step, x, params), graphs, row)))
            except Exception as err:  # noqa: BLE001 - any failure of the tool is a result row
                first = str(err).splitlines()[0][:120] if str(err) else ""
                points.append(Point({**row, "status": f"failed: {type(err).__name__}: {first}"}))
    return points


def twin_check(model: Any, backend: str, budget: float, tracker: type, rtol: float) -> bool:
    """Whether `model` (a ``ZooModel``, dropout-free) compiled with `backend` at `budget` gives
    plain autograd's gradients (normwise within `rtol`)."""
    from memsched.experiments.bench_vs_torch import memory
    from torch import nn

    seq = nn.Sequential(*model.blocks)
    params = list(dict.fromkeys(p for b in model.blocks for p in b.parameters()))
    x, loss_fn, target = model.example_input, model.loss_fn, model.target
    _, _, ref = memory(lambda a: loss_fn(seq(a), target), x, params, probe=False)
    step, _, _ = compile_step(seq, loss_fn, x, target, backend, budget)
    _, _, g = memory(step, x, params, probe=False, tracker=tracker)
    return close_normwise(g, ref, rtol)


def _guarded(timer: Callable[[], float], graphs: list, row: dict) -> Callable[[], float]:
    """`timer`, marking `row` failed if Dynamo compiled again (a recompilation would run at the
    default budget, not the row's)."""
    n = len(graphs)

    def one() -> float:
        ms = timer()
        if len(graphs) != n:
            row["status"] = f"failed: recompiled during timing ({n} -> {len(graphs)} graphs)"
        return ms

    return one

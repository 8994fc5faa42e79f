"""memsched: memory-aware scheduling for training deep networks in limited memory.

One import name for the whole toolkit. Its parts live in the repository's folders and are
installed under this name:

- `memsched.solvers`: pure optimisation (instances, schedules, simulators, DPs, MILP/CP models);
  never imports torch.
- `memsched.models`: the PyTorch side (network zoo, profiler, executors, pipeline runner).
- `memsched.experiments`: the ``memsched`` command line, sweeps, benchmarks and figures.

The facade, for notebooks and scripts (see `memsched.api`)::

    import memsched
    chain = memsched.load("examples/cnn12.json")            # chain, join, graph, PipeDream, ...
    r = memsched.solve(chain, "60%", solver="rotor")          # a Result: status, makespan, peak, bound
    r.to_pandas(); r.plot()                                   # one-row table; memory timeline figure
    cmp = memsched.solve(chain, "60%", solver=["rotor", "periodic", "cpsat"])   # a Comparison
    sw = memsched.sweep(chain, budgets=["40%", "60%", "80%"], solvers=["rotor", "periodic"])
    sw.plot()                                                 # overhead versus budget
    memsched.simulate(chain, r.schedule, budget=r.budget)     # the referee's replay
    memsched.profile("resnet18", batch=2, image_size=64)      # a zoo network -> chain (needs torch)
    memsched.run("resnet18", "70%", solver="rotor", batch=2)  # executed for real (needs torch)
    memsched.plot(r)                                          # any result, or (instance, schedule)

Your own network (an ``nn.Sequential`` or a list of blocks, an example batch, a loss)::

    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy)
    r = memsched.solve(chain, "50%", solver="rotor")
    memsched.run(net, "50%", example_input=x, target=y, loss_fn=F.cross_entropy)  # measured vs predicted
    scheduled = memsched.ScheduledChain(net, r)               # a drop-in module
    F.cross_entropy(scheduled(x), y).backward()               # forward + backward under r's schedule
    g = memsched.profile(module, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph")
    plan = memsched.solve(g, "70%", solver="checkmate")       # any module: its torch.fx training graph
    memsched.ScheduledGraph(module, plan, F.cross_entropy, example_input=x).step(x, y)

Bad input (a malformed file, a budget below one byte, an option no named solver takes, an
argument of the wrong type) raises `memsched.InputError` (a `ValueError`) naming the file and
field. Importing memsched is light: the facade's functions are loaded on first use, and torch,
pandas and matplotlib are imported only by the calls that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public names loaded on first access (PEP 562), and the module that defines each.
_LAZY = {
    "load": "memsched.api",
    "profile": "memsched.api",
    "solve": "memsched.api",
    "simulate": "memsched.api",
    "run": "memsched.api",
    "sweep": "memsched.api",
    "plot": "memsched.api",
    "budget": "memsched.api",
    "problem_of": "memsched.api",
    "reference_peak": "memsched.api",
    "default_solver": "memsched.api",
    "list_solvers": "memsched.api",
    "data_path": "memsched.api",
    "Result": "memsched.results",
    "Comparison": "memsched.results",
    "SweepResult": "memsched.results",
    "RunResult": "memsched.results",
    "InputError": "memsched.solvers.errors",
    "Network": "memsched.models.network",
    "ScheduledChain": "memsched.models.chain.training",
    "ScheduledGraph": "memsched.models.graph.training",
}

_SUBPACKAGES = ("solvers", "models", "experiments", "api", "results")

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"memsched.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))

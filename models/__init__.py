"""The PyTorch side of memsched (imports torch; ``solvers`` never does).

Public API:

- `models.zoo`: ``build_model(name, batch=, image_size=, seq_len=, width=, depth=, device=)``
  -> `ZooModel` (unpacks as ``blocks, example_input, loss_fn, target``); names resnet18 ..
  resnet152, densenet121, inception_v3, vgg16, gpt2, unet. Any ``nn.Sequential`` or list of
  modules is a chain too.
- `models.network`: your own network as a chain (``Network``, factories ``FILE.py:FUNCTION`` that
  ``build_model`` and the commands accept); `models.chain.training`: ``ScheduledChain``, training
  with a schedule (a drop-in module, or ``step(x, target)``; ``.grad`` filled as ``loss.backward()``
  does); `models.graph.training`: ``ScheduledGraph``, any module under a graph schedule.
- `models.chain.profiler`: ``profile_chain(blocks, loss_fn, x, target) -> solvers.chain.Chain``
  (times in ms, sizes in bytes; ``Chain.save`` writes memsched.chain/1) and
  ``profile_model(name, **sizes)``.
- `models.chain.executor`: ``ChainExecutor(blocks, loss_fn).step(schedule, x, target, chain=...)``
  -> `StepResult` (gradients, loss, measured peak bytes and time vs the simulator's
  prediction); ``reference_step`` / ``compare_gradients`` / ``execute`` for gradient checks.
- `models.join.executor`, `models.offload.executor`, `models.graph.executor`: the same for join
  schedules, offloading schedules (real transfers) and general-graph schedules (node by node on
  the torch.fx graph of `models.graph.export`).
- `models.measure`: the pieces every executor shares (``StepMeter``, ``measure_runs``,
  ``StepResult``, ``RunState``, ``RngStates``, ``Timer``, ``MemoryWatch``, ``compare_gradients``,
  ``gradients_match``, ``measured_vs_predicted``).
- `models.memory`: ``LiveTensorTracker``, the CPU measurement of live tensor bytes;
  `models.alloc_probe`: ``AllocatorProbe``, an independent one (torch.profiler allocator events).
- `models.run`: ``run(model, budget, problem=, solver=)``, the end-to-end run behind
  ``memsched run`` (``prepare`` + ``execute_schedule`` for sweeps and benchmarks).
"""

from __future__ import annotations

__all__ = ["zoo", "network", "chain", "join", "offload", "graph", "pipeline", "measure", "memory", "alloc_probe", "run"]

"""The PyTorch side of memsched (imports torch; ``solvers`` never does).

Public API:

- `models.zoo`: ``build_model(name, batch=, image_size=, seq_len=, width=, depth=, device=)``
  -> `ZooModel` (unpacks as ``blocks, example_input, loss_fn, target``); names resnet18 ..
  resnet152, densenet121, inception_v3, vgg16, gpt2, unet. Any ``nn.Sequential`` or list of
  modules is a chain too.
- `models.chain.profiler`: ``profile_chain(blocks, loss_fn, x, target) -> solvers.chain.Chain``
  (times in ms, sizes in bytes; ``Chain.save`` writes memsched.chain/1) and
  ``profile_model(name, **sizes)``.
- `models.chain.executor`: ``ChainExecutor(blocks, loss_fn).step(schedule, x, target, chain=...)``
  -> `StepResult` (gradients, loss, measured peak bytes and time vs the simulator's
  prediction); ``reference_step`` / ``compare_gradients`` / ``execute`` for gradient checks.
- `models.memory`: ``LiveTensorTracker``, the CPU measurement of live tensor bytes.
- `models.gpu_check`: ``python -m memsched.models.gpu_check`` accuracy check (GPU, or CPU with --tiny).
"""

from __future__ import annotations

__all__ = ["zoo", "profiler", "executor", "memory", "gpu_check"]

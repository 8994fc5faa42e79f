"""`memsched.run`: solve, then execute the schedule for real (PyTorch), as ``memsched run`` does.

The work is the ``run`` command's (`experiments.commands.run`): profile the zoo network (or
take the costs of a given chain), solve under the budget, execute one training step with the
schedule and one with store-all, compare measured time and peak memory with the simulator's
prediction and the gradients with plain autograd. This module builds that command's
arguments from keyword arguments and returns its JSON object as a dict, so the facade and
the command line can never disagree.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

#: Keyword sizes of the zoo networks, as the command's options (``image_size`` -> ``--image-size``).
_SIZE_OPTIONS = ("batch", "image_size", "seq_len", "width", "depth", "vocab", "device", "threads", "timing")


def run_model(model: str, budget: int | float | str, solver: str | None = None, *, chain: Any = None,
              bandwidth: str | float | None = None, slots: int = 500, time_limit: float | None = None,
              time_repeats: int = 3, repeats: int = 3, seed: int = 0, **sizes: Any) -> dict[str, Any]:
    """The ``memsched run MODEL --json`` object for these arguments (see `memsched.api.run`).
    An infeasible budget gives status "infeasible" with ``message`` and ``min_budget``; bad
    input raises `InputError`."""
    unknown = set(sizes) - set(_SIZE_OPTIONS)
    if unknown:
        raise InputError(f"unknown option {sorted(unknown)[0]!r} (sizes: {', '.join(_SIZE_OPTIONS)})",
                         field=sorted(unknown)[0])
    argv = ["run", str(model), "--budget", str(budget), "--slots", str(slots), "--time-repeats", str(time_repeats),
            "--repeats", str(repeats), "--seed", str(seed), "--json"]
    if solver is not None:
        argv += ["--solver", solver]
    if time_limit is not None:
        argv += ["--time-limit", str(time_limit)]
    if bandwidth is not None:
        argv += ["--bandwidth", str(bandwidth)]
    for key, value in sizes.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    with tempfile.TemporaryDirectory() as tmp:
        if chain is not None:
            if not isinstance(chain, (str, Path)):
                path = Path(tmp) / "chain.json"
                chain.save(path)
                chain = path
            argv += ["--chain", str(chain)]
        return _call(argv)


def _call(argv: list[str]) -> dict[str, Any]:
    from memsched.experiments.cli import build_parser

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        raise InputError(f"bad arguments for memsched run: {' '.join(argv[1:])}") from None
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = args.func(args)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"memsched run printed no result (exit {code}): {err.getvalue().strip()}")
    data = json.loads(lines[-1])
    data.setdefault("status", "infeasible" if code == 1 else "ok")
    return data


__all__ = ["run_model"]

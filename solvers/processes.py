"""Starting worker processes with ``spawn`` from any caller (shared by the sweep pool and the
pipeline runner)."""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator


@contextlib.contextmanager
def callers_main_hidden() -> Iterator[None]:
    """While processes are started inside this block, ``__main__`` is an empty module.

    Spawn runs the caller's main script again in each child (as ``__mp_main__``), so a script
    that starts a sweep or a pipeline run outside an ``if __name__ == "__main__":`` block would
    start one again in every child, which fails there (each sweep cell then ended as an ``error``
    row). Use it only where the children need nothing of ``__main__``: their target and arguments
    must be importable from memsched."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main

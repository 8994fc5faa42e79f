"""numba's ``njit`` when it is installed (and ``MEMSCHED_NO_NUMBA`` is unset), else an identity
decorator: the chain DP kernels run compiled or as plain Python/numpy with the same results."""

from __future__ import annotations

import os
from typing import Any

try:  # pragma: no cover - depends on the environment
    if os.environ.get("MEMSCHED_NO_NUMBA"):
        raise ImportError("disabled by MEMSCHED_NO_NUMBA")
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(*args: Any, **kwargs: Any):  # type: ignore[no-redef]
        """Identity decorator when numba is missing."""
        if args and callable(args[0]):
            return args[0]
        return lambda f: f

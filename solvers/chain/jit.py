"""numba's ``njit``, applied on a kernel's first call, when numba is installed (and
``MEMSCHED_NO_NUMBA`` is unset); else the plain Python function: the chain DP kernels run
compiled or as plain Python/numpy with the same results.

numba is imported only when a numba kernel is first called, not when the DP modules are
imported: with the C kernels (`ckernel`) a process never pays numba's import and JIT start-up.
``HAVE_NUMBA`` says whether numba is installed, without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from typing import Any

HAVE_NUMBA = not os.environ.get("MEMSCHED_NO_NUMBA") and importlib.util.find_spec("numba") is not None


class LazyJit:
    """A kernel compiled with ``numba.njit(**options)`` on its first call (numba's on-disk cache
    included, ``cache=True``), or run as plain Python when numba is missing or disabled."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = func
        self.options = options
        self._compiled: Callable[..., Any] | None = None
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any) -> Any:
        """Run the kernel (compiling or loading it from numba's cache on the first call)."""
        if self._compiled is None:
            if HAVE_NUMBA:
                import numba

                self._compiled = numba.njit(**self.options)(self.py_func)
            else:
                self._compiled = self.py_func
        return self._compiled(*args)


def njit(*args: Any, **kwargs: Any) -> Any:
    """``@njit`` or ``@njit(cache=True, ...)``: the function wrapped in a `LazyJit`."""
    if args and callable(args[0]):
        return LazyJit(args[0], {})
    return lambda f: LazyJit(f, dict(kwargs))


#: The kernels of the chain DPs, fastest first: C (`ckernel`), numba, numpy.
KERNELS = ("c", "numba", "numpy")


def kernel_backend(use_numba: bool | None = None) -> str:
    """Which kernel the chain DPs run: ``use_numba=False`` the numpy one, ``True`` the numba one
    (numpy when numba is missing), None the fastest available: C when `ckernel.library()` loads
    (built on first use), else numba, else numpy. All give the same tables."""
    if use_numba is not None:
        return "numba" if use_numba and HAVE_NUMBA else "numpy"
    from .ckernel import library

    if library() is not None:
        return "c"
    return "numba" if HAVE_NUMBA else "numpy"

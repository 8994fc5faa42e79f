"""The chain DP kernels in C (`rotor_kernel.c`), compiled on first use and loaded with ctypes.

`library()` compiles ``rotor_kernel.c`` with the system C compiler (``$CC``, else ``cc``, ``gcc``
or ``clang``) into ``__pycache__/`` beside it (else ``$XDG_CACHE_HOME/memsched``), once per
version of the source and flags (the file name carries their hash; a build is written to a
temporary name and renamed, so concurrent processes are safe), and loads it. Later processes
only load the built library: no numba import, no JIT start-up, which is most of a short
``memsched solve``. It returns None when ``MEMSCHED_NO_CC`` is set, when no compiler is found
or the build fails; the DPs then use their numba or numpy kernels, which give the same tables
bit for bit (the C code adds the same IEEE doubles in the same order: no fast-math, no FMA
contraction; tests/test_chain_kernels.py compares them). The rotor table is filled in parts of
milliseconds with Python between them (`fill_table`), so a Ctrl-C stops it within one part.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = Path(__file__).with_name("rotor_kernel.c")
#: Compiler flags: IEEE arithmetic as the other kernels (no -ffast-math, no FMA contraction).
FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off")

_UNSET: Any = object()
_LIB: Any = _UNSET


def _library_name() -> str:
    """File name of the built library: a checksum of the source, the flags and the platform
    (zlib's crc32: cheap to import, unlike hashlib; it only tells versions apart)."""
    key = SOURCE.read_bytes() + " ".join(FLAGS).encode() + f"{sys.platform}-{platform.machine()}".encode()
    return f"rotor_kernel-{zlib.crc32(key):08x}.so"


def _cache_dirs() -> list[Path]:
    """Where a built library is looked for and written, in order."""
    folders = [SOURCE.parent / "__pycache__"]
    try:
        folders.append(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memsched")
    except RuntimeError:  # no home directory
        pass
    return folders


def _compiler() -> str | None:
    """The C compiler: ``$CC``, else the first of cc, gcc, clang on the PATH."""
    import shutil  # only when building: a process that loads a built library never imports it

    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"].split()[0])
    return next((p for p in map(shutil.which, ("cc", "gcc", "clang")) if p), None)


def _build(name: str) -> Path | None:
    """Compile the source into the first writable cache folder; the path, or None."""
    import subprocess

    cc = _compiler()
    if cc is None:
        return None
    for folder in _cache_dirs():
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            subprocess.run([cc, *FLAGS, str(SOURCE), "-o", str(tmp)], check=True, capture_output=True, timeout=120)
            target = folder / name
            os.replace(tmp, target)
            if folder == SOURCE.parent / "__pycache__":  # builds of older versions of this source
                for stale in folder.glob("rotor_kernel-*.so"):
                    if stale != target:
                        stale.unlink(missing_ok=True)
            return target
        except (OSError, subprocess.SubprocessError):
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            continue
    return None


def _load() -> ctypes.CDLL | None:
    name = _library_name()
    path = next((d / name for d in _cache_dirs() if (d / name).is_file()), None) or _build(name)
    if path is None:
        return None
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.rotor_fill_part.argtypes = [i64] * 5 + [ptr] * 14
    lib.rotor_fill_part.restype = None
    lib.rotor_min_memory.argtypes = [i64] + [ptr] * 7
    lib.rotor_min_memory.restype = None
    return lib


def library() -> ctypes.CDLL | None:
    """The loaded C kernels (built on first use), or None (``MEMSCHED_NO_CC``, no compiler, a
    failed build). Resolved once per process."""
    global _LIB
    if _LIB is _UNSET:
        _LIB = None
        if not os.environ.get("MEMSCHED_NO_CC"):
            try:
                _LIB = _load()
            except (OSError, AttributeError):  # a library that does not load, or lacks a symbol
                _LIB = None
    return _LIB


def _pointers(inputs: tuple[np.ndarray, ...], outputs: tuple[np.ndarray, ...]) -> list[int]:
    """Data pointers of the inputs (already contiguous copies, kept alive by the caller) and of
    the outputs, which the kernel writes into: they must be C-contiguous and writeable."""
    for out in outputs:
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("output arrays must be writeable and C-contiguous")
    return [a.ctypes.data for a in (*inputs, *outputs)]


def _ints(*arrays: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.ascontiguousarray(a, dtype=np.int64) for a in arrays)


def fill_table(x, xbar, o_fa, o_fn, o_b, u_fa, u_b, sf, off, C, first) -> None:
    """The rotor table into C (float64, one row per (i, l), M+1 columns) and first (int64), as
    `dp._dp_numba` fills them (u_fa: F_all's times; sf: prefix sums of the no-grad times u_fn).

    The C kernel runs in parts (`fill_parts`) of at most `PART_WORK` cell updates each, and
    Python runs between them: a Ctrl-C raises `KeyboardInterrupt` within one part (milliseconds),
    not after the whole table (tens of seconds for L = 1000). The table is the same bit for bit."""
    lib = library()
    if lib is None:
        raise RuntimeError("the C kernels are not available")
    L = len(u_fa) - 1
    if C.dtype != np.float64 or first.dtype != np.int64 or C.ndim != 2 or C.shape[0] != (L + 1) * (L + 2) // 2 \
            or first.shape != (C.shape[0],) or len(off) != L + 1:
        raise ValueError("C must be float64 of (L+1)(L+2)/2 rows, first int64 of one entry a row")
    M = C.shape[1] - 1
    blk, tile = (ctypes.c_int64.in_dll(lib, name).value for name in ("rotor_blk", "rotor_tile"))
    inputs = (*_ints(x, xbar, o_fa, o_fn, o_b),
              *(np.ascontiguousarray(a, dtype=np.float64) for a in (u_fa, u_b, sf)), *_ints(off))
    # kept from part to part: block-end summaries of the final rows, the rows of the current tile
    buffers = (np.empty(C.shape[0] * ((M + blk) // blk)), np.empty(tile * (L + 1) * (M + 1)),
               np.empty(tile * (L + 1), dtype=np.int64))
    pointers = _pointers(inputs, (C, first, *buffers))
    for l0, i_hi, i_lo in fill_parts(L, M, tile, PART_WORK):
        lib.rotor_fill_part(L, M, l0, i_hi, i_lo, *pointers)


#: Most cell updates (an upper bound: splits x values of l x memory values) of one call of the C
#: kernel, unless one row i alone is more: tens of milliseconds, the longest a Ctrl-C waits (but
#: seconds for a row of ~10^7 memory values: L < 4 at exact sizes); ~2,000 calls for L = 1000 at
#: 100 slots (~5 ms of calls in a fill of ~15 s).
PART_WORK = 1 << 24


def fill_parts(L: int, M: int, tile: int, work: int = PART_WORK) -> Iterator[tuple[int, int, int]]:
    """The parts ``(l0, i_hi, i_lo)`` of `rotor_fill_part`, in the kernel's order: the tiles of
    `tile` values of l from l0 = 0, each one's i from l1 - 1 down to 0 split into runs of rows whose
    work bound (at most l1 splits, l1 - l0 values of l and M + 1 values of m a row) is within `work`."""
    for l0 in range(0, L + 1, tile):
        l1 = min(l0 + tile, L + 1)
        rows = max(1, work // (l1 * (l1 - l0) * (M + 1)))
        for i_hi in range(l1 - 1, -1, -rows):
            yield l0, i_hi, max(i_hi - rows + 1, 0)


def min_memory(x, xbar, o_fa, o_fn, o_b, Mm, ch) -> None:
    """Mmin(i, l) and the choices into the (L+1) x (L+1) int64 arrays Mm, ch, as
    `min_memory._min_memory_numba` fills them."""
    lib = library()
    if lib is None:
        raise RuntimeError("the C kernels are not available")
    L = len(o_b) - 1
    if Mm.dtype != np.int64 or ch.dtype != np.int64 or Mm.shape != (L + 1, L + 1) or ch.shape != Mm.shape:
        raise ValueError("Mm and ch must be int64 arrays of (L+1) x (L+1)")
    inputs = _ints(x, xbar, o_fa, o_fn, o_b)
    lib.rotor_min_memory(L, *_pointers(inputs, (Mm, ch)))

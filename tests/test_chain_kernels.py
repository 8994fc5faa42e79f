"""The chain DPs' kernels (C, numba, numpy) give the same tables, bit for bit; the C kernels are
built on first use and a rotor solve with them imports no numba."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from memsched.solvers.chain import Chain, ckernel, jit, reference_peak
from memsched.solvers.chain.dp import rotor_table, solve_rotor
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.min_memory import _arrays, _min_memory_numba, _min_memory_numpy

needs_c = pytest.mark.skipif(ckernel.library() is None, reason="no C compiler to build the C kernels")
KERNELS = [k for k in ("c", "numba", "numpy") if k != "c" or ckernel.library() is not None]


def mode_chain(L: int, seed: int) -> Chain:
    """Random chain with per-mode forward overheads drawn apart (either may be larger)."""
    base = random_chain(L, seed, overhead=1.0)
    rng = np.random.default_rng(500 + seed)
    o_fa = np.append(np.floor(rng.uniform(0, 1.0, L) * base.x[1 : L + 1]), 0).astype(np.int64)
    o_fn = np.append(np.floor(rng.uniform(0, 2.0, L) * base.x[1 : L + 1]), 0).astype(np.int64)
    return Chain.with_mode_overheads(base.u_f, base.u_b, base.x, base.xbar, o_fa, o_fn, base.o_b)


def time_chain(L: int, seed: int) -> Chain:
    """`mode_chain` with no-grad forward times u_fn drawn below F_all's u_fa (floats)."""
    base = mode_chain(L, seed)
    rng = np.random.default_rng(900 + seed)
    return base.with_mode_times(base.u_f, np.append(base.u_f[:L] * rng.uniform(0.2, 1.0, L), 0.0))


CHAINS = [
    ("plain", lambda: random_chain(23, 4)),
    ("overheads", lambda: random_chain(17, 5, overhead=1.0)),
    ("modes", lambda: mode_chain(19, 6)),
    ("mode times", lambda: time_chain(18, 9)),
    ("one stage", lambda: random_chain(1, 7, overhead=1.0)),
    ("zero sizes", lambda: random_chain(9, 8, size_range=(0, 3))),
    ("early release", lambda: random_chain(21, 10, overhead=1.0, release=0.6)),
]


@pytest.mark.parametrize("name,make", CHAINS, ids=[c[0] for c in CHAINS])
def test_kernels_fill_the_same_table(name, make):
    chain = make()
    peak = reference_peak(chain)
    # exact sizes at several budgets (rows infeasible at small m, constant tails at large m), and
    # a discretised chain with more memory values than a block of the skip test
    cases = [(chain, M) for M in (0, peak // 3, peak // 2, peak)]
    cases.append((chain.discretised(max(peak, 1) / 97), 97))
    for work, M in cases:
        tables = [rotor_table(work, M, kernel=k) for k in KERNELS]
        for t in tables[1:]:
            assert np.array_equal(t.C, tables[0].C)
        # rows are non-increasing in m (what the skipping of options relies on)
        finite = np.where(np.isfinite(tables[0].C), tables[0].C, 1e300)
        assert np.all(np.diff(finite, axis=1) <= 0)


@needs_c
@pytest.mark.parametrize("seed", range(3))
def test_c_least_memory_dp_equals_numpy(seed):
    chain = mode_chain(14, seed)
    out = []
    for kernel in (ckernel.min_memory, _min_memory_numba, _min_memory_numpy):
        Mm, ch = np.zeros((15, 15), dtype=np.int64), np.full((15, 15), -2, dtype=np.int64)
        kernel(*_arrays(chain), Mm, ch)
        out.append((np.triu(Mm), np.triu(ch)))
    for Mm, ch in out[1:]:
        assert np.array_equal(Mm, out[0][0]) and np.array_equal(ch, out[0][1])


@needs_c
def test_c_kernel_rejects_wrong_arrays():
    chain = random_chain(3, 0)
    with pytest.raises(ValueError):
        ckernel.min_memory(*_arrays(chain), np.zeros((3, 3), dtype=np.int64), np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="unknown kernel"):
        rotor_table(chain, 5, kernel="fortran")


@needs_c
def test_rotor_solve_with_the_c_kernel_imports_no_numba():
    code = ("import sys\nfrom memsched.solvers.chain.generate import random_chain\n"
            "from memsched.solvers.chain.dp import solve_rotor\nfrom memsched.solvers.chain import reference_peak\n"
            "c = random_chain(30, 1)\nr = solve_rotor(c, reference_peak(c) // 2, slots=100)\n"
            "print(r.status, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["optimal", "False"]


def test_no_cc_falls_back_to_numba_or_numpy():
    env = {**os.environ, "MEMSCHED_NO_CC": "1"}
    code = "from memsched.solvers.chain.jit import kernel_backend; print(kernel_backend())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == ("numba" if jit.HAVE_NUMBA else "numpy")


def test_solve_rotor_is_the_same_with_every_kernel(monkeypatch):
    chain = mode_chain(25, 9)
    budget = reference_peak(chain) * 2 // 5
    results = []
    for kernel in KERNELS:
        monkeypatch.setattr("memsched.solvers.chain.dp.kernel_backend", lambda use_numba=None, k=kernel: k)
        results.append(solve_rotor(chain, budget, slots=200))
    assert len({(r.status, r.objective, tuple(map(str, r.schedule.ops))) for r in results}) == 1


@needs_c
def test_c_kernel_is_built_once_into_pycache_or_the_user_cache(tmp_path, monkeypatch):
    source = tmp_path / "rotor_kernel.c"
    source.write_bytes(ckernel.SOURCE.read_bytes())
    monkeypatch.setattr(ckernel, "SOURCE", source)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "rotor_kernel-00000000.so").write_text("a build of an older source")
    monkeypatch.setattr(ckernel, "_LIB", ckernel._UNSET)
    assert ckernel.library() is not None
    assert [p.name for p in (tmp_path / "__pycache__").iterdir()] == [ckernel._library_name()]
    (tmp_path / "__pycache__" / ckernel._library_name()).unlink()
    (tmp_path / "__pycache__").rmdir()
    (tmp_path / "__pycache__").write_text("not a folder")  # unwritable: the user cache instead
    monkeypatch.setattr(ckernel, "_LIB", ckernel._UNSET)
    assert ckernel.library() is not None and (tmp_path / "cache" / "memsched" / ckernel._library_name()).is_file()
    monkeypatch.setenv("CC", "no-such-compiler")  # nothing built, no compiler: the other kernels
    (tmp_path / "cache" / "memsched" / ckernel._library_name()).unlink()
    monkeypatch.setattr(ckernel, "_LIB", ckernel._UNSET)
    assert ckernel.library() is None

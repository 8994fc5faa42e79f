"""`Pipeline.cut` is derived data (what crosses each cut): a hand-made one that differs is refused, since the DPs'
bounds rely on it (interleave-dp's stash bound answered `optimal` above interleave-cpsat's schedule with cut < act)."""

from __future__ import annotations

import numpy as np
import pytest
from memsched.solvers.pipeline.instance import Pipeline


def _chain(**extra):
    L = 4
    return Pipeline(fwd=np.ones(L), bwd=np.ones(L), act=np.array([10, 20, 30, 40]), params=np.zeros(L, dtype=int),
                    **extra)


def test_a_chains_cut_is_its_activations():
    assert _chain().cut.tolist() == [10, 20, 30]
    assert _chain(cut=np.array([10, 20, 30])).cut.tolist() == [10, 20, 30]


def test_a_cut_that_is_not_what_crosses_is_refused():
    with pytest.raises(ValueError, match="Pipeline.cut"):
        _chain(cut=np.array([5, 20, 30]))


def test_a_dags_cut_counts_every_output_read_later():
    succ = [[1, 2], [3], [3], []]
    assert _chain(succ=succ).cut.tolist() == [10, 10 + 20, 20 + 30]
    with pytest.raises(ValueError, match="Pipeline.cut"):
        _chain(succ=succ, cut=np.array([10, 20, 30]))

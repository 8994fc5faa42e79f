"""Small fixes 46: `Join.discretised` rounds the loss overhead up exactly (slots above 1e9 bytes), and
`Pipeline.to_graph_txt` writes layer names that `from_graph_txt` reads back unchanged (no growing
``node1: node1: ...`` prefix over repeated round trips)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from memsched.solvers.chain.instance import Chain
from memsched.solvers.discretize import round_up
from memsched.solvers.join.instance import Join
from memsched.solvers.pipeline import Pipeline, from_graph_txt, load

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data" / "pipeline"
STAGE = {"fwd_time": 1.0, "bwd_time": 1.0, "out_size": 10, "tape_size": 10, "fwd_overhead": 0, "bwd_overhead": 0}


# ---------------------------------------------------------------- 1: Join.discretised
def _join(loss_overhead: int) -> Join:
    chain = Chain.from_stages(10, [dict(STAGE)], {"bwd_time": 0.0, "bwd_overhead": 0})
    return Join([chain], 1.0, loss_overhead)


@pytest.mark.parametrize("slot", [2e9, 3e9, 1e12 / 7, 1.2e12 / 500, 2**40 / 500])
@pytest.mark.parametrize("k", [0, 1, 3, 499])
def test_loss_overhead_of_k_slots_and_a_byte_takes_k_plus_one_slots(slot: float, k: int) -> None:
    overhead = int(Fraction(slot) * k) + 1  # just above k slots (a float ceil(o / slot - 1e-9) gave k)
    got = _join(overhead).discretised(slot).loss_overhead
    assert got * Fraction(slot) >= overhead  # slots cover the bytes: a schedule in slots fits the budget
    assert got == int(round_up([overhead], slot)[0]) == k + 1  # the rounding of every other size


def test_loss_overhead_rounds_like_the_branch_sizes() -> None:
    rng = np.random.default_rng(46)
    for _ in range(300):
        slot = float(rng.uniform(1e9, 2e12))
        overhead = int(Fraction(slot) * int(rng.integers(0, 500))) + int(rng.integers(0, 3))
        assert _join(overhead).discretised(slot).loss_overhead == int(round_up([overhead], slot)[0])


# ---------------------------------------------------------------- 2: to_graph_txt round trips
def _twice(p: Pipeline) -> tuple[Pipeline, Pipeline]:
    once = from_graph_txt(p.to_graph_txt())
    return once, from_graph_txt(once.to_graph_txt())


@pytest.mark.parametrize("name", ["vgg16-b32.graph.txt", "tiny-resnet.graph.txt", "gpt24-b4.graph.txt"])
def test_a_loaded_profile_writes_back_the_same_layer_names(name: str) -> None:
    p = load(DATA / name)
    once, again = _twice(p)
    assert once.layer_names == p.layer_names and again.layer_names == p.layer_names
    assert once.meta["node_ids"] == p.meta["node_ids"]
    assert once.input_size == p.input_size and once.succ == again.succ
    assert list(again.act) == list(p.act) and list(again.cut_sizes) == list(p.cut_sizes)


def test_names_without_an_id_get_one_once_and_then_keep_it() -> None:
    p = Pipeline(fwd=[1.0, 2.0, 3.0], bwd=[2.0, 4.0, 6.0], act=[10, 20, 30], params=[1, 2, 3], input_size=7,
                 layer_names=["conv", "Input embed", "fc: head"])
    once, again = _twice(p)
    assert once.layer_names == ["node1: conv", "node2: layer Input embed", "fc: head"]
    assert again.layer_names == once.layer_names and again.input_size == 7


def test_ids_taken_from_names_do_not_clash_with_the_free_ones() -> None:
    names = ["node2: a", "relu", "node0: b", "node2: dup", "x y: spaced", "a;b: semi"]
    p = Pipeline(fwd=[1.0] * 6, bwd=[1.0] * 6, act=[5] * 6, params=[0] * 6, input_size=9, layer_names=names,
                 succ=[[1, 3], [2], [3], [4], [5], []])
    once, again = _twice(p)
    assert once.layer_names[0] == "node2: a" and once.layer_names[2] == "node0: b"
    assert len(set(once.meta["node_ids"])) == 6 and once.input_size == 9 and once.succ == p.succ
    assert again.layer_names == once.layer_names and again.succ == p.succ


def test_measured_saves_keep_names_and_saves_over_two_round_trips() -> None:
    p = Pipeline(fwd=[1.0, 1.0, 1.0], bwd=[2.0, 2.0, 2.0], act=[10, 20, 30], params=[1, 1, 1], input_size=100,
                 succ=[[1, 2], [2], []], saved_by=[[1], [1, 2], [2]], saved_extra=[0, 4, 0], input_saved=True,
                 layer_names=["node3: conv", "node1: pool", "fc"])
    once, again = _twice(p)
    assert once.layer_names == ["node3: conv", "node1: pool", "node3.1: fc"] == again.layer_names
    for q in (once, again):
        assert q.saved_by == p.saved_by and list(q.saved_extra) == [0, 4, 0]  # type: ignore[arg-type]
        assert all(np.array_equal(q.stash(i), p.stash(i)) for i in range(3))

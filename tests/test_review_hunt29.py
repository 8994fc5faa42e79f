"""Fixes of the hunt-29 review.

1. `models.costs.fake_module_conversions` is thread-safe: the patch of ``nn.Module._apply`` is installed by
   the first context to enter and removed by the last to leave (in any thread), not restored per context.
2. `memsched.solve` with a list of solvers and a `slots` given that a solver cannot use (``slots=0``: too
   large a table) is the `InputError` naming ``slots``, as with one name; with the default slots it is
   still that solver's "unsupported" entry.
3. The facade checks a graph object from its arrays (no `Graph.from_dict` round trip) by the loader's rules.
4. `default_solver` does not offer None; an offloading op without a name lists the transfers too.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from memsched.solvers.chain.instance import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.graph.instance import Graph

import memsched

CNN12 = memsched.data_path("examples", "cnn12.json")
GRAPH = memsched.data_path("graphs", "linear10.json")
WAIT = 30.0  # s: a generous bound on each hand-over between the test's threads


# ---------------------------------------------------------------------------- 1. fake conversions and threads
@pytest.fixture
def torch_nn():
    torch = pytest.importorskip("torch")
    return torch.nn


def test_fake_conversions_survive_another_thread_leaving(torch_nn):
    from memsched.models.costs import fake_module_conversions, shape_exact_model

    original = torch_nn.Module.__dict__["_apply"]
    b_in, a_in, b_out = threading.Event(), threading.Event(), threading.Event()
    out: dict[str, str] = {}

    def a() -> None:  # enters second, converts after b has left
        b_in.wait(WAIT)
        with shape_exact_model():
            m = torch_nn.Sequential(torch_nn.Linear(4, 4))
            a_in.set()
            b_out.wait(WAIT)
            try:
                m.half()
                out["a"] = str(m[0].weight.dtype)
            except Exception as err:  # old code: RuntimeError "Couldn't swap Linear.weight"
                out["a"] = f"{type(err).__name__}: {err}"

    def b() -> None:
        with fake_module_conversions():
            b_in.set()
            a_in.wait(WAIT)
        b_out.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert out["a"] == "torch.float16"
    assert torch_nn.Module.__dict__["_apply"] is original


def test_fake_conversions_restored_when_the_first_to_enter_leaves_first(torch_nn):
    from memsched.models.costs import fake_module_conversions

    original = torch_nn.Module.__dict__["_apply"]
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with fake_module_conversions():
            a_in.set()
            b_in.wait(WAIT)
        a_out.set()

    def b() -> None:
        a_in.wait(WAIT)
        with fake_module_conversions():
            b_in.set()
            a_out.wait(WAIT)
            assert torch_nn.Module.__dict__["_apply"] is not original  # still patched for b

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert torch_nn.Module.__dict__["_apply"] is original  # old code: b's exit left a's patch installed


def test_fake_conversions_nest_and_restore_on_error(torch_nn):
    from memsched.models.costs import fake_module_conversions

    original = torch_nn.Module.__dict__["_apply"]
    with pytest.raises(ValueError, match="boom"):
        with fake_module_conversions():
            with fake_module_conversions():
                assert torch_nn.Module.__dict__["_apply"] is not original
            assert torch_nn.Module.__dict__["_apply"] is not original  # the outer context still holds it
            raise ValueError("boom")
    assert torch_nn.Module.__dict__["_apply"] is original
    lin = torch_nn.Linear(2, 2).half()  # real modules convert as before
    assert lin.weight.dtype.is_floating_point


# ---------------------------------------------------------------------------- 2. slots with a list of solvers
@pytest.mark.parametrize("slots", [0, 10**9])
def test_list_of_solvers_with_slots_given_too_fine_raises(slots):
    with pytest.raises(InputError) as err:
        memsched.solve(CNN12, "50%", ["rotor", "sqrt"], slots=slots)  # was rotor "unsupported"
    assert err.value.field == "slots"


@pytest.fixture(scope="module")
def long_chain():
    """A chain whose rotor table at the default 500 slots has 2.5e8 cells: rotor refuses it."""
    return Chain.homogeneous(1000, x=1000)


def test_list_of_solvers_with_the_default_slots_keeps_the_refusal(long_chain):
    cm = memsched.solve(long_chain, "50%", ["rotor", "sqrt"])
    assert [r.status for r in cm.results] == ["unsupported", "feasible"]
    assert "slots" in cm.results[0].message


def test_list_of_solvers_with_the_default_number_given_raises(long_chain):
    chain = long_chain
    with pytest.raises(InputError) as err:  # the same number given by the caller: the caller's error
        memsched.solve(chain, "50%", ["rotor", "sqrt"], slots=500)
    assert err.value.field == "slots"


# ---------------------------------------------------------------------------- 3. graph check without a rebuild
@pytest.fixture
def no_rebuild(monkeypatch):
    """A loaded graph; afterwards, building or writing a graph's node-link data fails."""
    g = memsched.load(GRAPH)

    def refuse(*args, **kwargs):
        raise AssertionError("the facade rebuilt the graph")

    for name in ("from_dict", "to_dict", "to_networkx"):
        monkeypatch.setattr(Graph, name, refuse)
    return g


def test_graph_check_does_not_rebuild(no_rebuild):
    r = memsched.solve(no_rebuild, "90%")
    assert r.found
    assert memsched.simulate(no_rebuild, r.schedule, "90%").status == "valid"


@pytest.mark.parametrize(("edit", "field"), [
    ("cpu_nan", "node 3: cost_cpu"), ("cpu_huge", "node 2: cost_cpu"), ("ram_neg", "node 0: cost_ram"),
    ("ram_pib", "node 1: cost_ram"), ("ws_neg", "node 4: workspace"), ("ram_float", "node 5: cost_ram"),
    ("edge", "links"), ("meta", "graph.meta.random_nodes[0]"), ("units", "graph.meta.units.memory"),
    ("kib", "node 6: cost_ram"), ("total", "nodes"),
])
def test_edited_graph_checked_from_its_arrays(no_rebuild, edit, field):
    g = no_rebuild
    if edit == "cpu_nan":
        g.cost_cpu[3] = np.nan
    elif edit == "cpu_huge":
        g.cost_cpu[2] = 1e16
    elif edit == "ram_neg":
        g.cost_ram[0] = -5
    elif edit == "ram_pib":
        g.cost_ram[1] = 2**50 + 1
    elif edit == "ws_neg":
        g.workspace = np.zeros(g.n, dtype=np.int64)
        g.workspace[4] = -1
    elif edit == "ram_float":
        g.cost_ram = g.cost_ram.astype(float)
        g.cost_ram[5] = 4.5
    elif edit == "edge":
        g.edges.append((5, 2))
    elif edit == "meta":
        g.meta["random_nodes"] = ["no such node"]
    elif edit == "units":
        g.meta["units"] = {"memory": 5}
    elif edit == "kib":
        g.meta["units"] = {"memory": "KiB"}
        g.cost_ram[6] = 2**41  # 2^51 bytes
    else:
        g.cost_ram[:] = 2**47  # 10 nodes of 2^47 bytes: 1.25 PiB in all
    with pytest.raises(InputError) as err:
        memsched.solve(g, 10**6, "checkpoint-all")
    assert err.value.field == field
    assert err.value.path is None


# ---------------------------------------------------------------------------- 4. messages
@pytest.mark.parametrize("problem", ["nope", None])
def test_default_solver_message_does_not_offer_none(problem):
    with pytest.raises(InputError) as err:
        memsched.default_solver(problem)
    assert err.value.field == "problem"
    assert "(or None)" not in str(err.value)


@pytest.mark.parametrize("item", [{"stage": 1}, {"op": None, "stage": 1}, [None, 1]])
def test_offload_op_without_a_name_lists_the_transfers(item):
    from memsched.solvers.offload.schedule import OffloadSchedule

    with pytest.raises(InputError) as err:
        OffloadSchedule.from_json({"ops": [item]}, 3, path="s.json")
    assert err.value.field == "ops[0]"
    assert "unknown operation None (one of F_all, F_ck, F_n, B, Loss, Off, Pre)" in str(err.value)


def test_offload_op_that_is_no_op_still_cannot_be_read():
    from memsched.solvers.offload.schedule import OffloadSchedule

    for item in (5, None, []):
        with pytest.raises(InputError, match="cannot read operation"):
            OffloadSchedule.from_json({"ops": [item]}, 3, path="s.json")


def test_edited_pipeline_fractional_size_is_an_input_error():
    """`Pipeline.check` applies the loaders' integer rule to sizes (`act`, `cut`, ...), as `Graph.check` does."""
    p = memsched.load(memsched.data_path("pipeline", "mlp7.chain.json"), problem="pipeline")
    p.act = p.act.astype(float)
    p.act[1] = 1.5
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(p, "200%", devices=2)
    assert err.value.field == "act[1]"


@pytest.mark.parametrize(("key", "value"), [("bandwidth", float("nan")), ("latency", -1.0)])
def test_edited_offload_link_is_an_input_error(key, value):
    """An offloading instance's link edited after it was built is refused as its loader refuses it."""
    from memsched.solvers.offload import OffloadInstance

    inst = OffloadInstance(memsched.load(memsched.data_path("examples", "tiny.json")), bandwidth=1e9)
    setattr(inst, key, value)
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(inst, "90%")
    assert err.value.field == f"host_link.{key}"


@pytest.mark.parametrize("sizes", [[1.5, 2.0, 1.0], [float("nan"), 1.0, 1.0], [1e20, 1.0, 1.0]])
def test_a_graph_built_with_bad_sizes_is_refused_not_truncated(sizes):
    """`Graph(...)` cast sizes to int64 before any check: 1.5 bytes became 1, NaN a huge negative number."""
    with pytest.raises(InputError) as err:
        Graph(ids=[0, 1, 2], cost_cpu=[1.0, 1.0, 1.0], cost_ram=sizes, edges=[(0, 1), (1, 2)])
    assert err.value.field == "cost_ram[0]" and repr(sizes[0]) in str(err.value)


@pytest.mark.parametrize("name", ["act", "params"])
def test_a_pipeline_built_with_fractional_sizes_is_refused_not_truncated(name):
    from memsched.solvers.pipeline.instance import Pipeline

    arrays = {"act": [4, 4], "params": [2, 2], name: [1.5, 2.0]}
    with pytest.raises(InputError) as err:
        Pipeline(fwd=[1.0, 2.0], bwd=[1.0, 2.0], **arrays)
    assert err.value.field == f"{name}[0]"

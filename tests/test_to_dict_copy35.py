"""An instance's ``to_dict()`` is the caller's to edit (session 35).

Before, the chain's, join's and graph's ``to_dict()`` handed out the instance's own ``meta``
dict: editing the returned object (a user converting units before writing a file) changed the
instance it came from.
"""

from __future__ import annotations

from memsched.solvers.chain.generate import random_chain
from memsched.solvers.graph.instance import Graph
from memsched.solvers.join.instance import Join


def test_chain_to_dict_meta_is_a_copy() -> None:
    chain = random_chain(3, 0)
    chain.meta["units"] = {"time": "ms"}
    before = {key: value for key, value in chain.meta.items() if key != "units"}
    data = chain.to_dict()
    data["meta"]["units"]["time"] = "s"
    data["meta"]["note"] = "edited"
    assert chain.meta == {**before, "units": {"time": "ms"}}


def test_join_to_dict_meta_is_a_copy() -> None:
    join = Join.from_chains([random_chain(2, 0), random_chain(3, 1)], loss_time=1.0)
    join.meta["units"] = {"time": "ms"}
    data = join.to_dict()
    data["meta"]["units"]["time"] = "s"
    assert join.meta["units"] == {"time": "ms"}


def test_graph_to_dict_meta_is_a_copy() -> None:
    graph = Graph.from_dict({"directed": True, "multigraph": False,
                             "graph": {"name": "g", "meta": {"units": {"time": "ms"}}},
                             "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 4}], "links": []})
    data = graph.to_dict()
    data["graph"]["meta"]["units"]["time"] = "s"
    assert graph.meta["units"] == {"time": "ms"}

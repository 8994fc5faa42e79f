"""A computation graph (docs/graph.md) and its networkx node-link JSON file.

Notation (as in Checkmate, Jain et al. MLSys 2020): the n nodes are indexed 0..n-1 in a fixed
topological order (the file's ``graph.order`` when given, else a topological order of the file's
nodes, ties broken by their order in the file). Node v has a compute cost ``cost_cpu[v]`` (a
float, the file's time unit) and an output size ``cost_ram[v]`` = M_v (an integer, bytes or
any size unit); the optional ``workspace[v]`` = W_v (an integer, same unit, default 0) is memory
that exists only while v computes (scratch buffers, a gradient before accumulation).
``preds[v]`` / ``succs[v]`` are the sorted index lists of its in/out-neighbours; every edge
(i, k) has i < k. The original node ids are kept in ``ids`` (what schedules name).

The file format is networkx's node-link JSON as exported by Checkmate and read by Moccasin::

    {"directed": true, "multigraph": false,
     "graph": {"name": "vgg16", "order": [0, 1, ...]},             # optional
     "nodes": [{"id": 0, "cost_cpu": 1.5, "cost_ram": 4096, "name": "conv1", "backward": false,
                "workspace": 512}, ...],                                   # workspace optional
     "links": [{"source": 0, "target": 1}, ...]}

The loader accepts such files unchanged (``networkx.node_link_graph(..., edges="links")``; a
file that uses the newer key ``"edges"`` is accepted too; so are Moccasin's random-layered files,
whose keys are named by graph tags, see `_from_moccasin_tags`) and rejects cycles, missing or
negative costs, dangling links and a bad ``order`` with an `InputError` naming the file and the
field or node. A size that is not an integer is rounded up, with a tolerance of 1e-9 for float
noise: M_v = ceil(x - 1e-9), so 4.5 -> 5 but 4.0000000001 -> 4 and 1e-10 -> 0 (`_size`; sizes are
integers everywhere). ``graph.meta.units`` follows the chain file's rules (`chain.instance.check_units`:
``time`` one of its time or work units, ``memory`` the name of a unit); every size (rounded), and
their sum over the file (cost_ram and workspace), is at most 1 PiB once in bytes (a unit that is no
byte unit, "slots": as written).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..chain.instance import check_bytes, check_total, check_units, warn_unknown_units
from ..errors import InputError
from ..jsonio import read_json, warn_unknown, warns_once_loaded
from ..units import MAX_BYTES, MAX_TIME, check_number, meta_memory_unit, plain_number, size_array

if TYPE_CHECKING:
    import networkx as nx

#: the top-level keys of a node-link file (networkx writes them), the keys of a node, of a link, and of the graph
#: attributes (``graph``) that the loader reads; others are reported (`jsonio.warn_unknown`) and ignored
FILE_KEYS = ("directed", "multigraph", "graph", "nodes", "links", "edges")
NODE_KEYS = ("id", "cost_cpu", "cost_ram", "workspace", "name", "backward")
LINK_KEYS = ("source", "target", "key")  # "key": networkx's multigraph edge key (duplicate edges are one edge)
ATTR_KEYS = ("name", "order", "meta")


@dataclass(eq=False)
class Graph:
    """A DAG of operations indexed in topological order 0..n-1 (see the module docstring)."""

    ids: list[Hashable]
    cost_cpu: np.ndarray
    cost_ram: np.ndarray
    edges: list[tuple[int, int]]
    name: str = "graph"
    names: list[str] = field(default_factory=list)
    backward: list[bool] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    #: W_v: bytes (cost_ram units) alive only while v computes; None or empty means all 0
    workspace: Any = None

    def __post_init__(self) -> None:
        self.cost_cpu = np.asarray(self.cost_cpu, dtype=float)
        self.cost_ram = size_array(self.cost_ram, "cost_ram")  # 2.5 bytes is refused, not truncated
        n = len(self.ids)
        ws = self.workspace
        self.workspace = (np.zeros(n, dtype=np.int64) if ws is None or len(ws) == 0
                          else size_array(ws, "workspace"))
        if self.cost_cpu.shape != (n,) or self.cost_ram.shape != (n,) or self.workspace.shape != (n,):
            raise ValueError("cost_cpu, cost_ram and workspace must have one entry per node")
        if (self.workspace < 0).any():
            raise ValueError("workspace sizes must be >= 0")
        self.edges = sorted({(int(i), int(k)) for i, k in self.edges})
        self.preds: list[list[int]] = [[] for _ in range(n)]
        self.succs: list[list[int]] = [[] for _ in range(n)]
        for i, k in self.edges:
            if not 0 <= i < k < n:
                raise ValueError(f"edge ({i}, {k}) does not go forward in the node order")
            self.preds[k].append(i)
            self.succs[i].append(k)
        if not self.names:
            self.names = [str(v) for v in self.ids]
        if not self.backward:
            self.backward = [False] * n
        self.index = {v: i for i, v in enumerate(self.ids)}
        if len(self.index) != n:
            raise ValueError("node ids must be unique")

    def check(self, *, path: str = "<graph>") -> None:
        """The rules of the graph file's loader (`from_dict`), for a graph built or edited in Python, read
        from its arrays without rebuilding it (no networkx: a 20,000-node graph takes milliseconds):
        ``meta`` an object whose ``units`` follow `chain.instance.check_units`; each ``cost_cpu`` a time
        (finite, in 0..`MAX_TIME` of the time unit), each ``cost_ram`` and ``workspace`` an integer size
        >= 0 of at most 1 PiB once in bytes (the memory unit's bytes per unit), and so their sum
        (`check_total`); one entry per node in each; every edge (i, k) forward in the node order,
        0 <= i < k < n (so the graph is a DAG); the meta keys the executor reads (`_check_executor_meta`).
        The first bad entry is an `InputError` naming `path` (``<graph>`` as the loader's default) and
        the node and field as the loader does (``node 3: cost_cpu``)."""
        meta = self.meta if self.meta is not None else {}
        if not isinstance(meta, dict):
            raise InputError(f"must be an object, got {meta!r:.80}", path=path, field="graph.meta")
        per = check_units(meta, path, "graph.meta")
        unit = meta_memory_unit(meta)
        total = 0
        for name in ("cost_cpu", "cost_ram", "workspace"):
            total += self._check_costs(name, per, path, unit=unit)
        check_total(total, path, "nodes", per=per, unit=unit)
        n = len(self.ids)
        for i, k in self.edges:
            if not 0 <= i < k < n:
                raise InputError(f"edge ({i}, {k}) does not go forward in the node order 0..{n - 1} (the graph must "
                                 "be a DAG)", path=path, field="links")
        _check_executor_meta(meta, set(self.names), path)

    def _check_costs(self, name: str, per: int, path: str, *, unit: str | None = None) -> int:
        """The array `name` (``cost_cpu``: times; ``cost_ram``, ``workspace``: sizes, in the memory unit
        `unit` of `per` bytes; a workspace of None or [] is all 0), one entry per node, by the loader's rules
        (`check`; a size's error words the limit in `unit`, None: bytes);
        the first bad entry an `InputError` naming `path` and ``node <id>: <name>``. Returns the sum of a
        size array (in its units, an exact int), 0 for the times."""
        raw = getattr(self, name)
        if name == "workspace" and (raw is None or len(raw) == 0):
            return 0
        time = name == "cost_cpu"
        values = np.asarray(raw, dtype=float)
        if values.shape != (len(self.ids),):
            raise InputError(f"must have one entry per node ({len(self.ids)}), got shape {values.shape}",
                             path=path, field=name)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values < 0) | (values > (MAX_TIME if time else MAX_BYTES // per))
            if not time:
                bad |= values != np.floor(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            where = f"node {self.ids[i]!r}: {name}"
            value = check_number(plain_number(np.ravel(raw)[i]), path=path, field=where, time=time,
                                 integer=not time, unit=None if time else unit)
            check_bytes(int(value), per, path, where, unit=unit)
        return 0 if time else int(sum(np.asarray(raw, dtype=np.int64).tolist()))

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.ids)

    @property
    def sinks(self) -> list[int]:
        """Indices of the nodes with no successor."""
        return [v for v in range(self.n) if not self.succs[v]]

    def total_cpu(self) -> float:
        """sum_v cost_cpu[v]: the makespan of computing each node once."""
        return float(self.cost_cpu.sum())

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_lists(
        cls,
        cost_cpu: Iterable[float],
        cost_ram: Iterable[int],
        edges: Iterable[tuple[int, int]],
        *,
        name: str = "graph",
        names: list[str] | None = None,
        backward: list[bool] | None = None,
        meta: dict[str, Any] | None = None,
        workspace: Iterable[int] | None = None,
    ) -> Graph:
        """Nodes 0..n-1 with the given costs (and workspaces W_v, default 0); `edges` must go
        forward (i < k)."""
        cpu = list(cost_cpu)
        return cls(list(range(len(cpu))), np.asarray(cpu, float), np.asarray(list(cost_ram), np.int64),
                   list(edges), name=name, names=list(names or []), backward=list(backward or []),
                   meta=dict(meta or {}), workspace=None if workspace is None else list(workspace))

    @property
    def has_workspace(self) -> bool:
        """True when some node has a workspace W_v > 0."""
        return bool(self.workspace.any())

    def to_networkx(self) -> nx.DiGraph:
        """The graph as a networkx DiGraph (node attributes cost_cpu, cost_ram, name, backward, and
        workspace where it is > 0)."""
        import networkx as nx

        g = nx.DiGraph(name=self.name, order=list(self.ids))
        for v in range(self.n):
            extra = {"workspace": int(self.workspace[v])} if self.workspace[v] else {}
            g.add_node(self.ids[v], cost_cpu=float(self.cost_cpu[v]), cost_ram=int(self.cost_ram[v]),
                       name=self.names[v], backward=bool(self.backward[v]), **extra)
        g.add_edges_from((self.ids[i], self.ids[k]) for i, k in self.edges)
        return g

    # ----------------------------------------------------------------- file format
    def to_dict(self) -> dict[str, Any]:
        """The node-link JSON object (``"links"``, as Checkmate writes it), order included."""
        import networkx as nx

        data = nx.node_link_data(self.to_networkx(), edges="links")
        data["graph"] = {"name": self.name, "order": _plain(list(self.ids))}
        if self.meta:
            data["graph"]["meta"] = copy.deepcopy(self.meta)  # editable without changing the graph
        return data

    def save(self, path: str | Path) -> None:
        """Write the graph file atomically."""
        from ..jsonio import write_json_atomic

        write_json_atomic(path, self.to_dict())

    @classmethod
    @warns_once_loaded
    def from_dict(cls, data: Any, *, path: str = "<graph>") -> Graph:
        """Validate and build; every error names `path` and the field or node."""
        import networkx as nx

        if not isinstance(data, dict):
            raise InputError("expected a JSON object (networkx node-link data)", path=path)
        data, file_keys = _from_moccasin_tags(data, path)
        per = _units(data, path)
        unit = meta_memory_unit(_graph_attrs(data, path).get("meta"))
        node_keys = _warn_unknown_file_keys(data, path)
        nodes = data.get("nodes")
        if not isinstance(nodes, list) or not nodes:
            raise InputError("must be a non-empty list of nodes", path=path, field="nodes")
        if data.get("directed", True) is not True:
            raise InputError(f"must be true (edges run from producer to consumer), got {data['directed']!r}",
                             path=path, field="directed")
        if "links" in data and "edges" in data:
            raise InputError("has both 'links' and 'edges': give the edges once", path=path, field="edges")
        key = "links" if "links" in data else "edges" if "edges" in data else None
        if key is None:
            raise InputError("missing (the list of edges)", path=path, field="links")
        links = data[key]
        listed = file_keys.links or key  # the list's key in the file (a tagged file's "edges" is read as links)
        if not isinstance(links, list):
            raise InputError("must be a list", path=path, field=listed)
        seen: set[Any] = set()
        for j, node in enumerate(nodes):
            id_key = file_keys.node_key(j, "id")  # "name" in a tagged node without "id"
            if not isinstance(node, dict) or "id" not in node:
                need = 'an "id"' if id_key == "id" else 'a "name" (its id)'
                raise InputError(f"each node needs {need}", path=path, field=f"nodes[{j}]")
            nid = node["id"]
            if node.get("name") is not None and (not isinstance(node["name"], (str, int)) or
                                                 isinstance(node["name"], bool)):
                raise InputError(f"must be a string or an integer, got {node['name']!r}", path=path,
                                 field=f"nodes[{j}].name")
            if not _is_node_id(nid):
                raise InputError(f"node id must be a string or a finite number, got {nid!r}", path=path,
                                 field=f"nodes[{j}].{id_key}")
            if nid in seen:
                raise InputError(f"duplicate node id {nid!r}", path=path, field=f"nodes[{j}].{id_key}")
            seen.add(nid)
            label = f"nodes[{j}]" if node.get("name") is None else f"nodes[{j}] ({node['name']})"
            warn_unknown(node, node_keys, path, label, "a graph node")
            _cost(node, "cost_cpu", path, f"node {nid!r}: {file_keys.node_key(j, 'cost_cpu')}")
            sizes = ("cost_ram", "workspace") if node.get("workspace") is not None else ("cost_ram",)
            for f in sizes:
                where = f"node {nid!r}: {file_keys.node_key(j, f)}"
                check_bytes(_size(_cost(node, f, path, where, unit=unit)), per, path, where, unit=unit)
            if node.get("backward") is not None and not isinstance(node["backward"], bool):
                raise InputError(f"must be true or false, got {node['backward']!r}", path=path,
                                 field=f"nodes[{j}].backward")
        check_total(sum(_size(node["cost_ram"]) + _size(node.get("workspace") or 0) for node in nodes), path, "nodes",
                    per=per, unit=unit)
        tagged = "node_output_cost_tag" in _graph_attrs(data, path)  # Moccasin's links carry their own keys
        for j, link in enumerate(links):
            if not isinstance(link, dict) or "source" not in link or "target" not in link:
                # a tagged file's link is {"0": u, "1": v}; "source" and "target" are named where it uses them
                pair = tagged and not (isinstance(link, dict) and ("source" in link or "target" in link))
                need = '"0" and "1"' if pair else '"source" and "target"'
                raise InputError(f"each link needs {need}", path=path, field=f"{listed}[{j}]")
            if not tagged:
                warn_unknown(link, LINK_KEYS, path, f"{listed}[{j}]", "a link")
            for end, pair_key in (("source", "0"), ("target", "1")):
                if not _is_node_id(link[end]) or link[end] not in seen:
                    written = pair_key if j in file_keys.pair_links else end
                    what = end if written == end else f'{end} ("{written}")'
                    raise InputError(f"dangling link: {what} {link[end]!r} is not a node", path=path,
                                     field=f"{listed}[{j}].{written}")
        try:
            g = nx.node_link_graph({**data, "directed": True, "multigraph": False}, directed=True,
                                   multigraph=False, edges=key)
        except Exception as err:  # networkx raises several kinds on malformed data
            raise InputError(f"not valid node-link data ({err})", path=path) from None
        selfloops = list(nx.selfloop_edges(g))
        if selfloops:
            raise InputError(f"self-loop on node {selfloops[0][0]!r} (the graph must be a DAG)", path=path,
                             field=key)
        if not nx.is_directed_acyclic_graph(g):
            cycle = nx.find_cycle(g)
            text = " -> ".join(repr(u) for u, _ in cycle) + f" -> {cycle[0][0]!r}"
            raise InputError(f"the graph has a cycle: {text}", path=path, field=key)
        attrs = _graph_attrs(data, path)
        file_order = [node["id"] for node in nodes]
        if attrs.get("order") is not None:
            order = attrs["order"]
            if not isinstance(order, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                       for v in order):
                raise InputError("must be a list of node ids", path=path, field="graph.order")
            order = [_match(v, seen) for v in order]
            if len(order) != len(file_order) or set(order) != seen:
                raise InputError("must list every node exactly once", path=path, field="graph.order")
            pos = {v: i for i, v in enumerate(order)}
            for u, v in g.edges:
                if pos[u] > pos[v]:
                    raise InputError(f"not a topological order: {v!r} comes before its predecessor {u!r}",
                                     path=path, field="graph.order")
        else:
            rank = {v: i for i, v in enumerate(file_order)}
            order = list(nx.lexicographical_topological_sort(g, key=lambda v: rank[v]))
        index = {v: i for i, v in enumerate(order)}
        cpu = [float(g.nodes[v]["cost_cpu"]) for v in order]
        ram = [_size(g.nodes[v]["cost_ram"]) for v in order]
        work = [_size(g.nodes[v].get("workspace") or 0) for v in order]
        # a null name is no name, as the checks above read it: the id stands in ("None" was printed)
        names = [str(v if g.nodes[v].get("name") is None else g.nodes[v]["name"]) for v in order]
        backward = [bool(g.nodes[v].get("backward", False)) for v in order]
        edges = [(index[u], index[v]) for u, v in g.edges]
        # present, a string (as a chain file's name, `check_header`): true was printed as "(True)" and null,
        # false, [] or {} became the stem without a word
        if "name" in attrs and not isinstance(attrs["name"], str):
            raise InputError(f"must be a string, got {attrs['name']!r:.80}", path=path, field="graph.name")
        name = attrs.get("name") or Path(path).stem
        meta = attrs.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise InputError(f"must be an object, got {meta!r}", path=path, field="graph.meta")
        meta = meta if isinstance(meta, dict) else {}
        _check_executor_meta(meta, set(names), path)
        return cls(order, np.asarray(cpu), np.asarray(ram, np.int64), edges, name=str(name), names=names,
                   backward=backward, meta=dict(meta), workspace=work)

    @classmethod
    def load(cls, path: str | Path) -> Graph:
        """Read a graph file; a missing file or invalid JSON is an `InputError` naming it."""
        return cls.from_dict(read_json(path), path=str(path))

    # ----------------------------------------------------------------- derived views
    def discretised(self, budget: int, slots: int) -> tuple[np.ndarray, int, float]:
        """Sizes in slots for the solvers that need small integers: ``(M, B, slot)``.

        With ``slots > 0`` and a budget larger than ``slots``, one slot is ``budget / slots``
        size units, sizes are rounded up and the budget becomes ``slots`` (so a schedule that
        fits in slots fits the real budget). Otherwise sizes are kept exact (slot = 1).
        """
        from ..discretize import discretise_sizes  # the one discretisation of every problem

        M, B, slot = discretise_sizes(self.cost_ram, int(budget), slots)
        return (M if slot != 1.0 else self.cost_ram.copy()), B, slot

    def workspace_in(self, slot: float) -> np.ndarray:
        """The workspaces W_v in slots of `slot` size units (rounded up, as the sizes of
        `discretised`); `slot` = 1 keeps them exact."""
        from ..discretize import round_up

        return self.workspace.copy() if slot == 1.0 else round_up(self.workspace, slot)

    def necessary_budget(self, M: np.ndarray | None = None, W: np.ndarray | None = None) -> int:
        """Every schedule holds a node, its workspace and all its inputs at once:
        max_v (M_v + W_v + sum_{u in DEPS[v]} M_u) (sizes `M`, `W` default to the graph's)."""
        M = self.cost_ram if M is None else M
        W = self.workspace if W is None else W
        return int(max(int(M[v]) + int(W[v]) + sum(int(M[u]) for u in self.preds[v]) for v in range(self.n)))


@dataclass
class _FileKeys:
    """The file's own names of the keys `_from_moccasin_tags` read under the Checkmate names, for the errors
    to name what the file holds: per node position, {Checkmate key: the file's key} (``id``: ``"name"``,
    ``cost_cpu`` / ``cost_ram``: the tags' keys) for each key the node does not hold under its Checkmate
    name; the positions of the links written ``{"0": u, "1": v}``; the key of the file's list of links
    when it was read as ``"links"`` (None: as the file names it)."""

    nodes: dict[int, dict[str, str]] = field(default_factory=dict)
    pair_links: set[int] = field(default_factory=set)
    links: str | None = None

    def node_key(self, j: int, key: str) -> str:
        """The file's name of node `j`'s Checkmate `key`."""
        return self.nodes.get(j, {}).get(key, key)


def _from_moccasin_tags(data: dict[str, Any], path: Any = None) -> tuple[dict[str, Any], _FileKeys]:
    """Moccasin's random-layered ("RL") graphs, rewritten in the Checkmate keys, with the file's own key
    names (`_FileKeys`, for the errors); other data unchanged (and no renamed keys).

    Those files name their attribute keys in the graph attributes (``node_output_cost_tag``:
    "out_cost", the output size M_v; ``node_duration_tag``: "duration", the compute cost), keep
    the node id in ``"name"`` (no ``"id"``) and write links as ``{"0": source, "1": target}``.
    """
    attrs = data.get("graph")
    nodes = data.get("nodes")
    keys = _FileKeys()
    if not (isinstance(attrs, dict) and "node_output_cost_tag" in attrs and isinstance(nodes, list)):
        return data, keys
    # null: the default key, as when the attribute is left out
    ram_tag = "out_cost" if attrs.get("node_output_cost_tag") is None else attrs["node_output_cost_tag"]
    cpu_tag = "duration" if attrs.get("node_duration_tag") is None else attrs["node_duration_tag"]
    for key, tag in (("node_output_cost_tag", ram_tag), ("node_duration_tag", cpu_tag)):
        if not isinstance(tag, str):
            raise InputError(f"must be a string (the nodes' key of that attribute), got {tag!r}"[:200],
                             path=path, field=f"graph.{key}")
    if ram_tag == cpu_tag:  # one node value cannot be both the size and the duration
        raise InputError(f"is {cpu_tag!r}, the key node_output_cost_tag names too: give the duration its own key",
                         path=path, field="graph.node_duration_tag")
    new_nodes = []
    for j, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise InputError(f"each node must be an object, got {node!r}"[:200], path=path, field=f"nodes[{j}]")
        node = dict(node)
        # named by the key the file holds or, missing, the key it would hold: "name", the tag
        renamed = {k: tag for k, tag in (("id", "name"), ("cost_ram", ram_tag), ("cost_cpu", cpu_tag))
                   if k not in node and k != tag}
        if renamed:
            keys.nodes[j] = renamed
        if "id" not in node and "name" in node:
            node["id"] = node["name"]
        if "cost_ram" not in node and ram_tag in node:
            node["cost_ram"] = node.pop(ram_tag)
        if "cost_cpu" not in node and cpu_tag in node:
            node["cost_cpu"] = node.pop(cpu_tag)
        new_nodes.append(node)
    links = data.get("links", data.get("edges"))
    if "links" not in data and "edges" in data:
        keys.links = "edges"
    if isinstance(links, list):
        keys.pair_links = {j for j, e in enumerate(links)
                           if isinstance(e, dict) and "0" in e and "1" in e and "source" not in e}
        links = [{"source": e["0"], "target": e["1"], **{k: v for k, v in e.items() if k not in ("0", "1")}}
                 if j in keys.pair_links else e for j, e in enumerate(links)]
    out = {k: v for k, v in data.items() if k != "edges"}
    out.update(nodes=new_nodes, links=links)
    return out, keys


def _warn_unknown_file_keys(data: dict[str, Any], path: str) -> set[str]:
    """An `UnknownFieldWarning` for each top-level key of the node-link `data` other than `FILE_KEYS`
    and each graph attribute other than `ATTR_KEYS` (except in Moccasin's tagged files, whose
    attributes are many: positions, tags); the keys a node may have: `NODE_KEYS`, and in a tagged
    file the tags' values (its nodes' ``param_cost``, ...; `_from_moccasin_tags`)."""
    warn_unknown(data, FILE_KEYS, path, "", "a node-link graph file")
    attrs = _graph_attrs(data, path)
    if "node_output_cost_tag" not in attrs:
        warn_unknown(attrs, ATTR_KEYS, path, "graph", "the graph attributes")
        return set(NODE_KEYS)
    return set(NODE_KEYS) | {v for k, v in attrs.items() if k.endswith("_tag") and isinstance(v, str)}


def _is_node_id(value: Any) -> bool:
    """True for what a file may use as a node id or a link's end: a string or a finite number, not a
    list or an object (those cannot even be looked up among the ids), not true/false (equal to 1 and
    0 in Python) and not NaN or an infinity (NaN is not even equal to itself, and either one would be
    written back as ``NaN`` / ``Infinity``, which is not JSON)."""
    if value is None or isinstance(value, (bool, dict, list)) or not isinstance(value, Hashable):
        return False
    return not (isinstance(value, float) and not math.isfinite(value))


def _graph_attrs(data: dict[str, Any], path: str) -> dict[str, Any]:
    """The file's graph attributes (``"graph"``): {} when missing or null, else it must be an object
    (``[]``, ``0``, ``false`` or ``""`` are refused as ``[1]`` is); `InputError` naming `path`."""
    attrs = data.get("graph")
    if attrs is None:
        return {}
    if not isinstance(attrs, dict):
        raise InputError(f"must be an object, got {attrs!r:.80}", path=path, field="graph")
    return attrs


def _units(data: dict[str, Any], path: str) -> int:
    """``graph.meta.units`` checked as a chain file's ``meta.units`` (`chain.instance.check_units`);
    the bytes per size unit (1 for bytes, the default, and for a unit that is no byte unit).
    ``graph`` and ``graph.meta`` must be objects when present."""
    attrs = _graph_attrs(data, path)
    meta = attrs.get("meta")
    if meta is None:
        return 1
    if not isinstance(meta, dict):
        raise InputError(f"must be an object, got {meta!r:.80}", path=path, field="graph.meta")
    per = check_units(meta, path, "graph.meta")
    warn_unknown_units(meta, path, "graph.meta")
    return per


def _size(value: float) -> int:
    """A size of the file (cost_ram, workspace; a finite number >= 0) as an integer: rounded up, with
    a tolerance of 1e-9 for float noise (ceil(x - 1e-9): 4.5 -> 5, 4.0000000001 -> 4, 1e-10 -> 0)."""
    return int(math.ceil(float(value) - 1e-9))


def _cost(node: dict[str, Any], key: str, path: str, where: str, *, unit: str | None = None) -> float:
    """node[key] validated by `units.check_number` (times at most `units.MAX_TIME`, sizes `units.MAX_BYTES`
    as written, their error worded in the memory unit `unit`, None: bytes)."""
    if key not in node:
        raise InputError("missing required field", path=path, field=where)
    time = key == "cost_cpu"
    return float(check_number(node[key], path=path, field=where, time=time, unit=None if time else unit))


def _match(v: Any, ids: set[Any]) -> Any:
    """`order` entries may be written as strings for integer ids (JSON object keys)."""
    if v in ids:
        return v
    for u in ids:
        if repr(u) == repr(v) or str(u) == str(v):
            return u
    return v


def _plain(values: list[Any]) -> list[Any]:
    return [int(v) if isinstance(v, (np.integer,)) else v for v in values]


def _check_executor_meta(meta: dict[str, Any], names: set[str], path: str | None) -> None:
    """The keys of ``graph.meta`` that the executor reads (docs/graph.md): `InputError` naming the
    field when one is malformed (node names must be the file's; bytes finite numbers >= 0, and
    ``input_size``, the example input's bytes that `memsched run` compares, a whole number >= 0)."""

    def size(value: Any, field: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"must be a number of bytes >= 0, got {value!r}", path=path, field=field)

    def count(value: Any, field: str) -> None:  # a whole number of bytes: 64 or 64.0, never 64.9, -64 or true
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or value != int(value):
            raise InputError(f"must be an integer number of bytes >= 0, got {value!r}", path=path, field=field)

    def node(name: Any, field: str) -> None:
        if name not in names:
            raise InputError(f"{name!r} is not the name of a node", path=path, field=field)

    for key in ("temporaries", "passes", "untaped_temporaries", "released"):
        table = meta.get(key)
        if table is None:
            continue
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise InputError("must be an object of objects", path=path, field=f"graph.meta.{key}")
        for outer, inner in table.items():
            if key == "passes":
                node(outer, f"graph.meta.passes.{outer}")
            for name, value in inner.items():
                node(name, f"graph.meta.{key}.{outer}.{name}")
                size(value, f"graph.meta.{key}.{outer}.{name}")
    untaped = meta.get("untaped")
    if untaped is not None:
        if not isinstance(untaped, dict):
            raise InputError("must be an object of node names -> bytes", path=path, field="graph.meta.untaped")
        for name, value in untaped.items():
            node(name, f"graph.meta.untaped.{name}")
            size(value, f"graph.meta.untaped.{name}")
    random = meta.get("random_nodes")
    if random is not None:
        if not isinstance(random, list):
            raise InputError("must be a list of node names", path=path, field="graph.meta.random_nodes")
        for j, name in enumerate(random):
            node(name, f"graph.meta.random_nodes[{j}]")
    if meta.get("rng_state_bytes") is not None:
        size(meta["rng_state_bytes"], "graph.meta.rng_state_bytes")
    if meta.get("input_size") is not None:
        count(meta["input_size"], "graph.meta.input_size")

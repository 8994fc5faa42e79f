"""Hunt 28 (pipeline): an Input feeding a later layer, 1F1B with fewer micro-batches than devices,
`Pipeline.to_graph_txt` round trips, and `memsched partition --json`'s log in seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Pipeline, from_graph_txt, load
from memsched.solvers.result import SolveResult

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data" / "pipeline"
MLP = DATA / "mlp7.chain.json"
VGG = DATA / "vgg16-b32.graph.txt"

NODE = "forward_compute_time={f}, backward_compute_time={b}, activation_size={a}, parameter_size=0.0"


def _skip_graph(input_size: float) -> str:
    """node1 = Input of `input_size` bytes feeding node2 and node4 = Add(node3, Input)."""
    lines = [f"node1 -- Input0 -- {NODE.format(f=0.0, b=0.0, a=input_size)}"]
    lines += [f"node{k} -- {d} -- {NODE.format(f=1.0, b=2.0, a=1000.0)}"
              for k, d in ((2, "Linear"), (3, "Linear"), (4, "Add"))]
    lines += ["\tnode1 -- node2", "\tnode2 -- node3", "\tnode3 -- node4", "\tnode1 -- node4"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- 1: an Input feeding a later layer
def test_input_feeding_a_later_layer_is_refused_naming_line_and_node() -> None:
    with pytest.raises(InputError) as err:
        from_graph_txt(_skip_graph(1e8), path="skip.graph.txt")
    msg = str(err.value)
    assert "skip.graph.txt" in msg and "line 1" in msg and "node1" in msg and "node4" in msg
    assert "\n" not in msg


def test_input_skip_cli_exit_2(cli, tmp_path: Path) -> None:
    f = tmp_path / "skip.graph.txt"
    f.write_text(_skip_graph(1e8))
    r = cli("partition", f, "--devices", "2", "--memory", "1GB", "--bandwidth", "1GB/s")
    assert r.code == 2 and r.out == ""
    assert "skip.graph.txt" in r.err and "node4" in r.err and len(r.err.strip().splitlines()) == 1


def test_zero_size_input_may_feed_later_layers() -> None:
    p = from_graph_txt(_skip_graph(0.0))
    assert p.length == 3 and p.input_size == 0 and p.succ == [[1], [2], []]


def test_input_feeding_only_the_first_layer_loads() -> None:
    text = _skip_graph(1e8).replace("\tnode1 -- node4\n", "")
    p = from_graph_txt(text)
    assert p.length == 3 and p.input_size == 100_000_000


def test_bundled_graph_files_still_load() -> None:
    files = sorted(DATA.glob("**/*.graph.txt"))
    assert files
    for f in files:
        assert load(f).length >= 1
    gnmt = DATA / "pipedream" / "gnmt.graph.txt"
    if gnmt.exists():
        assert load(gnmt).input_size == 0


# ---------------------------------------------------------------- 2: 1F1B with m < devices
def test_partition_1f1b_fewer_micro_batches_than_devices_is_refused(cli) -> None:
    r = cli("partition", MLP, "--devices", "4", "--memory", "100MB", "--micro-batches", "2", "--json")
    assert r.code == 2 and r.out == ""
    assert "--micro-batches" in r.err and len(r.err.strip().splitlines()) == 1


def test_partition_1f1b_enough_micro_batches_and_gpipe_still_run(cli) -> None:
    ok = cli("partition", MLP, "--devices", "4", "--memory", "100MB", "--micro-batches", "4", "--json")
    assert ok.code == 0, ok.err
    gp = cli("partition", MLP, "--devices", "4", "--memory", "100MB", "--micro-batches", "2", "--schedule",
             "gpipe", "--json")
    assert gp.code == 0, gp.err
    assert all(s["in_flight"] <= 2 for s in gp.json()["stages"])


# ---------------------------------------------------------------- 3: to_graph_txt round trip
NAMES = ["InputEmbedding", "Input", "a\nb", "x -- y", "tail --", "-- head", "  ", "", "line\r\nbreak\u2028z",
         "conv -- -- relu", "Input -- x", "--", "ok"]


def _random_pipeline(rng: np.random.Generator) -> Pipeline:
    """A random pipeline (chain or DAG), layer names drawn from the awkward `NAMES`."""
    L = int(rng.integers(1, 7))
    succ = None
    if rng.random() < 0.5:
        succ = [sorted({u + 1, *(int(v) for v in rng.integers(u + 1, L, 2))}) if u + 1 < L else [] for u in range(L)]
    names = [str(rng.choice(NAMES)) for _ in range(L)]
    return Pipeline(fwd=rng.uniform(0.0, 3.0, L).round(3), bwd=rng.uniform(0.0, 6.0, L).round(3),
                    act=rng.integers(0, 10**6, L), params=rng.integers(0, 10**6, L),
                    input_size=int(rng.integers(0, 2)) * int(rng.integers(1, 10**6)), layer_names=names, succ=succ)


def test_to_graph_txt_round_trips_awkward_names() -> None:
    rng = np.random.default_rng(28)
    for _ in range(200):
        p = _random_pipeline(rng)
        q = from_graph_txt(p.to_graph_txt())
        assert q.length == p.length and q.input_size == p.input_size
        assert np.array_equal(q.act, p.act) and np.array_equal(q.params, p.params)
        assert np.array_equal(q.cut_sizes, p.cut_sizes)
        assert np.allclose(q.fwd * q.time_unit, p.fwd * p.time_unit)
        assert np.allclose(q.bwd * q.time_unit, p.bwd * p.time_unit)
        p_succ = p.succ if p.succ is not None else [[l + 1] if l + 1 < p.length else [] for l in range(p.length)]
        assert q.succ == p_succ


def test_to_graph_txt_first_layer_named_input_is_a_layer() -> None:
    p = Pipeline(fwd=[1.0, 2.0], bwd=[1.0, 2.0], act=[10, 20], params=[5, 5], input_size=0,
                 layer_names=["InputEmbedding", "fc"])
    q = from_graph_txt(p.to_graph_txt())
    assert q.length == 2 and q.input_size == 0 and "InputEmbedding" in q.layer_names[0]


def test_to_graph_txt_newline_in_name() -> None:
    p = Pipeline(fwd=[1.0, 2.0], bwd=[1.0, 2.0], act=[10, 20], params=[5, 5], input_size=7, layer_names=["a\nb", "fc"])
    text = p.to_graph_txt()
    assert len(text.splitlines()) == 2 + 1 + 2  # Input + two layers, then two edges
    q = from_graph_txt(text)
    assert q.length == 2 and q.input_size == 7 and q.layer_names[0].endswith("a b")


# ---------------------------------------------------------------- 4: --json log in seconds
def test_partition_json_log_in_seconds() -> None:
    from memsched.experiments.commands.partition import to_json

    inst = Pipeline(fwd=[1.0], bwd=[2.0], act=[1], params=[0], time_unit=1e-3)
    res = SolveResult(problem="pipeline", solver="cpsat", status="optimal", objective=88.0, lower_bound=80.0,
                      budget=10, log=[(0.5, 90.0, 70.0), (1.25, 88.0, None)])
    out = to_json(res, inst)
    assert out["period"] == pytest.approx(0.088)
    assert out["log"][0] == [0.5, pytest.approx(0.09), pytest.approx(0.07)]
    assert out["log"][1] == [1.25, pytest.approx(0.088), None]


def test_partition_json_fast_periods_in_seconds() -> None:
    """An exact solver's `fast` (the seeding solvers' periods) is in seconds like `period`."""
    from memsched.experiments.commands.partition import to_json

    inst = Pipeline(fwd=[1.0], bwd=[2.0], act=[1], params=[0], time_unit=1e-3)
    res = SolveResult(problem="pipeline", solver="cpsat", status="optimal", objective=88.0, lower_bound=88.0,
                      budget=10, details={"fast": {"madpipe": 90.0, "pipedream": None}})
    out = to_json(res, inst)
    assert out["fast"] == {"madpipe": pytest.approx(0.09), "pipedream": None}


def test_partition_cli_log_matches_period_unit(cli) -> None:
    r = cli("partition", VGG, "--devices", "4", "--memory", "8GB", "--solver", "cpsat", "--json")
    assert r.code == 0, r.err
    d = r.json()
    objectives = [o for _, o, _ in d.get("log", []) if o is not None]
    assert objectives, d.get("log")
    assert objectives[-1] == pytest.approx(d["period"])


def test_every_pipeline_solver_refuses_1f1b_with_fewer_micro_batches_than_devices():
    """The rule lives in the solvers (`dp.check_micro_batches`), so the facade refuses it too, not only
    `memsched partition`."""
    import memsched

    inst = memsched.load(memsched.data_path("pipeline", "mlp7.chain.json"), problem="pipeline")
    for solver in ("madpipe", "pipedream", "cpsat"):
        with pytest.raises(memsched.InputError, match="at least as many micro-batches as devices") as err:
            memsched.solve(inst, "100%", solver=solver, devices=4, micro_batches=2)
        assert err.value.field == "micro_batches"
    assert memsched.solve(inst, "100%", solver="madpipe", devices=4, micro_batches=4).found
    assert memsched.solve(inst, "100%", solver="madpipe", devices=4, micro_batches=2, schedule="gpipe").found

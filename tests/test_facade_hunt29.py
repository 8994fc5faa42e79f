"""Facade fixes of hunt 29.

1. `Result.to_json()` of a pipeline replay (`memsched.simulate`) of a partition given as a JSON dict or file
   has its stage times (the replay keeps the partition evaluated on the replay's machine), not a TypeError.
2. `memsched.plot` draws a pipeline result on the machine it was solved on, also with ``budget="X%"`` and
   for ``{name: result}`` (results of different machines there are an `InputError`).
3. `solve(..., solver=[...])` with a bad option value is the `InputError` naming the option, as with one name.
4. A ``$`` in an instance or network name never breaks `SweepResult.plot`, its rich display or `RunResult`'s.
5. A join, graph or pipeline edited in Python is re-checked by the facade (a NaN time, a negative size).
6. `profile` / `run` refuse ``example_input=`` / ``target=`` / ``loss_fn=`` that the Network or tuple holds.
7. `default_solver` / `list_solvers` name ``problem`` in their `InputError`.
"""

from __future__ import annotations

import io
import json

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import memsched  # noqa: E402
from memsched.results import RunResult  # noqa: E402

TINY = memsched.data_path("examples", "tiny.json")
CNN12 = memsched.data_path("examples", "cnn12.json")
PIPE = memsched.data_path("pipeline", "tiny-resnet.graph.txt")
JOIN = memsched.data_path("join", "tiny.json")
GRAPH = memsched.data_path("graphs", "linear10.json")


# ---------------------------------------------------------------------------- 1. pipeline replay to_json
@pytest.mark.parametrize("solver", ["madpipe", "interleave-dp"])
def test_pipeline_replay_of_json_dict_and_file_writes_json(solver, tmp_path):
    r = memsched.solve(PIPE, "200%", solver, devices=2)
    expected = memsched.simulate(PIPE, r, "200%").to_json()
    path = tmp_path / "part.json"
    path.write_text(json.dumps(r.to_json()))
    for given in (r.to_json(), path):
        out = memsched.simulate(PIPE, given, "200%").to_json()
        assert out["status"] == "valid"
        assert out["schedule"]["stages"] == expected["schedule"]["stages"]
        assert all(isinstance(stage["time"], float) for stage in out["schedule"]["stages"])


def test_pipeline_replay_keeps_the_callers_partition_and_writes_a_malformed_one():
    from memsched.solvers.pipeline.schedule import Partition

    part = Partition.from_json({"stages": [{"first_layer": 0, "last_layer": 3}, {"first_layer": 4, "last_layer": 9}]})
    memsched.simulate(PIPE, part, "200%").to_json()
    assert part.stages[0].time is None  # the caller's object is not evaluated in place
    gap = {"stages": [{"first_layer": 0, "last_layer": 3}, {"first_layer": 5, "last_layer": 9}]}
    s = memsched.simulate(PIPE, gap, "200%")
    assert s.status == "invalid"
    out = s.to_json()  # was a TypeError (stage times None)
    assert out["schedule"]["stages"][0]["time"] is None
    assert out["schedule"]["weight_factor"] == 4.0
    json.dumps(out, allow_nan=False)


# ---------------------------------------------------------------------------- 2. plot on the solved machine
def _drawn(fig) -> dict[str, float]:
    return {line.get_label(): float(np.nanmax(line.get_ydata())) for line in fig.axes[0].get_lines()}


@pytest.fixture(scope="module")
def light_result():
    p2 = memsched.load(PIPE).with_machine(weight_factor=1.0)  # not the default machine (4.0)
    return memsched.solve(p2, "200%", "madpipe", devices=2)


def test_plot_with_budget_share_uses_the_solved_machine(light_result):
    drawn = _drawn(memsched.plot(PIPE, light_result, budget="200%"))
    assert drawn["budget"] == light_result.budget  # was 200% of the default machine's reference peak
    assert drawn["peak"] == light_result.peak_memory


def test_plot_dict_of_results_uses_the_solved_machine(light_result):
    drawn = _drawn(memsched.plot(PIPE, {"madpipe": light_result}, budget="200%"))
    assert drawn["peak"] == light_result.peak_memory  # was the peak on weight factor 4
    assert drawn["budget"] == light_result.budget


def test_plot_dict_of_results_of_two_machines_is_an_input_error(light_result):
    heavy = memsched.solve(PIPE, "200%", "madpipe", devices=2)
    with pytest.raises(memsched.InputError) as err:
        memsched.plot(PIPE, {"light": light_result, "heavy": heavy})
    assert err.value.field == "schedule['heavy']"


# ---------------------------------------------------------------------------- 3. option values with a list
@pytest.mark.parametrize(("names", "options", "field"), [
    (["rotor", "cpsat"], {"parameters": "no_such_param:1"}, "parameters"),
    (["rotor", "periodic"], {"segments": 1000}, "segments"),
])
def test_list_of_solvers_with_a_bad_option_value_raises(names, options, field):
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(CNN12, "60%", names, time_limit=2, **options)
    assert err.value.field == field


def test_list_of_solvers_still_reports_a_refusal_of_the_instance():
    cm = memsched.solve(CNN12, "60%", ["rotor", "revolve"])  # revolve needs a homogeneous chain
    assert [r.status for r in cm.results] == ["optimal", "unsupported"]


# ---------------------------------------------------------------------------- 4. "$" in names
def test_sweep_plot_and_display_of_a_dollar_name(tmp_path):
    data = json.loads(TINY.read_text())
    data["name"] = "price$_$tag"
    path = tmp_path / "dollar.json"
    path.write_text(json.dumps(data))
    sw = memsched.sweep(memsched.load(path), ["80%", "90%"], ["rotor"])
    fig = sw.plot()
    fig.savefig(io.BytesIO())  # was a mathtext ValueError
    assert fig._suptitle.get_text() == r"price\$_\$tag"
    assert "<img" in sw._repr_html_()


def test_run_result_display_of_a_dollar_name():
    data = {"model": "a$_$b", "solver": "rotor", "device": "cpu", "status": "optimal",
            "predicted": {"makespan": 2.0, "peak_memory": 1000}, "measured": {"time": 2.1, "peak_memory": 1100}}
    assert "<img" in RunResult(data)._repr_html_()


# ---------------------------------------------------------------------------- 5. edited instances re-checked
def test_edited_join_nan_time_is_an_input_error():
    j = memsched.load(JOIN)
    j.branches[0].u_f[0] = np.nan
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(j, "90%")  # was "infeasible"
    assert err.value.field == "branches[0].u_f[0]"


def test_edited_join_negative_size_is_an_input_error():
    j = memsched.load(JOIN)
    j.branches[0].x[0] = -5
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(j, "90%")  # was an IndexError from the join DP
    assert err.value.field == "branches[0].x[0]"


def test_edited_join_loss_is_checked():
    j = memsched.load(JOIN)
    j.loss_time = float("nan")
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(j, "90%")
    assert err.value.field == "loss_time"


@pytest.mark.parametrize(("edit", "field"), [("cost_ram", "node 0: cost_ram"), ("cost_cpu", "node 3: cost_cpu")])
def test_edited_graph_is_an_input_error(edit, field):
    g = memsched.load(GRAPH)
    if edit == "cost_ram":
        g.cost_ram[0] = -5
    else:
        g.cost_cpu[3] = np.nan
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(g, "90%")
    assert err.value.field == field


@pytest.mark.parametrize(("edit", "field"), [("fwd", "fwd[0]"), ("act", "act[2]"), ("input_size", "input_size")])
def test_edited_pipeline_is_an_input_error(edit, field):
    p = memsched.load(PIPE)
    if edit == "fwd":
        p.fwd[0] = np.nan
    elif edit == "act":
        p.act[2] = -5
    else:
        p.input_size = -3
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(p, "200%", devices=2)
    assert err.value.field == field


def test_unedited_instances_still_solve():
    assert memsched.solve(memsched.load(JOIN), "90%").found
    assert memsched.solve(memsched.load(GRAPH), "90%").found
    assert memsched.solve(memsched.load(PIPE), "200%", devices=2).found


# ---------------------------------------------------------------------------- 6. Network and its arguments
@pytest.fixture(scope="module")
def small_net():
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(2, 8)


def test_network_with_example_input_again_is_an_input_error(small_net):
    net, x = small_net
    with pytest.raises(memsched.InputError) as err:
        memsched.profile(memsched.Network(net, x), example_input=x[:1], repeats=1)
    assert err.value.field == "example_input"


def test_tuple_with_example_input_again_is_an_input_error(small_net):
    net, x = small_net
    with pytest.raises(memsched.InputError) as err:
        memsched.profile((net, x), example_input=x[:1], loss_fn=lambda o, t: (o ** 2).sum(), repeats=1)
    assert err.value.field == "example_input"


def test_network_with_loss_again_is_an_input_error_in_run(small_net):
    from torch.nn import functional as F

    net, x = small_net
    y = F.one_hot(x.argmax(1) % 4, 4).float()
    with pytest.raises(memsched.InputError) as err:
        memsched.run(memsched.Network(net, x, y, F.mse_loss), "100%", loss_fn=F.l1_loss, repeats=1, time_repeats=1)
    assert err.value.field == "loss_fn"


def test_tuple_takes_what_it_leaves_out(small_net):
    net, x = small_net
    chain = memsched.profile((net, x), loss_fn=lambda o, t: (o ** 2).sum(), repeats=1)
    assert chain.length == 3


# ---------------------------------------------------------------------------- 7. problem named
@pytest.mark.parametrize("call", [memsched.default_solver, memsched.list_solvers])
def test_unknown_problem_names_problem(call):
    with pytest.raises(memsched.InputError) as err:
        call("xx")
    assert err.value.field == "problem"

"""Fixes from the `memsched run` hunt (CPU, tiny networks).

1. `memsched run FILE` / `memsched run ZOO --chain FILE` take the link of a chain file's
   ``host_link`` (the command line's --bandwidth / --latency win), as `memsched.run` does.
2. A join file given as MODEL runs with the join network its meta (or --model) names.
3. ``predicted.peak_memory`` is the executor's prediction (RNG states included) that every ratio
   uses; the solver's is ``predicted.model_peak_memory``.
4. Offloading schedules count their recomputations.
5. A join file profiled on other inputs (its branches' ``input_size``) is refused.
6. `run` leaves the buffers (BatchNorm statistics) of a caller's modules as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memsched.models.run  # noqa: E402
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, Op  # noqa: E402
from memsched.solvers.chain.schedule import B as BWD  # noqa: E402
from memsched.solvers.offload.schedule import Off, OffloadSchedule, Pre  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "solvers" / "data" / "examples"
JOINS = ROOT / "solvers" / "data" / "join"
CPU = ["--device", "cpu", "--time-repeats", "1"]




def _reached(cli, *argv) -> None:
    res = cli("run", *argv)
    assert res.code == 1 and "stub" in res.err, res.err


def _chain_file(tmp_path: Path, link: dict | None, name: str = "linked.json") -> Path:
    """The example chain tiny.json as a profile of resnet18 (its meta), with `link` as ``host_link``."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"]["model"] = "resnet18"
    if link is not None:
        data["host_link"] = link
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# ---------------------------------------------------------------------------- 1. host_link on the command line
def test_cli_run_takes_the_host_link_of_the_instance_file(cli, run_stub, tmp_path):
    linked = _chain_file(tmp_path, {"bandwidth": 2e9, "latency": 0.25})
    for argv in ((linked,), ("resnet18", "--chain", linked)):
        _reached(cli, *argv, "--budget", "90%", "--solver", "pofo", *CPU)
        call = run_stub[-1]
        assert (call["problem"], call["solver"]) == ("offload", "pofo")
        assert (call["bandwidth"], call["latency"]) == (2e9, 0.25)
        assert call["model"] == "resnet18" and call["instance"] == str(linked)
        _reached(cli, *argv, "--budget", "90%", *CPU)  # no --solver: offloading's default
        assert run_stub[-1]["problem"] == "offload" and run_stub[-1]["bandwidth"] == 2e9
    # the command line wins, each value on its own (as memsched solve and memsched.run)
    _reached(cli, "resnet18", "--chain", linked, "--budget", "90%", "--latency", "0.5", *CPU)
    assert (run_stub[-1]["bandwidth"], run_stub[-1]["latency"]) == (2e9, 0.5)
    _reached(cli, linked, "--budget", "90%", "--bandwidth", "1GB/s", *CPU)
    assert (run_stub[-1]["bandwidth"], run_stub[-1]["latency"]) == (1e9, 0.25)
    # --problem chain: the costs without the link
    _reached(cli, linked, "--budget", "90%", "--problem", "chain", *CPU)
    assert run_stub[-1]["problem"] == "chain" and run_stub[-1]["bandwidth"] is None


def test_cli_run_offloading_without_any_bandwidth_is_bad_input_before_running(cli, run_stub, tmp_path):
    plain = _chain_file(tmp_path, None, "plain.json")
    res = cli("run", plain, "--budget", "90%", "--problem", "offload", *CPU)
    assert res.code == 2 and not run_stub
    assert "--bandwidth" in res.err and "host_link" in res.err and len(res.err.strip().splitlines()) == 1
    no_bandwidth = _chain_file(tmp_path, {"latency": 0.1}, "nobw.json")
    res = cli("run", "resnet18", "--chain", no_bandwidth, "--budget", "90%", *CPU)
    assert res.code == 2 and not run_stub and "host_link.bandwidth" in res.err


def test_cli_run_executes_with_the_link_of_a_profiled_chain_file(cli, tmp_path):
    """End to end: a profiled tiny chain plus a host_link runs pofo (failed: needs a bandwidth)."""
    path = tmp_path / "net.json"
    res = cli("profile", "resnet18", "--batch", "2", "--image-size", "32", "--width", "4", "--depth", "1",
              "--device", "cpu", "--repeats", "1", "-o", path)
    assert res.code == 0, res.err
    data = json.loads(path.read_text())
    data["host_link"] = {"bandwidth": 1e9, "latency": 0.001}
    path.write_text(json.dumps(data))
    res = cli("run", path, "--budget", "100%", "--solver", "pofo", "--json", *CPU)
    assert res.code == 0, res.err
    out = res.json()
    assert (out["problem"], out["bandwidth"], out["latency"]) == ("offload", 1e9, 0.001)
    assert out["grad_check"] is True


# ---------------------------------------------------------------------------- 2. a join file as MODEL
def _join_file(tmp_path: Path, model: str | None = "siamese") -> Path:
    data = json.loads((JOINS / "siamese8.json").read_text())
    if model is not None:
        data["meta"]["model"] = model
    path = tmp_path / "siam.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_run_takes_a_join_file_as_model(cli, run_stub, tmp_path):
    path = _join_file(tmp_path)
    _reached(cli, path, "--budget", "100%", *CPU)
    call = run_stub[-1]
    assert (call["model"], call["problem"], call["instance"]) == ("siamese", "join", str(path))
    _reached(cli, path, "--model", "triplet", "--budget", "100%", *CPU)
    assert run_stub[-1]["model"] == "triplet" and run_stub[-1]["instance"] == str(path)


def test_cli_run_join_file_without_a_join_network_is_bad_input(cli, run_stub, tmp_path):
    res = cli("run", _join_file(tmp_path, None), "--budget", "100%", *CPU)
    assert res.code == 2 and not run_stub and "--model" in res.err and "siamese" in res.err
    res = cli("run", _join_file(tmp_path), "--model", "resnet18", "--budget", "100%", *CPU)
    assert res.code == 2 and not run_stub and "--model" in res.err


# ---------------------------------------------------------------------------- 3. one predicted peak for every ratio
def _mlp(batch: int = 4, width: int = 32, depth: int = 4):
    """An MLP chain with BatchNorm and dropout (recomputing a dropout stage keeps an RNG state)."""
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(16, width), nn.ReLU())]
    for _ in range(depth - 2):
        blocks.append(nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Dropout(0.3)))
    blocks.append(nn.Linear(width, 5))
    return nn.Sequential(*blocks), torch.randn(batch, 16), torch.randint(0, 5, (batch,))


def _zoo(net, x, y):
    from memsched.models.network import as_zoo_model

    return as_zoo_model(net, example_input=x, target=y, loss_fn=F.cross_entropy)


@pytest.mark.parametrize("problem, solver, extra", [("chain", "rotor", {}),
                                                    ("offload", "pofo", {"bandwidth": 1e8})])
def test_run_reports_the_prediction_its_ratios_use(problem, solver, extra):
    out = memsched.models.run.run(_zoo(*_mlp()), "78%", problem=problem, solver=solver, profile_repeats=1,
                                  time_repeats=1, **extra)
    assert out["grad_check"] is True and out["recomputations"] >= 1
    p, m, r = out["predicted"], out["measured"], out["ratio"]
    # the run keeps the CPU RNG state of each recomputed dropout stage: the allocator sees it, the solver does not
    assert p["peak_memory"] >= p["model_peak_memory"] + 5000
    assert p["tracker_peak_memory"] == p["model_peak_memory"]
    compared = p["sequential_peak"] if problem == "offload" else p["peak_memory"]  # offload on CPU: one op at a time
    assert r["independent_memory"] == pytest.approx(m["independent_peak"] / compared)
    tracker = p["tracker_sequential_peak"] if problem == "offload" else p["tracker_peak_memory"]
    assert r["memory"] == pytest.approx(m["peak_memory"] / tracker)
    s = out["store_all"]["predicted"]  # the tracker's predictions on both sides, as ratio.memory compares
    assert out["vs_store_all"]["predicted"]["memory"] == pytest.approx(
        p["tracker_peak_memory"] / (s["tracker_peak_memory"] or s["peak_memory"]))
    text = memsched.models.run.describe(out)
    assert "the solver's model" in text
    assert ("by the allocator" if problem == "offload" else "(allocator)") in text


def test_describe_says_nothing_more_when_the_predictions_agree():
    out = {"instance": "x", "device": "cpu", "solver": "rotor", "status": "optimal", "budget": 2048,
           "problem": "chain", "memory_method": "LiveTensorTracker", "grad_check": True,
           "predicted": {"makespan": 1.0, "peak_memory": 2048, "tracker_peak_memory": None, "model_peak_memory": 2048},
           "measured": {"time": 1.0, "peak_memory": 2048, "independent_peak": None}}
    line = memsched.models.run.describe(out).splitlines()[1]
    assert line == "  predicted: makespan 1.00 ms, peak 2.00 KiB"


# ---------------------------------------------------------------------------- 4. offloading recomputations
def test_offload_schedule_counts_its_recomputations():
    ops = [Op(F_CK, 0), Off("a", 1), Op(F_ALL, 1), Op(LOSS, 2), Op(BWD, 1), Pre("a", 1), Op(F_ALL, 0),
           Op(BWD, 0)]
    assert OffloadSchedule(ops, 2).recomputations() == 1
    assert OffloadSchedule([Op(F_N, 0), Op(F_N, 1), Op(F_ALL, 0)], 2).recomputations() == 1
    plain = OffloadSchedule([Op(F_ALL, 0), Off("abar", 0), Op(F_ALL, 1), Op(LOSS, 2), Op(BWD, 1), Pre("abar", 0),
                             Op(BWD, 0)], 2)
    assert plain.recomputations() == 0


def test_run_json_counts_offloading_recomputations():
    out = memsched.models.run.run(_zoo(*_mlp()), "78%", problem="offload", solver="remat-only", bandwidth=1e8,
                                  profile_repeats=1, time_repeats=1, store_all=False)
    forwards = sum(o["op"] in (F_ALL, F_CK, F_N) for o in out["schedule"]["ops"])
    assert out["recomputations"] == forwards - out["schedule"]["length"] > 0


# ---------------------------------------------------------------------------- 5. join input bytes
def _profile_free_join(tmp_path: Path, batch: int) -> Path:
    """A join file for siamese at `batch` (the branches' input_size of that batch; made-up costs,
    meta: only the model), without profiling."""
    from memsched.models.join.zoo import build_join_model
    from memsched.models.memory import unique_bytes
    from memsched.models.network import stage_output_bytes

    def stage(out: int) -> dict[str, float]:  # the real output sizes: `run` compares them with the network's
        return {"fwd_time": 1.0, "bwd_time": 1.0, "out_size": out, "tape_size": out, "fwd_overhead": 0,
                "bwd_overhead": 0}

    built = build_join_model("siamese", batch=batch, image_size=16, width=4)
    data = {"format": "memsched.join/1", "name": "siam",
            "branches": [{"name": name, "input_size": unique_bytes(x),
                          "stages": [stage(o) for o in stage_output_bytes(list(blocks), x)]}
                         for name, x, blocks in zip(built.branch_names, built.inputs, built.branches)],
            "loss": {"bwd_time": 0.0, "bwd_overhead": 0}, "meta": {"model": "siamese"}}
    path = tmp_path / "siam_b2.json"
    path.write_text(json.dumps(data))
    return path


def test_join_file_profiled_on_other_inputs_is_refused(tmp_path, cli):
    path = _profile_free_join(tmp_path, batch=2)
    sizes = {"image_size": 16, "width": 4}
    target = memsched.models.run.prepare("join", "siamese", instance=str(path), sizes={**sizes, "batch": 2})
    assert target.problem == "join"  # the batch it records: accepted
    with pytest.raises(memsched.InputError, match="input of .* bytes but branch 0 .* of siamese") as err:
        memsched.models.run.prepare("join", "siamese", instance=str(path), sizes={**sizes, "batch": 4})
    assert err.value.field == "--chain"
    res = cli("run", path, "--batch", "4", "--image-size", "16", "--width", "4", "--budget", "100%", *CPU)
    assert res.code == 2 and str(path) in res.err and "branch 0" in res.err
    assert len(res.err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- 6. the caller's buffers
def _state(net: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    """The entries of state dict `a` whose tensors differ in `b`."""
    return [k for k in a if not torch.equal(a[k], b[k])]


def test_run_leaves_the_callers_buffers_and_parameters():
    net, x, y = _mlp()
    zoo = _zoo(net, x, y)
    before = _state(net)
    out = memsched.models.run.run(zoo, "80%", problem="offload", solver="pofo", bandwidth=1e8, profile_repeats=1,
                                  time_repeats=1)
    assert out["grad_check"] is True
    assert not _changed(before, _state(net)) and net.training
    assert all(p.grad is None for p in net.parameters())


def test_run_restores_the_buffers_when_it_raises(monkeypatch):
    net, x, y = _mlp()
    zoo = _zoo(net, x, y)
    before = _state(net)

    def fail(*args, **kwargs):
        raise RuntimeError("solver down")

    monkeypatch.setattr(memsched.models.run.registry, "solve", fail)  # after profiling: the buffers moved
    with pytest.raises(RuntimeError, match="solver down"):
        memsched.models.run.run(zoo, "80%", problem="chain", profile_repeats=1, time_repeats=1)
    assert not _changed(before, _state(net))


def test_memsched_run_leaves_your_batchnorm_statistics():
    """The input check of your network (`models.network.as_zoo_model`'s dry run), the profiling and
    the ~28 executed steps leave its BatchNorm statistics as they were (they counted 24 to 28 batches)."""
    net, x, y = _mlp()
    before = _state(net)
    result = memsched.run(net, "80%", "pofo", bandwidth=1e8, example_input=x, target=y, loss_fn=F.cross_entropy,
                          repeats=1, time_repeats=1)
    assert result.grad_check
    assert not _changed(before, _state(net))

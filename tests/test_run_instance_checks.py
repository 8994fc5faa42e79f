"""`memsched run` with an instance file: what the file says is checked as `memsched solve` reads it.

1. A chain, offloading or join file whose recorded input bytes (a chain's x_0, each branch's
   ``input_size``) differ from the input of the network built here is refused, with or without a
   ``meta.model`` (the check was skipped without one: an lstm chain of batch 2 ran at batch 4 and
   reported a "feasible" schedule whose measured memory was 1.39x the prediction). A graph's
   ``meta.input_size`` is compared when it counts bytes (the generated graphs count KiB).
2. A plain chain file with an offloading solver that is no chain solver (pofo) is an offloading
   instance for `run` as for `solve`: without a bandwidth, solve's bad input naming
   ``host_link.bandwidth`` (was "--solver: unknown solver 'pofo' for chain"); cpsat, a solver of
   both problems, keeps the chain problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import memsched.models.run  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "solvers" / "data" / "examples"
LSTM = {"seq_len": 4, "width": 8}
LSTM_ARGS = ["--model", "lstm", "--seq-len", "4", "--width", "8"]
CPU = ["--device", "cpu", "--time-repeats", "1", "--no-independent"]
STAGE = {"fwd_time": 1.0, "bwd_time": 1.0, "out_size": 64, "tape_size": 64, "fwd_overhead": 0, "bwd_overhead": 0}


def _one_line_error(res: Any, *words: str) -> None:
    """Exit 2 with one error line (no traceback) holding each of `words`."""
    assert res.code == 2, (res.code, res.out, res.err)
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err, res.err
    for word in words:
        assert word in res.err, (word, res.err)


# ---------------------------------------------------------------------------- 1. input bytes without meta.model
def _lstm_chain(tmp_path: Path, batch: int, link: dict | None = None, name: str = "lstm_b2.json") -> Path:
    """A chain file for lstm at `batch` (x_0 the input's bytes at that batch, made-up costs) whose
    meta records no model nor sizes, as a hand-edited profile; `link` as its ``host_link``."""
    from memsched.models.memory import unique_bytes
    from memsched.models.zoo import build_model

    built = build_model("lstm", batch=batch, **LSTM)
    data: dict[str, Any] = {"format": "memsched.chain/1", "name": "lstm-nomodel",
                            "input_size": unique_bytes(built.example_input),
                            "stages": [dict(STAGE) for _ in built.blocks],
                            "loss": {"bwd_time": 0.0, "bwd_overhead": 0}, "meta": {}}
    if link is not None:
        data["host_link"] = link
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def nothing_executed(monkeypatch):
    """The schedules `memsched.models.run` executes (none when a check refuses the run first)."""
    calls: list[Any] = []

    def fake(target: Any, schedule: Any, **kw: Any) -> Any:
        calls.append(schedule)
        raise AssertionError("executed a schedule")

    monkeypatch.setattr(memsched.models.run, "execute_schedule", fake)
    return calls


def test_cli_run_refuses_an_offload_file_of_another_input_without_meta_model(cli, tmp_path, nothing_executed):
    """The hunter's repro: a host_link file of batch 2 without meta.model, run at batch 4."""
    path = _lstm_chain(tmp_path, 2, {"bandwidth": 1e6, "latency": 0.0})
    res = cli("run", path, *LSTM_ARGS, "--batch", "4", "--solver", "vdnn", "--budget", "97%", *CPU)
    _one_line_error(res, str(path), "profiled on an input of", "bytes", "give the sizes it was profiled at")
    assert not nothing_executed


def test_cli_run_refuses_a_chain_file_of_another_input_without_meta_model(cli, tmp_path, nothing_executed):
    path = _lstm_chain(tmp_path, 2)
    res = cli("run", "lstm", "--chain", path, *LSTM_ARGS[2:], "--batch", "4", "--budget", "97%", *CPU)
    _one_line_error(res, "--chain", "profiled on an input of")
    assert not nothing_executed


def test_run_takes_a_chain_file_without_meta_model_at_its_input():
    """The same chain at the batch it records: accepted (prepared, nothing profiled)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = _lstm_chain(Path(tmp), 2)
        target = memsched.models.run.prepare("chain", "lstm", instance=str(path), sizes={**LSTM, "batch": 2})
        assert target.problem == "chain" and target.instance.length == len(json.loads(path.read_text())["stages"])
        with pytest.raises(memsched.InputError, match="profiled on an input of") as err:
            memsched.models.run.prepare("chain", "lstm", instance=str(path), sizes={**LSTM, "batch": 4})
        assert err.value.field == "--chain"


def test_memsched_run_refuses_a_chain_of_another_input_without_meta_model(tmp_path, nothing_executed):
    path = _lstm_chain(tmp_path, 2)
    with pytest.raises(memsched.InputError, match="profiled on an input of") as err:
        memsched.run("lstm", "97%", "rotor", chain=str(path), batch=4, time_repeats=1, **LSTM)
    assert err.value.field == "chain"
    assert not nothing_executed


def test_join_file_without_meta_model_of_another_input_is_refused(tmp_path):
    from memsched.models.join.zoo import build_join_model
    from memsched.models.memory import unique_bytes

    sizes = {"image_size": 16, "width": 4}
    built = build_join_model("siamese", batch=2, **sizes)
    data = {"format": "memsched.join/1", "name": "siam",
            "branches": [{"name": name, "input_size": unique_bytes(x), "stages": [dict(STAGE)] * len(blocks)}
                         for name, x, blocks in zip(built.branch_names, built.inputs, built.branches)],
            "loss": {"bwd_time": 0.0, "bwd_overhead": 0}, "meta": {}}
    path = tmp_path / "siam_nomodel.json"
    path.write_text(json.dumps(data))
    assert memsched.models.run.prepare("join", "siamese", instance=str(path),
                                       sizes={**sizes, "batch": 2}).problem == "join"
    with pytest.raises(memsched.InputError, match="input of .* bytes but branch 0 .* of siamese"):
        memsched.models.run.prepare("join", "siamese", instance=str(path), sizes={**sizes, "batch": 4})


def test_graph_input_size_is_compared_when_it_counts_bytes():
    """A graph's meta.input_size is bytes in an export (meta.model, units.memory "bytes") or any
    file saying units.memory "bytes"; the generated graphs count KiB: not compared."""
    from memsched.models.run import _graph_input_bytes
    from memsched.solvers.graph.generate import resnet

    class G:
        def __init__(self, meta: dict[str, Any]):
            self.meta = meta

    assert _graph_input_bytes(resnet((1, 1, 1, 1))) is None
    assert _graph_input_bytes(G({"input_size": 96})) is None
    assert _graph_input_bytes(G({"input_size": 96, "units": {"memory": "bytes"}})) == 96
    assert _graph_input_bytes(G({"input_size": 96, "model": "resnet18"})) == 96
    assert _graph_input_bytes(G({"input_size": 96, "units": {"memory": "KiB"}})) is None


# ---------------------------------------------------------------------------- 2. plain chain + offloading solver
def _plain_chain(tmp_path: Path, link: dict | None = None) -> Path:
    """The example chain tiny.json as a profile of resnet18 (its meta), without a host_link."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"]["model"] = "resnet18"
    if link is not None:
        data["host_link"] = link
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_run_reads_a_plain_chain_with_an_offloading_solver_as_solve_does(cli, run_stub, tmp_path):
    """The hunter's repro: run and solve say the same (the file has no host bandwidth)."""
    path = _plain_chain(tmp_path)
    solve = cli("solve", path, "--solver", "pofo", "--budget", "90%")
    _one_line_error(solve, str(path), "host_link.bandwidth")
    for argv in ((path,), ("resnet18", "--chain", path)):
        res = cli("run", *argv, "--solver", "pofo", "--budget", "90%", *CPU)
        _one_line_error(res, str(path), "host_link.bandwidth")
        assert "unknown solver" not in res.err
        assert res.err.split("error: ", 1)[1] == solve.err.split("error: ", 1)[1]
    assert not run_stub


def test_cli_run_with_a_solver_of_both_problems_keeps_the_chain(cli, run_stub, tmp_path):
    path = _plain_chain(tmp_path)
    res = cli("run", path, "--solver", "cpsat", "--budget", "90%", *CPU)
    assert res.code == 1 and "stub" in res.err, res.err
    assert (run_stub[-1]["problem"], run_stub[-1]["bandwidth"]) == ("chain", None)
    res = cli("run", path, "--solver", "rotor", "--budget", "90%", *CPU)
    assert res.code == 1 and run_stub[-1]["problem"] == "chain"


def test_cli_run_with_an_offloading_solver_and_a_bandwidth_offloads(cli, run_stub, tmp_path):
    path = _plain_chain(tmp_path)
    res = cli("run", path, "--solver", "pofo", "--bandwidth", "1GB/s", "--budget", "90%", *CPU)
    assert res.code == 1 and "stub" in res.err, res.err
    assert (run_stub[-1]["problem"], run_stub[-1]["solver"], run_stub[-1]["bandwidth"]) == ("offload", "pofo", 1e9)
    linked = _plain_chain(tmp_path, {"bandwidth": 2e9})
    res = cli("run", linked, "--solver", "pofo", "--budget", "90%", *CPU)
    assert res.code == 1 and (run_stub[-1]["problem"], run_stub[-1]["bandwidth"]) == ("offload", 2e9)


def test_memsched_run_reads_a_plain_chain_with_an_offloading_solver_as_solve_does(run_stub, tmp_path):
    path = _plain_chain(tmp_path)
    for kw in ({"instance": str(path)}, {"chain": path}):
        with pytest.raises(memsched.InputError, match="no host bandwidth") as err:
            memsched.run("resnet18", "90%", "pofo", **kw)
        assert err.value.field == "host_link.bandwidth" and str(path) in str(err.value)
    assert not run_stub
    out = memsched.run("resnet18", "90%", "cpsat", instance=str(path))  # a chain solver too: the chain problem
    assert run_stub[-1]["problem"] == "chain" and out is not None

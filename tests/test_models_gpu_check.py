"""The accuracy check of every executor (experiments.gpu_check): its CPU path with tiny models, and
the CUDA run when a GPU is present."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from memsched.experiments import gpu_check  # noqa: E402

torch.set_num_threads(1)


def _check_doc(doc: dict, problems: set[str]) -> None:
    assert doc["summary"]["grad_check"] is True
    assert {r["problem"] for r in doc["rows"] if "measured_peak" in r} == problems
    for r in doc["rows"]:
        if "measured_peak" in r:
            assert r["grad_check"] is True
            assert r["measured_ms"] > 0 and r["predicted_ms"] > 0
            assert r["predicted_peak"] > 0 and r["measured_peak"] > 0


def test_gpu_check_runs_every_executor_on_cpu_tiny(tmp_path):
    out = tmp_path / "check.json"
    code = gpu_check.main(["--device", "cpu", "--tiny", "--models", "gpt2,clip", "--out", str(out),
                           "--repeats", "1", "--time-repeats", "1"])
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "memsched.gpu_check/2" and doc["size"] == "tiny"
    _check_doc(doc, {"chain", "offload", "graph", "join"})
    solvers = {(r["problem"], r["solver"]) for r in doc["rows"] if "measured_peak" in r}
    assert {("chain", "store-all"), ("chain", "rotor"), ("offload", "pofo"), ("join", "dp")} <= solvers
    # the chain and join executors are charged exactly as their simulators on CPU (same tracker)
    for r in doc["rows"]:
        if "measured_peak" in r and r["problem"] in ("chain", "join"):
            assert r["measured_peak"] <= 1.01 * r["predicted_peak"] + 4096
            assert r["independent_peak"] is not None
    assert (tmp_path / "check.png").stat().st_size > 0


def test_gpu_check_covers_every_problem_at_full_size():
    assert set(gpu_check.MODEL_SIZES["gpu"]) == {"resnet50", "gpt2", "siamese", "clip"}
    assert gpu_check.MODEL_SIZES["gpu"]["resnet50"][1] == {"batch": 32, "image_size": 224}
    assert gpu_check.MODEL_SIZES["gpu"]["gpt2"][1]["seq_len"] == 1024
    covered = {p for label in gpu_check.MODEL_SIZES["gpu"] for p in gpu_check.CHECKS[label]}
    assert covered == {"chain", "offload", "graph", "join"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the check's full run is "
                    "`python -m memsched.experiments.gpu_check` on a GPU machine)")
def test_gpu_check_on_cuda_small(tmp_path):
    out = tmp_path / "check.json"
    code = gpu_check.main(["--device", "cuda", "--size", "small", "--out", str(out), "--time-repeats", "3"])
    doc = json.loads(out.read_text())
    assert code == 0
    _check_doc(doc, {"chain", "offload", "graph", "join"})


def test_a_check_cut_short_keeps_the_rows_it_finished(tmp_path, monkeypatch):
    """`run_check` hands the document so far to `on_progress` after each (model, problem); the
    command line writes it, so a run stopped by a time limit leaves a readable, incomplete JSON."""
    seen: list[dict] = []
    calls = {"n": 0}
    real = gpu_check.evaluate_model

    def second_pair_fails(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gpu_check, "evaluate_model", second_pair_fails)
    out = tmp_path / "check.json"
    with pytest.raises(KeyboardInterrupt):
        gpu_check.main(["--device", "cpu", "--tiny", "--models", "gpt2", "--problems", "chain,graph", "--out", str(out),
                        "--repeats", "1", "--time-repeats", "1"])
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and {r["problem"] for r in doc["rows"]} == {"chain"}
    assert doc["summary"]["runs"] == len(doc["rows"]) > 0
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "check.png").exists()
    assert gpu_check.main(["--replot", "--out", str(out)]) == 0  # the figure of what finished
    assert (tmp_path / "check.png").stat().st_size > 0
    doc = gpu_check.run_check(torch.device("cpu"), "tiny", repeats=1, time_repeats=1, models=("gpt2",),
                              problems=("chain",), log=None, on_progress=seen.append)
    assert doc["complete"] is True and [d["complete"] for d in seen] == [False]
    assert all(r["memory_ratio"] == pytest.approx(r["measured_peak"] / r["compared_peak"], rel=1e-3)
               for r in doc["rows"] if "measured_peak" in r)

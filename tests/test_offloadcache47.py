"""bench_offload's cache of zoo profiles (results/offload/profiles): a cached file is reused only when
its meta says it is that model at the sizes of `ZOO` (not a cost model's chain, not other sizes), and a
line says which file is reused; another file is profiled again, with a line saying what differs."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from memsched.experiments import bench_offload
from memsched.solvers.chain import Chain

PROFILES = ROOT / "results" / "offload" / "profiles"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed cache, which `bench_offload.RESULTS` points at."""
    shutil.copytree(PROFILES, tmp_path / "profiles")
    monkeypatch.setattr(bench_offload, "RESULTS", tmp_path)
    return tmp_path / "profiles"


def _record_profiling(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Replace the profiler by a recorder returning the committed resnet50 chain (no torch run)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def profile_model(name: str, **kwargs: Any) -> tuple[Chain, None]:
        calls.append((name, kwargs))
        return Chain.load(PROFILES / "resnet50.json"), None

    from memsched.models.chain import profiler

    monkeypatch.setattr(profiler, "profile_model", profile_model)
    return calls


def test_committed_profiles_are_reused_and_said(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    calls = _record_profiling(monkeypatch)
    chains = bench_offload.profiled_chains(quick=False)
    assert calls == []
    assert [c.meta["model"] for c in chains] == list(bench_offload.ZOO)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("bench_offload: reusing the profile ") for line in err), err
    assert "repeats" in err[0]


def test_a_cost_model_chain_of_other_sizes_is_profiled_again(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(ROOT / "solvers" / "data" / "chains" / "densenet121-b32-224.v100.json", cache / "densenet121.json")
    calls = _record_profiling(monkeypatch)
    bench_offload.profiled_chains(quick=True)
    assert [name for name, _ in calls] == ["densenet121"]
    assert {k: calls[0][1][k] for k in bench_offload.ZOO["densenet121"]} == bench_offload.ZOO["densenet121"]
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "densenet121.json" in x)
    assert "another profile" in line and "batch 32 (asked 4)" in line and "profiling densenet121 again" in line


def test_a_profile_of_another_model_is_not_reused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(cache / "resnet50.json", cache / "gpt2.json")
    calls = _record_profiling(monkeypatch)
    bench_offload.profiled_chains(quick=False)
    assert [name for name, _ in calls] == ["gpt2"] and calls[0][1]["repeats"] == 5

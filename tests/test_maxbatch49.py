"""``memsched max-batch --json`` records every setting a rerun needs: the solver's ``slots`` and
``time_limit`` and the network's other sizing options (``sizes``: an image size of 416x608 was nowhere in
the answer of U-Net's search), for a finished and for an interrupted search. Probes are answered by a
table of verdicts (`max_batch.probe_size` replaced), so nothing is built."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import run_cli

pytest.importorskip("torch")

from memsched.experiments.commands import max_batch  # noqa: E402
from memsched.experiments.commands.max_batch import Probe, fixed_sizes  # noqa: E402


def fake_probes(monkeypatch: pytest.MonkeyPatch, largest: int, seen: list[dict[str, Any]],
                interrupt_at: int = 0) -> None:
    """Sizes up to `largest` fit; the probe of `interrupt_at` is interrupted; each probe's sizes go to `seen`."""
    def fake(model: str, sizes: dict[str, Any], *, size: int, **kw: Any) -> Probe:
        seen.append(dict(sizes))
        if size == interrupt_at:
            raise KeyboardInterrupt
        fits = size <= largest
        return Probe(size=size, fits=fits, status="optimal" if fits else "infeasible", budget=10**8,
                     parameter_bytes=1000, store_all_peak=1000 * size, store_all_time=10.0,
                     makespan=10.0 if fits else None, overhead=1.0 if fits else None,
                     peak_memory=1000 * size if fits else None, bound=1.2, nodes=4, solve_time_s=0.0)

    monkeypatch.setattr(max_batch, "probe_size", fake)


def test_a_batch_search_records_slots_time_limit_and_the_image_size(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    fake_probes(monkeypatch, 40, seen)
    res = run_cli("max-batch", "resnet18", "--memory", "1GB", "--image-size", "48x64", "--width", "8",
                  "--slots", "300", "--time-limit", "7", "--tolerance", "0", "--limit", "100", "--json")
    assert res.code == 0, res.err
    answer = json.loads(res.out)
    assert answer["largest"] == 40 and answer["slots"] == 300 and answer["time_limit"] == 7
    sizes = answer["sizes"]
    assert "batch" not in sizes and sizes["width"] == 8 and list(sizes["image_size"]) == [48, 64]
    built = {k: str(v) if k == "device" else v for k, v in seen[0].items() if k != "batch"}
    assert built == {k: tuple(v) if isinstance(v, list) else v for k, v in sizes.items()}  # what the probes had


def test_an_image_size_search_records_the_batch_and_default_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    fake_probes(monkeypatch, 96, seen)
    res = run_cli("max-batch", "resnet18", "--vary", "image-size", "--batch", "3", "--memory", "1GB",
                  "--tolerance", "0", "--limit", "256", "--json")
    assert res.code == 0, res.err
    answer = json.loads(res.out)
    assert answer["largest"] == 96 and answer["slots"] == 500 and answer["time_limit"] is None
    assert answer["sizes"]["batch"] == 3 and "image_size" not in answer["sizes"]


def test_an_interrupted_search_records_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    fake_probes(monkeypatch, 40, seen, interrupt_at=64)
    res = run_cli("max-batch", "resnet18", "--memory", "1GB", "--image-size", "32", "--slots", "0",
                  "--tolerance", "0", "--limit", "100", "--json")
    assert res.code == 130
    answer = json.loads(res.out)
    assert answer["status"] == "interrupted" and answer["slots"] == 0 and answer["sizes"]["image_size"] == [32, 32]


def test_fixed_sizes_names_objects_by_their_text() -> None:
    class Device:
        def __str__(self) -> str:
            return "cuda:1"

    assert fixed_sizes({"batch": 4, "image_size": (8, 8), "device": Device()}, "image-size") == {
        "batch": 4, "device": "cuda:1"}

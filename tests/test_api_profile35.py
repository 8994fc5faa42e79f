"""`memsched.profile` checks its arguments as ``memsched profile`` does, before anything is profiled:
`out` is not a source file the factory reads (it would be overwritten with the chain JSON), a
``seed=`` is an int in 0..2^32-1, and `timing` with a counted ``cost=`` (which times nothing) is
refused. The profilers are replaced by stand-ins that record their call, so that a check firing
too late fails the test instead of profiling (and writing) for real."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import memsched  # noqa: E402

FACTORY = "import torch.nn as nn\n\n\ndef build(batch=2, width=8, seed=0):\n" \
          "    return nn.Sequential(nn.Linear(width, width), nn.ReLU())\n"
#: a tiny zoo network: the sizes the tests profile at (if a check let them through)
LSTM = {"batch": 2, "seq_len": 2, "width": 8, "repeats": 1}


class Profiled(Exception):
    """Raised by the stand-in profilers: the call got past the argument checks."""


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Replace what `profile` builds and profiles with recorders that raise `Profiled`; the list of
    (what, keyword arguments) calls they saw."""
    from memsched.models import zoo
    from memsched.models.chain import profiler

    seen: list[tuple[str, dict[str, Any]]] = []

    def stand_in(what: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            seen.append((what, kwargs))
            raise Profiled(what)
        return record

    monkeypatch.setattr(profiler, "profile_model", stand_in("profile_model"))
    monkeypatch.setattr(profiler, "profile_chain", stand_in("profile_chain"))
    monkeypatch.setattr(zoo, "build_model", stand_in("build_model"))
    return seen


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("problem", ["chain", "graph"])
@pytest.mark.parametrize("out", ["net.py", "./net.py", Path("net.py")])
def test_out_is_the_factory_file_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[Any],
                                         problem: str, out: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(FACTORY)
    before = _files(tmp_path)
    with pytest.raises(memsched.InputError) as err:
        memsched.profile("net.py:build", repeats=1, out=out, problem=problem)
    assert err.value.field == "out"
    assert "destroy the input" in str(err.value)
    assert calls == []
    assert _files(tmp_path) == before


@pytest.mark.parametrize("out", [os.path.join("pkg", "__init__.py"), os.path.join("pkg", "mod.py")])
def test_out_is_a_module_factory_source_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[Any],
                                                out: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(FACTORY)
    before = _files(tmp_path)
    with pytest.raises(memsched.InputError) as err:
        memsched.profile("pkg.mod:build", repeats=1, out=out)
    assert err.value.field == "out"
    assert calls == []
    assert _files(tmp_path) == before


def test_out_beside_the_factory_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[Any]) -> None:
    """Another file name is no input: the call reaches the profiler (the stand-in)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(FACTORY)
    with pytest.raises(Profiled):
        memsched.profile("net.py:build", repeats=1, out="chain.json")
    assert [what for what, _ in calls] == ["profile_model"]
    assert (tmp_path / "net.py").read_text() == FACTORY


@pytest.mark.parametrize("seed", [-1, 2**32, 2**40, 1.0, True])
@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_seed_out_of_range_refused(calls: list[Any], seed: Any, problem: str) -> None:
    with pytest.raises(memsched.InputError) as err:
        memsched.profile("lstm", seed=seed, problem=problem, **LSTM)
    assert err.value.field == "seed"
    assert "0..4294967295" in str(err.value)
    assert calls == []


@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_seed_in_range_goes_on(calls: list[Any], seed: int) -> None:
    with pytest.raises(Profiled):
        memsched.profile("lstm", seed=seed, **LSTM)
    assert calls[0][1]["seed"] == seed


@pytest.mark.parametrize("cost", ["flops", "roofline:a100", "FLOPS"])
@pytest.mark.parametrize("timing", ["isolated", "in_step"])
def test_timing_with_counted_cost_refused(calls: list[Any], cost: str, timing: str) -> None:
    with pytest.raises(memsched.InputError) as err:
        memsched.profile("lstm", cost=cost, timing=timing, **LSTM)
    assert err.value.field == "timing"
    assert "would be ignored" in str(err.value)
    assert calls == []


@pytest.mark.parametrize("cost, timing", [("flops", None), ("measured", "isolated"), (None, "in_step")])
def test_timing_or_counted_cost_alone_goes_on(calls: list[Any], cost: str | None, timing: str | None) -> None:
    sizes = dict(LSTM, **({} if cost is None else {"cost": cost}))
    if cost == "flops":
        del sizes["repeats"]  # nothing is timed: a repeats given is refused too (test_api_profile_repeats36)
    with pytest.raises(Profiled):
        memsched.profile("lstm", timing=timing, **sizes)
    (what, kwargs), = calls
    assert what == "profile_model" and kwargs["timing"] == timing and kwargs.get("cost") == cost

"""The sweep's instance store (hunt 25): a profiled network of your own (``model = "FILE.py:FUNCTION"``
or ``"package.module:FUNCTION"``) is keyed by its source files' contents, so an edited factory is
profiled again instead of being solved and executed against the old profile, and an unchanged one
still reuses its stored profile; an entry stored before (no source hash in its key) is profiled
again by a run, and ``--verify`` refuses it until then; a hand-edited ``index.json`` entry without
a label, problem or source is built again instead of failing with a KeyError."""
from __future__ import annotations

import csv
import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from memsched.experiments.sweep import InstanceStore, load_config, run_sweep
from memsched.experiments.sweep.config import InstanceSpec
from memsched.experiments.sweep.verify import verify_sweep
from memsched.solvers.errors import InputError

pytest.importorskip("torch")

NET = """\
import torch
from torch import nn
H = {width}
def build(batch=2):
    torch.manual_seed(0)
    blocks = [nn.Linear(4, H), nn.Sequential(nn.ReLU(), nn.Linear(H, H)), nn.Sequential(nn.ReLU(), nn.Linear(H, 2))]
    return nn.Sequential(*blocks), torch.randn(batch, 4)
"""

SWEEP = """\
name = "mine"
[[instances]]
model = "mynet.py:build"
batch = 2
repeats = 1
warmup = 0
budgets = ["100%"]
[[solvers]]
name = "store-all"
[measure]
threads = 1
"""


def _write_net(folder: Path, width: int) -> None:
    (folder / "mynet.py").write_text(NET.format(width=width))


def _sweep(tmp_path: Path, **kw: Any) -> list[dict[str, str]]:
    """Run the sweep (in this process) and return its table's rows."""
    run_sweep(tmp_path / "sw.toml", output=tmp_path / "o", workers=1, progress=False, isolate=False, **kw)
    with open(tmp_path / "o" / "mine.csv", newline="") as f:
        return list(csv.DictReader(f))


def _index(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "o" / "instances" / "index.json").read_text())


@pytest.fixture
def factory_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``mynet.py`` (width 4) and its sweep file, the current folder (the factory's
    FILE is found from it, as the profiler imports it)."""
    _write_net(tmp_path, 4)
    (tmp_path / "sw.toml").write_text(SWEEP)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_edited_factory_file_is_profiled_again(factory_sweep: Path) -> None:
    before = _sweep(factory_sweep)
    _write_net(factory_sweep, 512)  # same stages, same input bytes, other activations
    after = _sweep(factory_sweep, fresh=True)
    assert before[0]["instance_hash"] != after[0]["instance_hash"]
    assert int(after[0]["reference_peak"]) > int(before[0]["reference_peak"])
    assert len(_index(factory_sweep)) == 2


def test_unchanged_factory_file_reuses_the_stored_profile(factory_sweep: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    before = _sweep(factory_sweep)
    import memsched.models.chain.profiler as profiler

    def no_profiling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("profiled again")

    monkeypatch.setattr(profiler, "profile_model", no_profiling)
    after = _sweep(factory_sweep, fresh=True)
    assert before[0]["instance_hash"] == after[0]["instance_hash"]
    assert len(_index(factory_sweep)) == 1


def _legacy_id(spec: InstanceSpec) -> str:
    """The store key before source hashes counted (what stores already written hold)."""
    ident = {"kind": spec.kind, "params": spec.params, "problem": spec.problem}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _as_stored_before(tmp_path: Path) -> None:
    """Rewrite the index as a sweep of an older memsched wrote it: keyed without the source hash."""
    spec = load_config(tmp_path / "sw.toml").instances[0]
    (entry,) = _index(tmp_path).values()
    (tmp_path / "o" / "instances" / "index.json").write_text(json.dumps({_legacy_id(spec): entry}))


def test_a_factory_stored_before_source_hashes_is_refused_by_verify_then_profiled_again(
        factory_sweep: Path) -> None:
    before = _sweep(factory_sweep)
    _as_stored_before(factory_sweep)
    with pytest.raises(InputError, match=r"is not stored .*run the sweep first"):
        verify_sweep(factory_sweep / "sw.toml", output=factory_sweep / "o", progress=False)
    after = _sweep(factory_sweep)  # resume: the instance is profiled again, its cell run again
    assert after[0]["instance_hash"] != before[0]["instance_hash"] and len(after) == 1
    assert len(_index(factory_sweep)) == 2
    checks = verify_sweep(factory_sweep / "sw.toml", output=factory_sweep / "o", progress=False)
    assert [c.verdict for c in checks] == ["same"]


def test_an_edited_package_module_is_another_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "lib" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "nets.py").write_text("H = 4\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    spec = InstanceSpec(0, "model", {"model": "mypkg.nets:build", "batch": 2})
    store = InstanceStore(tmp_path / "instances")
    store.put(spec, b'{"format": "memsched.chain/1"}\n', label="nets.build", problem="chain", source="p", built=True)
    assert InstanceStore(tmp_path / "instances").built(spec) is not None  # unchanged: reused
    (pkg / "nets.py").write_text("H = 512\n")
    assert InstanceStore(tmp_path / "instances").built(spec) is None


def test_a_zoo_network_keeps_its_key(tmp_path: Path) -> None:
    spec = InstanceSpec(0, "model", {"model": "lstm", "batch": 1, "seq_len": 3, "width": 4})
    InstanceStore(tmp_path / "instances").put(spec, b"{}\n", label="lstm", problem="chain", source="p", built=True)
    assert list(json.loads((tmp_path / "instances" / "index.json").read_text())) == [_legacy_id(spec)]


GENERATED = InstanceSpec(0, "generate", {"generate": "random_chain", "length": 5})


@pytest.mark.parametrize("field", ["label", "problem", "source"])
@pytest.mark.parametrize("value", [None, "", 3, ["x"]])
def test_an_index_entry_without_a_label_problem_or_source_is_built_again(tmp_path: Path, field: str,
                                                                         value: Any) -> None:
    InstanceStore(tmp_path / "instances").put(GENERATED, b"{}\n", label="g", problem="chain", source="s",
                                              built=True)
    index = tmp_path / "instances" / "index.json"
    data = json.loads(index.read_text())
    for entry in data.values():
        if value is None:
            del entry[field]
        else:
            entry[field] = value
    index.write_text(json.dumps(data))
    assert InstanceStore(tmp_path / "instances").built(GENERATED) is None


def test_a_sweep_with_an_index_entry_missing_its_label_builds_it_again(tmp_path: Path) -> None:
    (tmp_path / "sw.toml").write_text(textwrap.dedent("""\
        name = "mine"
        [[instances]]
        generate = "chain"
        L = 4
        budgets = ["100%"]
        [[solvers]]
        name = "store-all"
    """))
    before = _sweep(tmp_path)
    index = tmp_path / "o" / "instances" / "index.json"
    data = json.loads(index.read_text())
    for entry in data.values():
        del entry["label"]
    index.write_text(json.dumps(data))
    after = _sweep(tmp_path, fresh=True)
    assert after[0]["status"] == before[0]["status"] and after[0]["instance_hash"] == before[0]["instance_hash"]
    assert all(isinstance(e["label"], str) and e["label"] for e in _index(tmp_path).values())


def test_verify_finds_a_network_profiled_with_two_threads(factory_sweep: Path) -> None:
    """`--verify` looked the profile up under one torch thread: a sweep with ``[measure] threads = 2``
    was always "not stored ... run the sweep first", even right after its run."""
    (factory_sweep / "sw.toml").write_text(SWEEP.replace("threads = 1", "threads = 2"))
    _sweep(factory_sweep)
    checks = verify_sweep(factory_sweep / "sw.toml", output=factory_sweep / "o", progress=False)
    assert [c.verdict for c in checks] == ["same"]

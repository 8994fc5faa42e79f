"""A factory's own default sizes fix a profile's network as the sizes given on the command line do.

The hunter's repro: ``def build(batch=4, width=32)`` profiled without ``--width`` wrote a meta
without the width, so ``memsched run FILE --width 512`` built the network at width 512 and planned
it with the width-32 costs (exit 0, measured/predicted memory x155). A profile and a graph export
now record the factory's defaults of the sizes it takes (`models.network.factory_defaults`), so the
run refuses the contradicting option; a chain file profiled before (no width recorded) is refused by
its stages' output bytes (`models.run._check_output_bytes`) and still runs at the sizes it was
profiled at.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

torch.set_num_threads(1)

FACTORY = """
    import torch
    from torch import nn

    def build(batch=4, width=32):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(16, width), nn.Sequential(nn.ReLU(), nn.Linear(width, width)),
                            nn.Linear(width, 8))
        return net, torch.randn(batch, 16)

    def square(batch=2, image_size=4, width=3, dropout=None, depth=0.5):
        # image_size used as an int: a default passed back as (h, w) would break it
        torch.manual_seed(0)
        net = nn.Sequential(nn.Flatten(), nn.Linear(image_size * image_size, width), nn.Linear(width, 2))
        return net, torch.randn(batch, image_size, image_size)
"""
CPU = ["--device", "cpu", "--time-repeats", "1", "--no-independent"]


@pytest.fixture
def factory(tmp_path: Path) -> Path:
    path = tmp_path / "hid.py"
    path.write_text(textwrap.dedent(FACTORY))
    return path


def _one_line_error(res: Any, *words: str) -> None:
    """Exit 2 with one error line (no traceback) holding each of `words`."""
    assert res.code == 2, (res.code, res.out, res.err)
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err, res.err
    for word in words:
        assert word in res.err, (word, res.err)


def _profile(cli: Any, spec: str, out: Path, *extra: str) -> dict[str, Any]:
    """Profile `spec` into `out` (one repeat, CPU); its meta."""
    res = cli("profile", spec, "--repeats", "1", "--device", "cpu", "-o", out, *extra)
    assert res.code == 0, (res.code, res.out, res.err)
    return json.loads(out.read_text())["meta"]


def test_profile_records_the_factorys_default_width_and_run_refuses_another(cli, factory, tmp_path):
    spec = f"{factory}:build"
    path = tmp_path / "hid.json"
    meta = _profile(cli, spec, path)
    res = cli("run", path, "--width", "512", "--budget", "100%", *CPU)
    _one_line_error(res, str(path), "--width", "width 32, not 512")
    assert meta["width"] == 32 and meta["batch"] == 4 and meta["model"] == spec
    res = cli("run", path, "--budget", "100%", "--json", *CPU)  # the recorded sizes: runs
    assert res.code == 0, (res.code, res.out, res.err)
    assert res.json()["grad_check"] is True


def _profiled_before_the_fix(cli, spec: str, path):
    """`spec` profiled to `path` as before the fix: its meta without the factory's default width."""
    _profile(cli, spec, path)
    data = json.loads(path.read_text())
    data["meta"].pop("width", None)
    path.write_text(json.dumps(data))
    return path


def test_chain_profiled_before_the_fix_is_refused_by_its_output_bytes(cli, factory, tmp_path):
    """A chain whose meta records no width (as every profile before the fix): --width 512 builds a
    network of the same input and stage count; its stages' out_size tell it, naming the file and field.
    At the profiled width (given or left to the factory) it still runs."""
    spec = f"{factory}:build"
    path = _profiled_before_the_fix(cli, spec, tmp_path / "old.json")
    res = cli("run", path, "--width", "512", "--budget", "100%", *CPU)
    _one_line_error(res, str(path), "stages[0].out_size", "512 bytes", "8192 bytes")
    for extra in ([], ["--width", "32"]):
        res = cli("run", path, *extra, "--budget", "100%", "--json", *CPU)
        assert res.code == 0, (extra, res.code, res.out, res.err)
        assert res.json()["grad_check"] is True


def test_chain_given_with_chain_to_its_factory_is_refused_by_its_output_bytes(cli, factory, tmp_path):
    """The same pre-fix file given with --chain to the factory named as MODEL at another width: refused
    by the first stage whose out_size differs, naming the file (before: run, planned with width-32 sizes)."""
    spec = f"{factory}:build"
    path = _profiled_before_the_fix(cli, spec, tmp_path / "old.json")
    res = cli("run", spec, "--chain", path, "--width", "64", "--budget", "100%", *CPU)
    _one_line_error(res, str(path), "stages[0].out_size", "512 bytes", "1024 bytes")


def test_graph_export_records_the_default_width_and_run_refuses_another(cli, factory, tmp_path):
    spec = f"{factory}:build"
    path = tmp_path / "g.json"
    res = cli("export-graph", spec, "-o", path)
    assert res.code == 0, (res.code, res.out, res.err)
    res = cli("run", path, "--problem", "graph", "--width", "512", "--budget", "100%", *CPU)
    _one_line_error(res, str(path), "--width", "width 32, not 512")
    meta = json.loads(path.read_text())["graph"]["meta"]
    assert meta["width"] == 32 and meta["model"] == spec


def test_only_defaults_a_run_can_pass_back_are_recorded(cli, factory, tmp_path):
    """An int image_size default (a given one reaches the factory as (h, w)), a None dropout and a
    fractional depth are left out of the meta; the sizes that are plain ints are kept, and the file
    runs without any sizing option (the factory still gets its own int image size)."""
    spec = f"{factory}:square"
    path = tmp_path / "sq.json"
    meta = _profile(cli, spec, path)
    assert meta["width"] == 3 and meta["batch"] == 2
    assert not {"image_size", "dropout", "depth"} & set(meta), meta
    res = cli("run", path, "--budget", "100%", *CPU)
    assert res.code == 0, (res.code, res.out, res.err)

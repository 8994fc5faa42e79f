"""A pipeline solver entry of a sweep file that no instance can take is refused when the file is read.

Before, a ``[[solvers]]`` entry with ``devices = 0``, an unknown ``schedule``, ``micro_batches = 0``
or no ``devices`` at all (in its options or in ``[defaults]``) on pipeline instances was read, and
every cell got an ``unsupported`` row (exit 0). Now the pipeline solvers' own check of these values
(`pipeline.dp._defaults`, what ``memsched solve --option`` meets) refuses them before any cell runs:
exit 2, one line naming the file and the field, nothing written. A missing ``devices`` is refused only
for an entry whose every instance is a pipeline instance (``cpsat`` on chain and pipeline instances
keeps its chain cells)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import sweep_toml
from memsched.experiments.sweep import load_config
from memsched.solvers.errors import InputError

import memsched

VGG = memsched.data_path("pipeline/vgg16-b32.graph.txt")
PIPELINE = {"example": "cnn12", "problem": "pipeline", "label": "cnn12-pipeline"}
CHAIN = {"example": "cnn12"}
NO_DEVICES = "pipeline solvers need a number of devices >= 1"


def _file(tmp_path: Path, solvers: list[Any], instances: list[dict[str, Any]] | None = None,
          defaults: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "po.toml"
    path.write_text(sweep_toml("po", budgets=["100%"], instances=instances or [PIPELINE], solvers=solvers,
                               defaults=defaults))
    return path


@pytest.mark.parametrize("solvers, defaults, field, says", [
    ([{"name": "madpipe", "options": {"devices": 0}}], None, "solvers[0].options.devices", f"{NO_DEVICES}, got 0"),
    ([{"name": "cpsat"}], None, "solvers[0].options.devices", "missing: every instance cpsat runs on"),
    ([{"name": "madpipe", "options": {"devices": 2}}, "cpsat"], None, "solvers[1].options.devices", NO_DEVICES),
    ([{"name": "madpipe", "options": {"schedule": "bogus", "devices": 2}}], None, "solvers[0].options.schedule",
     "unknown schedule 'bogus' (one of 1f1b, gpipe)"),
    ([{"name": "madpipe", "options": {"schedule": "gpipe", "micro_batches": 0, "devices": 2}}], None,
     "solvers[0].options.micro_batches", "must be >= 1, got 0"),
    ([{"name": "cpsat", "options": {"schedule": "gpipe"}}], {"options": {"devices": 0}}, "defaults.options.devices",
     f"{NO_DEVICES}, got 0"),
    ([{"name": "pipedream", "options": {"devices": 2}}], {"options": {"schedule": "zigzag"}},
     "defaults.options.schedule", "unknown schedule 'zigzag'"),
])
def test_the_sweep_refuses_what_no_instance_takes(cli, tmp_path, solvers, defaults, field, says):
    cfg = _file(tmp_path, solvers, defaults=defaults)
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--workers", "1", "--no-progress")
    assert res.code == 2, (res.out, res.err)
    assert res.err.strip().count("\n") == 0 and f"{cfg}: {field}: " in res.err and says in res.err, res.err
    assert not (tmp_path / "out").exists()


def test_a_pipeline_file_without_devices_is_refused(tmp_path):
    """The instance's problem is read from its file (a PipeDream graph.txt) when the entry does not say it."""
    with pytest.raises(InputError, match=NO_DEVICES) as err:
        load_config(_file(tmp_path, ["madpipe"], instances=[{"file": str(VGG)}]))
    assert err.value.field == "solvers[0].options.devices"


@pytest.mark.parametrize("solvers, instances, defaults", [
    ([{"name": "cpsat", "options": {"schedule": "GPipe"}}], None, {"options": {"devices": 2}}),  # from [defaults]
    (["cpsat"], [CHAIN, PIPELINE], None),       # its chain cells run: left to the cells
    (["cpsat"], [CHAIN], None),                 # no pipeline instance at all
    ([{"name": "cpsat", "problems": ["chain"]}], [CHAIN, PIPELINE], None),
    ([{"name": "madpipe", "options": {"devices": 2, "micro_batches": 1, "schedule": "gpipe"}}], None, None),
    ([{"name": "madpipe", "options": {"devices": 2, "micro_batches": 2}}], None, None),
    (["madpipe"], [{"file": "no-such-file.graph.txt"}], None),  # its problem is not known before it is loaded
])
def test_what_some_instance_takes_is_read(tmp_path, solvers, instances, defaults):
    """Each file is read once the entry that makes it bad input (madpipe on 0 devices) is taken out."""
    bad = [*solvers, {"name": "madpipe", "label": "extra", "options": {"devices": 0}}]
    with pytest.raises(InputError, match=f"{NO_DEVICES}, got 0") as err:
        load_config(_file(tmp_path, bad, instances=instances, defaults=defaults))
    assert err.value.field == f"solvers[{len(solvers)}].options.devices"
    load_config(_file(tmp_path, solvers, instances=instances, defaults=defaults))


def test_a_mixed_sweep_keeps_the_chain_cells(cli, tmp_path):
    """cpsat without devices on a chain and a pipeline instance: its chain cell runs, its pipeline cell
    says why; madpipe without devices (it runs on the pipeline instance only) is refused."""
    import csv

    out = tmp_path / "out"
    res = cli("sweep", _file(tmp_path, ["cpsat", "madpipe"], instances=[CHAIN, PIPELINE]), "--output", out,
              "--workers", "1", "--no-progress")
    assert res.code == 2 and "solvers[1].options.devices: missing" in res.err and not out.exists(), res.err
    res = cli("sweep", _file(tmp_path, ["cpsat"], instances=[CHAIN, PIPELINE]), "--output", out,
              "--workers", "1", "--no-progress")
    assert res.code == 0, (res.out, res.err)
    rows = list(csv.DictReader((out / "po.csv").open()))
    assert sorted(r["status"] for r in rows) == ["optimal", "unsupported"], rows

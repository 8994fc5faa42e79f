"""A file `memsched profile` wrote for a float64 factory runs again (session 36 hunt).

`memsched profile FILE.py:FUNCTION` records the network's own dtype as ``meta.dtype`` (its parameters',
"float64" for a ``.double()`` network); `memsched run FILE.json`, `run SPEC --chain FILE.json` and
`memsched.run(SPEC, instance=FILE)` refused it (``meta.dtype: unknown dtype 'float64'``), as the run
checked a factory's recorded dtype by the zoo's dtypes. Now a factory's recorded dtype is any torch
knows (float64 goes back to a factory that takes ``dtype``, else the factory builds its own), and a
rebuilt network of another dtype is refused naming ``meta.dtype``; a zoo network's recorded dtype
keeps the zoo's check, and `memsched.run`'s message names the file as the command line's does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

import memsched

#: tiny networks: float64 by the factory's own choice (no dtype argument, and a dtype argument
#: defaulting to float64), integer labels and cross-entropy
FACTORIES = '''
import torch
from torch import nn
import torch.nn.functional as F


def f64(batch=4, width=8):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 3)).double()
    return net, torch.randn(batch, width, dtype=torch.float64), torch.randint(0, 3, (batch,)), F.cross_entropy


def takes_dtype(batch=4, dtype=torch.float64):
    net = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2)).to(dtype)
    return net, torch.randn(batch, 8, dtype=dtype)
'''
PROFILE = ("--repeats", "1", "--threads", "1")
RUN = ("--budget", "100%", "--threads", "1", "--time-repeats", "1", "--no-independent", "--json")
#: a tiny zoo network
LSTM = ("lstm", "--batch", "2", "--seq-len", "4", "--width", "16")


def _profiled(tmp_path: Path, function: str) -> tuple[str, Path]:
    """(the factory spec of `function` in a file under `tmp_path`, the chain file `memsched profile` wrote)."""
    source = tmp_path / "f64net.py"
    source.write_text(FACTORIES)
    spec, out = f"{source}:{function}", tmp_path / f"{function}.json"
    res = run_cli("profile", spec, *PROFILE, "-o", out)
    assert res.code == 0, res.err
    return spec, out


def _edited(path: Path, out: Path, **meta: object) -> Path:
    """The chain file `path` with `meta` set in its meta, written to `out`."""
    data = json.loads(path.read_text())
    data["meta"].update(meta)
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("function", ["f64", "takes_dtype"])
def test_a_float64_factory_file_runs_again_on_the_command_line(tmp_path: Path, function: str) -> None:
    spec, path = _profiled(tmp_path, function)
    assert json.loads(path.read_text())["meta"]["dtype"] == "float64"
    for argv in ((path,), (spec, "--chain", path)):
        res = run_cli("run", *argv, *RUN)
        assert res.code == 0, res.err
        assert res.json()["grad_check"] is True, res.out


def test_a_float64_factory_file_runs_again_in_python(tmp_path: Path) -> None:
    spec, path = _profiled(tmp_path, "f64")
    out = memsched.run(spec, "100%", instance=str(path), time_repeats=1)
    assert out["grad_check"] is True and out["status"] == "optimal"


def test_a_factory_building_another_dtype_than_its_file_records_is_refused(tmp_path: Path) -> None:
    """The factory builds float64; the file says float32: another network than the one profiled (its
    bytes alone do not tell, the file being the float64 profile's)."""
    spec, path = _profiled(tmp_path, "f64")
    edited = _edited(path, tmp_path / "f32.json", dtype="float32")
    res = run_cli("run", edited, *RUN)
    assert res.code == 2, res.out
    assert f"{edited}: meta.dtype: the instance was profiled at dtype float32" in res.err, res.err
    with pytest.raises(memsched.InputError) as err:
        memsched.run(spec, "100%", instance=str(edited), time_repeats=1)
    assert err.value.path == str(edited) and err.value.field == "meta.dtype"


def test_float64_recorded_for_a_float32_factory_without_dtype_names_meta_dtype(tmp_path: Path) -> None:
    """A factory that takes no ``dtype`` builds its own: a float64 record it does not build is refused
    naming ``meta.dtype`` (not cast to float64, nor blamed on the input's bytes)."""
    source = tmp_path / "f32net.py"
    source.write_text(FACTORIES.replace(").double()", ")").replace(", dtype=torch.float64)", ")"))
    path = tmp_path / "f32.json"
    res = run_cli("profile", f"{source}:f64", *PROFILE, "-o", path)
    assert res.code == 0, res.err
    assert json.loads(path.read_text())["meta"]["dtype"] == "float32"
    edited = _edited(path, tmp_path / "f64.json", dtype="float64")
    res = run_cli("run", edited, *RUN)
    assert res.code == 2, res.out
    assert f"{edited}: meta.dtype: the instance was profiled at dtype float64 but " in res.err, res.err
    assert "builds a float32 network" in res.err, res.err


def test_a_factory_file_with_a_dtype_torch_does_not_know_is_refused(tmp_path: Path) -> None:
    _, path = _profiled(tmp_path, "f64")
    edited = _edited(path, tmp_path / "bad.json", dtype="float99")
    res = run_cli("run", edited, *RUN)
    assert res.code == 2, res.out
    assert f"{edited}: meta.dtype: unknown dtype 'float99'" in res.err, res.err


def test_a_zoo_file_recording_float64_is_still_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "lstm.json"
    res = run_cli("profile", *LSTM, *PROFILE, "-o", path)
    assert res.code == 0, res.err
    edited = _edited(path, tmp_path / "lstm64.json", dtype="float64")
    res = run_cli("run", edited, *RUN)
    assert res.code == 2, res.out
    assert f"{edited}: meta.dtype: unknown dtype 'float64' (one of float32, bfloat16, float16)" in res.err, res.err
    with pytest.raises(memsched.InputError) as err:
        memsched.run("lstm", "100%", instance=str(edited), time_repeats=1)
    assert err.value.path == str(edited) and err.value.field == "meta.dtype"
    assert "unknown dtype 'float64'" in err.value.message

"""Output paths checked and written (hunt 30): a link into a missing or read-only folder is refused
before any work, naming the option (it was found only when writing, after the solve); a pipe reached
through a ``/dev/fd`` link (``-o >(cmd)``, ``/dev/stdout`` on a pipe) is written directly; a legal file
name of 242-255 bytes is written (its temporary file's name stayed over 255 bytes); the parent
packages' ``__init__.py`` of a ``package.module:FUNCTION`` factory are guarded like its own files; a
folder where a sweep stores an instance copy is a one-line error (exit 2), not an internal error."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from memsched.experiments.commands import _checks
from memsched.experiments.commands._checks import check_output_file, check_outputs
from memsched.experiments.commands.profile import model_inputs
from memsched.experiments.sweep import InstanceStore
from memsched.experiments.sweep.config import InstanceSpec
from memsched.experiments.sweep.instance_store import model_sources
from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_json_atomic, write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ROOT / "examples" / "cnn12.json"
NETWORK = ROOT / "models" / "examples" / "my_network.py"


def _solve(*extra: object) -> tuple[int, str]:
    """`memsched solve` of the 12-stage example chain with rotor (well under a second)."""
    res = run_cli("solve", CHAIN, "--budget", "60%", "--solver", "rotor", *extra)
    return res.code, res.err


# --------------------------------------------------------------------------- 1: links checked up front
def test_link_into_missing_folder_is_refused_before_the_solve(tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "nowhere" / "x.json")
    code, err = _solve("-o", link)
    assert code == 2
    assert "--output" in err and "does not exist" in err and "nowhere" in err
    assert "cannot write" not in err  # refused by the check, not by the write after the solve


def test_plot_link_into_missing_folder_writes_no_other_output(tmp_path: Path) -> None:
    """``-o good.json --plot <dangling link>``: refused before anything is written (no half-done run)."""
    link = tmp_path / "fig.png"
    link.symlink_to(tmp_path / "nowhere" / "x.png")
    good = tmp_path / "good.json"
    code, err = _solve("-o", good, "--plot", link)
    assert code == 2 and "--plot" in err and "does not exist" in err
    assert not good.exists()


def test_link_into_read_only_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The link's target folder is checked for writing, not the link's own (root ignores modes:
    the read-only folder is simulated with `os.access`)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(ro / "x.json")
    real_access = os.access
    monkeypatch.setattr(_checks.os, "access",
                        lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    with pytest.raises(InputError, match="is not writable") as info:
        check_output_file(str(link), "--output")
    assert "--output" in str(info.value) and str(ro) in str(info.value)


def test_link_to_existing_file_in_writable_folder_still_passes(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}\n")
    link = tmp_path / "out.json"
    link.symlink_to("real.json")  # relative to the link's folder
    check_output_file(str(link), "--output")
    code, _ = _solve("-o", link)
    assert code == 0 and link.is_symlink() and '"memsched.schedule/1"' in (tmp_path / "real.json").read_text()


# --------------------------------------------------------------------------- 2: pipes behind /dev/fd links
def _pipe_path() -> tuple[int, int, str]:
    if not os.path.isdir("/dev/fd"):
        pytest.skip("no /dev/fd")
    r, w = os.pipe()
    return r, w, f"/dev/fd/{w}"


def _drain(r: int, w: int) -> bytes:
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    return b"".join(chunks)


def test_write_atomic_writes_a_pipe_behind_a_dev_fd_link() -> None:
    r, w, path = _pipe_path()
    try:
        check_output_file(path, "--output")
        check_outputs([("--output", path)])
        write_json_atomic(path, {"a": 1})
    finally:
        data = _drain(r, w)
    assert data == b'{\n "a": 1\n}\n'


def test_solve_output_to_a_pipe_like_process_substitution() -> None:
    """``memsched solve ... -o >(wc -c)`` in effect: the schedule goes down the pipe."""
    r, w, path = _pipe_path()
    try:
        code, err = _solve("-o", path)
    finally:
        data = _drain(r, w)
    assert code == 0, err
    assert b'"memsched.schedule/1"' in data


# --------------------------------------------------------------------------- 3: long names
def test_legal_long_name_is_written(tmp_path: Path) -> None:
    name = "s" * 245 + ".json"  # 250 bytes: legal, but ".<name>.XXXXXXXX.tmp" is 264
    code, err = _solve("-o", tmp_path / name)
    assert code == 0, err
    assert '"memsched.schedule/1"' in (tmp_path / name).read_text()
    assert os.listdir(tmp_path) == [name]  # no temporary file left


def test_long_multibyte_name_and_temporary_prefix(tmp_path: Path) -> None:
    name = "\u00e9" * 125 + ".json"  # 255 UTF-8 bytes
    assert len(os.fsencode(name)) == 255
    write_text_atomic(tmp_path / name, "x\n")
    assert (tmp_path / name).read_text() == "x\n" and os.listdir(tmp_path) == [name]
    from memsched.solvers.jsonio import TMP_NAME_BYTES, tmp_prefix

    assert len(os.fsencode(tmp_prefix(name))) <= TMP_NAME_BYTES + 2
    assert tmp_prefix("a.json") == ".a.json."  # short names keep the usual ".<name>.XXXXXXXX.tmp"


# --------------------------------------------------------------------------- 4: parent packages guarded
def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``mypkg/sub/net.py`` (the example network) with code in both packages' ``__init__.py``."""
    sub = tmp_path / "mypkg" / "sub"
    sub.mkdir(parents=True)
    shutil.copy(NETWORK, sub / "net.py")
    (tmp_path / "mypkg" / "__init__.py").write_text("PACKAGE_CODE = 1\n")
    (sub / "__init__.py").write_text("SUB_CODE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return sub


def test_model_inputs_lists_parent_package_inits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = _package(tmp_path, monkeypatch)
    found = {Path(p).resolve() for _, p in model_inputs("mypkg.sub.net:build")}
    assert {sub / "net.py", sub / "__init__.py", tmp_path / "mypkg" / "__init__.py"} <= found


@pytest.mark.parametrize("command", ["export-graph", "profile"])
def test_output_onto_parent_package_init_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    command: str) -> None:
    sub = _package(tmp_path, monkeypatch)
    for init in (tmp_path / "mypkg" / "__init__.py", sub / "__init__.py"):
        before = init.read_text()
        res = run_cli(command, "mypkg.sub.net:build", "--batch", "2", "--image-size", "16", "--width", "4",
                      "--depth", "2", "-o", os.path.relpath(init))
        assert res.code == 2 and "--output" in res.err and "destroy the input" in res.err, res.err
        assert init.read_text() == before


def test_sweep_source_hash_counts_only_the_module_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's store key keeps hashing the module's own files (stores written before stay valid)."""
    sub = _package(tmp_path, monkeypatch)
    before = model_sources("mypkg.sub.net:build")
    (tmp_path / "mypkg" / "__init__.py").write_text("PACKAGE_CODE = 2\n")
    assert model_sources("mypkg.sub.net:build") == before
    (sub / "net.py").write_text((sub / "net.py").read_text() + "\n# edited\n")
    assert model_sources("mypkg.sub.net:build") != before


# --------------------------------------------------------------------------- 5: a folder in the store
def test_store_put_onto_a_folder_is_an_input_error(tmp_path: Path) -> None:
    store = InstanceStore(tmp_path / "instances")
    spec = InstanceSpec(0, "example", {"example": "tiny"})
    stored = store.put(spec, b"{}\n", label="tiny", problem="chain", source="example tiny")
    assert stored is not None
    stored.path.unlink()
    stored.path.mkdir()
    with pytest.raises(InputError, match="is a folder, expected a file") as info:
        store.put(spec, b"{}\n", label="tiny", problem="chain", source="example tiny")
    assert str(stored.path) in str(info.value)


SWEEP = """\
name = "g"
budgets = ["90%"]
[[instances]]
example = "tiny"
[[solvers]]
name = "rotor"
"""


def test_sweep_with_a_folder_at_an_instance_copy_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text(SWEEP)
    first = run_cli("sweep", cfg, "--workers", "1", "--no-progress", "--output", tmp_path / "o1")
    assert first.code == 0, first.err
    names = [p.name for p in (tmp_path / "o1" / "instances").glob("tiny-*.json")]
    assert len(names) == 1
    (tmp_path / "o2" / "instances" / names[0]).mkdir(parents=True)
    res = run_cli("sweep", cfg, "--workers", "1", "--no-progress", "--output", tmp_path / "o2")
    assert res.code == 2, res.err
    assert "is a folder, expected a file (a stored instance)" in res.err and names[0] in res.err
    assert "internal error" not in res.err

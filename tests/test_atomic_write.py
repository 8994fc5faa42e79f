"""`solvers.jsonio.write_atomic`, the one way every command writes a file: a reader never sees
half a file, and writing never replaces what is not the output's own regular file (a link, a
device, a user's file that happens to be named like a temporary one)."""

from __future__ import annotations

import os
import stat

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_atomic, write_json_atomic, write_text_atomic


def test_writes_and_replaces_with_the_old_permissions(tmp_path):
    target = tmp_path / "out.json"
    write_json_atomic(target, {"a": 1})
    assert target.read_text() == '{\n "a": 1\n}\n'
    target.chmod(0o640)
    write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary left


def test_a_new_file_gets_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "x.txt", "x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "x.txt").stat().st_mode) == 0o644  # not mkstemp's 0600


def test_a_link_stays_a_link_and_its_file_is_written(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real.name)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_device_is_written_not_replaced():
    before = os.stat("/dev/null")
    write_text_atomic("/dev/null", "discarded")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_file_named_like_the_temporary_is_left_alone(tmp_path):
    (tmp_path / "out.json.tmp").write_text("mine")
    (tmp_path / "o2.json.tmp").mkdir()
    write_text_atomic(tmp_path / "out.json", "x")
    write_text_atomic(tmp_path / "o2.json", "y")
    assert (tmp_path / "out.json.tmp").read_text() == "mine" and (tmp_path / "o2.json.tmp").is_dir()
    assert (tmp_path / "out.json").read_text() == "x" and (tmp_path / "o2.json").read_text() == "y"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old")

    def half(tmp):
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(InputError, match="out.csv: cannot write \\(No space left on device\\)"):
        write_atomic(target, half)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    with pytest.raises(InputError, match="cannot write"):
        write_text_atomic(tmp_path / "missing" / "x.json", "x")

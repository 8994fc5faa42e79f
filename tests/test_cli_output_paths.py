"""Output paths of the commands (`_checks.check_outputs`): an output that is one of the command's
inputs (the instance, a schedule of `plot`, the FILE.py of a factory MODEL; also through a link or
a hard link) is refused before any work; ``-o -`` is an ordinary file checked as any other; an
empty ``-o``, ``--budget`` (simulate, plot) or ``--solver`` (solve) is refused; and ``solve``
without a schedule says that the output file it leaves alone was not written."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

TINY = EXAMPLES / "tiny.json"
MY_NETWORK = ROOT / "models" / "examples" / "my_network.py"


@pytest.fixture
def inst(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the tiny chain in a fresh working folder (the current folder)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "inst.json"
    shutil.copy(TINY, path)
    return path


# --------------------------------------------------------------------------- output onto an input
def test_solve_refuses_output_onto_its_instance(cli, inst):
    before = inst.read_bytes()
    res = cli("solve", "inst.json", "--budget", "25", "-o", "./inst.json")
    assert res.code == 2 and res.out == ""
    assert "--output: is the input FILE" in res.err and len(res.err.strip().splitlines()) == 1
    assert inst.read_bytes() == before


def test_solve_refuses_output_or_plot_onto_a_link_of_its_instance(cli, inst, tmp_path):
    before = inst.read_bytes()
    (tmp_path / "link.png").symlink_to("inst.json")
    os.link(inst, tmp_path / "hard.json")
    res = cli("solve", "inst.json", "--budget", "25", "--plot", "link.png")
    assert res.code == 2 and "--plot: is the input FILE 'inst.json' under another name" in res.err
    res = cli("solve", "inst.json", "--budget", "25", "-o", "hard.json")
    assert res.code == 2 and "--output: is the input FILE 'inst.json' under another name" in res.err
    assert inst.read_bytes() == before


def test_solve_still_refuses_plot_onto_output_and_writes_a_new_file(cli, inst, tmp_path):
    res = cli("solve", "inst.json", "--budget", "25", "-o", "s.png", "--plot", "./s.png")
    assert res.code == 2 and "--plot: same file as --output" in res.err
    res = cli("solve", "inst.json", "--budget", "25", "-o", "s.json")
    assert res.code == 0 and (tmp_path / "s.json").is_file()


def test_plot_refuses_output_onto_a_schedule_or_the_instance(cli, inst, tmp_path):
    assert cli("solve", "inst.json", "--budget", "25", "-o", "sched.svg").code == 0  # a schedule JSON named .svg
    schedule = (tmp_path / "sched.svg").read_bytes()
    res = cli("plot", "inst.json", "sched.svg", "-o", "sched.svg")
    assert res.code == 2 and "sched.svg: --output: is the input SCHEDULE" in res.err
    assert (tmp_path / "sched.svg").read_bytes() == schedule
    (tmp_path / "inst.svg").symlink_to("inst.json")
    before = inst.read_bytes()
    res = cli("plot", "inst.json", "sched.svg", "-o", "inst.svg")
    assert res.code == 2 and "--output: is the input FILE 'inst.json' under another name" in res.err
    assert inst.read_bytes() == before


def test_profile_and_export_graph_refuse_output_onto_the_factory_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "mynet.py"
    shutil.copy(MY_NETWORK, source)
    before = source.read_bytes()
    for command in ("profile", "export-graph"):
        res = cli(command, "mynet.py:build", "--repeats", "1", "-o", "mynet.py")
        assert res.code == 2 and res.out == "", (command, res.err)
        assert "mynet.py: --output: is the input MODEL" in res.err
        assert source.read_bytes() == before


def test_profile_refuses_output_onto_the_module_of_a_factory(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    package = tmp_path / "netpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copy(MY_NETWORK, package / "mynet.py")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    before = (package / "mynet.py").read_bytes()
    res = cli("profile", "netpkg.mynet:build", "--repeats", "1", "-o", "netpkg/mynet.py")
    assert res.code == 2 and "--output: is the input MODEL" in res.err
    assert (package / "mynet.py").read_bytes() == before


def test_same_file_of_devices_and_links(tmp_path):
    from memsched.experiments.commands._checks import same_file

    a = tmp_path / "a.json"
    a.write_text("{}")
    os.link(a, tmp_path / "b.json")
    assert same_file(str(tmp_path / "b.json"), str(a))
    assert same_file(str(tmp_path / "new.json"), str(tmp_path / "." / "new.json"))  # neither exists yet
    assert not same_file(str(tmp_path / "c.json"), str(a))
    assert not same_file("/dev/null", "/dev/null")  # a device is written, never replaced


# --------------------------------------------------------------------------- "-o -"
def test_dash_output_is_an_ordinary_checked_path(cli, inst, tmp_path):
    (tmp_path / "-").mkdir()
    res = cli("solve", "inst.json", "--budget", "25", "-o", "-")
    assert res.code == 2 and res.out == "" and "-: --output: is a folder" in res.err
    (tmp_path / "-").rmdir()
    res = cli("solve", "inst.json", "--budget", "25", "-o", "-")
    assert res.code == 0 and "memsched.schedule" not in res.out  # the file, not stdout, has the schedule
    assert "memsched.schedule/1" in (tmp_path / "-").read_text()


# --------------------------------------------------------------------------- no schedule: output left alone
def test_solve_without_schedule_says_outputs_were_left_unchanged(cli, inst, tmp_path):
    assert cli("solve", "inst.json", "--budget", "25", "-o", "s.json").code == 0
    first = (tmp_path / "s.json").read_bytes()
    res = cli("solve", "inst.json", "--budget", "15", "-o", "s.json", "--plot", "s.png")
    assert res.code == 1
    assert "s.json (--output) left unchanged: no schedule was found" in res.err
    assert "s.png (--plot) left unchanged: no schedule was found" in res.err
    assert (tmp_path / "s.json").read_bytes() == first  # not deleted: the user's file
    assert not (tmp_path / "s.png").exists()
    res = cli("solve", "inst.json", "--budget", "15")
    assert res.code == 1 and "left unchanged" not in res.err


# --------------------------------------------------------------------------- empty strings
def test_empty_budget_is_refused_by_simulate_and_plot(cli, inst, tmp_path):
    assert cli("solve", "inst.json", "--budget", "25", "-o", "s.json").code == 0
    for argv in (("simulate", "inst.json", "s.json"), ("plot", "inst.json", "s.json", "-o", "f.png")):
        res = cli(*argv, "--budget", "")
        assert res.code == 2 and res.out == "" and "--budget:" in res.err, argv
    assert not (tmp_path / "f.png").exists()


@pytest.mark.parametrize("argv", [("solve", "inst.json", "--budget", "25"), ("plot", "inst.json", "inst.json"),
                                  ("profile", "resnet18"), ("export-graph", "resnet18")])
def test_empty_output_is_said_to_be_empty(cli, inst, argv):
    res = cli(*argv, "-o", "")
    assert res.code == 2 and res.err.strip().endswith("--output: is empty, expected a file name"), res.err
    assert "folder" not in res.err


def test_empty_solver_is_refused_by_solve(cli, inst):
    res = cli("solve", "inst.json", "--budget", "25", "--solver", "")
    assert res.code == 2 and res.out == "" and "--solver: is empty" in res.err

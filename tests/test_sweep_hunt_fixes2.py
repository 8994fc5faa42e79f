"""Fixes from a second bug hunt on sweeps: row keys that cover an entry's `problem` and host
link, budgets and solvers repeated under another spelling, option values no instance takes,
bad input that left an output folder behind, run-only options given with --list / --verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, sweep_toml
from memsched.experiments.sweep import build_tasks, load_config, run_sweep
from memsched.experiments.sweep.config import EXAMPLES as PACKAGE_EXAMPLES
from memsched.solvers.errors import InputError

import memsched

TINY = EXAMPLES / "tiny.json"
RANDOM10 = PACKAGE_EXAMPLES / "random10.json"  # inside the package: its source (and keys) do not depend on tmp_path


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def keys(tmp_path: Path, name: str = "sweep.toml", **kw) -> list[str]:
    return [t.key for t in build_tasks(load_config(write(tmp_path, sweep_toml("keys", **kw), name)))]


# ------------------------------------------------------------------ 1. keys cover the entry's problem and link
def test_keys_of_entries_without_overrides_are_the_keys_they_had(tmp_path):
    """Keys computed before the fix (hard-coded): committed tables are resumed and verified by key."""
    cfg = write(tmp_path, sweep_toml("keys", budgets=["50%"], solvers=["rotor"], instances=[
        {"example": "tiny"}, {"file": RANDOM10, "problem": "chain", "label": "r10"},
        {"generate": "chain", "L": 6, "seed": 1, "problem": "chain"}]))
    got = {t.loaded.label: t.key for t in build_tasks(load_config(cfg))}
    assert got == {"tiny": "8e6638aea7d437a7", "r10": "a193fa15a74b0760", "random-L6-s1": "7322e7996a9bdb05"}


def test_a_changed_bandwidth_gives_new_keys_and_is_not_resumed(tmp_path):
    def sweep(bandwidth: str):
        cfg = write(tmp_path, sweep_toml("bw", budgets=["50%", "70%"], solvers=["offload-prefix"], instances=[
            {"file": RANDOM10, "problem": "offload", "bandwidth": bandwidth}]))
        return run_sweep(cfg, output=tmp_path / "out", workers=1, progress=False, isolate=False)

    slow = sweep("100")
    fast = sweep("1e12")
    assert fast.resumed == 0 and fast.ran == 2
    assert {r["key"] for r in slow.rows}.isdisjoint(r["key"] for r in fast.rows)
    assert [r["objective"] for r in fast.rows] != [r["objective"] for r in slow.rows]
    assert sweep("1e12").resumed == 2  # the same bandwidth again: the same keys


def test_a_changed_problem_gives_new_keys(tmp_path):
    def grid(problem: str | None) -> list[str]:
        inst = {"file": RANDOM10, **({"problem": problem} if problem else {})}
        # devices: a pipeline solver needs them (the sweep file is refused without)
        return keys(tmp_path, budgets=["60%"], instances=[inst], solvers=[{"name": "cpsat", "options": {"devices": 2}}])

    own = grid(None)
    assert grid("chain") == own  # the file's own problem is no override
    assert set(grid("pipeline")).isdisjoint(own)


# ------------------------------------------------------------------ 2. repeated budgets and solvers
@pytest.mark.parametrize("budgets", [["50%", "50.0%"], ["1KiB", "1024B"], [2048, 2048.5]])
def test_a_budget_repeated_in_another_spelling_is_refused(tmp_path, budgets):
    cfg = write(tmp_path, sweep_toml("dup", budgets=budgets, instances=[{"file": TINY}], solvers=["rotor"]))
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == "budgets[1]" and "already in the list" in str(err.value)


def test_a_share_and_a_size_of_the_same_bytes_for_an_instance_are_refused(tmp_path):
    peak = memsched.reference_peak(memsched.load(TINY))
    cfg = write(tmp_path, sweep_toml("dup", budgets=["50%", peak // 2], instances=[{"file": TINY}],
                                     solvers=["rotor"]))
    with pytest.raises(InputError) as err:
        build_tasks(load_config(cfg))
    assert err.value.field == "budgets[1]" and "already in the list for instance tiny" in str(err.value)


@pytest.mark.parametrize("budgets", [["50%", "50.0%"], ["1KiB", 1024]])
def test_the_facade_refuses_a_budget_repeated_in_another_spelling(budgets):
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, budgets, "rotor")
    assert err.value.field == "budgets[1]" and "already in the list" in str(err.value)


def test_the_facade_refuses_a_repeated_solver():
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, ["50%"], ["rotor", "store-all", "rotor"])
    assert err.value.field == "solvers[2]" and "already in the list" in str(err.value)


# ------------------------------------------------------------------ 3. option values no instance takes
@pytest.mark.parametrize("solver, options, key", [("cpsat", {"parameters": "bogus_param:3"}, "parameters"),
                                                  ("periodic", {"segments": 0}, "segments")])
def test_an_option_value_no_instance_takes_is_refused_when_the_file_is_read(cli, tmp_path, solver, options, key):
    cfg = write(tmp_path, sweep_toml("opt", budgets=["50%"], instances=[{"file": TINY}],
                                     solvers=[{"name": solver, "options": options}]))
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == f"solvers[0].options.{key}"
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress", "--workers", "1")
    assert res.code == 2 and f"solvers[0].options.{key}" in res.err
    assert not (tmp_path / "out").exists()


def test_a_default_option_value_no_instance_takes_names_defaults(tmp_path):
    cfg = write(tmp_path, sweep_toml("opt", budgets=["50%"], instances=[{"file": TINY}], solvers=["periodic"],
                                     defaults={"options": {"segments": 0}}))
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == "defaults.options.segments"


def test_an_option_value_some_instances_take_is_left_to_the_cells(tmp_path):
    cfg = write(tmp_path, sweep_toml("opt", budgets=["100%"], instances=[{"file": TINY}],
                                     solvers=[{"name": "periodic", "options": {"segments": 500}}]))
    out = run_sweep(cfg, output=tmp_path / "out", workers=1, progress=False, isolate=False)
    assert [r["status"] for r in out.rows] == ["unsupported"]


def test_the_facade_refuses_an_option_value_no_instance_takes():
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, ["50%"], "periodic", segments=0)
    assert err.value.field == "segments"


# ------------------------------------------------------------------ 7. bad input leaves nothing behind
def bad_instance_sweep(tmp_path: Path, out: Path) -> Path:
    return write(tmp_path, sweep_toml("bad", budgets=["50%"], output=str(out), solvers=["rotor"],
                                      instances=[{"example": "tiny"}, {"file": str(tmp_path / "missing.json")}]))


def test_a_bad_instance_leaves_no_output_folder(cli, tmp_path):
    out = tmp_path / "deep" / "out"
    res = cli("sweep", bad_instance_sweep(tmp_path, out), "--no-progress", "--workers", "1")
    assert res.code == 2 and "instances[1].file" in res.err
    assert not (tmp_path / "deep").exists()
    with pytest.raises(InputError):
        run_sweep(bad_instance_sweep(tmp_path, out), workers=1, progress=False, isolate=False)
    assert not (tmp_path / "deep").exists()


def test_a_bad_instance_keeps_what_the_folder_held(cli, tmp_path):
    out = tmp_path / "out"
    (out / "instances").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    index = out / "instances" / "index.json"
    index.write_text(json.dumps({"x": {"file": "other.json"}}))
    (out / "instances" / "other.json").write_text("{}")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    res = cli("sweep", bad_instance_sweep(tmp_path, out), "--no-progress", "--workers", "1")
    assert res.code == 2
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # no lock, no stored copy of tiny, the index as it was


# ------------------------------------------------------------------ 8. run-only options with --list / --verify
@pytest.mark.parametrize("argv, option", [(["--list", "--fresh"], "--fresh"), (["--verify", "--fresh"], "--fresh"),
                                          (["--list", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler"),
                                          (["--verify", "--workers", "2"], "--workers"),
                                          (["--verify", "--reprofile"], "--reprofile")])
def test_run_only_options_are_refused_with_list_and_verify(cli, tmp_path, argv, option):
    cfg = write(tmp_path, sweep_toml("s", budgets=["50%"], instances=[{"file": TINY}], solvers=["rotor"]))
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress", *argv)
    assert res.code == 2 and option in res.err and res.out == ""


def test_list_keeps_reprofile_and_workers(cli, tmp_path):
    cfg = write(tmp_path, sweep_toml("s", budgets=["50%"], instances=[{"file": TINY}], solvers=["rotor"]))
    assert cli("sweep", cfg, "--output", tmp_path / "out", "--list", "--reprofile", "--workers", "2").code == 0


def test_a_comparison_refuses_a_repeated_solver():
    """`memsched.solve(..., solver=[...])` compares each solver once, as `memsched.sweep` does."""
    import memsched

    with pytest.raises(memsched.InputError) as err:
        memsched.solve(str(TINY), "90%", solver=["rotor", "periodic", "rotor"])
    assert err.value.field == "solver[2]" and "already in the list (as solver[0])" in str(err.value)

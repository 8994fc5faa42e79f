"""The command line: round trips, budgets, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from memsched.solvers.chain import Chain


def test_solvers_lists_chain_baselines(cli):
    res = cli("solvers")
    assert res.code == 0
    for name in ("store-all", "recompute-all", "periodic", "sqrt"):
        assert name in res.out


@pytest.mark.parametrize("name", ["cnn12", "random10", "random30", "homogeneous20"])
def test_solve_then_simulate_round_trip(cli, examples, tmp_path, name):
    path = examples / f"{name}.json"
    res = cli("solve", path, "--budget", "60%", "--solver", "periodic", "--json")
    assert res.code == 0, res.err
    out = res.json()
    for key in ("problem", "solver", "status", "makespan", "peak_memory", "lower_bound", "solve_time_s", "schedule"):
        assert key in out
    assert out["status"] == "feasible" and out["peak_memory"] <= out["budget"]
    schedule_file = tmp_path / "out.json"
    schedule_file.write_text(res.out)  # the whole solve output is accepted
    sim = cli("simulate", path, schedule_file, "--json").json()
    assert sim["valid"] and sim["makespan"] == pytest.approx(out["makespan"])
    assert sim["peak_memory"] == out["peak_memory"]
    assert max(step["mem_during"] for step in sim["memory_profile"]) == out["peak_memory"]
    schedule_file.write_text(json.dumps(out["schedule"]))  # and the bare schedule
    assert cli("simulate", path, schedule_file, "--json").json()["makespan"] == pytest.approx(out["makespan"])


def test_budget_forms(cli, examples):
    path = examples / "cnn12.json"
    store_all = cli("solve", path, "--budget", "100%", "--solver", "store-all", "--json").json()
    peak = store_all["peak_memory"]
    assert store_all["budget"] == peak
    for text in (str(peak), f"{peak / 1e6}MB"):
        assert cli("solve", path, "--budget", text, "--solver", "store-all", "--json").code == 0
    assert cli("solve", path, "--budget", f"{peak / 2**30 + 0.01:.2f}GiB", "--solver", "store-all").code == 0
    assert cli("solve", path, "--budget", f"{(peak - 1) // 1024}KiB", "--solver", "store-all").code == 1


def test_infeasible_budget_exit_1_with_smallest_budget(cli, examples):
    res = cli("solve", examples / "tiny.json", "--budget", "5", "--solver", "store-all", "--json")
    assert res.code == 1
    assert res.json()["status"] == "infeasible" and res.json()["min_budget"] == 28
    assert "smallest feasible budget: 28 bytes" in res.err
    assert "Traceback" not in res.err


def _bad_chain(tmp_path, mutate) -> str:
    data = Chain.homogeneous(3).to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda t: str(t / "missing.json"), ["missing.json", "no such file"]),
        (lambda t: (t / "x.json").write_text("{oops") and str(t / "x.json"), ["x.json", "invalid JSON"]),
        (lambda t: _bad_chain(t, lambda d: d["stages"][0].pop("out_size")), ["stages[0]", "out_size"]),
        (lambda t: _bad_chain(t, lambda d: d["stages"][1].update(tape_size=-1)), ["stages[1]", "tape_size"]),
        (lambda t: _bad_chain(t, lambda d: d["stages"][2].update(tape_size=0)), ["stages[2]", "tape_size"]),
    ],
)
def test_bad_input_one_line_exit_2(cli, tmp_path, make, words):
    res = cli("solve", make(tmp_path), "--budget", "50%", "--solver", "periodic")
    assert res.code == 2
    assert res.err.count("\n") == 1 and "Traceback" not in res.err
    for word in words:
        assert word in res.err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--solver", "nonsense"], ["unknown solver", "nonsense"]),
        (["--budget", "lots"], ["--budget", "lots"]),
        (["--slots", "-1"], ["--slots"]),
        (["--option", "novalue"], ["--option"]),
        (["--time-limit", "0"], ["--time-limit"]),
    ],
)
def test_bad_usage_exit_2(cli, examples, args, words):
    argv = ["solve", examples / "cnn12.json", "--budget", "60%", "--solver", "periodic"]
    for k in range(0, len(args), 2):
        if args[k] in argv:
            argv[argv.index(args[k]) + 1] = args[k + 1]
        else:
            argv += args[k : k + 2]
    res = cli(*argv)
    assert res.code == 2 and "Traceback" not in res.err
    assert res.err.startswith("memsched solve: error: ") and res.err.count("\n") == 1  # argparse's errors too
    for word in words:
        assert word in res.err


def test_simulate_rejects_invalid_schedule(cli, examples, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "memsched.schedule/1", "ops": [{"op": "F_ck", "stage": 1}]}))
    res = cli("simulate", examples / "tiny.json", bad)
    assert res.code == 2
    assert "op #0 F_ck(1): a_1 is not resident" in res.err
    bad.write_text(json.dumps({"ops": [{"op": "Fly", "stage": 0}]}))
    res = cli("simulate", examples / "tiny.json", bad)
    assert res.code == 2 and "ops[0]" in res.err and "unknown operation" in res.err


def test_option_passes_to_solver(cli, examples):
    res = cli("solve", examples / "random30.json", "--budget", "100%", "--solver", "periodic",
              "--option", "segments=5", "--json")
    assert res.code == 0 and res.json()["segments"] == 5


def test_console_script_and_no_torch_import(tmp_path):
    code = "import sys; sys.modules['torch'] = None; import solvers, solvers.chain, solvers.registry; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
    out = subprocess.run([sys.executable, "-m", "memsched.experiments.cli", "solvers"], capture_output=True, text=True)
    assert out.returncode == 0 and "periodic" in out.stdout


def test_hrevolve_command(cli):
    res = cli("hrevolve", "10", "--level", "2,0,0", "--level", "inf,2,2", "--json")
    assert res.code == 0 and res.json()["status"] == "optimal" and res.json()["cost"] > 0
    # with enough free memory no disk is used: cost = l forwards + (l+1) backwards
    assert cli("hrevolve", "6", "--level", "7,0,0", "--json").json()["cost"] == 6 + 7
    assert cli("hrevolve", "6", "--level", "1,0").code == 2


def test_graph_solve_simulate_round_trip(cli, examples, tmp_path):
    path = examples.parent / "graphs" / "vgg16_like.json"
    res = cli("solve", path, "--budget", "100%", "--solver", "checkpoint-all", "--json")
    assert res.code == 0, res.err
    out = res.json()
    (tmp_path / "s.json").write_text(res.out)
    sim = cli("simulate", path, tmp_path / "s.json", "--json").json()
    assert sim["valid"] and sim["makespan"] == pytest.approx(out["makespan"])
    assert sim["peak_memory"] == out["peak_memory"] == max(s["mem_during"] for s in sim["memory_profile"])

"""The benchmark scripts' ends (experiments/bench_*.py, called in-process as ``main(argv)``):

1. Ctrl-C: one line, exit 130, no traceback; the CSV is left as it was (byte for byte; absent when it
   was), the rows finished before it are in ``<out stem>.partial.csv`` beside it (the line names it)
   under the committed header (``results/<name>.csv``), and the same command resumes from them; the
   short benches whose rows are timed against each other (bench_cli_startup, bench_sweep_rotor) keep
   nothing.
2. Bad values: argparse's usage and one error line, exit 2, before any work (the work is replaced by
   a function that fails the test when called); an unwritable ``--out`` is one line and exit 2
   before the work too.
3. bench_join's help: the whole first paragraph, and ``--figure`` beside ``--out``.

Every output goes to ``tmp_path``; bench_offload's hard-coded folder is monkeypatched there.
"""

from __future__ import annotations

import csv
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from conftest import call_main, partial_of, partial_table, shown_lines

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


def bench(name: str) -> ModuleType:
    """The module ``memsched.experiments.<name>``."""
    return importlib.import_module(f"memsched.experiments.{name}")



def forbid(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> None:
    """Replace `target.name` by a function failing the test: the work must not start."""
    def started(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{name} was called before the arguments were checked")

    monkeypatch.setattr(target, name, started)


def interrupt_after(n: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """`real` for the first `n` calls, then KeyboardInterrupt (a Ctrl-C during call n + 1)."""
    calls = {"n": 0}

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return wrapped


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of a CSV."""
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or ()), rows


def committed_header(name: str) -> list[str]:
    """The header of the committed results/<name>.csv."""
    with (RESULTS / name).open(newline="") as fh:
        return next(csv.reader(fh))


def assert_interrupted(name: str, code: Any, err: str, out: Path, before: bytes | None = None, *,
                       kept: bool = True) -> None:
    """Exit 130, no traceback, `out` as it was (`before`: its bytes, None: absent), and the last line stderr
    shows says where the finished rows are (`kept`: the partial file beside `out`, else nothing kept)."""
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    last = shown_lines(err)[-1]
    if kept:
        assert last.startswith(f"{name}: interrupted: ") and f" finished rows kept in {partial_of(out)} " in last, err
        assert last.endswith(f"({out} is unchanged); the same command resumes from them"), err
    else:
        assert last.startswith(f"{name}: interrupted: ") and f"{out} is unchanged" in last, err
        assert not partial_of(out).exists()
    assert (out.read_bytes() if out.exists() else None) == before


# ------------------------------------------------------------------ 2. bad values: exit 2 before any work
def _no_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    import memsched.solvers.chain.generate as generate

    forbid(monkeypatch, generate, "random_chain")


BAD = [  # (script, arguments, what must not run: (attribute of the script or a callable patching it), text in stderr)
    ("bench_chain_dp", ["--lengths", "-5"], "run_one", "--lengths"),
    ("bench_chain_dp", ["--lengths", "10", "--slots", "0"], "run_one", "--slots"),
    ("bench_chain_dp", ["--lengths", "10", "--repeat", "0"], "run_one", "--repeat"),
    ("bench_chain_dp", ["--lengths", "10", "--seed", "-1"], "run_one", "--seed"),
    ("bench_chain_dp", ["--lengths", "10", "--fraction", "0"], "run_one", "--fraction"),
    ("bench_time_limits", ["--only", "nosuch"], "run", "--only"),
    ("bench_time_limits", ["--limits", "-1", "--only", "chain/cpsat"], "run", "--limits"),
    ("bench_offload_exact", ["--lengths", "4", "--seeds", "1", "--time-limit", "-1"], "run_one", "--time-limit"),
    ("bench_offload_exact", ["--lengths", "4", "--seeds", "0"], "run_one", "--seeds"),
    ("bench_join", ["--quick", "--slots", "-3"], "run", "--slots"),
    ("bench_join", ["--quick", "--cpsat-medium", "-1"], "run", "--cpsat-medium"),
    ("bench_sweep_rotor", ["--length", "10", "--budgets", "3", "--slots", "-5"], _no_chain, "--slots"),
    ("bench_sweep_rotor", ["--length", "10", "--budgets", "0"], _no_chain, "--budgets"),
    ("bench_cli_startup", ["--runs", "0"], "timed", "--runs"),
    ("bench_pipeline_pipedream", ["--quick", "--memory", "banana"], "run", "--memory"),
    ("bench_pipeline_pipedream", ["--quick", "--memory", "0"], "run", "--memory"),
    ("bench_model_memory", ["--sizes", "20", "--backends", "lp", "--time-limit", "-1"], "measure", "--time-limit"),
    ("bench_model_memory", ["--sizes", "20", "--backends", "lp", "--grace", "-5"], "measure", "--grace"),
    ("bench_model_memory", ["--sizes", "0", "--backends", "lp"], "measure", "--sizes"),
]


@pytest.mark.parametrize(("name", "args", "work", "flag"), BAD, ids=[f"{b[0]} {' '.join(b[1])}" for b in BAD])
def test_bad_value_exits_2_before_any_work(tmp_path, monkeypatch, capsys, name, args, work, flag):
    mod = bench(name)
    if callable(work):
        work(monkeypatch)
    else:
        forbid(monkeypatch, mod, work)
    out = tmp_path / "out.csv"
    out_flag = "--output" if name in ("bench_sweep_rotor", "bench_cli_startup") else "--out"
    code, _, err = call_main(mod.main, [*args, out_flag, str(out)], capsys)
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert ": error: " in last and flag in last, err
    assert not out.exists()


def test_pipedream_memory_error_names_memory_not_budget(tmp_path, monkeypatch, capsys):
    mod = bench("bench_pipeline_pipedream")
    forbid(monkeypatch, mod, "run")
    code, _, err = call_main(mod.main, ["--quick", "--memory", "banana", "--out", str(tmp_path / "p.csv")], capsys)
    assert code == 2 and "--memory" in err and "--budget" not in err, err
    assert mod.memory_bytes("16GB") == 16_000_000_000


def test_time_limits_only_nosuch_is_one_usage_error(tmp_path, monkeypatch, capsys):
    mod = bench("bench_time_limits")
    code, _, err = call_main(mod.main, ["--only", "nosuch", "--out", str(tmp_path / "t.csv")], capsys)
    assert code == 2 and "KeyError" not in err and "'nosuch'" in err, err
    assert "chain/cpsat" in err  # says what it accepts
    assert "chain" in mod.only_choices() and "graph/checkmate" in mod.only_choices()


def test_offload_missing_chain_file_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    mod = bench("bench_offload")
    results = tmp_path / "offload"
    monkeypatch.setattr(mod, "RESULTS", results)
    forbid(monkeypatch, mod, "profiled_chains")
    forbid(monkeypatch, mod, "run")
    code, _, err = call_main(mod.main, ["--chains", str(tmp_path / "nonexistent.json")], capsys)
    assert code == 2, err
    assert "Traceback" not in err and "--chains" in err and "nonexistent.json" in err, err
    assert not results.exists()


def test_cli_startup_runs_zero_exits_2(tmp_path, monkeypatch, capsys):
    mod = bench("bench_cli_startup")
    forbid(monkeypatch, mod, "timed")
    code, _, err = call_main(mod.main, ["--runs", "0", "--output", str(tmp_path / "c.csv")], capsys)
    assert code == 2 and "StatisticsError" not in err and "Traceback" not in err and "--runs" in err, err


UNWRITABLE = [  # (script, arguments, the work that must not start, flag of the output)
    ("bench_chain_dp", ["--lengths", "3"], "run_one", "--out"),
    ("bench_pipeline", ["--quick"], "sweep", "--out"),
    ("bench_pipeline_interleave", [], "run", "--out"),
    ("bench_profile", ["--quick"], "run_case", "--out"),
    ("bench_offload_exact", ["--lengths", "4", "--seeds", "1"], "run_one", "--out"),
    ("bench_join", ["--quick"], "run", "--out"),
    ("bench_time_limits", ["--only", "chain/cpsat"], "run", "--out"),
    ("bench_pipeline_pipedream", ["--quick"], "run", "--out"),
    ("bench_cli_startup", [], "timed", "--output"),
    ("bench_sweep_rotor", ["--length", "10", "--budgets", "2"], None, "--output"),
    ("bench_model_memory", ["--sizes", "20", "--backends", "lp"], "measure", "--out"),
]


@pytest.mark.parametrize(("name", "args", "work", "flag"), UNWRITABLE, ids=[u[0] for u in UNWRITABLE])
def test_unwritable_out_exits_2_before_the_work(tmp_path, monkeypatch, capsys, name, args, work, flag):
    mod = bench(name)
    if work is None:
        _no_chain(monkeypatch)
    else:
        forbid(monkeypatch, mod, work)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    out = blocker / "x.csv"
    code, _, err = call_main(mod.main, [*args, flag, str(out)], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith(f"{name}: error: ") and flag in lines[0] and str(out) in lines[0], err
    assert blocker.read_text() == "not a folder\n"


# ------------------------------------------------------------------ 1. Ctrl-C keeps the finished rows
def test_chain_dp_ctrl_c_keeps_the_finished_row(tmp_path, monkeypatch, capsys):
    mod = bench("bench_chain_dp")
    real = mod.run_one
    monkeypatch.setattr(mod, "run_one", interrupt_after(1, real))
    out = tmp_path / "dp.csv"
    argv = ["--lengths", "10", "20", "--slots", "50", "--repeat", "1", "--out", str(out)]
    code, stdout, err = call_main(mod.main, argv, capsys)
    assert_interrupted("bench_chain_dp", code, err, out)
    header, rows = partial_table(out)
    assert header == committed_header("bench_chain_dp.csv")
    assert [(r["L"], r["slots"]) for r in rows] == [(10, 50)]
    assert rows[0]["makespan"] > 0

    lengths: list[int] = []
    monkeypatch.setattr(mod, "run_one", lambda L, *a: lengths.append(L) or real(L, *a))
    code, _, err = call_main(mod.main, argv, capsys)  # the same command resumes: L = 20 only
    assert code == 0 and lengths == [20] and not partial_of(out).exists(), err
    header, done = read_csv(out)
    assert header == committed_header("bench_chain_dp.csv") and [r["L"] for r in done] == ["10", "20"]
    assert float(done[0]["makespan"]) == rows[0]["makespan"]


def test_chain_dp_ctrl_c_before_any_row_leaves_the_csv(tmp_path, monkeypatch, capsys):
    mod = bench("bench_chain_dp")
    monkeypatch.setattr(mod, "run_one", interrupt_after(0, mod.run_one))
    out = tmp_path / "dp.csv"
    out.write_text("an earlier run\n")
    code, _, err = call_main(mod.main, ["--lengths", "10", "--slots", "50", "--out", str(out)], capsys)
    assert_interrupted("bench_chain_dp", code, err, out, b"an earlier run\n", kept=False)
    assert shown_lines(err)[-1] == f"bench_chain_dp: interrupted: nothing finished; {out} is unchanged", err


def test_chain_dp_complete_run_keeps_its_format(tmp_path, capsys):
    mod = bench("bench_chain_dp")
    out = tmp_path / "dp.csv"
    argv = ["--lengths", "10", "20", "--slots", "50", "--repeat", "1", "--out", str(out)]
    code, stdout, err = call_main(mod.main, argv, capsys)
    assert code == 0, err
    header, rows = read_csv(out)
    assert header == committed_header("bench_chain_dp.csv")
    assert [r["L"] for r in rows] == ["10", "20"]
    assert stdout.splitlines()[0].split()[:2] == ["L", "slots"] and len(stdout.splitlines()) == 3


def test_chain_dp_budget_without_a_schedule_is_one_line(tmp_path, capsys):
    mod = bench("bench_chain_dp")
    out = tmp_path / "dp.csv"
    code, _, err = call_main(mod.main, ["--lengths", "4", "--slots", "100", "--repeat", "1", "--out", str(out)], capsys)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("bench_chain_dp: error: --fraction: no schedule"), err


def _result(**kw: Any) -> SimpleNamespace:
    """A solver result with the fields the scripts read."""
    base = dict(status="optimal", objective=10.0, lower_bound=10.0, seeded_by=None, details={}, peak_memory=5,
                found=True, solve_time_s=0.01, scope="test", schedule=None, min_budget=None, solver="fake")
    return SimpleNamespace(**{**base, **kw})


def _time_limits(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    problem = SimpleNamespace(reference_peak=lambda inst: 100)
    solver = SimpleNamespace(fast_solvers=())
    registry = SimpleNamespace(get_problem=lambda p: problem, get_solver=lambda p, s: solver,
                               solve=interrupt_after(1, lambda *a, **k: _result()))
    monkeypatch.setattr(mod, "registry", registry)
    monkeypatch.setattr(mod, "CASES", [("chain", "cpsat", "fake", lambda: None, 0.5, {})])


def _join(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    # the first budget of the first small instance: the 5 fast solvers, cpsat, milp and exact
    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=interrupt_after(8, lambda *a, **k: _result())))


def _interleave(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    part = SimpleNamespace(stages=[1, 2], device_of=[0, 1])
    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=interrupt_after(1, lambda *a, **k: _result(
        schedule=part))))


def _pipedream(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    res = _result(scope="all antichain splits", details={"ideals": 7})
    monkeypatch.setattr(mod, "_solve", interrupt_after(3, lambda *a, **k: (res, 0.1, 0.1)))


def _profile(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    monkeypatch.setattr(mod, "run_case", interrupt_after(1, lambda *a: {"seconds": 1.0, "cpu": 1.0, "rss": 100.0,
                                                                         "n": 3, "peak": 2**30}))


def _cli_startup(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    monkeypatch.setattr(mod, "timed", interrupt_after(1, lambda cmd, runs, env=None: ([0.1], "", [0.05])))


def _sweep_rotor(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
    import memsched.experiments.sweep as sweep

    calls = {"n": 0}

    def fake(*args: Any, **kwargs: Any) -> Any:  # the sweep's own line on Ctrl-C names a scratch journal
        calls["n"] += 1
        if calls["n"] <= 3:  # two untimed warm-ups, then the timed shared-table sweep
            return SimpleNamespace(rows=[{"objective": 1.0}, {"objective": 2.0}])
        print("interrupted: 1/2 rows kept in /tmp/x/journal.jsonl; rerun to resume", file=sys.stderr)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", fake)


def _real_after(attr: str, n: int) -> Callable[[pytest.MonkeyPatch, ModuleType], None]:
    """Patch `attr` of the script: the real function for `n` calls, then Ctrl-C."""
    def patch(monkeypatch: pytest.MonkeyPatch, mod: ModuleType) -> None:
        monkeypatch.setattr(mod, attr, interrupt_after(n, getattr(mod, attr)))
    return patch


CTRL_C = [  # (script, arguments, patch, rows kept (0: none, nothing kept), committed CSV under results/, output flag)
    ("bench_time_limits", ["--limits", "0.1", "0.2"], _time_limits, 1, "bench_time_limits.csv", "--out"),
    ("bench_offload_exact", ["--lengths", "4", "--seeds", "1", "--time-limit", "1"], _real_after("run_one", 1), 1,
     "bench_offload_exact.csv", "--out"),
    ("bench_join", ["--quick"], _join, 8, "bench_join.csv", "--out"),
    ("bench_pipeline", ["--quick", "--part", "sweep"], _real_after("_row", 2), 2, "bench_pipeline.csv", "--out"),
    ("bench_pipeline_interleave", [], _interleave, 1, "bench_pipeline_interleave.csv", "--out"),
    ("bench_pipeline_pipedream", ["--quick"], _pipedream, 1, "bench_pipeline_pipedream.csv", "--out"),
    ("bench_profile", ["--quick"], _profile, 1, "bench_profile.csv", "--out"),
    ("bench_cli_startup", [], _cli_startup, 0, "bench_cli_startup.csv", "--output"),  # timed against each other
    ("bench_sweep_rotor", ["--length", "10", "--budgets", "2", "--slots", "50"], _sweep_rotor, 0,
     "bench_sweep_rotor.csv", "--output"),
]


@pytest.mark.parametrize(("name", "args", "patch", "kept", "committed", "out_flag"), CTRL_C,
                         ids=[c[0] for c in CTRL_C])
def test_ctrl_c_keeps_the_finished_rows_beside_the_csv(tmp_path, monkeypatch, capsys, name, args, patch, kept,
                                                        committed, out_flag):
    mod = bench(name)
    patch(monkeypatch, mod)
    out = tmp_path / "table.csv"
    out.write_text(",".join(committed_header(committed)) + "\nan earlier complete table\n")
    before = out.read_bytes()
    code, _, err = call_main(mod.main, [*args, out_flag, str(out)], capsys)
    assert_interrupted(name, code, err, out, before, kept=bool(kept))
    assert sum(line.startswith("interrupted:") for line in err.splitlines()) == 0, err  # a sweep's own line too
    if kept:
        header, rows = partial_table(out)
        assert len(rows) == kept
        assert header == committed_header(committed)
    else:
        assert shown_lines(err)[-1] == f"{name}: interrupted: nothing kept; {out} is unchanged", err
        assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_offload_ctrl_c_keeps_the_finished_rows(tmp_path, monkeypatch, capsys):
    mod = bench("bench_offload")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "offload")
    # one point: remat-only, vdnn, offload-prefix, rotor-offload, pofo; then Ctrl-C
    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=interrupt_after(
        5, lambda *a, **k: _result(schedule=object(), objective=12.0))))
    chain = ROOT / "solvers" / "data" / "examples" / "tiny.json"
    argv = ["--chains", str(chain), "--quick", "--bandwidths", "1e9"]
    code, _, err = call_main(mod.main, argv, capsys)
    out = tmp_path / "offload" / "offload_tradeoff.csv"
    assert_interrupted("bench_offload", code, err, out)
    header, rows = partial_table(out)  # the points as solved: the table's time scale is added when it is written
    assert header == [h for h in committed_header("offload/offload_tradeoff.csv") if h != "time_scale"]
    assert [r["strategy"] for r in rows] == ["remat only", "offload only", "both"]
    assert {r["budget_fraction"] for r in rows} == {mod.QUICK_FRACTIONS[0]}

    budgets: list[int] = []
    monkeypatch.setattr(mod, "registry", SimpleNamespace(
        solve=lambda *a, **k: budgets.append(a[3]) or _result(schedule=object(), objective=12.0)))
    code, _, err = call_main(mod.main, argv, capsys)  # the same command resumes: the other fractions only
    assert code == 0, err
    assert len(budgets) == 5 * (len(mod.QUICK_FRACTIONS) - 1) and rows[0]["budget"] not in budgets
    header, done = read_csv(out)
    assert header == committed_header("offload/offload_tradeoff.csv") and all(r["time_scale"] for r in done)
    assert [float(r["budget_fraction"]) for r in done[::3]] == list(mod.QUICK_FRACTIONS)
    assert not partial_of(out).exists()


def test_executor_overhead_ctrl_c_keeps_the_finished_rows(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    mod = bench("bench_executor_overhead")
    real = mod.measure
    monkeypatch.setattr(mod, "measure", interrupt_after(1, real))
    out = tmp_path / "o.csv"
    argv = ["--stages", "1,2", "--repeats", "2", "--out", str(out)]
    code, _, err = call_main(mod.main, argv, capsys)
    assert_interrupted("bench_executor_overhead", code, err, out)
    header, rows = partial_table(out)
    assert header == committed_header("bench_executor_overhead.csv") and [r["stages"] for r in rows] == [1]
    measured: list[int] = []
    monkeypatch.setattr(mod, "measure", lambda L, repeats: measured.append(L) or real(L, repeats))
    code, _, err = call_main(mod.main, argv, capsys)  # the same command resumes: 2 stages only
    assert code == 0 and measured == [2] and not partial_of(out).exists(), err
    header, done = read_csv(out)
    assert header == committed_header("bench_executor_overhead.csv") and [r["stages"] for r in done] == ["1", "2"]


def test_vs_torch_ctrl_c_keeps_the_finished_models(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    mod = bench("bench_vs_torch")
    fake = [{"model": "gpt2", "size": "tiny", "tool": "torch", "setting": "no checkpointing", "status": "ok"}]
    monkeypatch.setattr(mod, "run_one", interrupt_after(1, lambda name, size, args: list(fake)))
    forbid(monkeypatch, mod, "figure")
    out = tmp_path / "v.csv"
    out.write_text("model,size\nan earlier complete table\n")
    before = out.read_bytes()
    code, _, err = call_main(mod.main, ["--models", "gpt2", "--sizes", "tiny,small", "--out", str(out)], capsys)
    assert_interrupted("bench_vs_torch", code, err, out, before)
    header, rows = partial_table(out)
    assert header == committed_header("bench_vs_torch.csv")
    assert [(r["model"], r["size"], r["tool"]) for r in rows] == [("gpt2", "tiny", "torch")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, partial_of(out).name])  # no figure


def test_model_memory_ctrl_c_is_one_line(tmp_path, monkeypatch, capsys):
    mod = bench("bench_model_memory")
    monkeypatch.setattr(mod, "measure", interrupt_after(0, mod.measure))
    out = tmp_path / "m.csv"
    code, _, err = call_main(mod.main, ["--sizes", "20", "--backends", "lp", "--out", str(out)], capsys)
    assert_interrupted("bench_model_memory", code, err, out, kept=False)
    assert shown_lines(err)[-1] == f"bench_model_memory: interrupted: nothing finished; {out} is unchanged", err


# ------------------------------------------------------------------ 3. bench_join's help
def test_join_help_has_its_whole_description_and_the_figure_beside_out(capsys):
    mod = bench("bench_join")
    code, out, _ = call_main(mod.main, ["--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "the exact methods and the heuristics (equal / proportional shares, sequential)" in flat
    assert "of equal and unequal lengths." in flat
    figure_help = flat.split("--figure", 2)[-1].split("--cpsat-medium")[0]
    assert "beside --out" in figure_help, figure_help


def test_join_ctrl_c_while_drawing_says_the_csv_was_written(tmp_path, monkeypatch, capsys):
    """A Ctrl-C after the complete table is written (here: while its figure is drawn) does not claim the CSV
    is unchanged: it says it was written, and the rows stay beside it for the same command to finish from."""
    mod = bench("bench_join")
    solved: list[str] = []
    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=lambda *a, **k: solved.append(a[2]) or _result()))
    monkeypatch.setattr(mod, "figure", interrupt_after(0, mod.figure))
    out = tmp_path / "bj.csv"
    out.write_text("an earlier complete table\n")
    argv = ["--quick", "--figure", "--out", str(out)]
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 130 and "Traceback" not in err, err
    header, rows = read_csv(out)
    assert header == committed_header("bench_join.csv") and len(rows) == len(solved) > 0
    last = shown_lines(err)[-1]
    assert last == (f"bench_join: interrupted: {len(rows)} finished rows kept in {partial_of(out)} ({out} was "
                    "written before the interrupt); the same command resumes from them"), err
    assert len(partial_table(out)[1]) == len(rows)

    solved.clear()
    drawn: list[Path] = []
    monkeypatch.setattr(mod, "figure", lambda rows, png: drawn.append(png))
    code, _, err = call_main(mod.main, argv, capsys)  # resumes: nothing solved again, the figure drawn
    assert code == 0 and solved == [] and drawn == [out.with_suffix(".png")], err
    assert len(read_csv(out)[1]) == len(rows) and not partial_of(out).exists()

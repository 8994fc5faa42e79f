"""Bad input and Ctrl-C at the ends of the paper and benchmark scripts (experiments/*.py), each run as a
command (``python -m memsched.experiments.NAME``) on tiny inputs under ``tmp_path``:

1. bench_papers_graphs: a --merge CSV that is not the script's (a column missing, a row without its key)
   is one line naming the file and exit 2, with --out as it was (it was overwritten, then the figure
   failed); neither --graphs nor --merge is one line naming --graphs (was a TypeError).
2. bench_model_memory --reestimate / --resume on a CSV whose header is not the script's, or a row that
   is not a number: one line naming the file, exit 2, the file as it was (was a KeyError / ValueError).
3. paper_figures on a sweep table with a header and no rows: one line "no rows" (was a ValueError from
   the pipeline figure), no figure folder made.
4. max_batch_figure --out naming a file: one line naming it and exit 2 before the table is printed.
5. paper_instances on a missing file, bad JSON or JSON that is not a chain of a zoo network: one line
   naming the file, exit 2 (were tracebacks).
6. paper_figures and max_batch_figure on a real SIGINT: one line, exit 130, no traceback.
7. bench_sweep_rotor warms up both sweep variants (untimed) before timing either.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import sigint_as_in_a_terminal

PAPERS_FIELDS = ("instance,nodes,fraction,budget,solver,label,status,makespan,overhead,bound,gap,time_s,"
                 "first_schedule_s,time_limit_s,seeded_by,scope,load,peak,ref_peak,min_peak_lb,cell")
MEMORY_FIELDS = ("graph,n,variables,rows,nonzeros,backend,status,seconds,model_bytes_per_nnz,"
                 "backend_bytes_per_nnz,measured_gb,estimated_gb,estimate_covers,load")
MEMORY_ROW = '"random_layered(20, 0)",20,1041,1717,4588,lp,optimal,0.1,739.2,3109.5,0.018,0.104,True,6.9'


def script(name: str, *argv: object, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m memsched.experiments.NAME ARGV`` in `cwd`: exit status, stdout and stderr (text)."""
    return subprocess.run([sys.executable, "-m", f"memsched.experiments.{name}", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def one_line(proc: subprocess.CompletedProcess, *names: str) -> str:
    """The single line `proc` printed on stderr (no traceback), which names each of `names`."""
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------ bench_papers_graphs
def _papers_csv(path: Path) -> Path:
    """A CSV of bench_papers_graphs with one cell (two solvers)."""
    path.write_text(PAPERS_FIELDS + "\n"
                    "RL100,100,0.9,90,cpsat,cpsat,optimal,110.0,0.1,110.0,0.0,1.0,0.5,180.0,dtr,s,1.0,80,100,50,\n"
                    "RL100,100,0.9,90,greedy,greedy,feasible,120.0,0.2,,,0.1,0.1,,,,1.0,85,100,50,\n")
    return path


@pytest.mark.parametrize("foreign, named", [
    ("L,seed,slots,makespan\n6,0,100,31.1\n", "instance"),  # another benchmark's CSV
    (PAPERS_FIELDS + "\nRL100,100,,90,cpsat,cpsat,optimal,110.0,0.1,,,1,,,,,,80,100,50,\n", "fraction"),
], ids=["no-columns", "row-without-fraction"])
def test_papers_graphs_merge_of_a_foreign_csv_leaves_out_as_it_was(tmp_path, foreign, named):
    good = _papers_csv(tmp_path / "good.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text(foreign)
    out = tmp_path / "out.csv"
    out.write_text("the earlier run's rows\n")
    proc = script("bench_papers_graphs", "--merge", good, bad, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    one_line(proc, str(bad), "--merge", named)
    assert out.read_text() == "the earlier run's rows\n"
    assert not out.with_suffix(".png").exists()


def test_papers_graphs_merge_of_its_own_csv_still_works(tmp_path):
    out = tmp_path / "out.csv"
    proc = script("bench_papers_graphs", "--merge", _papers_csv(tmp_path / "good.csv"), "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with out.open(newline="") as fh:
        assert [r["solver"] for r in csv.DictReader(fh)] == ["cpsat", "greedy"]


def test_papers_graphs_without_graphs_or_merge_is_one_line(tmp_path):
    proc = script("bench_papers_graphs", "--out", tmp_path / "out.csv", cwd=tmp_path)
    assert proc.returncode == 2
    assert "required" in one_line(proc, "--graphs")
    assert not (tmp_path / "out.csv").exists()


# ------------------------------------------------------------------------------ bench_model_memory
FOREIGN = ("a,b\n1,2\n", "variables")  # not this script's CSV
EXTRA = (MEMORY_FIELDS + ",note\n" + MEMORY_ROW + ",x\n", "note")  # a column the rewrite would drop
NOT_A_NUMBER = (MEMORY_FIELDS + "\n" + MEMORY_ROW.replace(",1041,", ",many,") + "\n", "number")


@pytest.mark.parametrize("mode, text, named", [  # --resume keeps the rows as text: no number is parsed
    ("--reestimate", *FOREIGN), ("--reestimate", *EXTRA), ("--reestimate", *NOT_A_NUMBER),
    ("--resume", *FOREIGN), ("--resume", *EXTRA),
], ids=["reestimate-foreign", "reestimate-extra-column", "reestimate-not-a-number", "resume-foreign",
        "resume-extra-column"])
def test_model_memory_on_a_foreign_csv_is_one_line_and_leaves_it(tmp_path, mode, text, named):
    out = tmp_path / "mm.csv"
    out.write_text(text)
    # --sizes 5 --backends lp --time-limit 0.01: were it measured, a moment's work (it must not be)
    proc = script("bench_model_memory", mode, "--out", out, "--sizes", "5", "--backends", "lp",
                  "--time-limit", "0.01", "--grace", "0", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    one_line(proc, str(out), named)
    assert out.read_text() == text
    assert proc.stdout == ""


def test_model_memory_reestimate_of_its_own_csv_still_works(tmp_path):
    out = tmp_path / "mm.csv"
    out.write_text(MEMORY_FIELDS + "\n" + MEMORY_ROW + "\n")
    proc = script("bench_model_memory", "--reestimate", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "covers the measured peak in 1 of 1 runs" in proc.stdout


# ------------------------------------------------------------------------------ paper_figures
def test_paper_figures_on_a_table_without_rows_is_one_line(tmp_path):
    folder = tmp_path / "sweep"
    folder.mkdir()
    table = folder / "sweep.csv"
    table.write_text("problem,instance,source,solver_label,status,budget,objective,overhead,reference_peak\n")
    proc = script("paper_figures", "--results", folder, "--out", tmp_path / "figs", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no rows" in one_line(proc, str(table))
    assert not (tmp_path / "figs").exists()


# ------------------------------------------------------------------------------ max_batch_figure
def _answers(folder: Path) -> Path:
    """A folder with two max-batch answers (store-all and rotor of one network)."""
    folder.mkdir()
    for solver, largest in (("store-all", 100), ("rotor", 150)):
        (folder / f"vgg19-16g-{solver}.json").write_text(json.dumps({
            "model": "vgg19", "solver": solver, "largest": largest, "memory": 16e9, "cost": "roofline:v100",
            "state_factor": 2.0, "max_overhead": 1.2, "result": {"size": largest, "overhead": 1.1}}))
    return folder


def test_max_batch_figure_out_naming_a_file_is_one_line_before_the_table(tmp_path):
    results = _answers(tmp_path / "answers")
    out = tmp_path / "afile"
    out.write_text("not a folder\n")
    proc = script("max_batch_figure", "--results", results, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2
    one_line(proc, str(out))
    assert proc.stdout == ""  # the table is not printed before the error
    assert out.read_text() == "not a folder\n"


def test_max_batch_figure_missing_published_is_one_line(tmp_path):
    results = _answers(tmp_path / "answers")
    proc = script("max_batch_figure", "--results", results, "--out", tmp_path / "figs",
                  "--published", tmp_path / "none.csv", cwd=tmp_path)
    assert proc.returncode == 2
    one_line(proc, "--published", str(tmp_path / "none.csv"))


# ------------------------------------------------------------------------------ paper_instances
@pytest.mark.parametrize("text", [
    None,  # missing
    "{\n'meta': 1}",  # not JSON
    "[1, 2]",  # JSON, not an object
    '{"x": 1}',  # no stages
    '{"stages": [], "meta": {"parameter_bytes": 3}}',  # no meta.model
], ids=["missing", "bad-json", "list", "no-stages", "no-model"])
def test_paper_instances_bad_file_is_one_line(tmp_path, text):
    path = tmp_path / "chain.json"
    if text is not None:
        path.write_text(text)
    proc = script("paper_instances", path, cwd=tmp_path)
    assert proc.returncode == 2
    one_line(proc, str(path))
    assert (path.read_text() if text is not None else None) == text


def test_paper_instances_unknown_zoo_network_is_one_line(tmp_path):
    path = tmp_path / "chain.json"
    text = json.dumps({"stages": [{}], "meta": {"model": "no-such-net"}})
    path.write_text(text)
    proc = script("paper_instances", path, cwd=tmp_path)
    assert proc.returncode == 2
    one_line(proc, str(path), "no-such-net")
    assert path.read_text() == text


# ------------------------------------------------------------------------------ Ctrl-C of the figure scripts
@pytest.mark.parametrize("name, stage", [("paper_figures", "read_table"), ("max_batch_figure", "load_answers")])
def test_figure_script_ctrl_c_is_one_line_and_130(tmp_path, name, stage):
    """A real SIGINT, sent by the script to itself at `stage` (a module function replaced), is handled as
    a Ctrl-C in a terminal: one line, exit 130."""
    driver = textwrap.dedent(f"""
        import os, signal, sys, time
        import memsched.experiments.{name} as script

        def sigint_here(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)  # the handler raises long before

        script.{stage} = sigint_here
        sys.exit(script.main(sys.argv[1:]))
        """)
    proc = subprocess.run([sys.executable, "-c", driver, "--results", tmp_path, "--out", tmp_path / "figs"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          preexec_fn=sigint_as_in_a_terminal, check=False)
    assert proc.returncode == 130, proc.stderr
    one_line(proc, f"{name}: interrupted")


# ------------------------------------------------------------------------------ bench_sweep_rotor
def test_sweep_rotor_warms_up_both_variants_before_timing(tmp_path, monkeypatch, capsys):
    """Neither timed sweep is the first sweep of its kind: each kind (shared table, one DP per budget) has
    run once before the clock is first read for a sweep (the first run pays run_sweep's start-up)."""
    import memsched.solvers.chain.dp as dp
    from memsched.experiments import bench_sweep_rotor as bench

    events: list[Any] = []
    clock = iter(range(1, 10_000))

    def sweep(cfg: Path, output: Path) -> SimpleNamespace:
        events.append(("sweep", "shared" if "shared" in cfg.stem else "per_budget"))
        return SimpleNamespace(rows=[{"objective": 10.0}] * 3)

    def perf_counter() -> float:
        events.append("clock")
        return float(next(clock))

    monkeypatch.setattr(bench, "_sweep", sweep)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=perf_counter))  # this module's clock only
    monkeypatch.setattr(dp, "solve_rotor", lambda *args, **kwargs: events.append("rotor"))
    assert bench.main(["--length", "8", "--budgets", "3", "--slots", "50",
                       "--output", str(tmp_path / "rot.csv")]) == 0
    capsys.readouterr()
    # a timed sweep: the clock read right before it and right after it
    timed = [i for i, e in enumerate(events)
             if isinstance(e, tuple) and events[i - 1] == "clock" and events[i + 1:i + 2] == ["clock"]]
    assert timed, events
    before = {e[1] for e in events[:timed[0]] if isinstance(e, tuple)}
    assert before == {"shared", "per_budget"}, events
    assert [e[1] for i, e in enumerate(events) if i in timed] == ["shared", "per_budget"]

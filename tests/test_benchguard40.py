"""The ends of the benchmark scripts that did not go through experiments/benchtable.py, each run as a command
(``python -m memsched.experiments.NAME``) with outputs under ``tmp_path``:

1. bench_executor, bench_graph_executor, bench_pipeline_dag_exec: a bad count or time limit (``--threads 0``,
   ``--repeats 0``, ``--time-limit -1``, ``--steps 0``, ``--width 0``) is argparse's usage and one error line, exit
   2, before any work (were tracebacks, some after minutes of profiling, or accepted); an ``--out`` that is a
   folder, or whose graph file beside it is one, is one line and exit 2 before any work (was an
   IsADirectoryError once everything had run).
2. bench_executor on a real SIGINT once its first (network, problem) cell is done: one line naming the partial
   file, exit 130, no traceback, the CSV left as it was (absent here) and the finished cell's rows in
   ``<out stem>.partial.csv`` under the committed header (was exit -2, a traceback and no CSV); the same command
   run again resumes from them (the finished network is not run again) and removes the partial file.
3. bench_vs_torch ``--segments`` that is not "all" nor integers >= 2 (a word, 0, an empty entry): one line, exit 2,
   before any model is built (a word failed after the first model was built, 0 dropped every point silently).
4. bench_offload ``--quick`` without ``--out`` refuses to replace a full table in its default file (one line, exit
   2; it overwrote the committed one with a 3-budget table), and writes ``--out`` when given; ``--out`` is
   checked before any work. Its default folder is replaced by one under ``tmp_path``.
"""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import partial_of, partial_table, shown_lines, sigint_as_in_a_terminal

ROOT = Path(__file__).resolve().parent.parent
#: the smallest run of each script, so that one which does not refuse its arguments (the old scripts) ends soon
CHEAP = {
    "bench_executor": ["--size", "tiny", "--problems", "chain", "--repeats", "1", "--time-repeats", "1"],
    "bench_graph_executor": ["--size", "tiny", "--models", "resnet18", "--solvers", "checkpoint-all", "--repeats", "1",
                             "--time-repeats", "1"],
    "bench_pipeline_dag_exec": ["--width", "4", "--size", "16", "--micro-batch", "2", "--steps", "1"],
}


def script(name: str, *argv: object, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m memsched.experiments.NAME ARGV`` in `cwd`: exit status, stdout and stderr (text)."""
    return subprocess.run([sys.executable, "-m", f"memsched.experiments.{name}", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


def no_work(proc: subprocess.CompletedProcess) -> None:
    """Exit 2, no traceback, nothing on stdout (no profiling line, no row was printed)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == "", proc.stdout[-2000:]


# ------------------------------------------------------------------------------ 1. bad values, before any work
BAD = [  # (script, arguments, the flag the error names)
    ("bench_executor", ["--threads", "0"], "--threads"),
    ("bench_executor", ["--time-limit", "-1"], "--time-limit"),
    ("bench_executor", ["--repeats", "0"], "--repeats"),
    ("bench_graph_executor", ["--repeats", "0"], "--repeats"),
    ("bench_graph_executor", ["--time-limit", "-1", "--solvers", "checkmate"], "--time-limit"),
    ("bench_pipeline_dag_exec", ["--steps", "0"], "--steps"),
    ("bench_pipeline_dag_exec", ["--width", "0"], "--width"),
]


@pytest.mark.parametrize(("name", "args", "flag"), BAD, ids=[f"{b[0]} {' '.join(b[1])}" for b in BAD])
def test_bad_value_is_a_usage_error_before_any_work(tmp_path, name, args, flag):
    out = tmp_path / "out.csv"
    proc = script(name, *CHEAP[name], *args, "--out", out, cwd=tmp_path)
    no_work(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert ": error: argument " in last and flag in last, proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", ["bench_executor", "bench_graph_executor", "bench_pipeline_dag_exec"])
def test_out_naming_a_folder_is_one_line_before_any_work(tmp_path, name):
    folder = tmp_path / "folder"
    folder.mkdir()
    proc = script(name, *CHEAP[name], "--out", folder, cwd=tmp_path)
    no_work(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{name}: error: ") and str(folder) in line and "--out" in line, line
    assert list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # no folder.resnet18.json beside it


def test_graph_executor_graph_file_naming_a_folder_is_one_line_before_any_work(tmp_path):
    blocker = tmp_path / "acc.resnet18.json"  # where the ResNet-18 graph of --out acc.csv goes
    blocker.mkdir()
    proc = script("bench_graph_executor", *CHEAP["bench_graph_executor"], "--out", tmp_path / "acc.csv", cwd=tmp_path)
    no_work(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("bench_graph_executor: error: ") and str(blocker) in line, line
    assert not (tmp_path / "acc.csv").exists()


# ------------------------------------------------------------------------------ 2. Ctrl-C keeps the finished rows
def test_executor_sigint_after_the_first_cell_keeps_it_and_exits_130(tmp_path, monkeypatch):
    """A real SIGINT, sent once the second network's first row is printed (the first network's (network, chain)
    cell is done then: a cell's rows are kept once it is evaluated, before the next one starts)."""
    out = tmp_path / "acc.csv"
    argv = [sys.executable, "-m", "memsched.experiments.bench_executor", *CHEAP["bench_executor"], "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)
    try:
        assert proc.stdout is not None
        printed: list[str] = []
        for line in proc.stdout:
            printed.append(line)
            if len({row.split()[0] for row in printed if " chain " in row}) == 2:  # the second network's first row
                proc.send_signal(signal.SIGINT)
                break
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    first = next(row.split()[0] for row in printed if " chain " in row)
    assert proc.returncode == 130, (proc.returncode, "".join(printed) + err[-3000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    last = shown_lines(err)[-1]
    assert last.startswith("bench_executor: interrupted: ") and f"finished rows kept in {partial_of(out)} " in last
    assert last.endswith(f"({out} is unchanged); the same command resumes from them"), err
    assert not out.exists()  # --out is only ever a complete table
    header, rows = partial_table(out)
    with (ROOT / "results" / "executor_accuracy.csv").open(newline="") as fh:
        assert header == next(csv.reader(fh))
    assert {(r["model"], r["problem"]) for r in rows} == {(first, "chain")}, rows  # the whole first cell, no more
    assert len(rows) == sum(row.split()[0] == first for row in printed if " chain " in row), rows
    assert rows[0]["solver"] == "store-all" and rows[0]["measured_peak"] > 0 and rows[0]["threads"] == 1

    # the same command again (in-process, the networks' runs counted, not made): the kept cell is not run again
    import memsched.experiments.bench_executor as bench

    evaluated: list[tuple[str, str]] = []

    def evaluate(label: str, name: str, sizes: object, problem: str, **kw: object) -> list[dict[str, object]]:
        evaluated.append((label, problem))
        return [{"model": label, "problem": problem, "solver": "store-all"}]

    monkeypatch.setattr(bench, "evaluate", evaluate)
    assert bench.main([*CHEAP["bench_executor"], "--out", str(out)]) == 0
    assert evaluated and (first, "chain") not in evaluated, evaluated
    with out.open(newline="") as fh:
        done = list(csv.DictReader(fh))
    assert [r["model"] for r in done] == [first] * len(rows) + [label for label, _ in evaluated]
    assert done[0]["measured_peak"] == str(rows[0]["measured_peak"]) and not partial_of(out).exists()


# ------------------------------------------------------------------------------ 3. bench_vs_torch --segments
@pytest.mark.parametrize("segments", ["foo", "0", "1", "2,,3", "2,x"])
def test_vs_torch_bad_segments_is_one_line_before_any_model(tmp_path, segments):
    out = tmp_path / "v.csv"
    proc = script("bench_vs_torch", "--models", "gpt2", "--sizes", "tiny", "--segments", segments, "--out", out,
                  cwd=tmp_path)
    no_work(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("bench_vs_torch: --segments: ") and repr(segments) in line, line
    assert not out.exists()


# ------------------------------------------------------------------------------ 4. bench_offload --out, --quick
def offload_in(results: Path, *argv: object, cwd: Path) -> subprocess.CompletedProcess:
    """bench_offload ARGV as a command, its default folder (``RESULTS``, results/offload) replaced by `results`:
    a script that wrote its default file (the old one did) writes there, never into the repository."""
    driver = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import memsched.experiments.bench_offload as script
        script.RESULTS = Path({str(results)!r})
        sys.exit(script.main(sys.argv[1:]))
        """)
    return subprocess.run([sys.executable, "-c", driver, *map(str, argv)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_offload_quick_does_not_replace_the_full_table(tmp_path):
    results = tmp_path / "offload"
    results.mkdir()
    table = results / "offload_tradeoff.csv"
    full = (ROOT / "results" / "offload" / "offload_tradeoff.csv").read_bytes()  # the committed full table
    assert b",0.2," in full  # budgets from 20%
    table.write_bytes(full)
    chain = ROOT / "solvers" / "data" / "examples" / "tiny.json"
    proc = offload_in(results, "--quick", "--chains", chain, "--bandwidths", "1e9", cwd=tmp_path)
    no_work(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("bench_offload: error: --quick: ") and str(table) in line and "--out" in line, line
    assert table.read_bytes() == full
    assert sorted(p.name for p in results.iterdir()) == ["offload_tradeoff.csv"]  # no figure either
    # --out elsewhere: the quick table there, the full one as it was
    out = tmp_path / "quick.csv"
    proc = offload_in(results, "--quick", "--chains", chain, "--bandwidths", "1e9", "--slots", "20", "--out", out,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with out.open(newline="") as fh:
        assert {r["budget_fraction"] for r in csv.DictReader(fh)} == {"0.3", "0.6", "1.0"}
    assert out.with_suffix(".png").exists() and table.read_bytes() == full


def test_offload_out_naming_a_folder_is_one_line_before_any_work(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    proc = offload_in(tmp_path / "offload", "--quick", "--out", folder, cwd=tmp_path)
    no_work(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("bench_offload: error: ") and str(folder) in line and "--out" in line, line

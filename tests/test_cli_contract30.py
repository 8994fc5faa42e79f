"""CLI contract checks (hunt 30): help and docs say what the commands do.

1. bench_offload's usage line names only flags its parser has.
2. An exact solver's ``--json`` always has ``log`` (``[]`` when the search logged nothing).
3. Unknown arguments are a usage error of the command: ``memsched CMD: error: unrecognized arguments``.
4. ``--budget`` help (solve, simulate, plot) and docs: a plain number is in the file's memory unit.
5. docs/cli.md does not promise per-operation memory in ``simulate``'s text output.
6. The graph baselines name their scope (no optimality claim), as the other problems' baselines do.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import memsched.solvers
import pytest
from memsched.solvers import registry
from memsched.solvers.graph import Graph

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = Path(memsched.solvers.__file__).resolve().parent / "data"
GRAPH_BASELINES = ("checkpoint-all", "dtr", "sqrt", "greedy", "griewank")


def _cli(*argv: object) -> tuple[int, str, str]:
    """`memsched ARGV` in-process: (exit code, stdout, stderr)."""
    from memsched.experiments.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # --help, argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _flat(text: str) -> str:
    """`text` with every run of whitespace one space (argparse wraps help lines)."""
    return " ".join(text.split())


# ---------------------------------------------------------------- 1. bench_offload usage line
def test_bench_offload_usage_names_only_real_flags():
    from memsched.experiments import bench_offload

    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        bench_offload.main(["--help"])
    usage = out.getvalue().split("\n\n")[0]  # argparse's own usage block: the flags the parser has
    real = set(re.findall(r"--[a-z][a-z-]*", usage))
    doc_usage = next(line for line in bench_offload.__doc__.splitlines() if "python -m" in line)
    named = set(re.findall(r"--[a-z][a-z-]*", doc_usage))
    assert named and named <= real, f"usage line names {sorted(named - real)}, not flags of the parser"


# ---------------------------------------------------------------- 2. log of exact solvers
@pytest.mark.parametrize("args", [
    (EXAMPLES / "tiny.json", "--solver", "milp"),
    (EXAMPLES / "tiny.json", "--solver", "cpsat"),
    (DATA / "join" / "tiny.json", "--solver", "exact"),
])
def test_exact_solver_json_has_log_without_a_schedule(args):
    code, out, err = _cli("solve", *args, "--budget", "1", "--time-limit", "3", "--json")
    assert code == 1, err
    result = json.loads(out)
    assert result["status"] == "infeasible" and result["schedule"] is None
    assert result["log"] == []  # docs/cli.md: `log` is always present for exact solvers


def test_fast_solver_json_still_has_no_empty_log():
    code, out, err = _cli("solve", EXAMPLES / "tiny.json", "--budget", "90%", "--solver", "periodic", "--json")
    assert code == 0, err
    assert "log" not in json.loads(out)


# ---------------------------------------------------------------- 3. usage errors name the command
@pytest.mark.parametrize("argv, prefix", [
    (("solve", EXAMPLES / "tiny.json", "--budget", "90%", "--bogus"),
     "memsched solve: error: unrecognized arguments: --bogus"),
    (("partition", EXAMPLES / "random10.json", "--devices", "2", "--memory", "60%", "extra"),
     "memsched partition: error: unrecognized arguments: extra"),
    (("--bogus",), "memsched: error: unrecognized arguments: --bogus"),
])
def test_unrecognized_arguments_are_the_commands_usage_error(argv, prefix):
    code, out, err = _cli(*argv)
    assert code == 2 and out == ""
    assert err.strip() == prefix  # one line, the command's own prefix (docs/cli.md, exit code 2)


# ---------------------------------------------------------------- 4. --budget: the file's memory unit
@pytest.mark.parametrize("command", ["solve", "simulate", "plot"])
def test_budget_help_says_the_files_memory_unit(command):
    code, out, _ = _cli(command, "--help")
    assert code == 0
    help_text = _flat(out)
    start = help_text.index("--budget BUDGET ", help_text.index("options:"))  # the option's help, not the usage
    budget_help = help_text[start:start + 200]
    assert "file's memory unit" in budget_help and "bytes by default" in budget_help, budget_help


def test_plain_budget_is_in_the_files_unit():
    join = DATA / "join" / "tiny.json"
    assert json.loads(join.read_text())["meta"]["units"]["memory"] == "MB"
    code, out, err = _cli("solve", join, "--budget", "28", "--json")
    assert code == 0, err
    assert json.loads(out)["budget"] == 28  # 28 MB, not 28 bytes


def test_cli_doc_solve_budget_row_says_the_files_memory_unit():
    rows = [line for line in (ROOT / "docs" / "cli.md").read_text().splitlines()
            if line.startswith("| `--budget` | required |")]
    solve_row = rows[0]  # the first such row is `memsched solve`'s table
    assert "file's memory unit" in solve_row and "bytes by default" in solve_row, solve_row


# ---------------------------------------------------------------- 5. simulate: what it reports
def test_cli_doc_simulate_does_not_promise_per_operation_text(tmp_path):
    doc = _flat((ROOT / "docs" / "cli.md").read_text())
    section = doc[doc.index("## `memsched simulate`"):doc.index("## `memsched profile`")]
    assert "for chains, the memory of every operation" not in section
    assert "`--json` also gives the memory of every operation (`memory_profile`" in section
    # what the doc now says holds: the text has no per-operation lines, --json has memory_profile
    code, out, err = _cli("solve", EXAMPLES / "tiny.json", "--budget", "90%", "--solver", "periodic", "--json")
    assert code == 0, err
    schedule = tmp_path / "s.json"
    schedule.write_text(out)
    code, text, err = _cli("simulate", EXAMPLES / "tiny.json", schedule)
    assert code == 0, err
    assert [line.split()[0] for line in text.splitlines()] == ["problem", "operations", "makespan", "peak"]
    code, out, err = _cli("simulate", EXAMPLES / "tiny.json", schedule, "--json")
    assert code == 0 and json.loads(out)["memory_profile"], err


# ---------------------------------------------------------------- 6. graph baselines name their scope
def _graph() -> Graph:
    return Graph.load(DATA / "graphs" / "linear10.json")


@pytest.mark.parametrize("name", GRAPH_BASELINES)
@pytest.mark.parametrize("fraction", [0.8, 0.2])
def test_graph_baseline_scope_is_named(name, fraction):
    graph = _graph()
    budget = int(fraction * registry.get_problem("graph").reference_peak(graph))
    res = registry.solve("graph", graph, name, budget)
    assert res.scope.startswith(name) and "(no optimality claim)" in res.scope, (res.status, res.scope)
    assert "exact sizes" in res.scope  # the graph baselines ignore slots


@pytest.mark.parametrize("name", ["sqrt", "greedy", "griewank"])
def test_graph_baseline_scope_is_named_when_it_refuses_the_graph(name):
    graph = Graph.from_lists([1.0, 2.0, 3.0], [4, 5, 6], [(0, 1), (1, 2)], name="no-backward")
    res = registry.solve("graph", graph, name, 100)
    assert res.details.get("not_applicable") and res.schedule is None
    assert res.scope.startswith(name) and "(no optimality claim)" in res.scope, res.scope

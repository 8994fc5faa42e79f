"""The command line's flags and the pages that document them agree (session 44, the flags hunt):

1. every option a solver takes (the registry's solver specs, `_checks.solver_parameters`, as
   ``--option zzz=1`` lists them) is in the *Options* table of its problem page's *Solvers* section, as
   docs/cli.md says, and that table agrees with cli.md's table of the most used options (names and defaults);
2. README's "What is inside" table names every solver that ``memsched solvers`` lists (join ``store-all``);
3. ``memsched run --model ""`` and ``--solver ""`` are refused naming the flag, as ``solve`` refuses
   ``--solver ""``: never "unknown model None", nor the file's ``meta.model`` in its place;
4. ``python -m memsched.experiments.gpu_check`` answers a usage error with one line, as every script does;
5. an empty input path (``solve ""``, ``run ""``, ``run --chain ""``, ``max-batch --journal ""``, ``plot``'s
   files) is "ARGUMENT: is empty", never ".: is a directory" (the current folder).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import call_main, one_line_refusal, run_cli

import memsched

#: the repository of the tree under test (its docs and README), found from the package, not from this file
ROOT = Path(importlib.import_module("memsched.solvers").__file__).resolve().parents[1]
TINY = str(memsched.data_path("examples", "tiny.json"))
PAGES = {"chain": "chain.md", "graph": "graph.md", "join": "join.md", "offload": "offload.md",
         "pipeline": "pipeline.md"}
#: a default as cli.md's table writes it when it is a value (not a sentence): compared with the page's
VALUE = re.compile(r"^(-?[\d.]+|true|false|none|auto|2P|`[^`]*`)$")


def _accepted(problem: str, solver: str) -> set[str]:
    """The options `solver` takes with ``--option`` (what the refusal of an unknown key lists): its
    parameters without the older spellings and the options the commands set with their own flags."""
    from memsched.experiments.commands._checks import FLAGS, solver_parameters
    from memsched.solvers.exact.options import ALIASES

    return set(solver_parameters(problem, solver)) - set(ALIASES) - set(FLAGS)


def _section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section of a markdown page (up to the next ``## ``)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def _top_level(cell: str) -> list[tuple[str, str]]:
    """The (option, its parenthesis's text) pairs of a table cell written "`name` (default...), ...": the
    backticked identifiers outside any parenthesis, each with the text of the parenthesis after it."""
    out: list[tuple[str, str]] = []
    depth, i = 0, 0
    while i < len(cell):
        ch = cell[i]
        if ch == "`":
            end = cell.index("`", i + 1)
            name = cell[i + 1:end]
            i = end + 1
            if depth == 0 and re.fullmatch(r"[a-z_]+", name):
                rest = cell[i:].lstrip()
                out.append((name, _parenthesis(rest) if rest.startswith("(") else ""))
            continue
        depth += (ch == "(") - (ch == ")")
        i += 1
    return out


def _parenthesis(text: str) -> str:
    """The inside of the parenthesis that `text` opens with (nested ones included)."""
    level = 0
    for end, ch in enumerate(text):
        level += (ch == "(") - (ch == ")")
        if level == 0:
            return text[1:end]
    return text[1:]


def _rows(table_text: str, header: str) -> list[list[str]]:
    """The rows (cells) of the markdown table whose header line starts with `header`."""
    lines = table_text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def _page_options(problem: str) -> dict[str, dict[str, str]]:
    """solver -> {option: its parenthesis} from the *Options* table in the *Solvers* section of its page."""
    section = _section((ROOT / "docs" / PAGES[problem]).read_text(), "Solvers")
    assert "| solver | options (default) |" in section, f"{PAGES[problem]}: no Options table under Solvers"
    out: dict[str, dict[str, str]] = {}
    for cells in _rows(section, "| solver | options (default) |"):
        for solver in re.findall(r"`([^`]+)`", cells[0]):
            assert solver not in out, (problem, solver)
            out[solver] = dict(_top_level(cells[1]))
    return out


def _first(paren: str) -> str:
    """A default's first word(s): the parenthesis up to its first ``:``, ``;`` or ``,``."""
    return re.split(r"[:;,]", paren, maxsplit=1)[0].strip()


@pytest.mark.parametrize("problem", sorted(PAGES))
def test_every_solver_option_is_on_its_problem_page(problem: str) -> None:
    from memsched.solvers import registry

    documented = _page_options(problem)
    solvers = [name for _, name, _ in registry.solver_table(problem)]
    assert set(documented) <= set(solvers), set(documented) - set(solvers)
    for solver in solvers:
        taken = _accepted(problem, solver)
        assert set(documented.get(solver, {})) == taken, (problem, solver, sorted(taken))


def test_the_option_lists_are_those_the_command_line_names() -> None:
    """The test's option sets are what ``--option zzz=1`` answers (for a solver with shared exact options too)."""
    res = run_cli("solve", TINY, "--budget", "60%", "--solver", "milp", "--option", "zzz=1")
    line = one_line_refusal(res, "unknown option 'zzz'")
    listed = set(line.split("its options: ", 1)[1].rstrip(")").split(", "))
    assert listed == _accepted("chain", "milp")


def test_cli_table_agrees_with_the_problem_pages() -> None:
    """Each option in docs/cli.md's table is on its problem page, with the same default when cli.md gives a value."""
    text = (ROOT / "docs" / "cli.md").read_text()
    rows = _rows(text, "| problem | solver | options (default) |")
    assert len(rows) >= 15
    pages = {problem: _page_options(problem) for problem in PAGES}
    for problem, solvers, options in rows:
        for solver in re.findall(r"`([^`]+)`", solvers):
            page = pages[problem][solver]
            for name, paren in _top_level(options):
                assert name in page, (problem, solver, name)
                if VALUE.match(_first(paren)):
                    assert _first(paren) == _first(page[name]), (problem, solver, name, paren, page[name])


def test_readme_names_every_solver() -> None:
    """README's table (its header says the list is `memsched solvers`') names each problem's solvers."""
    res = run_cli("solvers", "--json")
    assert res.code == 0, res.err
    listed: dict[str, list[str]] = {}
    for row in res.json():
        listed.setdefault(row["problem"], []).append(row["solver"])
    section = _section((ROOT / "README.md").read_text(), "What is inside")
    rows = _rows(section, "| problem | instance | solvers (`memsched solvers`) |")
    called = {"checkmate-approx": "LP rounding", "exact": "A*"}  # named by their method in the table
    seen = set()
    for cells in rows:
        problem = next(p for p in listed if p in cells[0].lower())
        seen.add(problem)
        for solver in listed[problem]:
            word = called.get(solver, solver)
            assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", cells[2]), (problem, solver)
    assert seen == set(listed)


def test_run_refuses_an_empty_model_and_solver() -> None:
    one_line_refusal(run_cli("run", TINY, "--budget", "60%", "--model", ""), "--model: is empty")
    one_line_refusal(run_cli("run", "resnet18", "--budget", "60%", "--solver", ""), "--solver: is empty")
    # as the other commands word it
    one_line_refusal(run_cli("solve", TINY, "--budget", "60%", "--solver", ""), "--solver: is empty")


def test_run_refuses_an_empty_model_before_the_files_meta_model(tmp_path: Path) -> None:
    """A chain file naming its network (meta.model): an empty --model is refused, not replaced by it."""
    import json

    data: dict[str, Any] = json.loads(Path(TINY).read_text())
    data.setdefault("meta", {})["model"] = "resnet18"
    path = tmp_path / "named.json"
    path.write_text(json.dumps(data))
    one_line_refusal(run_cli("run", str(path), "--budget", "60%", "--model", "", "--solver", "zzz"),
                     "--model: is empty")


@pytest.mark.parametrize(("argv", "field"), [
    (["solve", "", "--budget", "60%"], "FILE"),
    (["run", "resnet18", "--budget", "60%", "--chain", ""], "--chain"),
    (["run", "", "--budget", "60%"], "MODEL"),
    (["max-batch", "resnet18", "--memory", "1GB", "--journal", ""], "--journal"),
    (["plot", "", TINY, "-o", "OUT"], "FILE"),
])
def test_an_empty_path_names_its_argument(argv: list[str], field: str, tmp_path: Path) -> None:
    argv = [str(tmp_path / "out.png") if a == "OUT" else a for a in argv]  # never written: refused first
    line = one_line_refusal(run_cli(*argv), f"{field}: is empty")
    assert ".:" not in line and "directory" not in line, line


def test_gpu_check_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import gpu_check

    code, out, err = call_main(gpu_check.main, ["--bogus"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "python -m memsched.experiments.gpu_check: error: unrecognized arguments: --bogus"]
    assert out == ""

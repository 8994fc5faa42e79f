"""The documentation under docs/: self-contained, complete for the command line, one template.

(a) no tracked file points to the design note outside the repository;
(b) every subcommand and every option string of every subparser of `memsched` appears in its
    section of docs/cli.md (the failure names the command and the missing option);
(c) each problem page has the template's headings, in order;
(d) every relative Markdown link in docs/ and README.md resolves to an existing file (and heading);
(e) every registered solver is named in the Solvers section of its problem's page;
(f) every option of the solver options table of docs/cli.md is one its solver takes.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest
from memsched.experiments.cli import build_parser
from memsched.solvers import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PROBLEM_PAGES = {"chain": "chain.md", "graph": "graph.md", "join": "join.md", "offload": "offload.md",
                 "pipeline": "pipeline.md"}
TEMPLATE = ("Notation", "Instance format", "Schedule format", "Simulator rules", "Budget semantics", "Solvers",
            "Exact models", "Dynamic programs", "References")
# spelled in pieces so that this file does not match its own check
OUTSIDE = ("DESIGN" + ".md", "../" + "shared", "/work/" + "shared")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / p for p in out.decode().split("\0") if p]


def _sections(text: str, level: str = "## ") -> dict[str, str]:
    """Heading text (without the leading #s) -> body up to the next heading of that level."""
    out: dict[str, str] = {}
    current, body = None, []
    for line in text.splitlines():
        if line.startswith(level):
            if current is not None:
                out[current] = "\n".join(body)
            current, body = line[len(level):].strip(), []
        elif current is not None:
            body.append(line)
    if current is not None:
        out[current] = "\n".join(body)
    return out


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("memsched has no subcommands")


# --------------------------------------------------------------------------- (a)
def test_no_tracked_file_points_outside_the_repository():
    offenders = []
    for path in _tracked_files():
        if not path.is_file():
            continue  # deleted in the working tree
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary
        for n, line in enumerate(text.splitlines(), 1):
            for needle in OUTSIDE:
                if needle in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: mentions {needle!r}")
    assert not offenders, "point to a page under docs/ instead:\n" + "\n".join(offenders)


# --------------------------------------------------------------------------- (b)
def test_every_command_and_option_is_in_cli_md():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    sections = _sections(text)
    by_command = {}
    for heading, body in sections.items():
        m = re.fullmatch(r"`memsched ([\w-]+)`.*", heading)
        if m:
            by_command[m.group(1)] = body
    missing = []
    for name, sub in _subparsers().items():
        if name not in by_command:
            missing.append(f"memsched {name}: no section '## `memsched {name}`' in docs/cli.md")
            continue
        body = by_command[name]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                if not re.search(rf"`{re.escape(option)}(?![\w-])", body):
                    missing.append(f"memsched {name}: option {option} is not documented in its section of "
                                   "docs/cli.md (write it as `" + option + "`)")
            if not action.option_strings:
                label = action.metavar or action.dest
                if not isinstance(label, str) or label.upper() not in body.upper():
                    missing.append(f"memsched {name}: positional argument {label} is not documented in its "
                                   "section of docs/cli.md")
    assert not missing, "\n".join(missing)


def test_cli_md_lists_the_exit_codes():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    exit_section = next((b for h, b in _sections(text).items() if h.lower().startswith("exit codes")), None)
    assert exit_section is not None, "docs/cli.md needs a '## Exit codes' section"
    for code in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\|\s*{code}\s*\|", exit_section, re.M), f"exit code {code} missing from docs/cli.md"


# --------------------------------------------------------------------------- (c)
@pytest.mark.parametrize("page", sorted(PROBLEM_PAGES.values()))
def test_problem_page_follows_the_template(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    headings = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
    positions = []
    for want in TEMPLATE:
        hits = [k for k, h in enumerate(headings) if h == want or h.startswith(want + " ")]
        assert hits, f"docs/{page}: missing the heading '## {want}' (template: {', '.join(TEMPLATE)})"
        positions.append(hits[0])
    assert positions == sorted(positions), f"docs/{page}: headings out of the template's order {TEMPLATE}"
    body = _sections(text)
    for want in TEMPLATE:
        section = next(b for h, b in body.items() if h == want or h.startswith(want + " "))
        assert section.strip(), f"docs/{page}: section '## {want}' is empty"


# --------------------------------------------------------------------------- (d)
def _markdown_files() -> list[Path]:
    return sorted(DOCS.glob("**/*.md")) + [ROOT / "README.md"]


def _anchors(md: Path) -> set[str]:
    """GitHub's heading slugs of a Markdown file, and its explicit <a id="..."> anchors."""
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
             for h in re.findall(r"^#+ (.*)$", text, re.M)}
    return slugs | set(re.findall(r"<a id=\"([^\"]+)\"", text))


def test_relative_links_resolve():
    broken = []
    for md in _markdown_files():
        text = md.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # absolute URL
            path, _, anchor = target.partition("#")
            dest = md.parent / path if path else md
            if not dest.exists():
                broken.append(f"{md.relative_to(ROOT)}: link to {target} does not resolve")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{md.relative_to(ROOT)}: link to {target}: no heading or anchor #{anchor} there")
    assert not broken, "\n".join(broken)


def test_index_links_every_page():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {Path(t.split("#", 1)[0]).name for t in LINK.findall(index)}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert not pages - linked, f"docs/index.md does not link {sorted(pages - linked)}"


# --------------------------------------------------------------------------- (e)
def test_every_registered_solver_is_documented():
    missing = []
    for problem, name, _ in registry.solver_table():
        page = PROBLEM_PAGES.get(problem)
        if page is None:
            missing.append(f"problem {problem!r} has no page in docs/")
            continue
        solvers = _sections((DOCS / page).read_text(encoding="utf-8")).get("Solvers", "")
        if f"`{name}`" not in solvers:
            missing.append(f"docs/{page}: solver `{name}` ({problem}) is not in the Solvers section")
    assert not missing, "\n".join(missing)


def test_every_option_in_the_solver_options_table_is_taken():
    """(f) each option the table of docs/cli.md ("Solver options") names for a solver is one that
    solver takes: `--option` refuses any other (the table said `num_workers`, `cuts` and `root_lp`
    where the check knew none of them)."""
    from memsched.experiments.commands._checks import solver_parameters

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (chain|graph|join|offload|pipeline) \| ([^|]+) \| ([^|]+) \|$", text, re.M)
    assert len(rows) >= 15
    missing = []
    for problem, solvers, options in rows:
        names = re.findall(r"`([a-z][a-z0-9-]*)`", solvers)
        keys = [k for k in re.findall(r"(?:^|\), |; |\) )`([a-z_]+)` \(", options)]
        assert names and keys, (problem, solvers, options)
        for name in names:
            taken = solver_parameters(problem, name)
            missing += [f"{problem} {name}: {key}" for key in keys if key not in taken]
    assert not missing, missing

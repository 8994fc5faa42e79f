"""Pieces shared by subcommands: options, budgets, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError, article
from memsched.solvers.exact.interrupt import answer_on_interrupt
from memsched.solvers.exact.options import ALIASES
from memsched.solvers.result import SolveResult
from memsched.solvers.units import parse_positive_budget, unit_bytes

from memsched.live import line_limit, progress_line, wanted

from ._checks import count, latency, seconds


class _OneOfBooleanAction(argparse.BooleanOptionalAction):
    """``--X`` / ``--no-X`` where giving both is refused (a usage error, exit 2) rather than the last
    one silently winning, as the usage ``[--X | --no-X]`` says; the same flag twice is harmless."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest)  # None (the default) until one of the flags was given
        if option_string is not None and before is not None and before != (not option_string.startswith("--no-")):
            given = self.option_strings[0 if before else 1]
            raise argparse.ArgumentError(None, f"argument {option_string}: not allowed with argument {given}")
        super().__call__(parser, namespace, values, option_string)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: on for exact solvers when stderr is a terminal); both
    together are refused (exit 2)."""
    parser.add_argument("--progress", action=_OneOfBooleanAction, default=None,
                        help="a live line on stderr (stage, best, bound, gap); default: exact solvers on a terminal")


def run_solver(problem: str, instance: Any, name: str, budget: int, *, progress: bool | None,
               time_limit: float | None, options: dict[str, Any], **kw: Any) -> SolveResult:
    """`registry.solve` as a command runs it: a progress line for exact solvers (`progress`: the
    ``--progress`` flag, None for the default), and a Ctrl-C during an exact solver's search
    answered with what it had (``details["interrupted"]``; see `stopped_by_user`)."""
    solver = registry.get_solver(problem, name)
    with answer_on_interrupt(), progress_line(wanted(progress, solver), label=name,
                                              limit=line_limit(solver, time_limit, options)):
        return registry.solve(problem, instance, name, budget, time_limit=time_limit, **kw, **options)


def stopped_by_user(command: str, result: SolveResult) -> bool:
    """True when a Ctrl-C ended `result`'s solve (the command then exits 130 after printing it):
    says so on stderr."""
    if not result.details.get("interrupted"):
        return False
    had = "no schedule" if result.schedule is None else result.status
    print(f"memsched {command}: interrupted; the answer above is what {result.solver} had ({had})", file=sys.stderr)
    return True


def parse_options(items: list[str] | None) -> dict[str, Any]:
    """`--option key=value` pairs; values read as JSON when they parse (numbers, booleans). Keys are
    kept as given with '-' read as '_'; a key given twice, in any spelling ('-' or '_', or an older
    name of an exact solver's option such as ``num_workers`` for ``workers``, `option_name`), is an
    `InputError` naming ``--option KEY``: no value silently wins over another."""
    options: dict[str, Any] = {}
    seen: dict[str, str] = {}  # option_name(key) -> the key as first given
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected key=value, got {item!r}", field="--option")
        name = option_name(key.replace("-", "_"))
        if name in seen:
            first = seen[name]
            spelled = "twice" if first == key else f"twice (as {first!r} and {key!r})"
            raise InputError(f"given {spelled}: give each option once", field=f"--option {name}")
        seen[name] = key
        key = key.replace("-", "_")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def option_name(key: str) -> str:
    """The one name of solver option `key` ('_' spelling): an exact solver's older spelling mapped to
    its `ExactOptions` name (``num_workers`` and ``threads`` -> ``workers``, ``random_seed`` -> ``seed``)."""
    return ALIASES.get(key, key)


def budget_for(problem: str, instance: Any, text: str) -> int:
    """The budget in the instance's size unit (bytes unless ``meta.units.memory`` says otherwise)
    from a budget string: a number in that unit, a size ("1.5GB") converted into it, "X%" of the
    problem's reference peak (`units.parse_budget`)."""
    reference = None
    if str(text).strip().endswith("%"):
        reference = registry.get_problem(problem).reference_peak(instance)
    return parse_positive_budget(text, reference, per_unit=unit_bytes(instance))


def add_link_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bandwidth", metavar="BW",
                        help='host link bandwidth ("12GB/s"): makes a chain file an offloading instance')
    parser.add_argument("--latency", type=latency, default=None, metavar="S", help="host link latency in seconds")


def load_problem(path: str, bandwidth: str | None = None, latency: float | None = None,
                 solver: str | None = None, declared: str | None = None) -> tuple[str, Any]:
    """(problem, instance) for a file. A chain file becomes an offloading instance when a
    bandwidth is given, when it has a ``host_link``, or when `solver` is an offloading solver or
    `declared` (the problem a schedule file names) is "offload"; it becomes a pipeline when
    `declared` is "pipeline". A schedule that declares "chain" keeps a chain file a chain, its
    ``host_link`` set aside as ``memsched.solve(problem="chain")`` sets it aside (`declared_chain`),
    unless a bandwidth or a latency is given."""
    from memsched.solvers.formats import detect_problem, load_instance
    from memsched.solvers.units import parse_bandwidth

    problem = detect_problem(path)
    if problem == "chain" and declared == "pipeline":
        return load_instance(path, "pipeline")
    if problem == "chain" and declared_chain(declared, bandwidth, latency):
        return load_instance(path, "chain")
    if problem == "chain" and declared == "offload" and bandwidth is None:
        solver = solver or registry.get_problem("offload").default_solver
    if problem == "chain":
        chain_names = set(registry.get_problem("chain").solvers)
        # a chain solver (or none) without a bandwidth never needs the offload package: not imported
        wants_offload = bandwidth is not None or has_host_link(path) or (
            solver is not None and solver not in chain_names and solver in registry.get_problem("offload").solvers)
        if wants_offload:
            from memsched.solvers.offload import OffloadInstance

            bw = parse_bandwidth(bandwidth) if bandwidth is not None else None
            return "offload", OffloadInstance.load(path, bw, latency)
    elif bandwidth is not None:
        raise InputError(f"applies to chain files, not to {article(problem)} instance", field="--bandwidth")
    if latency is not None:  # it would be ignored
        raise InputError("applies to offloading instances: give --bandwidth, or a host_link in the file",
                         field="--latency")
    return load_instance(path, problem)


def declared_chain(declared: str | None, bandwidth: object, latency: object) -> bool:
    """True when a schedule that declares problem `declared` is replayed on a chain file read as a chain
    whatever the file's ``host_link``: it declares "chain" and neither a bandwidth nor a latency is given
    (either makes the file an offloading instance, on which the chain schedule is the one that transfers
    nothing). So a chain answer solved from a file with a link (``memsched.solve(problem="chain")``, which
    sets the link aside) replays with the makespan and peak it was solved with. `memsched simulate`,
    `memsched plot`, `memsched.simulate` and `memsched.plot` share it."""
    return declared == "chain" and bandwidth is None and latency is None


def has_host_link(path: str) -> bool:
    """True when the chain file at `path` has a ``host_link``: it is then an offloading
    instance whatever the solver name (``--solver cpsat`` is offloading's cpsat)."""
    from memsched.solvers.jsonio import read_json

    data = read_json(path)
    return isinstance(data, dict) and "host_link" in data


def add_solver_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--solver", help="solver name (see `memsched solvers`)")
    parser.add_argument("--time-limit", type=seconds, default=None, metavar="S", help="seconds for exact solvers")
    parser.add_argument("--slots", type=count(0, 10**9), default=500, metavar="N",
                        help="discretise memory into N slots (sizes rounded up); 0 keeps sizes exact")
    parser.add_argument("--option", action="append", metavar="KEY=VALUE", help="solver-specific option")


def set_help(parser: argparse.ArgumentParser, option: str, text: str) -> None:
    """Replace the help of `parser`'s `option` (e.g. ``--device``, added by a shared helper) with `text`,
    for a command where the shared help would not say what the command does."""
    for action in parser._actions:
        if option in action.option_strings:
            action.help = text
            return
    raise KeyError(option)


def time_text(value: float, unit: str | None) -> str:
    """A time of an instance (a makespan, a period, a lower bound: `units.time_unit`'s unit) for the text
    output: 6 significant digits, then the unit when one is known ("184.444 ms"), the bare number when none
    is (a graph file that names no time unit: its costs are in the file's own unit)."""
    return f"{value:.6g} {unit}" if unit else f"{value:.6g}"


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")

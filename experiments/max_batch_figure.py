"""Checkmate's maximum-batch-size figure from the answers of ``memsched max-batch --json``.

    python -m memsched.experiments.max_batch_figure [--results results/max_batch] [--out results/figures]
        [--stem paper_max_batch] [--published results/published_checkmate.csv]

Reads every ``<results>/<model>-<memory>-<solver>.json`` (one ``memsched max-batch MODEL --memory M
--solver S --cost C --json`` answer each) and draws one group of bars per network: the largest
batch that trains within the memory M with each solver (``store-all``: no recomputation;
``rotor``: the chain DP at the makespan bound X = ``max_overhead``), each bar labelled with the
batch and the overhead of its schedule (makespan / store-all makespan at that batch). The title
states the memory, the cost model the times come from (the answers' ``cost``), the resident
bytes per parameter byte (``state_factor``) and the overhead bound. Prints the table (markdown)
of the answers too. Writes ``<stem>.png`` and ``.pdf`` under `--out`.

Answers of ``--problem graph`` (solvers checkpoint-all, sqrt, greedy, dtr, checkmate, cpsat) are
drawn the same way, one bar per solver present. With ``--published CSV`` (the transcribed
numbers, ``results/published_checkmate.csv``), each published maximum batch of a network and
solver drawn here is marked over its bar (a solid black tick; a dashed one for a lower bound,
relation ``>=``) and given in the table: the paper's numbers beside ours. A bar's label sits on its
bar's top, and a published value (">=57", italic) by its tick; a tick just above a bar (within the label's
height) takes the bar's label over it instead, so that no tick strikes a label through or reads as its
underline (`place_labels`). A solver whose every answer
drawn is ``optimal`` is named in the legend with the model it is optimal in (``rotor (persistent)``,
``checkmate (file's order)``, chain ``cpsat (phase model)``: `legend_text`, by problem and solver). Each
solver's bars have a colour and a hatch of their own (`HATCHES`: one solver, one hatch in every figure).
A size that is a lower bound (the search was interrupted, stopped by bad input, timed out above it or left
sizes untried: `lower_bound`) is written ">= N" in the table and over its bar, and the title says so.

The answers drawn in one figure share one protocol (`PROTOCOL`: memory, cost, max_overhead,
state_factor, problem, vary, tolerance; an answer without ``problem`` is a chain's, without ``vary``
a batch's): a folder mixing protocols (a 16 GB and a 32 GB answer, say) is bad input naming the two
files and the field they disagree on, and so are two answers of one network and solver: put the
answers of each protocol in a folder of their own. Answers of ``--vary image-size`` are drawn as
the largest image side (px); --published (batches) is refused with them.

A JSON object with both ``largest`` and ``solver`` is an answer: one without ``model``, or whose
``model``, ``solver``, ``largest`` (a batch or side in 1..`MAX_BATCH`, or null), ``result`` (an object or
null) or ``memory`` (bytes, at most `MAX_BYTES`) is of the wrong type, is bad input naming the file and the
field. Other
files (not JSON, not an object, without ``largest`` or ``solver``: notes, say) are skipped.

Exit 0; 2, one line on stderr before the table is printed, when --results holds no answer or a
bad one (above), --published cannot be read or lacks a column it needs (`PUBLISHED_COLUMNS`: a JSON file,
say) or --out is no folder that can be made (a file, say);
130, one line, on Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from memsched.experiments.commands._checks import MAX_BATCH  # noqa: E402
from memsched.experiments.paper_figures import save_figure  # noqa: E402
from memsched.experiments.script_args import ScriptParser  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.units import MAX_BYTES, format_bytes  # noqa: E402

#: solvers in the order of their bars (chain answers first, then graph answers); others follow, sorted
SOLVERS = ("store-all", "rotor", "checkpoint-all", "sqrt", "greedy", "dtr", "checkmate", "cpsat")
#: our zoo name -> the network's name in the published table (Checkmate's Keras models)
PUBLISHED_NETWORKS = {"vgg19": "VGG19", "unet": "U-Net (vgg_unet)", "fcn8": "FCN-8 (fcn_8_vgg)", "resnet50": "ResNet50"}
#: our solver name -> the strategy's name in the published table
PUBLISHED_STRATEGIES = {
    "checkpoint-all": "checkpoint-all",
    "sqrt": "sqrt (Chen et al.)",
    "greedy": "greedy (Chen et al.)",
    "checkmate": "checkmate (MILP)",
}
#: rows of the published table that are drawn (the superseded draft rows are not)
PUBLISHED_FIGURE = "Fig. 6 (artifact)"
#: the columns a --published CSV must have (``relation`` may be left out: "=")
PUBLISHED_COLUMNS = ("network", "figure", "quantity", "strategy", "value")
#: solver -> the hatch of its bars, the same in every figure (the chain and the graph one) and distinct
#: for every solver of ``memsched solvers`` (chain and graph); another solver takes the first of
#: `SPARE_HATCHES` that no solver of its figure has (`hatches`)
HATCHES = {"store-all": "..", "rotor": "//", "checkpoint-all": "xx", "sqrt": "\\\\", "greedy": "++",
           "dtr": "--", "checkmate": "oo", "cpsat": "||", "milp": "**", "revolve": "OO", "periodic": "/.",
           "recompute-all": "\\.", "checkmate-approx": "o-", "griewank": "x.", "dtr-orders": "|-"}
SPARE_HATCHES = ("/o", "\\o", "+.", "-.", "|o", "*-", "O.", "x-", "+o", "/-", "\\|", "/|")

#: the fields every answer drawn in one figure shares, with the value an answer without the field has
PROTOCOL: dict[str, Any] = {"memory": None, "cost": None, "max_overhead": None, "state_factor": None,
                            "problem": "chain", "vary": "batch", "tolerance": None}

Answers = dict[str, dict[str, dict[str, Any]]]
#: {(model, solver): (relation, value)} of the published maximum batches
Published = dict[tuple[str, str], tuple[str, int]]


def load_answers(folder: Path) -> Answers:
    """{model: {solver: answer}} of every ``*.json`` answer in `folder` (sorted by file name); files
    that are not max-batch answers (not a JSON object, no ``largest`` or ``solver``) are skipped. An
    answer with a bad field (`check_answer`), one of another protocol than the first answer's
    (`PROTOCOL`) or a second answer of one network and solver is an `InputError` naming the file(s)."""
    out: Answers = {}
    first: tuple[Path, dict[str, Any]] | None = None
    where: dict[tuple[str, str], Path] = {}
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError as err:  # a name too long
        raise InputError(f"not a usable folder: {err.strerror}", path=str(folder)[:80], field="--results") from None
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "largest" not in data or "solver" not in data:
            continue
        check_answer(path, data)
        if first is None:
            first = (path, data)
        else:
            check_same_protocol(first, (path, data))
        key = (data["model"], data["solver"])
        if key in where:
            raise InputError(f"a second answer of {key[0]} with {key[1]} (the first is {str(where[key])!r}): one "
                             "answer per network and solver in a figure", path=str(path))
        where[key] = path
        out.setdefault(key[0], {})[key[1]] = data
    return out


def check_answer(path: Path, data: dict[str, Any]) -> None:
    """`InputError` naming `path` and the field unless the answer `data` has a ``model`` and a ``solver``
    (non-empty strings), a ``largest`` that is a size in 1..`MAX_BATCH` (a batch, or an image side in px:
    what ``memsched max-batch`` answers at most) or null, a ``result`` that is an object or null (its
    ``overhead`` a finite number or null) and a ``memory`` (bytes) that is a positive number of at most
    `MAX_BYTES` when given."""
    for field in ("model", "solver"):
        if field not in data:
            raise InputError("missing: a max-batch answer names its network and solver", path=str(path), field=field)
        if not isinstance(data[field], str) or not data[field]:
            raise InputError(f"expected a name, got {data[field]!r}", path=str(path), field=field)
    big = data["largest"]
    if big is not None and (not isinstance(big, int) or isinstance(big, bool) or not 1 <= big <= MAX_BATCH):
        raise InputError(f"expected a size in 1..{MAX_BATCH} or null, got {_short(big)}", path=str(path),
                         field="largest")
    result = data.get("result")
    if result is not None and not isinstance(result, dict):
        raise InputError(f"expected an object or null, got {result!r}", path=str(path), field="result")
    over = (result or {}).get("overhead")
    if over is not None and not _number(over):
        raise InputError(f"expected a number or null, got {over!r}", path=str(path), field="result.overhead")
    memory = data.get("memory")
    if memory is not None and not (_number(memory) and 0 < memory <= MAX_BYTES):
        raise InputError(f"expected a positive number of bytes (at most {MAX_BYTES}), got {_short(memory)}",
                         path=str(path), field="memory")


def check_same_protocol(first: tuple[Path, dict[str, Any]], other: tuple[Path, dict[str, Any]]) -> None:
    """`InputError` naming both files and the field when the answers `first` and `other` ((path, answer))
    differ in a field of `PROTOCOL` (a missing field has its default there)."""
    for field, default in PROTOCOL.items():
        mine, theirs = first[1].get(field, default), other[1].get(field, default)
        if mine != theirs:
            raise InputError(f"{theirs!r} here but {mine!r} in {str(first[0])!r}: the answers drawn in one figure "
                             f"share {', '.join(PROTOCOL)} (put each protocol's answers in a folder of their own)",
                             path=str(other[0]), field=field)


def _number(value: Any) -> bool:
    """True for an int or float that is no bool and finite as a float (an int beyond the floats, 10**400,
    is not: it cannot be drawn)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _short(value: Any) -> str:
    """`value` for a one-line message: its repr, cut to 40 characters (10**400 has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def load_published(path: Path) -> Published:
    """{(our model, our solver): (relation, batch)} of the maximum batches in a published CSV
    (``results/published_checkmate.csv``: columns network, figure, quantity, strategy, relation,
    value); rows of other figures, quantities, networks or strategies are skipped. A file without a
    column of `PUBLISHED_COLUMNS` in its header row (a JSON file, an empty one) is an `InputError` naming
    the column: none of its rows would be drawn."""
    nets = {v: k for k, v in PUBLISHED_NETWORKS.items()}
    strategies = {v: k for k, v in PUBLISHED_STRATEGIES.items()}
    out: Published = {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        check_published_columns(reader.fieldnames, path)
        for row in reader:
            model, solver = nets.get(row.get("network", "")), strategies.get(row.get("strategy", ""))
            if row.get("figure") != PUBLISHED_FIGURE or row.get("quantity") != "max_batch" or not model or not solver:
                continue
            out[(model, solver)] = (row.get("relation", "="), int(row["value"]))
    return out


def check_published_columns(columns: Any, path: Path) -> None:
    """`InputError` naming `path`, ``--published`` and the first column of `PUBLISHED_COLUMNS` that the
    header row `columns` (`csv.DictReader.fieldnames`: None for an empty file) lacks."""
    have = {str(c).strip() for c in columns or ()}
    missing = [c for c in PUBLISHED_COLUMNS if c not in have]
    if missing:
        raise InputError(f"cannot read the published numbers (no column {missing[0]!r}: a CSV with the columns "
                         f"{', '.join(PUBLISHED_COLUMNS)}, relation, as results/published_checkmate.csv)",
                         path=str(path), field="--published")


def solvers_of(answers: Answers) -> list[str]:
    """The solvers present in `answers`, in the order of `SOLVERS` (others after them, sorted)."""
    present = {solver for by in answers.values() for solver in by}
    return [s for s in SOLVERS if s in present] + sorted(present - set(SOLVERS))


def table(answers: Answers, published: Published | None = None) -> str:
    """Markdown table of the answers. Chain answers (store-all and rotor only): per network the
    largest batch of each solver, rotor's gain over store-all and rotor's overhead at its largest
    batch. Otherwise one column per solver ("batch (xoverhead)"), the gain of the last solver over
    the first, and the published numbers (``>=`` a lower bound) where `published` has them. A size that is a
    lower bound is ">= N" (`size_text`), and `LOWER_BOUND_NOTE` follows the table then."""
    solvers = solvers_of(answers)
    note = f"\n\n{LOWER_BOUND_NOTE}" if any_lower_bound(answers) else ""
    if set(solvers) <= {"store-all", "rotor"}:
        return _chain_table(answers) + note
    published = published or {}
    first, last = solvers[0], solvers[-1]
    head = ["network", *solvers, f"{last} / {first}"] + (["published (same solvers)"] if published else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, by in answers.items():
        cells = [model]
        for solver in solvers:
            ans = by.get(solver) or {}
            over = (ans.get("result") or {}).get("overhead")
            big = ans.get("largest")
            cells.append("-" if big is None else size_text(ans) + (f" (x{over:.3f})" if over is not None else ""))
        lo, hi = (by.get(first) or {}).get("largest"), (by.get(last) or {}).get("largest")
        cells.append(f"{hi / lo:.2f}x" if lo and hi else "-")
        if published:
            pub = [(s, *published[(model, s)]) for s in solvers if (model, s) in published]
            cells.append(", ".join(f"{s} {'' if rel == '=' else rel}{v}" for s, rel, v in pub) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + note


def size_text(answer: dict[str, Any]) -> str:
    """An answer's largest size as text, ">= N" when it is a lower bound (`lower_bound`), as
    ``memsched max-batch`` says "at least"."""
    return (">=" if lower_bound(answer) else "") + str(answer["largest"])


def lower_bound(answer: dict[str, Any]) -> bool:
    """Whether an answer's ``largest`` is only a lower bound (docs/cli.md, max-batch's JSON): its ``status``
    is given and not ``"complete"`` (``"interrupted"``, ``"stopped"``), sizes were left ``untried``, a larger
    size timed out (``timed_out``) or bad input stopped the search (``stopped``; files without ``status``)."""
    status = answer.get("status")
    return bool((status is not None and status != "complete") or answer.get("untried")
                or answer.get("timed_out") or answer.get("stopped"))


#: the line a table and a figure add when a size drawn is a lower bound
LOWER_BOUND_NOTE = ">= N: a lower bound (the search was interrupted, stopped, timed out above N or left sizes untried)"


def any_lower_bound(answers: Answers) -> bool:
    """Whether a size drawn (``largest`` not null) of `answers` is a lower bound (`lower_bound`)."""
    return any(a.get("largest") is not None and lower_bound(a) for by in answers.values() for a in by.values())


def _chain_table(answers: Answers) -> str:
    lines = ["| network | store-all | rotor (overhead <= bound) | gain | rotor's overhead at its largest |"]
    lines.append("|---|---|---|---|---|")
    for model, by in answers.items():
        sa, ro = by.get("store-all", {}).get("largest"), by.get("rotor", {}).get("largest")
        res = (by.get("rotor") or {}).get("result") or {}
        gain = f"{ro / sa:.2f}x" if sa and ro else "-"
        over = f"x{res['overhead']:.3f}" if res.get("overhead") is not None else "-"
        sizes = ["-" if big is None else size_text(by[solver]) for solver, big in (("store-all", sa), ("rotor", ro))]
        cells = [model, *sizes, gain, over]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw(
    answers: Answers, out_dir: Path, stem: str = "paper_max_batch", published: Published | None = None
) -> list[Path]:
    """Grouped bars (one group per network, one bar per solver) of the largest batch (or image side:
    `quantity`), with the published numbers marked over their bars; returns the files written. The
    title's protocol is the first answer's (`load_answers` checked that they share it)."""
    models = list(answers)
    solvers = solvers_of(answers)
    published = published or {}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(models) * len(solvers) + 2.0), 3.8))
    width = 0.8 / len(solvers)
    first: dict[str, Any] = next((a for by in answers.values() for a in by.values()), {})
    marked = {"=": False, ">=": False}
    hatch = hatches(solvers)
    labels: list[BarLabel] = []
    for k, solver in enumerate(solvers):
        xs, ys, notes, ticks = [], [], [], []
        for i, model in enumerate(models):
            x = i + (k - (len(solvers) - 1) / 2) * width
            if (model, solver) in published:
                rel, value = published[(model, solver)]
                key = "=" if rel == "=" else ">="
                label = "published (Checkmate artifact)" if key == "=" else "published lower bound (>=)"
                ax.hlines(
                    value,
                    x - width / 2,
                    x + width / 2,
                    colors="black",
                    linewidth=1.6,
                    linestyles="solid" if key == "=" else "dashed",
                    label=None if marked[key] else label,
                    zorder=3,
                )
                marked[key] = True
            ans = answers[model].get(solver)
            tick = published.get((model, solver))
            if ans is None or ans.get("largest") is None:
                if tick is not None:  # a published number without our bar: its value by its tick
                    labels.append(BarLabel(x, None, "", tick))
                continue
            xs.append(x)
            ys.append(ans["largest"])
            ticks.append(tick)
            over = (ans.get("result") or {}).get("overhead")
            show = over is not None and solver not in ("store-all", "checkpoint-all")
            notes.append(size_text(ans) + (f"\nx{over:.2f}" if show else ""))
        bars = ax.bar(xs, ys, width=width, label=legend_text(solver, answers), color=f"C{k}", hatch=hatch[solver],
                      edgecolor="0.2", linewidth=0.4)
        for bar in bars:  # a patch's own hatch width exists from matplotlib 3.10 (before: rcParams at drawing)
            if hasattr(bar, "set_hatch_linewidth"):
                bar.set_hatch_linewidth(0.4)
        labels += [BarLabel(bar.get_x() + bar.get_width() / 2, bar.get_height(), note, tick)
                   for bar, note, tick in zip(bars, notes, ticks)]
    what = quantity(first)
    ax.set_xticks(range(len(models)), models, fontsize=7)
    ax.set_ylabel(what + (" (px)" if what.endswith("side") else ""), fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_yscale("log")
    memory = first.get("memory")
    head = f"{what} within {memory_text(memory)}" if memory else what
    bound = first.get("max_overhead", "?")
    bound_text = "store-all + one forward pass" if bound == "forward" else f"x{bound} store-all"
    problem = first.get("problem", "chain")
    bounds = f"\n{LOWER_BOUND_NOTE}" if any_lower_bound(answers) else ""
    ax.set_title(
        f"{head}, {problem} solvers (bars: batch, overhead)\ntimes: {first.get('cost', 'unknown')}; "
        f"resident {first.get('state_factor', '?')} x parameter bytes\nmakespan <= {bound_text}{bounds}",
        fontsize=7,
    )
    tops = [a["largest"] for by in answers.values() for a in by.values() if a.get("largest")]
    tops += [v for _, v in published.values()]
    ax.set_ylim(1, 4 * max(tops, default=1))
    ax.legend(fontsize=6, loc="upper left", ncol=2)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    place_labels(ax, labels)  # after the layout: where a label goes depends on the distances drawn
    return save_figure(fig, out_dir, stem)


class BarLabel(NamedTuple):
    """A bar's label and the published number over it, to place (`place_labels`): the bar's centre `x` (data),
    its `top` (the size drawn; None: no bar, a published number alone), its `note` (the size and overhead) and
    its published (relation, value) `tick` (None: none)."""

    x: float
    top: float | None
    note: str
    tick: tuple[str, int] | None


#: the bar labels' font size (points), the height of one of their lines and the gap between a published tick and
#: a label over it (points)
LABEL_FONT = 5.0
LABEL_LINE_PT = 1.2 * LABEL_FONT
LABEL_LIFT_PT = 2.0
#: a published tick this many points or less above the top of its bar's label is too close to be told from it:
#: the label is lifted over the tick instead (`place_labels`)
TICK_CLEARANCE_PT = 4.0


def place_labels(ax: Any, labels: list[BarLabel]) -> None:
    """Write each bar's label (`BarLabel.note`) on the top of its bar and each published value by its tick
    (">=57" by a dashed tick, "289" by a solid one, in italics), so that each reads as the label of its own mark:
    a tick above the bar by no more than the label's height and `TICK_CLEARANCE_PT` (close enough to strike
    the label through or to pass for its underline) takes the label over it instead, and its value is not
    written (the bar's label stands over both); a tick further above its bar has its value just above it; a
    tick under its bar's top, just under it, on a white ground over the bar's hatching. Distances are those of
    the axes as laid out when called (points: call after the limits and `tight_layout`)."""
    per_pt = ax.figure.dpi / 72

    def gap_pt(low: float, high: float) -> float:
        """How far `high` is drawn above `low` (data, on one bar), in points."""
        return float(ax.transData.transform((0, high))[1] - ax.transData.transform((0, low))[1]) / per_pt

    for label in labels:
        top, tick = label.top, label.tick
        anchor = top
        if tick is not None and top is not None:
            span = LABEL_LIFT_PT + LABEL_LINE_PT * (label.note.count("\n") + 1) + TICK_CLEARANCE_PT
            if 0 <= gap_pt(top, tick[1]) <= span:
                anchor, tick = tick[1], None  # the label over the tick, which it names no more
        if top is not None:
            lift = LABEL_LIFT_PT if anchor != top else 0.0
            ax.annotate(label.note, (label.x, anchor), xytext=(0, lift), textcoords="offset points", ha="center",
                        va="bottom", fontsize=LABEL_FONT)
        if tick is not None:
            under = top is not None and tick[1] < top
            ax.annotate((">=" if tick[0] != "=" else "") + str(tick[1]), (label.x, tick[1]),
                        xytext=(0, -LABEL_LIFT_PT if under else LABEL_LIFT_PT), textcoords="offset points",
                        ha="center", va="top" if under else "bottom", fontsize=LABEL_FONT, style="italic",
                        bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8} if under
                        else None)


def hatches(solvers: list[str]) -> dict[str, str]:
    """Solver -> the hatch of its bars in one figure: `HATCHES`' (the same in every figure), else the first
    of `SPARE_HATCHES` that no solver of `solvers` has (then cycled: past them, solvers may share one)."""
    out = {s: HATCHES[s] for s in solvers if s in HATCHES}
    spare = [h for h in SPARE_HATCHES if h not in out.values()]
    for k, solver in enumerate(s for s in solvers if s not in HATCHES):
        out[solver] = spare[k % len(spare)]
    return out


#: (bytes per unit, name), largest first, of the units a memory is written in (`memory_text`)
_DECIMAL_UNITS = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB"))
_BINARY_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def memory_text(memory: float) -> str:
    """A memory in bytes as the title writes it, exactly: a whole number of the largest decimal unit it fills
    ("16 GB" for 16e9, "2 MB"), else of the largest binary one ("16 GiB" for 2**34, "1 KiB"), else either with
    at most 3 decimals ("1.5 GB", "1.5 GiB"), else `format_bytes` (rounded: "1.91 MiB" for 2000123). A
    --memory given as "16GB" or "16GiB" is written as given."""
    if float(memory) != math.floor(memory):
        return format_bytes(memory)
    n = int(memory)
    for per in (1, 1000):  # whole units first, then thousandths
        for units in (_DECIMAL_UNITS, _BINARY_UNITS):
            scale, name = next(((u, nm) for u, nm in units if n >= u), (1, "B"))
            if scale > 1 and (n * per) % scale == 0:
                return f"{n * per // scale / per:g} {name}"
    return format_bytes(n)


#: (problem, solver) -> the start of the scope its ``optimal`` answers are optimal in (a max-batch answer's
#: result carries its status, not always its scope; the solvers' own scopes begin so): the model, in the
#: words of the other figures, is `plotting.labels.scope_model`'s (`SCOPE_MODELS`). cpsat's model depends
#: on the problem: the chain's phase model, at most 2 computations per node on a graph.
OPTIMAL_SCOPES = {
    ("chain", "rotor"): "persistent schedules",
    ("chain", "milp"): "phase model",
    ("chain", "cpsat"): "phase model",
    ("graph", "checkmate"): "frontier-advancing schedules in the file's order",
    ("graph", "cpsat"): "at most 2 computations per node",
}


def legend_text(solver: str, answers: Answers) -> str:
    """The legend text of `solver`'s bars: the solver with the model it is optimal in ("rotor
    (persistent)", `plotting.labels.with_model`) when every answer of it drawn (``largest`` not null) has
    an ``optimal`` result, whose ``scope`` (else `OPTIMAL_SCOPES` of the answer's ``problem``, a chain's
    when it has none) names one model; else the solver."""
    from memsched.experiments.plotting.labels import scope_model, with_model

    drawn = [a for by in answers.values() for s, a in by.items() if s == solver and a.get("largest") is not None]
    results = [a.get("result") or {} for a in drawn]
    if not results or any(r.get("status") != "optimal" for r in results):
        return solver
    models = {scope_model(str((a.get("result") or {}).get("scope")
                              or optimal_scope(str(a.get("problem", PROTOCOL["problem"])), solver)))
              for a in drawn}
    return with_model(solver, str(models.pop())) if len(models) == 1 and None not in models else solver


def optimal_scope(problem: str, solver: str) -> str:
    """The start of the scope that `solver`'s ``optimal`` answers of `problem` are optimal in: that of
    `OPTIMAL_SCOPES`; for a (problem, solver) not listed, the solver's one scope there when all its problems
    agree (rotor's, of an answer whose ``problem`` names another problem); else "" (no model)."""
    if (problem, solver) in OPTIMAL_SCOPES:
        return OPTIMAL_SCOPES[(problem, solver)]
    scopes = {scope for (_, name), scope in OPTIMAL_SCOPES.items() if name == solver}
    return scopes.pop() if len(scopes) == 1 else ""


def quantity(answer: dict[str, Any]) -> str:
    """What an answer maximises, in words: "largest image side" for ``vary`` image-size, else "largest batch"."""
    return "largest image side" if answer.get("vary") == "image-size" else "largest batch"


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; exit 0, 2 (one line on stderr, before the table) when --results
    holds no answer, --published cannot be read or a figure's path under --out cannot be written, 130 on
    Ctrl-C (one line)."""
    from memsched.experiments.benchtable import guarded

    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/max_batch", help="folder of `memsched max-batch --json` answers")
    parser.add_argument("--out", default="results/figures", help="folder for the figure files")
    parser.add_argument("--stem", default="paper_max_batch", help="figure file name (without extension)")
    parser.add_argument("--published", default=None, help="CSV of published numbers to mark (published_checkmate.csv)")
    args = parser.parse_args(argv)
    return guarded("max_batch_figure", lambda: run(args),
                   interrupted=f"interrupted: each figure file under {args.out} is as it was or complete "
                               "(written atomically)")


def run(args: argparse.Namespace) -> int:
    """The body of `main`: the answers, --published and the figure's paths (`check_figure_paths`) checked
    (`InputError`) before the table is printed and the figure drawn; exit 0."""
    from memsched.experiments.figures import check_figure_paths, check_stem

    answers = load_answers(Path(args.results))
    if not answers:
        raise InputError(f"no max-batch answer (*.json) in {args.results}", field="--results")
    published: Published = {}
    if args.published:
        try:
            published = load_published(Path(args.published))
        except InputError:  # a column missing: its own message (an InputError is a ValueError)
            raise
        except (OSError, KeyError, ValueError) as err:
            raise InputError(f"cannot read the published numbers ({_reason(err)})", path=args.published,
                             field="--published") from None
        published = {key: v for key, v in published.items() if key[0] in answers}
        if published and any(a.get("vary") == "image-size" for by in answers.values() for a in by.values()):
            raise InputError("the published numbers are batches; these answers are image sides (--vary image-size)",
                             path=args.published, field="--published")
    check_stem(args.stem)
    check_figure_paths(Path(args.out), [args.stem])
    print(table(answers, published))
    for p in draw(answers, Path(args.out), stem=args.stem, published=published):
        print(f"wrote {p}")
    return 0


def _reason(err: Exception) -> str:
    """One line saying why --published could not be read: a missing column (`KeyError`) named as such,
    else the error's first line."""
    from memsched.solvers.errors import first_line

    if isinstance(err, KeyError):
        return f"no column {err}"
    if isinstance(err, OSError):
        return err.strerror or first_line(err)
    return first_line(err)


if __name__ == "__main__":
    raise SystemExit(main())

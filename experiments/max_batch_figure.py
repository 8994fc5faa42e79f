"""Checkmate's maximum-batch-size figure from the answers of ``memsched max-batch --json``.

    python -m memsched.experiments.max_batch_figure [--results results/max_batch] [--out results/figures]
        [--stem paper_max_batch]

Reads every ``<results>/<model>-<memory>-<solver>.json`` (one ``memsched max-batch MODEL --memory M
--solver S --cost C --json`` answer each) and draws one group of bars per network: the largest
batch that trains within the memory M with each solver (``store-all``: no recomputation;
``rotor``: the chain DP at the makespan bound X = ``max_overhead``), each bar labelled with the
batch and the overhead of its schedule (makespan / store-all makespan at that batch). The title
states the memory, the cost model the times come from (the answers' ``cost``), the resident
bytes per parameter byte (``state_factor``) and the overhead bound. Prints the table (markdown)
of the answers too. Writes ``<stem>.png`` and ``.pdf`` under `--out`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from memsched.experiments.paper_figures import figure_args, save_figure  # noqa: E402

#: solvers in the order of their bars
SOLVERS = ("store-all", "rotor")


def load_answers(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{model: {solver: answer}} of every ``*.json`` answer in `folder` (sorted by file name);
    files that are not max-batch answers (no ``largest`` or ``solver``) are skipped."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "largest" not in data or "solver" not in data:
            continue
        out.setdefault(str(data["model"]), {})[str(data["solver"])] = data
    return out


def table(answers: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Markdown table: per network the largest batch of each solver, rotor's gain over store-all
    and rotor's overhead at its largest batch."""
    lines = ["| network | store-all | rotor (overhead <= bound) | gain | rotor's overhead at its largest |"]
    lines.append("|---|---|---|---|---|")
    for model, by in answers.items():
        sa, ro = by.get("store-all", {}).get("largest"), by.get("rotor", {}).get("largest")
        res = (by.get("rotor") or {}).get("result") or {}
        gain = f"{ro / sa:.2f}x" if sa and ro else "-"
        over = f"x{res['overhead']:.3f}" if res.get("overhead") is not None else "-"
        cells = [model, "-" if sa is None else str(sa), "-" if ro is None else str(ro), gain, over]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw(answers: dict[str, dict[str, dict[str, Any]]], out_dir: Path, stem: str = "paper_max_batch") -> list[Path]:
    """Grouped bars (one group per network, one bar per solver) of the largest batch; returns the
    files written."""
    models = list(answers)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(models) + 1.5), 3.4))
    width = 0.8 / len(SOLVERS)
    first: dict[str, Any] = next((a for by in answers.values() for a in by.values()), {})
    for k, solver in enumerate(SOLVERS):
        xs, ys, notes = [], [], []
        for i, model in enumerate(models):
            ans = answers[model].get(solver)
            if ans is None or ans.get("largest") is None:
                continue
            xs.append(i + (k - (len(SOLVERS) - 1) / 2) * width)
            ys.append(ans["largest"])
            over = (ans.get("result") or {}).get("overhead")
            notes.append(f"{ans['largest']}" + (f"\nx{over:.2f}" if over is not None and solver != "store-all" else ""))
        bars = ax.bar(xs, ys, width=width, label=solver, color=f"C{k}")
        for bar, note in zip(bars, notes):
            ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=6)
    ax.set_xticks(range(len(models)), models, fontsize=7)
    ax.set_ylabel("largest batch", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_yscale("log")
    memory = first.get("memory")
    head = f"largest batch within {memory / 1e9:.0f} GB" if memory else "largest batch"
    ax.set_title(f"{head} (bars: batch, rotor's overhead)\ntimes: {first.get('cost', 'unknown')}; resident "
                 f"{first.get('state_factor', '?')} x parameter bytes; overhead <= {first.get('max_overhead', '?')}",
                 fontsize=7)
    tops = [a["largest"] for by in answers.values() for a in by.values() if a.get("largest")]
    ax.set_ylim(1, 4 * max(tops, default=1))
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; exit 0, or 2 when --results holds no answer."""
    args = figure_args(argv, __doc__, "results/max_batch", "folder of `memsched max-batch --json` answers",
                       "paper_max_batch")
    answers = load_answers(Path(args.results))
    if not answers:
        print(f"max_batch_figure: error: no max-batch answer (*.json) in {args.results}", file=sys.stderr)
        return 2
    print(table(answers))
    for p in draw(answers, Path(args.out), stem=args.stem):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

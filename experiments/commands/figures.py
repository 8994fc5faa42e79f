"""`memsched figures`: redraw the papers' figures (PNG and PDF) from the sweep tables in results/."""

from __future__ import annotations

import argparse
from pathlib import Path

from memsched.solvers.errors import InputError

from ._checks import check_output_dir


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``figures`` subcommand (redraw figures from the sweep tables)."""
    p = sub.add_parser("figures", help="regenerate figures from the sweep tables under results/",
                       description="Redraw figures (a)-(g) and the main job's from the sweep tables; a figure "
                                   "whose rows are absent is skipped with a one-line note.")
    p.add_argument("--results", default="results", metavar="DIR", help="folder searched for sweep tables "
                                                                       "(default: results)")
    p.add_argument("--out", metavar="DIR", help="folder for the figures (default: <results>/figures)")
    p.add_argument("--only", nargs="+", metavar="ID", help="figure ids to draw (main, a, b, c, d, e, f, g)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Redraw the figures whose sweep tables are under --results (absent ones skipped with a note, partial ones
    drawn with their done/total cells); exit 0, 2 if the folder is missing or empty (""), a table is damaged, or
    rows of one sweep come from two tables run with other settings. The notes come first, then the
    ``wrote`` lines, each figure's as its files land (a figure's PNG and PDF are replaced together), so
    that a Ctrl-C (exit 130) leaves every figure all-new or all-old and its lines name the files replaced."""
    from memsched.experiments.figures import FIGURES, make_figures

    if args.results == "":  # not the current folder: an empty path is bad input
        raise InputError("is empty, expected a folder name", field="--results")
    if Path(args.results).exists() and not Path(args.results).is_dir():
        raise InputError("is a file, expected a folder", field="--results", path=args.results)
    if not Path(args.results).is_dir():
        raise InputError("no such folder", field="--results", path=args.results)
    check_output_dir(args.out, "--out")
    for fid in args.only or []:
        if fid not in FIGURES:
            raise InputError(f"unknown figure {fid!r} (one of {', '.join(FIGURES)})", field="--only")
    make_figures(args.results, args.out, args.only, on_notes=_print_notes, on_saved=_print_written)
    return 0


def _print_notes(notes: list[str]) -> None:
    """One ``note:`` line per note, printed before any figure is drawn."""
    for note in notes:
        print(f"note: {note}", flush=True)


def _print_written(paths: list[Path]) -> None:
    """One ``wrote`` line per file of a figure, printed as soon as its files are in place (`make_figures`'s
    `on_saved`): a run stopped by Ctrl-C (exit 130) has named every file it replaced, and no other."""
    for path in paths:
        print(f"wrote {path}", flush=True)

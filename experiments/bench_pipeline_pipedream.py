"""Our DAG planners beside PipeDream's planner, on the profiles shipped in PipeDream's repository.

    python -m memsched.experiments.bench_pipeline_pipedream [--quick] [--out results/bench_pipeline_pipedream.csv]
        [--replot]

For every profile under ``solvers/data/pipeline/pipedream/`` and P in {2, 4, 8, 16} devices:

- ``compute`` (straight pipelines, communication not charged, as PipeDream's planner with
  ``--straight_pipeline``): ``dag-pipedream`` (antichain DP, memory ignored: PipeDream's model),
  ``dag`` (the same with every device within ``--memory``, default 16 GB, PipeDream's default
  ``memory_size``, weights x 4), and ``pipedream`` on the linearised chain (the former memsched
  planner);
- ``1gbps`` (1 GB/s links, replication allowed; PipeDream's planner with
  ``-b 1e9 --activation_compression_ratio 1``): the same solvers with replication and the
  bandwidth charged. The two models differ slightly here: PipeDream charges a stage both its
  input and its output transfer divided by its own replication, memsched its input divided by
  its own replication (the output is the next stage's input).

``pipedream_plan_within_memory`` says whether PipeDream's plan fits ``--memory`` per device
(`memory_verdict`): ``yes`` when the plan of ``dag-pipedream`` (PipeDream's planner's period)
fits; ``no (proven)`` when it does not and ``dag``, exact on the full antichain lattice, finds
nothing within the memory at that period (so no plan of PipeDream's period fits, whichever tie
its planner picked: ``dag``'s longer period there is a memory-feasibility effect, not a DP
weakness); ``no (its plan)`` when only the reproduced plan is known to exceed it (a coarsened
lattice, or a tie plan of the same period fits).

PipeDream's period, state count and planning time are those its planner printed on this kind of
machine (``solvers/data/pipeline/pipedream/planner_outputs.csv``; ``timeout`` where it did not
finish in 60 s). Columns ``*_period_s`` are seconds per micro-batch; ``ratio`` is ours
(``dag-pipedream``) over PipeDream's. ``*_plan_s`` are wall-clock seconds of the whole solve
(lattice, contiguous DP for the bound, lattice DP, replay), ``*_plan_cpu_s`` the CPU seconds of
the same solve (what the wall clock would be on an idle core), ``load_1min`` the machine's load.
Writes the CSV and a figure beside it (``.png``: the ratio per profile and P, compute only; every profile
has its column, and a column missing a point says why under it: ``PipeDream timed out``, or ``no plan <= 16 GB``
where ``dag`` found none); ``--replot`` runs nothing and redraws that figure from ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    Resumable,
    check_out,
    figure_beside,
    guarded,
    resumable,
    save_figure,
    settings_of,
    write_csv,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import load
from memsched.solvers.units import parse_budget

DATA = Path(__file__).resolve().parents[1] / "solvers" / "data" / "pipeline" / "pipedream"
FIELDS = ["profile", "layers", "mode", "devices", "memory", "pipedream_period_s", "pipedream_states",
          "pipedream_planner_s", "pipedream_status", "ours_period_s", "ours_peak_memory", "ours_fits",
          "ours_plan_s", "ratio", "memaware_status", "memaware_period_s", "memaware_peak_memory",
          "memaware_plan_s", "pipedream_plan_within_memory", "chain_period_s", "ideals", "scope", "ours_plan_cpu_s",
          "memaware_plan_cpu_s", "load_1min", "version"]
#: per mode: bandwidth (bytes/s), replication, and the cap on ideals (replication costs P times
#: more per ideal, so the 1 GB/s runs use a coarser lattice on the largest DAGs; the scope says so)
MODES = {"compute": {"bandwidth": None, "replication": False, "max_states": 5000},
         "1gbps": {"bandwidth": 1e9, "replication": True, "max_states": 2000}}


def planner_outputs() -> dict[tuple[str, str, int], dict[str, str]]:
    """PipeDream's planner outputs keyed by (profile, mode, P)."""
    path = DATA / "planner_outputs.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {(r["profile"], r["mode"], int(r["devices"])): r for r in csv.DictReader(f)}


def _solve(inst: Any, solver: str, memory: int | None, P: int, replication: bool,
           max_states: int) -> tuple[Any, float, float]:
    """The result, its wall-clock time and the CPU time of this process (s)."""
    start, cpu = time.perf_counter(), time.process_time()
    res = registry.solve("pipeline", inst, solver, memory, devices=P, replication=replication,
                         max_states=max_states)
    return res, time.perf_counter() - start, time.process_time() - cpu


def run(quick: bool, memory: int, rows: list[dict[str, Any]] | None = None, table: Resumable | None = None
        ) -> list[dict[str, Any]]:
    """Compare our partitions with PipeDream's planner on its profiles (`memory` bytes per device for the
    memory-aware one); one row per network, mode and device count, appended to `rows` (when given) as soon
    as it is measured, so a caller interrupted keeps the finished ones; with `table` (`benchtable.resumable`;
    then `rows` is its rows) those it holds already are not measured again."""
    ref = planner_outputs()
    rows = table.rows if table is not None else [] if rows is None else rows
    names = sorted(p.name.removesuffix(".graph.txt") for p in DATA.glob("*.graph.txt"))
    if quick:
        names = [n for n in names if n in ("alexnet", "vgg16", "resnet50")]
    for name in names:
        base = load(DATA / f"{name}.graph.txt")
        for mode, machine in MODES.items():
            inst = base.with_machine(bandwidth=machine["bandwidth"])
            rep, cap = bool(machine["replication"]), int(machine["max_states"])
            for P in (2, 4, 8, 16):
                if table is not None and table.kept(name, mode, P) is not None:
                    continue
                ours, t_ours, c_ours = _solve(inst, "dag-pipedream", None, P, rep, cap)
                mem, t_mem, c_mem = _solve(inst, "dag", memory, P, rep, cap)
                chain, _, _ = _solve(inst, "pipedream", None, P, rep, cap)
                pd = ref.get((name, mode, P), {})
                u = inst.time_unit
                pd_period = float(pd["period_s"]) if pd.get("period_s") else None
                ours_s = ours.objective * u
                r = {
                    "profile": name, "layers": inst.length, "mode": mode, "devices": P, "memory": memory,
                    "pipedream_period_s": pd_period if pd_period is not None else "",
                    "pipedream_states": pd.get("states", ""), "pipedream_planner_s": pd.get("planner_s", ""),
                    "pipedream_status": pd.get("status", "not run"),
                    "ours_period_s": ours_s, "ours_peak_memory": ours.peak_memory,
                    "ours_fits": bool(ours.peak_memory is not None and ours.peak_memory <= memory),
                    "ours_plan_s": round(t_ours, 3),
                    "ratio": round(ours_s / pd_period, 6) if pd_period else "",
                    "memaware_status": mem.status,
                    "memaware_period_s": mem.objective * u if mem.objective is not None else "",
                    "memaware_peak_memory": mem.peak_memory if mem.peak_memory is not None else "",
                    "memaware_plan_s": round(t_mem, 3),
                    "pipedream_plan_within_memory": memory_verdict(
                        bool(ours.peak_memory is not None and ours.peak_memory <= memory), mem.status,
                        mem.objective, ours.objective, "all antichain splits" in mem.scope),
                    "chain_period_s": chain.objective * u,
                    "ideals": ours.details.get("ideals", ""), "scope": ours.scope,
                    "ours_plan_cpu_s": round(c_ours, 3), "memaware_plan_cpu_s": round(c_mem, 3),
                    "load_1min": round(os.getloadavg()[0], 2), "version": __version__,
                }
                if table is not None:
                    table.add(r)
                else:
                    rows.append(r)
                print(_line(r), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    """The printed line of a comparison's row (periods and times in s, memory in GB), from the row alone: a row
    read back from a partial file prints as when it ran."""
    return (f"{r['profile']:14s} {r['mode']:7s} P={r['devices']:2d}  pipedream {_f(r['pipedream_period_s'])} "
            f"({r['pipedream_status']}, {r['pipedream_planner_s'] or '-'} s)  ours {_f(r['ours_period_s'])} "
            f"({r['ours_plan_s']} s)  ratio {r['ratio'] or '-'}  within {r['memory'] / 1e9:g} GB: "
            f"{_f(r['memaware_period_s'])} ({r['memaware_status']}; PipeDream's plan fits: "
            f"{r['pipedream_plan_within_memory']})  chain {_f(r['chain_period_s'])}")


def memory_verdict(fits: bool, mem_status: str, mem_period: float | None, period: float, full_lattice: bool) -> str:
    """``pipedream_plan_within_memory`` of the module docstring, from whether the reproduced
    PipeDream plan (period `period`) fits, and the memory-aware DP's status and period."""
    if fits:
        return "yes"
    binds = mem_period is None or mem_period > period * (1 + 1e-9)
    if full_lattice and mem_status in ("optimal", "infeasible") and binds:
        return "no (proven)"
    return "no (its plan)"


def _f(x: Any) -> str:
    return f"{x:.6f}" if isinstance(x, float) else "   -    "


#: the note of a column whose PipeDream planner gave no period (it timed out, or was not run after a smaller P did)
TIMED_OUT = "PipeDream timed out"
#: the figure's panels: the antichain DP (memory ignored) and the memory-aware DP, each over PipeDream's period
PANELS = ("dp", "memory")


def _number(value: Any) -> float | None:
    """A cell of the table as a number: None when empty (no value), else float (a row read back is text)."""
    return None if value in (None, "") else float(value)


def missing_reason(row: dict[str, Any], panel: str) -> str | None:
    """Why the compute `row` has no point in `panel` (`PANELS`: ``dp``, the ratio of ``dag-pipedream``'s period
    to PipeDream's; ``memory``, the memory-aware period over PipeDream's); None when it has one. From the row's
    statuses: PipeDream's planner gave no period (`TIMED_OUT` when it timed out or was not run because a
    smaller P did, else its status) or a period of 0, (``dp``) the row has no ratio, or (``memory``)
    ``dag`` found no plan within the row's memory (bytes, shown in GB)."""
    if _number(row["pipedream_period_s"]) is None:
        status = str(row["pipedream_status"])
        return TIMED_OUT if "timeout" in status or "timed out" in status else f"PipeDream: {status}"
    if _number(row["pipedream_period_s"]) == 0:  # nothing to divide by (the run leaves the ratio empty)
        return "PipeDream's period 0"
    if panel == "dp" and _number(row["ratio"]) is None:
        return "no ratio"
    if panel == "memory" and _number(row["memaware_period_s"]) is None:
        if row["memaware_status"] == "infeasible":
            return f"no plan \u2264 {float(row['memory']) / 1e9:g} GB"
        return f"within memory: {row['memaware_status']}"
    return None


def column_note(rows: list[dict[str, Any]], panel: str) -> str:
    """The note under one profile's column of `panel`: the reason of each of its compute `rows` without a point
    (`missing_reason`), once each; a reason of every row alone, one of some rows after their device counts
    ("P=2: no plan <= 16 GB"), one line each; empty when every row has its point."""
    by_reason: dict[str, list[int]] = {}
    for r in rows:
        reason = missing_reason(r, panel)
        if reason is not None:
            by_reason.setdefault(reason, []).append(int(r["devices"]))
    return "\n".join(reason if len(ps) == len(rows) else f"P={', '.join(map(str, sorted(ps)))}: {reason}"
                     for reason, ps in by_reason.items())


def _ratio(row: dict[str, Any], panel: str) -> float:
    """The point of the compute `row` in `panel` (`PANELS`; nan when it has none: `missing_reason`)."""
    if missing_reason(row, panel) is not None:
        return float("nan")
    if panel == "dp":
        return float(row["ratio"])
    return float(row["memaware_period_s"]) / float(row["pipedream_period_s"])


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    """Ratio of our period to PipeDream's planner's, per profile and P (compute only), and the
    memory-aware period relative to PipeDream's. Every profile of the compute rows has its column in both
    panels, a column without a point for some P says why under it (`column_note`: PipeDream timed out, no
    plan within the memory), so that no profile or P drops out of the figure unsaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    comp = [r for r in rows if r["mode"] == "compute"]
    profiles = sorted({r["profile"] for r in comp})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=False)
    for ax, panel in zip(axes, PANELS):
        for P, marker in zip((2, 4, 8, 16), "os^D"):
            mine = [r for r in comp if int(r["devices"]) == P]
            ax.scatter([profiles.index(r["profile"]) for r in mine], [_ratio(r, panel) for r in mine],
                       marker=marker, label=f"P={P}")
        below = blended_transform_factory(ax.transData, ax.transAxes)  # x: the column, y: from the panel's bottom
        for x, profile in enumerate(profiles):
            note = column_note([r for r in comp if r["profile"] == profile], panel)
            if note:
                ax.text(x, 0.03, note, rotation=90, ha="center", va="bottom", fontsize=7, color="dimgrey",
                        transform=below, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    axes[0].set_title("antichain DP (memory ignored) / PipeDream planner")
    axes[1].set_title(f"within {float(comp[0]['memory']) / 1e9:g} GB per device / PipeDream planner" if comp else "")
    for ax in axes:
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(profiles)), profiles, rotation=30, ha="right")
        ax.set_ylabel("period ratio (compute only)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def memory_bytes(text: str) -> int:
    """``--memory`` (an argparse ``type``): bytes per device, a number or a size ("16GB"), > 0."""
    try:
        memory = parse_budget(text, None, field="--memory")
    except InputError as err:
        raise argparse.ArgumentTypeError(err.message) from None
    if memory <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a memory > 0")
    return memory


def main(argv: list[str] | None = None) -> int:
    """Run the PipeDream comparison; print a table, write the CSV (``--out``) and the figure; exit 0 (2 on a bad
    argument, 130 on Ctrl-C: the files as they were, the finished rows kept beside them for a rerun to resume
    from)."""
    ap = ScriptParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="alexnet, vgg16 and resnet50 only")
    ap.add_argument("--memory", type=memory_bytes, default="16GB",
                    help="memory per device for the memory-aware planner (bytes, or a size such as 16GB)")
    ap.add_argument("--out", default="results/bench_pipeline_pipedream.csv")
    ap.add_argument("--replot", action="store_true", help="run nothing: redraw the figure of --out beside it")
    args = ap.parse_args(argv)
    return guarded("bench_pipeline_pipedream", lambda: _replot(Path(args.out)) if args.replot else _main(args))


#: the number columns `figure` reads of a row: (their type, whether a cell may be empty: no value)
_FIGURE_NUMBERS: dict[str, tuple[type, bool]] = {
    "devices": (int, False), "memory": (float, False), "pipedream_period_s": (float, True), "ratio": (float, True),
    "memaware_period_s": (float, True)}


def _replot(out: Path) -> int:
    """``--replot``: the figure beside `out` drawn from its rows, nothing solved (`InputError` naming `out` when it
    is not a table of this bench, has no row, or a cell the figure reads that is not a number); `out` is left as
    it is."""
    from memsched.experiments.benchtable import read_table

    png = figure_beside(out)
    _, rows = read_table(out, field="--out", required=FIELDS, known=FIELDS, of="bench_pipeline_pipedream")
    if not rows:
        raise InputError("no row to draw", path=str(out), field="--out")
    for row in rows:
        for column, (kind, may_be_empty) in _FIGURE_NUMBERS.items():
            try:
                if not (may_be_empty and row[column] == ""):
                    kind(row[column])
            except ValueError:
                raise InputError(f"row {row['profile']!r} {row['mode']} P={row['devices']}: {column} "
                                 f"{row[column]!r} is not a number", path=str(out), field="--out") from None
    figure(rows, png)
    print(f"wrote {png}")
    return 0


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the comparison run, the CSV and figure written (atomically); on
    Ctrl-C the rows finished so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    out = Path(args.out)
    check_out(out)
    png = figure_beside(out)  # checked before any work: not --out itself
    with resumable(out, FIELDS, settings_of(args), ("profile", "mode", "devices"), line=_line) as table:
        run(args.quick, args.memory, table=table)
        write_csv(table.rows, out, FIELDS)
        figure(table.rows, png)
    print(f"wrote {out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fixes from plotting hunt 26: user text with ``$`` drawn literally (`memsched plot`, the sweep figures),
the documented default units of a file without ``meta.units`` (bytes; ms for chains and joins), and
one-line errors for a sweep table without a column a figure reads (`memsched figures`, paper_figures)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import matplotlib
import pytest
from conftest import run_cli

matplotlib.use("Agg")

from memsched.experiments.plotting import plot_comparison, plot_schedule, timeline_for  # noqa: E402
from memsched.solvers.chain import Chain  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

import memsched  # noqa: E402

TINY = Path(memsched.data_path("examples", "tiny.json"))
CNN12 = Path(memsched.data_path("examples", "cnn12.json"))
HOMOGENEOUS20 = Path(memsched.data_path("examples", "homogeneous20.json"))  # "meta": {}: bytes and ms
RESULTS = Path(__file__).resolve().parent.parent / "results"


def _cli(*argv: object) -> tuple[int, str]:
    """`memsched ARGV` in-process: (exit code, stderr)."""
    res = run_cli(*argv)
    return res.code, res.err


def _drawn(text_artist) -> tuple[str, bool]:
    """(the text matplotlib draws, whether it typesets it as math) of a Text artist."""
    return text_artist._preprocess_math(text_artist.get_text())


def _store_all(chain: Chain):
    return store_all_schedule(chain.length)


# ---------------------------------------------------------------------------- 1: "$" drawn literally
def _renamed(tmp_path: Path, name: str) -> Path:
    data = json.loads(TINY.read_text())
    data["name"] = name
    path = tmp_path / "named.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", [r"net $\frac$ v2", "price $5 and $6"])
def test_plot_draws_an_instance_name_with_dollars_literally(tmp_path, name):
    """`memsched plot` failed with exit 3 (ParseSyntaxException) for a name with an invalid $...$ pair,
    and drew "price $5 and $6" as math."""
    chain = Chain.load(_renamed(tmp_path, name))
    fig = plot_schedule("chain", chain, _store_all(chain))
    assert _drawn(fig._suptitle) == (f"{name} (chain)", False)
    fig.savefig(io.BytesIO(), format="png", dpi=30)


def test_plot_command_with_dollar_name_title_and_label(tmp_path):
    path = _renamed(tmp_path, r"net $\frac$ v2")
    schedule = tmp_path / "s.json"
    assert _cli("solve", path, "--budget", "100%", "-o", schedule)[0] == 0
    code, err = _cli("plot", path, schedule, "-o", tmp_path / "a.png")
    assert code == 0 and (tmp_path / "a.png").stat().st_size > 1000, err
    code, err = _cli("plot", path, schedule, "-o", tmp_path / "b.png", "--title", r"a $\frac$ b")
    assert code == 0, err
    code, err = _cli("plot", path, schedule, schedule, "-o", tmp_path / "c.png", "--label", r"a $\frac$ b",
                     "--label", "x")
    assert code == 0, err


def test_comparison_labels_and_title_are_literal():
    chain = Chain.load(TINY)
    fig = plot_comparison("chain", chain, {"cost $5": _store_all(chain), "b": _store_all(chain)},
                          title="$x$ and $y$")
    assert _drawn(fig._suptitle) == ("$x$ and $y$", False)
    titles = [_drawn(ax._left_title) for ax in fig.axes]
    assert any(text.startswith("cost $5: ") and not math for text, math in titles), titles


def test_sweep_figure_titles_and_labels_are_literal(tmp_path):
    """`memsched figures` put instance names and solver labels into titles and legends as math."""
    from memsched.experiments import figures

    table = figures.load_results(_table_copy(tmp_path, "fig_a_chains"))
    first = table["instance"].iloc[0]
    table["instance"] = table["instance"].replace(first, r"net $\frac$")
    table["solver_label"] = table["solver_label"].fillna(table["solver"]).replace("rotor", "rotor $5")
    paths, note = figures.render("a", table, tmp_path / "out")
    assert note is None and len(paths) == 2


def test_paper_figure_titles_are_literal(tmp_path):
    from memsched.experiments import paper_figures

    folder = tmp_path / "fig_paper_chains"
    folder.mkdir()
    rows = _rows(RESULTS / "fig_paper_chains" / "fig_paper_chains.csv")
    rows = [{**r, "instance": r"a $\frac$ b" if r["instance"] == rows[0]["instance"] else r["instance"]}
            for r in rows]
    _write(folder / "fig_paper_chains.csv", rows)
    code = paper_figures.main(["--results", str(folder), "--out", str(tmp_path / "out"), "--stem", "x"])
    assert code == 0 and (tmp_path / "out" / "x.png").exists()


# ---------------------------------------------------------------------------- 2: default units
def test_chain_without_units_is_drawn_in_bytes_and_ms():
    """homogeneous20.json ("meta": {}) was drawn with ticks 2e+07 and no unit, though absent units mean
    bytes (docs/cli.md) and ms (docs/chain.md)."""
    chain = Chain.load(HOMOGENEOUS20)
    tl = timeline_for("chain", chain, _store_all(chain))
    assert (tl.time_unit, tl.memory_unit) == ("ms", "bytes")
    fig = plot_schedule("chain", chain, _store_all(chain))
    assert fig.axes[0].get_ylabel().endswith("(MiB)")
    assert fig.axes[-1].get_xlabel() == "time (ms)"


def test_cli_plot_of_a_chain_without_units(tmp_path):
    schedule = tmp_path / "s.json"
    assert _cli("solve", HOMOGENEOUS20, "--budget", "50%", "-o", schedule)[0] == 0
    code, err = _cli("plot", HOMOGENEOUS20, schedule, "--budget", "50%", "-o", tmp_path / "h.svg")
    assert code == 0, err
    svg = (tmp_path / "h.svg").read_text()
    assert "MiB" in svg


def test_stated_units_are_kept():
    data = json.loads(HOMOGENEOUS20.read_text())
    data["meta"] = {"units": {"time": "MFLOP", "memory": "KiB"}}
    chain = Chain.from_dict(data)
    tl = timeline_for("chain", chain, _store_all(chain))
    assert (tl.time_unit, tl.memory_unit) == ("MFLOP", "KiB")


def test_join_without_units_is_in_bytes_and_ms(tmp_path):
    from memsched.solvers.join import Join

    data = json.loads(Path(memsched.data_path("join", "tiny.json")).read_text())
    data.pop("meta", None)
    path = tmp_path / "j.json"
    path.write_text(json.dumps(data))
    join = Join.load(path)
    result = memsched.solve(join, "100%")
    tl = timeline_for("join", join, result.schedule)
    assert (tl.time_unit, tl.memory_unit) == ("ms", "bytes")
    stated = Join.load(memsched.data_path("join", "tiny.json"))  # meta.units: ms, MB
    tl = timeline_for("join", stated, memsched.solve(stated, "100%").schedule)
    assert (tl.time_unit, tl.memory_unit) == ("ms", "MB")


def test_graph_without_units_is_in_bytes_and_names_no_time_unit():
    """A graph's costs have no documented time unit (ms, MFLOP, ...): only the memory gets its default."""
    graph = memsched.load(memsched.data_path("graphs", "random_layered30.json"))
    tl = timeline_for("graph", graph, list(range(graph.n)))
    assert (tl.time_unit, tl.memory_unit) == (None, "bytes")
    flops = memsched.load(memsched.data_path("graphs", "vgg16_like.json"))  # meta.units: MFLOP, KiB
    tl = timeline_for("graph", flops, list(range(flops.n)))
    assert (tl.time_unit, tl.memory_unit) == ("MFLOP", "KiB")


def test_offload_without_units_is_in_bytes_and_ms():
    from memsched.solvers.offload import OffloadInstance, OffloadSchedule

    chain = Chain.load(HOMOGENEOUS20)
    tl = timeline_for("offload", OffloadInstance(chain, 12e9), OffloadSchedule.from_chain(_store_all(chain)))
    assert (tl.time_unit, tl.memory_unit) == ("ms", "bytes")


# ---------------------------------------------------------------------------- 3, 4: missing columns
def _rows(table: Path) -> list[dict[str, str]]:
    with open(table, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write(table: Path, rows: list[dict[str, str]], drop: str | None = None) -> None:
    fields = [c for c in rows[0] if c != drop]
    with open(table, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _table_copy(tmp_path: Path, sweep: str, drop: str | None = None) -> Path:
    """A results folder with the committed table of `sweep`, without column `drop`."""
    folder = tmp_path / "results" / sweep
    folder.mkdir(parents=True)
    _write(folder / f"{sweep}.csv", _rows(RESULTS / sweep / f"{sweep}.csv"), drop)
    return tmp_path / "results"


@pytest.mark.parametrize(("sweep", "fid", "column"), [("fig_a_chains", "a", "instance"),
                                                      ("fig_a_chains", "a", "budget_spec"),
                                                      ("fig_b_solve_time", "b", "size"),
                                                      ("fig_f_pipeline", "f", "objective")])
def test_figures_name_the_table_and_the_missing_column(tmp_path, sweep, fid, column):
    """A table without `instance` failed with exit 3 (KeyError: 'instance')."""
    from memsched.experiments.figures import make_figures

    results = _table_copy(tmp_path, sweep, drop=column)
    with pytest.raises(InputError) as err:
        make_figures(results, tmp_path / "figs", [fid])
    text = str(err.value)
    assert f"{sweep}.csv" in text and column in text and "\n" not in text
    assert not (tmp_path / "figs").exists()


def test_figures_command_exit_2_for_a_missing_column(tmp_path):
    results = _table_copy(tmp_path, "fig_a_chains", drop="instance")
    code, err = _cli("figures", "--results", results, "--out", tmp_path / "figs", "--only", "a")
    assert code == 2 and "instance" in err and "fig_a_chains.csv" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("sweep", "column"), [("fig_paper_chains", "overhead"),
                                               ("fig_paper_chains", "reference_peak"),
                                               ("fig_paper_pipeline", "objective")])
def test_paper_figures_name_a_missing_column(tmp_path, capsys, sweep, column):
    """paper_figures printed a traceback (exit 1) for a table without `overhead` or `objective`."""
    from memsched.experiments import paper_figures

    folder = _table_copy(tmp_path, sweep, drop=column) / sweep
    out = tmp_path / "out"
    code = paper_figures.main(["--results", str(folder), "--out", str(out), "--stem", "x"])
    err = capsys.readouterr().err
    assert code == 2 and column in err and f"{sweep}.csv" in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()

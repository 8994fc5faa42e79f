"""bench_join's figure names each exact solver with the model it is optimal in, draws every solver of the table
(store-all too), and ``--replot`` redraws it from the committed table without running anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]


def test_replot_names_the_models_and_draws_every_solver(tmp_path, monkeypatch, capsys):
    import memsched.experiments.bench_join as bench

    out = tmp_path / "bench_join.csv"
    shutil.copy(ROOT / "results" / "bench_join.csv", out)
    figures = []
    real = bench.save_figure

    def keep(fig, path, **kw):
        figures.append(fig)
        return real(fig, path, **kw)

    monkeypatch.setattr(bench, "save_figure", keep)
    assert bench.main(["--replot", "--out", str(out)]) == 0
    assert (tmp_path / "bench_join.png").stat().st_size > 0
    assert out.read_bytes() == (ROOT / "results" / "bench_join.csv").read_bytes()  # the table is left as it is
    (fig,) = figures
    (legend,) = fig.legends  # one legend for the figure, outside the panels (test_benchfig51)
    labels = [t.get_text() for t in legend.get_texts()]
    assert "dp (persistent per branch)" in labels and "exact (all schedules)" in labels, labels
    assert "cpsat (join phase model)" in labels and "store-all" in labels, labels
    assert "wrote" in capsys.readouterr().out


def test_replot_of_a_table_with_no_row_is_bad_input(tmp_path, capsys):
    import memsched.experiments.bench_join as bench

    out = tmp_path / "bench_join.csv"
    out.write_text((ROOT / "results" / "bench_join.csv").read_text().splitlines()[0] + "\n")
    assert bench.main(["--replot", "--out", str(out)]) == 2
    assert "no row to draw" in capsys.readouterr().err
    assert not (tmp_path / "bench_join.png").exists()


def test_replot_of_a_table_with_an_unreadable_makespan_is_bad_input(tmp_path, capsys):
    import memsched.experiments.bench_join as bench

    lines = (ROOT / "results" / "bench_join.csv").read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("makespan")] = "abc"
    out = tmp_path / "bench_join.csv"
    out.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    assert bench.main(["--replot", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "makespan is not a number" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bench_join.png").exists()

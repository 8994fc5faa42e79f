"""Fixes from hunt 25 (figures): the memory unit of the panel titles of `memsched figures`, a chain file
in KiB read as a pipeline (partition / simulate / plot agree, in bytes), `paper_figures` on a missing
table or an --out that is a file (one line, exit 2), and an over-budget pipeline drawn up to the
violation."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from conftest import run_cli  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402

import memsched  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MLP7 = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"
VGG16_B32 = ROOT / "solvers" / "data" / "pipeline" / "vgg16-b32.graph.txt"


# ---------------------------------------------------------------------------- 1. figure titles
def _titles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The panel titles of every figure drawn (recorded as each is finished)."""
    seen: list[str] = []
    finish = F._finish

    def record(fig, rows, out_dir, stem, note=""):  # noqa: ANN001, ANN202
        seen.extend(ax.get_title() for ax in fig.axes if ax.get_visible())
        return finish(fig, rows, out_dir, stem, note)

    monkeypatch.setattr(F, "_finish", record)
    return seen


def _sweep_copy(tmp_path: Path, sweep: str, instance: str, *, stored: bool = True) -> Path:
    """results/<sweep> under tmp_path with the rows of `instance` only (and its stored files)."""
    import pandas as pd

    src = ROOT / "results" / sweep
    dst = tmp_path / "results" / sweep
    dst.mkdir(parents=True)
    rows = pd.read_csv(src / f"{sweep}.csv")
    rows[rows["instance"] == instance].to_csv(dst / f"{sweep}.csv", index=False)
    if stored:
        shutil.copytree(src / "instances", dst / "instances")
    return tmp_path / "results"


def test_join_title_gives_the_reference_peak_in_the_files_unit(tmp_path, monkeypatch):
    """siamese8.json is in MB: its reference peak 168 is 168 MB, not 168 bytes."""
    titles = _titles(monkeypatch)
    F.make_figures(_sweep_copy(tmp_path, "fig_d_join", "siamese-cnn8"), tmp_path / "out", ["d"])
    assert titles == ["siamese-cnn8 (size 16, ref. peak 168 MB (160.2 MiB))"]


def test_join_title_unit_from_the_source_file_without_a_store(tmp_path, monkeypatch):
    titles = _titles(monkeypatch)
    F.make_figures(_sweep_copy(tmp_path, "fig_d_join", "siamese-cnn8", stored=False), tmp_path / "out", ["d"])
    assert titles == ["siamese-cnn8 (size 16, ref. peak 168 MB (160.2 MiB))"]


def test_graph_title_reads_the_stored_generated_graphs_unit(tmp_path, monkeypatch):
    """vgg16-like is generated (no source file) in KiB: 59290 KiB is 57.9 MiB, not 57.9 KiB."""
    titles = _titles(monkeypatch)
    F.make_figures(_sweep_copy(tmp_path, "fig_c_graphs", "vgg16-like"), tmp_path / "out", ["c"])
    assert titles == ["vgg16-like (size 43, ref. peak 59290 KiB (57.9 MiB))"]


def test_size_text_keeps_bytes_titles_and_names_other_units():
    assert F.size_text(35868, None) == "35.03 KiB"
    assert F.size_text(57, "bytes") == "57 bytes"
    assert F.size_text(168, "MB") == "168 MB (160.2 MiB)"
    assert F.size_text(17, "slots") == "17 slots"


# ---------------------------------------------------------------------------- 2. a KiB chain as a pipeline
@pytest.fixture
def mlp7_kib(tmp_path: Path) -> Path:
    data = json.loads(MLP7.read_text())
    data["meta"]["units"]["memory"] = "KiB"
    path = tmp_path / "mlp7_kib.json"
    path.write_text(json.dumps(data))
    return path


def test_kib_chain_read_as_a_pipeline_is_in_bytes(mlp7_kib):
    from memsched.solvers.formats import load_instance

    _, inst = load_instance(mlp7_kib, "pipeline")
    _, ref = load_instance(MLP7, "pipeline")
    assert list(inst.act) == [1024 * int(a) for a in ref.act]
    assert inst.input_size == 1024 * ref.input_size
    assert list(inst.params) == list(ref.params)  # meta.param_sizes are bytes
    assert inst.meta["units"]["memory"] == "bytes"


def test_partition_simulate_and_plot_agree_on_a_kib_chain(mlp7_kib, tmp_path):
    from memsched.experiments.plotting import schedule_from_json
    from memsched.experiments.plotting.timeline import timeline_for
    from memsched.solvers.formats import load_instance

    text = run_cli("partition", mlp7_kib, "--devices", "2", "--memory", "150%")
    assert text.code == 0, text.err
    part = run_cli("partition", mlp7_kib, "--devices", "2", "--memory", "150%", "--json")
    path = tmp_path / "part.json"
    path.write_text(part.out)
    sim = run_cli("simulate", mlp7_kib, path)
    assert sim.code == 0, sim.err
    peaks = [re.search(r"peak memory\s+(\d+)(?: bytes)? \(([^)]*)\)", out).groups() for out in (text.out, sim.out)]
    assert peaks[0] == peaks[1], peaks
    _, inst = load_instance(mlp7_kib, "pipeline")
    tl = timeline_for("pipeline", inst, schedule_from_json("pipeline", json.loads(part.out), inst))
    assert tl.memory_unit == "bytes" and tl.peak_memory == int(peaks[0][0])
    from memsched.experiments.plotting.timeline import units_of

    assert units_of(inst)[1] == "bytes"  # the unit `simulate` and the facade's summaries scale sizes by
    plot = run_cli("plot", mlp7_kib, path, "-o", tmp_path / "p.png")
    assert plot.code == 0, plot.err


def test_chain_in_slots_is_refused_as_a_pipeline(tmp_path):
    data = json.loads(MLP7.read_text())
    data["meta"]["units"]["memory"] = "slots"
    path = tmp_path / "slots.json"
    path.write_text(json.dumps(data))
    res = run_cli("partition", path, "--devices", "2", "--memory", "150%")
    assert res.code == 2 and "meta.units.memory" in res.err and "slots" in res.err, res.err


# ---------------------------------------------------------------------------- 3. paper_figures bad arguments
def test_paper_figures_missing_table_is_one_line_exit_2(tmp_path, capsys):
    from memsched.experiments import paper_figures

    code = paper_figures.main(["--results", str(tmp_path / "nonexist"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "nonexist" / "nonexist.csv") in err
    assert not (tmp_path / "out").exists()


def test_paper_figures_out_a_file_is_one_line_exit_2_before_drawing(tmp_path, capsys, monkeypatch):
    from memsched.experiments import paper_figures

    results = tmp_path / "fig_paper_chains"
    results.mkdir()
    shutil.copy(ROOT / "results" / "fig_paper_chains" / "fig_paper_chains.csv", results)
    out = tmp_path / "afile"
    out.write_text("keep")

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("drawn before the paths were checked")

    monkeypatch.setattr(paper_figures, "draw", never)
    code = paper_figures.main(["--results", str(results), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(out) in err, err
    assert out.read_text() == "keep"


# ---------------------------------------------------------------------------- 4. over-budget pipeline
def test_over_budget_pipeline_is_drawn_up_to_the_violation(tmp_path):
    from memsched.experiments.plotting.timeline import timeline_for

    inst = memsched.load(VGG16_B32, problem="pipeline")
    part = memsched.solve(inst, "60%", problem="pipeline", devices=4).schedule
    tl = timeline_for("pipeline", inst, part, 2_300_000_000)
    assert tl.failure is not None
    t = tl.failure.time
    assert all(b.start < t or b.category == "failed" for b in tl.bars)
    assert [b.start for b in tl.bars if b.category == "failed"] == [t]
    assert all(float(s.times[-1]) == t for s in tl.memory)
    from memsched.experiments.plotting.draw import _failing_memory

    failing = _failing_memory(tl)  # the memory line goes on over the failing forward, at the memory it needs
    assert failing is not None and failing[2] == tl.peak_memory > 2_300_000_000 > failing[1]
    part_file = tmp_path / "part.json"
    part_file.write_text(json.dumps(memsched.solve(inst, "60%", problem="pipeline", devices=4).to_json()))
    res = run_cli("plot", VGG16_B32, part_file, "-o", tmp_path / "p.png", "--budget", "2.3GB")
    assert res.code == 0 and "drawn up to the violation" in res.err, res.err

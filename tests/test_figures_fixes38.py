"""A pipeline partition drawn up to its violation draws the memory line on over the failing forward (as
chain, join and graph figures do: the failing bar was not marked failed), from the failing stage's own
level; a paper figure's ``--stem`` that is no plain file name is refused before anything is written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

import memsched

PIPELINE = Path(memsched.data_path("pipeline", "tiny-resnet.graph.txt"))


def _over_budget_partition(tmp_path: Path) -> Path:
    out = tmp_path / "part.json"
    res = run_cli("partition", PIPELINE, "--devices", "2", "--memory", "30MiB", "--solver", "dag",
                  "--bandwidth", "12GB/s", "--json")
    assert res.code == 0, res.err
    out.write_text(res.out)
    return out


def test_the_failing_forward_of_a_pipeline_carries_the_memory_line(tmp_path: Path) -> None:
    part = _over_budget_partition(tmp_path)
    fig = memsched.plot(PIPELINE, json.loads(part.read_text()), budget="20MiB")
    lines = {line.get_gid(): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}
    assert "failing memory" in lines, sorted(lines)
    x, y = lines["failing memory"].get_xdata(), lines["failing memory"].get_ydata()
    need = 29733792  # the stage's memory (bytes), as the simulator's message says
    assert y[0] < 20 * 2**20 < need == y[1] == y[2] and x[0] == x[1] < x[2]


@pytest.mark.parametrize("stem", ["", ".", "..", ".hidden", "a/b"])
def test_a_stem_that_is_no_file_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                stem: str) -> None:
    from memsched.experiments import paper_figures

    results = Path(__file__).resolve().parents[1] / "results" / "fig_paper_chains"
    out = tmp_path / "figs"
    assert paper_figures.main(["--results", str(results), "--out", str(out), "--stem", stem]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--stem" in err, err
    assert not out.exists()

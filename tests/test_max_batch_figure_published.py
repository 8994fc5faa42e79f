"""The maximum-batch figure with graph solvers and the published numbers beside ours."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from memsched.experiments.max_batch_figure import load_published, main, solvers_of, table

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "results" / "published_checkmate.csv"


def _answer(model: str, solver: str, largest: int | None, overhead: float | None) -> dict:
    return {
        "model": model,
        "solver": solver,
        "problem": "graph",
        "largest": largest,
        "memory": 16e9,
        "cost": "flops",
        "state_factor": 2.0,
        "max_overhead": "forward",
        "result": None if largest is None else {"size": largest, "overhead": overhead},
    }


def test_published_csv_is_well_formed_and_sourced():
    rows = list(csv.DictReader(PUBLISHED.open(newline="")))
    assert rows and all(r["source"] and r["locator"] and r["value"] for r in rows)
    pub = load_published(PUBLISHED)
    # the artifact's VGG19 numbers, read from parasj/checkmate (branch mlsys20_artifact, README.md)
    assert pub[("vgg19", "checkpoint-all")] == ("=", 167) and pub[("vgg19", "checkmate")] == ("=", 289)
    assert pub[("unet", "checkmate")] == (">=", 57)
    assert ("vgg19", "rotor") not in pub  # Checkmate did not run rotor


def test_graph_answers_are_tabulated_beside_the_published_numbers(tmp_path, capsys):
    res = tmp_path / "mb"
    res.mkdir()
    for solver, largest, over in (
        ("checkpoint-all", 100, 1.0),
        ("greedy", 150, 1.2),
        ("checkmate", 200, 1.3),
        ("sqrt", None, None),
    ):
        (res / f"vgg19-16GB-{solver}.json").write_text(json.dumps(_answer("vgg19", solver, largest, over)))
    answers = {
        "vgg19": {
            s: json.loads((res / f"vgg19-16GB-{s}.json").read_text())
            for s in ("checkmate", "sqrt", "greedy", "checkpoint-all")
        }
    }
    assert solvers_of(answers) == ["checkpoint-all", "sqrt", "greedy", "checkmate"]
    text = table(answers, {("vgg19", "checkmate"): (">=", 250)})
    assert "| vgg19 | 100 (x1.000) | - | 150 (x1.200) | 200 (x1.300) | 2.00x | checkmate >=250 |" in text
    assert (
        main(["--results", str(res), "--out", str(tmp_path / "fig"), "--stem", "g", "--published", str(PUBLISHED)]) == 0
    )
    out = capsys.readouterr().out
    assert "checkpoint-all 167" in out and "checkmate 289" in out
    assert (tmp_path / "fig" / "g.png").stat().st_size > 1000
    assert main(["--results", str(res), "--published", str(tmp_path / "missing.csv")]) == 2

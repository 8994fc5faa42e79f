"""Defects found by reviewing session 48's diff:

1. The new MILPs' ``backend`` (and the offload milp's ``scale``) were not checked when a sweep was read: a wrong
   value made every cell ``unsupported`` (`sweep.config.check_option_value`), where the chain milp's is refused.
2. `max_batch_figure` passed ``hatch_linewidth`` to ``ax.bar``, a patch property only from matplotlib 3.10
   (pyproject allows 3.7): a traceback on older matplotlib. The width is now set only where the patch has it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.patches
import pytest
from memsched.experiments.sweep.config import check_option_value
from memsched.solvers.errors import InputError
from memsched.solvers.offload.generate import random_offload

import memsched

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("problem,solver,value", [
    ("offload", "milp", "gurobi"), ("offload", "milp", "cp-sat"), ("join", "milp", "gurobi"),
    ("pipeline", "milp", "portfolio"), ("pipeline", "dag-milp", "cp-sat"), ("chain", "milp", "gurobi")])
def test_a_milp_backend_wrong_for_every_instance_is_refused_up_front(problem: str, solver: str, value: str) -> None:
    with pytest.raises(InputError, match="unknown MILP backend") as err:
        check_option_value(problem, solver, "backend", value)
    assert err.value.field is not None and err.value.field.endswith("backend")


def test_the_offload_milp_scale_is_checked_up_front() -> None:
    with pytest.raises(InputError):
        check_option_value("offload", "milp", "scale", -1.0)


def test_a_sweep_with_a_bad_offload_milp_backend_is_refused_not_unsupported() -> None:
    with pytest.raises(InputError, match="backend"):
        memsched.sweep(random_offload(3, 0, integer_times=True), ["90%"], ["milp"], backend="gurobi", progress=False)


def test_the_max_batch_figure_draws_without_a_patch_hatch_width(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """As on matplotlib 3.7-3.9, whose patches have no ``set_hatch_linewidth``."""
    from memsched.experiments.max_batch_figure import main

    monkeypatch.delattr(matplotlib.patches.Patch, "set_hatch_linewidth", raising=False)
    folder = tmp_path / "answers"
    folder.mkdir()
    for path in sorted((ROOT / "results" / "max_batch").glob("vgg16-*.json")):
        (folder / path.name).write_text(path.read_text())
    assert main(["--results", str(folder), "--out", str(tmp_path / "out"), "--stem", "mb"]) == 0, capsys.readouterr()
    assert (tmp_path / "out" / "mb.png").is_file()

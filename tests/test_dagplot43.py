"""Two DAG-pipeline defects.

1. `memsched plot` / `Result.plot()` of a DAG partition labelled each stage's row with the positions
   of its layers in the partition's ``order`` (``stage 0 [0-1]``) instead of its layers as instance
   indices (``stage 0 [0,2]``, what ``memsched partition`` prints and ``simulate --json``'s
   memory_profile says: `Partition.stage_span`).
2. `dag_runner.run_dag_partition` and `profile_dag` crashed on a malformed spec entry (a ValueError
   unpacking it in `DagNet.__init__`, a TypeError iterating an int's inputs in `check_spec`) instead
   of an `InputError` naming ``spec[k]`` (``spec[k].inputs``), before any process is spawned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, load
from memsched.solvers.pipeline.schedule import Stage

# a diamond a -> {b, c} -> d whose DAG-optimal partition on 2 devices is [a, c] | [b, d] (order [0, 2, 1, 3])
DIAMOND = "".join(
    f"{n} -- {n.upper()} -- forward_compute_time={t}, backward_compute_time={t}, activation_size=1000, "
    f"parameter_size=0\n" for n, t in (("a", 0.5), ("b", 0.5), ("c", 5), ("d", 5))
) + "\ta -- b\n\ta -- c\n\tb -- d\n\tc -- d\n"
EXPECTED_ROWS = ["stage 0 [0,2]", "stage 1 [1,3]"]


@pytest.fixture
def diamond(tmp_path: Path) -> Path:
    path = tmp_path / "d4.txt"
    path.write_text(DIAMOND)
    return path


# ---------------------------------------------------------------------------- 1. stage labels of a DAG partition
def test_pipeline_timeline_labels_dag_stages_with_their_layers(diamond: Path) -> None:
    from memsched.experiments.plotting.adapters import pipeline_timeline

    part = Partition([Stage(0, 1), Stage(2, 3)], devices=2, order=[0, 2, 1, 3])
    tl = pipeline_timeline(load(diamond), part)
    assert tl.rows == EXPECTED_ROWS
    assert [s.label for s in tl.memory] == EXPECTED_ROWS
    assert {b.row for b in tl.bars} == set(EXPECTED_ROWS)


def test_timeline_rows_are_the_simulators_memory_profile_labels(diamond: Path) -> None:
    from memsched.experiments.plotting.adapters import pipeline_timeline
    from memsched.solvers.pipeline.simulator import memory_profile

    inst = load(diamond)
    part = Partition([Stage(0, 1), Stage(2, 3)], devices=2, order=[0, 2, 1, 3])
    assert pipeline_timeline(inst, part).rows == [e["op"] for e in memory_profile(inst, part)] == EXPECTED_ROWS


def test_contiguous_partition_labels_are_unchanged(diamond: Path) -> None:
    from memsched.experiments.plotting.adapters import pipeline_timeline

    tl = pipeline_timeline(load(diamond), Partition.from_bounds([(0, 1), (2, 3)], devices=2))
    assert tl.rows == ["stage 0 [0-1]", "stage 1 [2-3]"]


def test_result_plot_of_the_dag_solver_labels_rows_as_partition_prints_them(diamond: Path) -> None:
    import matplotlib.pyplot as plt

    import memsched

    res = memsched.solve(str(diamond), "1GB", devices=2, solver="dag")
    assert res.schedule.order == [0, 2, 1, 3]  # the case of the defect: positions differ from layers
    fig = res.plot()
    try:
        labels = {t.get_text() for ax in fig.axes for t in ax.get_yticklabels()}
    finally:
        plt.close(fig)
    assert set(EXPECTED_ROWS) <= labels
    assert not {"stage 0 [0-1]", "stage 1 [2-3]"} & labels


# ---------------------------------------------------------------------------- 2. malformed dag_runner specs
MALFORMED = {
    "entry without inputs": ([("block",), ("block", [0])], "spec[0]"),
    "int inputs": ([("block", -1), ("block", [0])], "spec[0].inputs"),
    "str inputs": ([("block", [-1]), ("block", "0")], "spec[1].inputs"),
    "bare int entry": ([("block", [-1]), 5], "spec[1]"),
    "kind not a str": ([(3, [-1]), ("block", [0])], "spec[0]"),
    "three fields": ([("block", [-1], 0), ("block", [0])], "spec[0]"),
    "not a list": ("block", "spec"),
}


@pytest.fixture
def no_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    from memsched.models.pipeline import dag_runner

    def refuse(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a rank process was spawned for a spec the runner must refuse first")

    monkeypatch.setattr(dag_runner, "run_ranks", refuse)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_run_dag_partition_refuses_a_malformed_spec_before_building(case: str, no_spawn: None) -> None:
    from memsched.models.pipeline.dag_runner import run_dag_partition

    spec, field = MALFORMED[case]
    part = Partition.from_bounds([(0, 0), (1, 1)], micro_batches=2)
    with pytest.raises(InputError) as err:
        run_dag_partition(part, spec, width=4, in_dim=4, out_dim=2, batch=4, micro_batches=2)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_check_spec_and_dagnet_refuse_a_malformed_spec(case: str) -> None:
    import torch
    from memsched.models.pipeline.dag_runner import DagNet, check_spec, profile_dag

    spec, field = MALFORMED[case]
    with pytest.raises(InputError) as err:
        check_spec(spec)
    assert err.value.field == field
    with pytest.raises(InputError) as err:
        profile_dag(DagNet(spec, width=4, in_dim=4, out_dim=2), torch.randn(2, 4), reps=1)
    assert err.value.field == field


def test_profile_dag_refuses_int_inputs_of_a_built_net() -> None:
    """A net built around `DagNet`'s own check (its ``spec`` changed after construction) still gets
    `profile_dag`'s InputError rather than a TypeError."""
    import torch
    from memsched.models.pipeline.dag_runner import DagNet, profile_dag

    net = DagNet([("block", [-1]), ("block", [0])], width=4, in_dim=4, out_dim=2)
    net.spec = [("block", -1), ("block", [0])]  # type: ignore[list-item]
    with pytest.raises(InputError) as err:
        profile_dag(net, torch.randn(2, 4), reps=1)
    assert err.value.field == "spec[0].inputs"


def test_well_formed_specs_still_pass() -> None:
    from memsched.models.pipeline.dag_runner import check_spec, residual_spec

    check_spec(residual_spec(2))
    check_spec([["block", [-1]], ["add", (0,)], ["block", [1]]])  # lists and tuples, as read from JSON

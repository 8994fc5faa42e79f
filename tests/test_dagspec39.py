"""Two spec / instance checks that came too late or without the file.

1. `dag_runner.check_spec` accepted a "block" (ReLU -> Linear of its *one* input) with several
   inputs; `DagNet.node` applies it to ``inputs[0]`` alone, so the others were listed but unused:
   a dead end hidden behind them made the ranks fail in their backward (``RankError: ...
   'NoneType' object has no attribute 'detach'``), or the profile charged a boundary tensor the
   block never reads. It is now refused (`InputError` on ``spec[k]``) before any process starts;
   an "add" still reads several.
2. ``memsched partition FILE --solver interleave-v`` on more than `interleave.MAX_V_LAYERS`
   layers printed ``layers: the V-shaped DP handles at most 80 layers ...`` without the file,
   where every other instance error starts with ``FILE:``; `check_work` now checks the limit
   with the path, as it does for exact-combined's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_cli
from memsched.models.pipeline import dag_runner
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition

#: layer 1 is a dead end hidden by layer 2's second input (the ranks failed in its backward)
HIDDEN_DEAD_END = [("block", [-1]), ("block", [0]), ("block", [0, 1]), ("block", [2])]
#: layer 2 lists layer 0 as an input it never reads (the profile charged it to the boundary)
UNUSED_INPUT = [("block", [-1]), ("block", [0]), ("block", [1, 0]), ("block", [2])]


@pytest.mark.parametrize("spec", [HIDDEN_DEAD_END, UNUSED_INPUT], ids=["hidden-dead-end", "unused-input"])
def test_check_spec_refuses_a_block_with_several_inputs(spec: dag_runner.Spec) -> None:
    for kinds in (None, dag_runner.DAGNET_KINDS):
        with pytest.raises(InputError, match=r"^spec\[2\]: .*exactly one") as err:
            dag_runner.check_spec(spec, kinds)
        assert err.value.field == "spec[2]"


def test_run_dag_partition_refuses_before_spawning() -> None:
    """The refusal comes from `run_dag_partition` itself, at once (no rank is started)."""
    part = Partition.from_bounds([(0, 1), (2, 3)], micro_batches=2)
    start = time.perf_counter()
    with pytest.raises(InputError, match=r"^spec\[2\]: "):
        dag_runner.run_dag_partition(part, HIDDEN_DEAD_END, width=4, in_dim=4, out_dim=2, batch=4,
                                     micro_batches=2, steps=1, timeout_s=20.0)
    assert time.perf_counter() - start < 5.0


def test_profile_dag_refuses() -> None:
    import torch

    net = dag_runner.DagNet(UNUSED_INPUT, width=4, in_dim=4, out_dim=2)
    with pytest.raises(InputError, match=r"^spec\[2\]: "):
        dag_runner.profile_dag(net, torch.zeros(2, 4), reps=1)


def test_adds_and_single_input_blocks_still_pass() -> None:
    dag_runner.check_spec(dag_runner.residual_spec(2))
    dag_runner.check_spec([("block", [-1]), ("block", [0]), ("add", [1, 0]), ("block", [2])])
    dag_runner.check_spec([("block", [-1]), ("add", [0]), ("block", [1])])  # an add of one input
    with pytest.raises(InputError, match=r"^spec\[1\]: a layer reads at least one tensor"):
        dag_runner.check_spec([("block", [-1]), ("block", []), ("block", [1])])


def _chain_file(path: Path, layers: int) -> str:
    """A uniform `layers`-layer chain (memsched.chain/1, ms and bytes) written to `path`."""
    stage = {"fwd_time": 1.0, "bwd_time": 2.0, "out_size": 1000, "tape_size": 2000, "fwd_overhead": 0,
             "bwd_overhead": 0}
    doc = {"format": "memsched.chain/1", "name": f"c{layers}", "input_size": 1000,
           "stages": [dict(stage, name=f"l{i}") for i in range(layers)], "loss": {"bwd_time": 0.0, "bwd_overhead": 0},
           "meta": {"units": {"time": "ms", "memory": "bytes"}}}
    path.write_text(json.dumps(doc))
    return str(path)


def test_partition_interleave_v_limit_names_the_file(tmp_path: Path) -> None:
    from memsched.solvers.pipeline.interleave import MAX_V_LAYERS

    file = _chain_file(tmp_path / "c90.json", MAX_V_LAYERS + 10)
    res = run_cli("partition", file, "--devices", "2", "--memory", "10MB", "--solver", "interleave-v")
    assert res.code == 2, res.err
    assert f"memsched partition: error: {file}: layers: the V-shaped DP handles at most {MAX_V_LAYERS}" in res.err
    assert f"the instance has {MAX_V_LAYERS + 10}" in res.err


def test_interleave_v_within_the_limit_still_runs(tmp_path: Path) -> None:
    """The check is the solver's own (`check_v_length`): 80 layers pass, a short chain runs."""
    from memsched.solvers.pipeline.interleave import check_v_length

    check_v_length(80)
    with pytest.raises(InputError, match=r"^F: layers: "):
        check_v_length(81, "F")
    file = _chain_file(tmp_path / "c8.json", 8)
    res = run_cli("partition", file, "--devices", "2", "--memory", "10MB", "--solver", "interleave-v", "--json")
    assert res.code == 0, res.err

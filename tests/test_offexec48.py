"""Three fixes found by the offloading-executor hunt:

1. `memsched.run`'s solver options are checked by the solver's own instance-free checks before the
   network is profiled: a CP-SAT ``parameters`` name CP-SAT does not know was refused only after
   profiling (and after ``--profile-file`` was written).
2. `sequential_replay` charged an ``Off`` of a value whose host copy exists already (docs/offload.md
   rule 3: no time), which the simulator and the executor treat as free.
3. An offloading solver named with the chain problem on an instance that has a host link said the
   chain "has no host link"; it now names the real fix (drop the chain problem)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memsched.models.offload.executor import sequential_replay
from memsched.solvers import registry
from memsched.solvers.chain import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, simulate

import memsched
from memsched.api import check_run_solver_args

TINY = {"format": "memsched.chain/1", "name": "tiny", "input_size": 4,
        "stages": [{"name": "c1", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 4, "tape_size": 8,
                    "fwd_overhead": 0, "bwd_overhead": 0},
                   {"name": "c2", "fwd_time": 2.0, "bwd_time": 4.0, "out_size": 2, "tape_size": 6,
                    "fwd_overhead": 1, "bwd_overhead": 1}],
        "loss": {"bwd_time": 0.5, "bwd_overhead": 0}, "meta": {"units": {"time": "ms", "memory": "bytes"}}}

#: abar_1 offloaded, fetched, offloaded again (its host copy still exists: free), fetched for B(0)
TWICE = [{"op": "F_all", "stage": 0}, {"op": "F_all", "stage": 1}, {"op": "Off", "value": "abar", "index": 1},
         {"op": "Pre", "value": "abar", "index": 1}, {"op": "Off", "value": "abar", "index": 1}, {"op": "Loss"},
         {"op": "Pre", "value": "abar", "index": 1}, {"op": "B", "stage": 1}, {"op": "B", "stage": 0}]


ROOT = Path(__file__).resolve().parents[1]


def _instance(latency: float = 0.0) -> OffloadInstance:
    """The 2-stage tiny chain with a 2000 bytes/s link (abar_1, 8 bytes: 4 ms + latency)."""
    return OffloadInstance(Chain.from_dict(TINY), 2000.0, latency)


# --------------------------------------------------------------------------- 1. options before profiling
@pytest.mark.parametrize(("problem", "solver", "link"), [("offload", "offload-exact", {"bandwidth": "1GB/s"}),
                                                         ("chain", "cpsat", {})])
def test_run_refuses_unknown_cpsat_parameters_before_profiling(captured_run: list[dict[str, Any]], problem: str,
                                                                solver: str, link: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="unknown CP-SAT parameter 'bogus'") as err:
        memsched.run("resnet18", "80%", solver, problem=problem, options={"parameters": "bogus"},
                     batch=2, image_size=32, width=8, **link)
    assert err.value.field == "parameters"
    assert captured_run == []  # nothing was profiled


def test_run_passes_known_cpsat_parameters_on() -> None:
    check_run_solver_args("chain", "cpsat", None, None, {"parameters": "cp_model_presolve:false"})
    with pytest.raises(InputError, match="CP-SAT rejects them"):
        check_run_solver_args("offload", "offload-exact", "1GB/s", None, {"parameters": "linearization_level:-5"})


# --------------------------------------------------------------------------- 2. sequential replay
@pytest.mark.parametrize("latency", [0.0, 0.25])
def test_sequential_replay_charges_nothing_for_an_off_with_a_host_copy(latency: float) -> None:
    inst = _instance(latency)
    sched = OffloadSchedule.from_json(TWICE, 2)
    seq = sequential_replay(inst, sched)
    assert seq.valid, seq.violation
    off_again = seq.ops[4]
    assert off_again.start == off_again.end  # the host holds abar_1 already (rule 3), as in the simulator
    assert simulate(inst, sched).ops[4].end == simulate(inst, sched).ops[4].start
    t = inst.transfer_time(8)  # Off, Pre, Pre of abar_1 are charged; the second Off is not
    assert seq.makespan == pytest.approx(1 + 2 + 3 * t + 0.5 + 4 + 2)


def test_sequential_replay_still_charges_a_first_off() -> None:
    """An Off of a value without a host copy takes its full transfer time, as before."""
    inst = _instance()
    ops = [{"op": "F_all", "stage": 0}, {"op": "F_all", "stage": 1}, {"op": "Off", "value": "abar", "index": 1},
           {"op": "Pre", "value": "abar", "index": 1}, {"op": "Loss"}, {"op": "B", "stage": 1},
           {"op": "B", "stage": 0}]
    seq = sequential_replay(inst, OffloadSchedule.from_json(ops, 2))
    assert seq.valid, seq.violation
    assert seq.makespan == pytest.approx(1 + 2 + 0.5 + 4 + 2 + 2 * inst.transfer_time(8))


# --------------------------------------------------------------------------- 3. the registry's message
def test_offloading_solver_on_a_chain_with_a_link_says_to_drop_the_chain_problem() -> None:
    with pytest.raises(InputError) as err:
        registry.get_solver("chain", "pofo", host_link=True)
    assert "--problem chain" in err.value.message and "--problem offload" in err.value.message
    assert "no host link" not in err.value.message
    with pytest.raises(InputError, match="--problem chain") as err:
        check_run_solver_args("chain", "pofo", None, None, {}, host_link=True)
    assert err.value.field in ("solver", "--solver")  # "solver" under memsched.run


def test_offloading_solver_on_a_chain_without_a_link_keeps_the_bandwidth_hint() -> None:
    with pytest.raises(InputError, match="has no host link: give its bandwidth") as err:
        registry.get_solver("chain", "pofo")
    assert "--problem" not in err.value.message
    with pytest.raises(InputError, match="has no host link"):
        check_run_solver_args("chain", "pofo", None, None, {})


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from memsched.experiments.cli import main

    try:
        rc = main(args)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    return rc, capsys.readouterr().err


def test_memsched_run_refuses_bad_parameters_before_writing_the_profile(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The command line checks the solver's options as the API does: nothing profiled, no --profile-file."""
    pf = tmp_path / "pf.json"
    rc, err = _cli(["run", "resnet18", "--batch", "2", "--image-size", "32", "--width", "8", "--threads", "1",
                    "--budget", "80%", "--solver", "cpsat", "--option", "parameters=bogus", "--profile-file", str(pf)],
                   capsys)
    assert rc == 2 and "bogus" in err and len(err.strip().splitlines()) == 1
    assert not pf.exists()


def test_memsched_run_names_problem_chain_for_a_file_with_a_link(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "linked.json"
    data = json.loads((ROOT / "examples" / "tiny.json").read_text())
    data["host_link"] = {"bandwidth": 5e7, "latency": 0.0}
    data.setdefault("meta", {})["model"] = "resnet18"
    path.write_text(json.dumps(data))
    rc, err = _cli(["run", str(path), "--budget", "70%", "--problem", "chain", "--solver", "pofo"], capsys)
    assert rc == 2 and "--problem chain" in err and "no host link" not in err

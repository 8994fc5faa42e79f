"""Hunt 25 (offloading execution: `memsched run`, `memsched max-batch`, `measure_link`):

1. `memsched run` on an offloading instance on CPU compared the measured time with the two-stream
   makespan, though the docs, `OffloadStepResult.time_ratio` and the sweep rows compare a CPU run
   (synchronous transfers) with the sequential replay: ``ratio.time`` is now measured /
   ``predicted.sequential_makespan`` (a new key of the JSON's predicted block).
2. `memsched max-batch --solver pofo` said to give a bandwidth (--bandwidth), a flag max-batch
   refuses: an offloading solver is refused saying max-batch supports chain and graph solvers.
3. `memsched run FILE.json --bandwidth ...` on a chain timed in MFLOP did not name the file.
4. `memsched run siamese --problem offload|chain` said "unknown model 'siamese'": it now says it
   is a join network (--problem join, or no --problem).
5. `measure_link` returned a negative bandwidth for large-first sizes, divided by zero for equal
   ones, and clamped a non-positive fitted slope to a huge bandwidth.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memsched.models.memory  # noqa: E402
import memsched.models.run  # noqa: E402
from memsched.models.offload.values import measure_link  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

torch.set_num_threads(1)

LSTM = ["--batch", "2", "--seq-len", "4", "--width", "16"]
CPU = ["--device", "cpu", "--threads", "1", "--time-repeats", "1", "--no-independent"]


# ---------------------------------------------------------------------------- 1. ratio.time on CPU offloading
def test_run_offload_on_cpu_compares_time_with_the_sequential_replay(tmp_path: Path) -> None:
    from memsched.models.offload.executor import sequential_replay
    from memsched.solvers import registry
    from memsched.solvers.offload import OffloadInstance
    from memsched.solvers.offload.schedule import OffloadSchedule

    profile = tmp_path / "lstm.json"
    out = memsched.models.run.run("lstm", "95%", problem="offload", solver="vdnn", bandwidth=1e6,
                                  sizes={"batch": 2, "seq_len": 4, "width": 16, "device": "cpu"}, time_repeats=1,
                                  profile_repeats=1, independent=False, store_all=False,
                                  profile_file=str(profile))
    assert out["device"] == "cpu" and out["predicted"] is not None
    chain = registry.problem_module("chain").load(str(profile))
    schedule = OffloadSchedule.from_json(out["schedule"], chain.length)
    sequential = sequential_replay(OffloadInstance(chain, 1e6, 0.0), schedule).makespan
    predicted = out["predicted"]
    assert predicted["sequential_makespan"] == pytest.approx(sequential)
    assert predicted["sequential_makespan"] != pytest.approx(predicted["makespan"])  # the test tells them apart
    assert out["ratio"]["time"] == pytest.approx(out["measured"]["time"] / sequential)


# ---------------------------------------------------------------------------- 2. max-batch and offloading solvers
@pytest.mark.parametrize("solver", ["pofo", "vdnn"])
def test_max_batch_refuses_an_offloading_solver_without_asking_for_a_bandwidth(cli, solver: str) -> None:
    res = cli("max-batch", "lstm", "--memory", "20MB", "--seq-len", "4", "--width", "16", "--solver", solver,
              "--limit", "4")
    assert res.code == 2, res.err
    assert "--solver" in res.err and "chain and graph solvers" in res.err, res.err
    assert "--bandwidth" not in res.err and "host_link" not in res.err, res.err


# ---------------------------------------------------------------------------- 3. MFLOP chain names its file
def test_run_offload_on_a_flops_chain_names_the_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "lstm_flops.json"
    res = cli("profile", "lstm", *LSTM, "--cost", "flops", "-o", path)
    assert res.code == 0, res.err
    for argv in ((path, "--solver", "pofo"), ("lstm", "--chain", path)):
        res = cli("run", *argv, "--budget", "80%", "--bandwidth", "1e8", *CPU)
        assert res.code == 2, res.err
        assert f"{path}: meta.units.time: MFLOP" in res.err, res.err
    with pytest.raises(InputError) as info:
        memsched.models.run.run("lstm", "80%", problem="offload", instance=str(path), bandwidth=1e8,
                                sizes={"device": "cpu"}, time_repeats=1, independent=False)
    assert info.value.path == str(path) and info.value.field == "meta.units.time"


# ---------------------------------------------------------------------------- 4. a join network with another problem
@pytest.mark.parametrize("problem", ["offload", "chain", "graph"])
def test_run_join_network_with_another_problem_says_it_is_a_join_network(cli, problem: str) -> None:
    link = ["--bandwidth", "1e8"] if problem == "offload" else []
    res = cli("run", "siamese", "--budget", "90%", "--problem", problem, *link, *CPU)
    assert res.code == 2, res.err
    assert "unknown model" not in res.err, res.err
    assert "siamese is a join network" in res.err and "--problem join" in res.err, res.err


# ---------------------------------------------------------------------------- 5. measure_link's sizes and fit
@pytest.mark.parametrize("sizes", [(1 << 16, 1 << 12), (1 << 12, 1 << 12), (0, 1 << 12), (-4, 1 << 12)])
def test_measure_link_requires_two_increasing_positive_sizes(sizes: tuple[int, int]) -> None:
    with pytest.raises(InputError) as info:
        measure_link(torch.device("cpu"), sizes=sizes, repeats=1)
    assert info.value.field == "sizes"


def test_measure_link_refuses_a_non_positive_slope(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memsched.models.memory, "cpu_clock", lambda clock: (lambda: 0.0))  # every transfer 0 s
    with pytest.raises(RuntimeError, match="no positive slope"):
        measure_link(torch.device("cpu"), sizes=(1 << 10, 1 << 12), repeats=1)


def test_measure_link_still_measures_a_positive_link() -> None:
    bandwidth, latency = measure_link(torch.device("cpu"), sizes=(1 << 12, 1 << 20), repeats=3)
    assert bandwidth > 0 and latency >= 0


def test_run_json_documents_sequential_makespan() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    run_section = doc[doc.index("## `memsched run`"):doc.index("## ", doc.index("## `memsched run`") + 5)]
    assert "`sequential_makespan`" in run_section

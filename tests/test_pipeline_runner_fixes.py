"""Pipeline runner fixes (piperun): the chain runner's measured period is the slope
(T(2m) - T(m)) / m, not a step time divided by m; both runners refuse, before spawning, fewer than
one micro-batch and a partition that does not cover exactly the network's layers, and the DAG
runner what the chain runner refuses (an interleaved allocation, 1F1B with m < S); a DAG spec whose
later layer reads the network's input is refused by `profile_dag` and the DAG runner; the notebook
checks "offloading is never slower than rematerialization alone" compare the offloading solvers
only, so that they can fail."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

from memsched.models.pipeline import dag_runner, runner  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.pipeline import Partition, simulate_batch  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


# ---------------------------------------------------------------------------- 1. the measured period
def test_compare_measures_the_period_as_the_slope_of_two_step_times():
    """A run whose step times are exactly the simulator's makespans of m and 2m micro-batches
    measures exactly the predicted period (1F1B: the simulator's slope is its period); the old
    step time / m read 1.1x-1.5x the period."""
    inst = runner.profile_sequential(runner.make_mlp(4, 8), torch.randn(2, 64), reps=1)
    m = 4
    part = Partition.from_bounds([(0, 1), (2, 3)], micro_batches=m).evaluated(inst)
    u = inst.time_unit
    t_m, t_2m = (simulate_batch(inst, part, n).makespan * u for n in (m, 2 * m))
    run = {"config": {"micro_batches": m}, "step_time_s": t_m, "step_time_2m_s": t_2m, "saved_peak": [0, 0],
           "cuda_peak": [None, None], "grad_check": True, "grad_max_abs_err": 0.0, "device": "cpu"}
    out = runner.compare(inst, part, run)
    period = part.period * u
    assert out["measured"]["period_s"] == pytest.approx(period, rel=1e-9)
    assert out["predicted"]["slope_s"] == pytest.approx(period, rel=1e-9)
    assert out["measured"]["step_time_s"] == t_m and out["predicted"]["makespan_s"] == pytest.approx(t_m)


@pytest.mark.torch
@pytest.mark.slow
def test_chain_run_times_m_and_2m_micro_batches_in_one_spawn():
    """The real run records both step times (no timing assert) and still checks the gradients of the m run."""
    part = Partition.from_bounds([(0, 0), (1, 1)])
    run = runner.run_partition(part, layers=2, width=4, in_dim=4, out_dim=2, batch=2, micro_batches=2, steps=1,
                               device="cpu", timeout_s=120)
    assert run["grad_check"], run["grad_max_abs_err"]
    assert run["step_time_s"] > 0 and run["step_time_2m_s"] > 0
    inst = runner.profile_sequential(runner.make_mlp(2, 4, in_dim=4, out_dim=2), torch.randn(1, 4), reps=1)
    out = runner.compare(inst, part, run)
    assert out["measured"]["period_s"] == pytest.approx((run["step_time_2m_s"] - run["step_time_s"]) / 2)


# ---------------------------------------------------------------------------- 2. refused before spawning
@pytest.fixture
def no_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to spawn the ranks fails the test."""

    def spawn(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a rank process was spawned for an input the runner must refuse first")

    monkeypatch.setattr(runner, "run_ranks", spawn)
    monkeypatch.setattr(dag_runner, "run_ranks", spawn)


def _interleaved() -> Partition:
    part = Partition.from_bounds([(0, 1), (2, 2), (3, 4)])
    part.device_of = [0, 1, 0]
    return part


def _bad_order() -> Partition:
    part = Partition.from_bounds([(0, 1), (2, 4)])
    part.order = [1, 0, 2, 3, 4]  # layer 1 reads layer 0
    return part


CHAIN = {  # name: (partition, micro_batches, field); the network has 8 layers
    "m0": (Partition.from_bounds([(0, 1), (2, 7)], schedule="gpipe", micro_batches=1), 0, "micro_batches"),
    "short": (Partition.from_bounds([(0, 1), (2, 3)]), 4, "partition"),
    "long": (Partition.from_bounds([(0, 5), (6, 11)]), 4, "partition"),
    "gap": (Partition.from_bounds([(0, 2), (4, 7)]), 4, "partition"),
}
DAG = {  # residual_spec(1): 5 layers
    "m0": (Partition.from_bounds([(0, 1), (2, 4)], schedule="gpipe", micro_batches=1), 0, "micro_batches"),
    "short": (Partition.from_bounds([(0, 1), (2, 3)]), 4, "partition"),
    "long": (Partition.from_bounds([(0, 3), (4, 8)]), 4, "partition"),
    "1f1b_m_lt_S": (Partition.from_bounds([(0, 1), (2, 3), (4, 4)]), 2, "micro_batches"),
    "interleaved": (_interleaved(), 4, "partition"),
    "order": (_bad_order(), 4, "partition.order"),
}


@pytest.mark.parametrize("case", sorted(CHAIN))
def test_chain_runner_refuses_before_spawning(case: str, no_spawn: None):
    part, m, field = CHAIN[case]
    with pytest.raises(InputError) as err:
        runner.run_partition(part, layers=8, width=4, batch=8, micro_batches=m, steps=1, device="cpu", timeout_s=5)
    assert err.value.field == field, err.value


@pytest.mark.parametrize("case", sorted(DAG))
def test_dag_runner_refuses_before_spawning(case: str, no_spawn: None):
    part, m, field = DAG[case]
    with pytest.raises(InputError) as err:
        dag_runner.run_dag_partition(part, dag_runner.residual_spec(1), width=4, batch=8, micro_batches=m, steps=1,
                                     timeout_s=5)
    assert err.value.field == field, err.value


# ---------------------------------------------------------------------------- 3. the input read by a later layer
def test_a_later_reader_of_the_network_input_is_refused(no_spawn: None):
    """x -> block -> block -> add(., x) -> block: the model has the input as layer 0's input only, so
    profiling would undercount what the boundary carries, and the runner's rank 1 died (KeyError: -1)."""
    spec = [("block", [-1]), ("block", [0]), ("add", [1, -1]), ("block", [2])]
    net = dag_runner.DagNet(spec, width=4, in_dim=4, out_dim=2)
    with pytest.raises(InputError) as err:
        dag_runner.profile_dag(net, torch.randn(2, 4), reps=1)
    assert err.value.field == "spec[2]" and "-1" in str(err.value)
    part = Partition.from_bounds([(0, 1), (2, 3)])
    with pytest.raises(InputError) as err:
        dag_runner.run_dag_partition(part, spec, width=4, in_dim=4, out_dim=2, batch=8, micro_batches=4, steps=1,
                                     timeout_s=5)
    assert err.value.field == "spec[2]"
    dag_runner.check_spec(dag_runner.residual_spec(2))  # only layer 0 reads the input: accepted


# ---------------------------------------------------------------------------- 4. the notebook checks can fail
def _cell(name: str, index: int) -> str:
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    return "".join(nb["cells"][index]["source"])


def _lines(source: str, *words: str) -> str:
    """The cell's lines containing any of `words`, dedented (the check under test, alone)."""
    return textwrap.dedent("\n".join(line for line in source.splitlines() if any(w in line for w in words)))


def test_pofo_notebook_check_compares_offloading_solvers_only():
    """Cell 3 of 08_paper_pofo: with every offloading solver slower than remat-only, the check
    "the best offloading solver is at least as good as rematerialization alone" must fail (the old
    row minimum included remat-only, so it could not)."""
    pd = pytest.importorskip("pandas")
    check = _lines(_cell("08_paper_pofo.ipynb", 3), "offloading", "min(axis=1)")
    wide = pd.DataFrame({"remat-only": [10.0, 20.0], "vdnn": [11.0, 21.0], "offload-prefix": [12.0, 22.0],
                         "pofo": [10.5, 20.5]})
    env = {"wide": wide, "found": wide["remat-only"].notna(), "key": "fake"}
    with pytest.raises(AssertionError):
        exec(check, env)
    wide.loc[0, "pofo"] = 9.0
    wide.loc[1, "vdnn"] = 20.0
    exec(check, env)  # holds when an offloading solver is as good


def test_explorer_notebook_check_compares_offloading_solvers_only():
    """Cell 13 of 04_interactive_explorer: the same check on the offloading panel's comparison
    (the old ``off.best`` included remat-only)."""
    check = _lines(_cell("04_interactive_explorer.ipynb", 13), "offloading", "off.best")

    class Comparison(list):
        def __getitem__(self, key: Any) -> Any:
            return next(r for r in self if r.solver == key) if isinstance(key, str) else super().__getitem__(key)

        @property
        def best(self) -> Any:
            return min((r for r in self if r.found), key=lambda r: r.makespan)

    def result(solver: str, makespan: float) -> SimpleNamespace:
        return SimpleNamespace(solver=solver, makespan=makespan, found=True)

    off = Comparison([result("remat-only", 10.0), result("offload-prefix", 11.0), result("pofo", 10.5)])
    with pytest.raises(AssertionError):
        exec(check, {"off": off})
    off[2].makespan = 9.0
    exec(check, {"off": off})

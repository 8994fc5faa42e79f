"""Every problem package defines a `Problem` descriptor that loads, solves, replays and profiles.

For each problem: load an example, solve with a fast solver through the registry, replay the
schedule through the descriptor (and through a JSON round trip of the schedule), and check that
the memory profile's largest ``mem_during`` is the replay's peak.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.problem import Problem, Replay

DATA = Path(__file__).resolve().parents[1] / "solvers" / "data"

# problem -> (example file, fast solver, budget as a fraction of the reference peak, extra load args)
CASES = {
    "chain": (DATA / "examples" / "cnn12.json", "rotor", 0.6, ()),
    "graph": (DATA / "graphs" / "linear10.json", "checkpoint-all", 1.0, ()),
    "join": (DATA / "join" / "siamese8.json", "dp", 0.7, ()),
    "offload": (DATA / "examples" / "cnn12.json", "offload-prefix", 0.7, (12e9,)),
    "pipeline": (DATA / "pipeline" / "mlp7.chain.json", "madpipe", 0.8, ()),
}


def test_every_problem_has_a_descriptor():
    assert set(registry.available_problems()) == set(CASES)
    for name in registry.PROBLEMS:
        desc = registry.get_problem(name)
        assert isinstance(desc, Problem)
        assert desc.name == name
        assert desc.objective == ("period" if name == "pipeline" else "makespan")
        assert desc.default_solver in desc.solvers
        for target, summary in desc.solvers.values():
            assert ":" in target and summary


@pytest.mark.parametrize("problem", sorted(CASES))
def test_solve_replay_profile(problem, tmp_path):
    path, solver, frac, extra = CASES[problem]
    desc = registry.get_problem(problem)
    instance = desc.load(str(path), *extra)
    reference = desc.reference_peak(instance)
    assert isinstance(reference, int) and reference > 0
    budget = int(reference * frac)
    options = {"devices": 2} if problem == "pipeline" else {}
    result = registry.solve(problem, instance, solver, budget, **options)
    assert result.schedule is not None, result.message

    rep = desc.replay(instance, result.schedule, budget)
    assert isinstance(rep, Replay) and rep.violation is None
    assert rep.peak_memory <= budget
    assert rep.objective == pytest.approx(result.objective)
    assert rep.peak_memory == result.peak_memory

    profile = desc.memory_profile(instance, result.schedule)
    assert profile and max(row["mem_during"] for row in profile) == rep.peak_memory

    # the schedule reader reads what the schedule writes
    file = tmp_path / "schedule.json"
    file.write_text(json.dumps(result.schedule.to_json()))
    again = desc.load_schedule(file, instance)
    assert desc.replay(instance, again, budget) == rep

    # a budget below the peak is reported as a violation, not accepted
    assert desc.replay(instance, result.schedule, rep.peak_memory - 1).violation is not None


def test_unknown_solver_names_the_field():
    with pytest.raises(InputError) as err:
        registry.get_problem("chain").solver("no-such-solver")
    assert err.value.field == "--solver"


def test_problem_packages_import_light():
    """Importing a problem package loads no exact model and none of the heavy libraries."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "import memsched.solvers.chain, memsched.solvers.graph, memsched.solvers.join\n"
            "import memsched.solvers.offload, memsched.solvers.pipeline\n"
            "heavy = [m for m in ('pandas', 'networkx', 'ortools', 'pulp', 'matplotlib') if m in sys.modules]\n"
            "exact = [m for m in sys.modules if m.endswith(('.cpsat', '.milp', '.astar'))]\n"
            "print(heavy + exact)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _generated(problem: str, seed: int):
    """A small seeded random instance of `problem` from its package's generate.py."""
    import numpy as np

    if problem == "chain":
        from memsched.solvers.chain.generate import random_chain

        return random_chain(8, seed)
    if problem == "graph":
        from memsched.solvers.graph.generate import random_dag

        return random_dag(10, seed)
    if problem == "join":
        from memsched.solvers.join.generate import random_join

        return random_join([3, 4], seed)
    if problem == "offload":
        from memsched.solvers.offload.generate import random_offload

        return random_offload(6, seed)
    from memsched.solvers.pipeline.generate import random_pipeline

    return random_pipeline(np.random.default_rng(seed), 6)


@pytest.mark.parametrize("problem", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_generated_instances_replay_through_the_descriptor(problem, seed):
    desc = registry.get_problem(problem)
    instance = _generated(problem, seed)
    budget = desc.reference_peak(instance)  # the reference schedule's own peak always fits
    result = registry.solve(problem, instance, desc.default_solver, budget, slots=0,
                            **({"devices": 2} if problem == "pipeline" else {}))
    assert result.schedule is not None, result.message
    rep = desc.replay(instance, result.schedule, budget)
    assert rep.violation is None and rep.peak_memory <= budget
    assert max(row["mem_during"] for row in desc.memory_profile(instance, result.schedule)) == rep.peak_memory

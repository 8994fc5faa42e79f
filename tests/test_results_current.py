"""The committed figure tables are what the code computes now (no stale figure).

Every row of the fast, deterministic solvers of each committed figure sweep is solved again from
the instances stored beside it (`memsched sweep NAME --verify`, `experiments/sweep/verify.py`)
and must give the same status and objective. A solver change that moves a committed figure fails
here until the sweep is brought up to date (``memsched sweep NAME --verify --update`` and
``memsched figures``, or ``python -m memsched.experiments.paper_figures`` for ``fig_paper_*``).
Exact solvers are left out: their time-limited answers depend on the machine's speed, and they
take minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.experiments.sweep import find_config, load_config
from memsched.experiments.sweep.verify import verify_sweep

RESULTS = Path(__file__).resolve().parents[1] / "results"

#: Sweep name -> the solver labels checked (fast, deterministic: DPs and heuristics).
FAST = {
    "default": ["store-all", "recompute-all", "sqrt", "periodic", "revolve", "rotor"],  # results/main
    "fig_a_chains": ["rotor", "periodic", "sqrt", "store-all", "revolve"],
    "fig_b_solve_time": ["rotor"],
    "fig_c_graphs": ["checkpoint-all", "dtr", "sqrt", "greedy", "griewank"],
    "fig_d_join": ["dp", "equal", "proportional", "sequential", "store-all"],
    "fig_e_offload": ["none", "remat-only (rotor: persistent)", "vdnn", "offload-prefix", "rotor-offload",
                      "pofo (persistent, offloaded checkpoints)"],
    "fig_f_pipeline": ["madpipe P=2", "madpipe P=4", "madpipe P=8", "pipedream P=2", "pipedream P=4",
                       "pipedream P=8", "balance-time P=8"],
    "fig_g_measured": ["rotor", "dp", "pofo"],
    "fig_paper_chains": ["rotor", "sqrt", "store-all", "revolve"],
    "fig_paper_graphs": ["checkpoint-all", "greedy", "sqrt", "griewank"],
    "fig_paper_pipeline": ["madpipe P=2", "madpipe P=4", "pipedream P=2", "pipedream P=4", "balance-time P=2"],
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_committed_rows_are_what_head_computes(name):
    config = load_config(find_config(name))
    out = RESULTS.parent / config.output_dir()
    if not (out / f"{config.name}.csv").exists():
        pytest.skip(f"{out} is not committed")
    checks = verify_sweep(config, output=out, solvers=FAST[name], progress=False)
    assert checks, f"no {name} rows for {FAST[name]}"
    stale = [f"{c.instance} {c.budget_spec} {c.solver_label}: stored {c.stored_status} {c.stored_objective}, "
             f"now {c.new_status} {c.new_objective}" for c in checks if c.verdict != "same"]
    assert not stale, f"results/{name} is stale (memsched sweep {name} --verify --update):\n" + "\n".join(stale)

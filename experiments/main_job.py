"""The default end-to-end job (README): every chain solver on the built-in examples.

Solves each example chain at several budgets with every available solver, replays every
schedule in the simulator (the registry does it), prints a table and writes
results/main/chain_solvers.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from solvers import registry
from solvers.chain import Chain, reference_peak

EXAMPLES = Path(__file__).resolve().parent.parent / "solvers" / "data" / "examples"
RESULTS = Path(__file__).resolve().parent.parent / "results" / "main"


def run(chains: list[str], budgets: list[float], time_limit: float) -> pd.DataFrame:
    rows = []
    names = [n for _, n, _ in registry.solver_table("chain")]
    grid = [(c, b, s) for c in chains for b in budgets for s in names]
    for chain_name, fraction, solver in tqdm(grid, desc="main job", unit="run"):
        chain = Chain.load(EXAMPLES / f"{chain_name}.json")
        if solver == "revolve" and not chain.is_homogeneous():
            continue
        if solver in ("milp", "cpsat") and chain.length > 12:
            continue  # exact models: small chains only in the default job
        budget = int(reference_peak(chain) * fraction)
        result = registry.solve("chain", chain, solver, budget, slots=200, time_limit=time_limit)
        rows.append({"instance": chain_name, "L": chain.length, "budget_fraction": fraction, "budget": budget,
                     "solver": solver, "status": result.status, "makespan": result.objective,
                     "overhead": (result.objective / chain.total_time() - 1) if result.objective else None,
                     "peak_memory": result.peak_memory, "lower_bound": result.lower_bound,
                     "solve_time_s": result.solve_time_s})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chains", nargs="+", default=["tiny", "random10", "cnn12", "random30", "homogeneous20"])
    parser.add_argument("--budgets", nargs="+", type=float, default=[0.5, 0.7, 0.9, 1.0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args(argv)
    table = run(args.chains, args.budgets, args.time_limit)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "chain_solvers.csv"
    table.to_csv(out, index=False)
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

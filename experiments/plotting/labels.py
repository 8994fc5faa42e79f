"""Legend text of solver series: a solver's label with the restricted model its ``optimal`` rows are
optimal in, as the rows' ``scope`` names it (issue 19 item 6: "rotor (persistent)", "cpsat (phase
model)"). Used by the command-line figures (`experiments.figures`, `experiments.paper_figures`) and the
facade's `SweepResult.plot`; no pyplot import."""

from __future__ import annotations

import pandas as pd

__all__ = ["SCOPE_MODELS", "model_labels"]


#: (start of a row's ``scope``, the model): the restricted model a solver's ``optimal`` rows are optimal in,
#: as the solver's scope string names it (`model_labels`)
SCOPE_MODELS: tuple[tuple[str, str], ...] = (
    ("persistent schedules", "persistent"),                                  # rotor
    ("join-persistent schedules", "persistent per branch"),                  # dp (join networks)
    ("contiguous stages on <=", "contiguous stages, 1F1B"),                  # madpipe, pipedream, cpsat (pipeline)
    ("straight pipelines and V-shaped allocations", "straight or V-shaped stages"),  # interleave-v
    ("all schedules of the join simulator", "all schedules"),                # exact (join networks)
    ("frontier-advancing schedules in the file's order", "file's order"),   # checkmate
    ("phase model", "phase model"),                                          # milp, cpsat (chains)
    ("join phase model", "join phase model"),                                # cpsat (join networks)
    ("at most 2 computations per node", "<= 2 computations per node"),      # cpsat (graphs)
)


def model_labels(rows: pd.DataFrame) -> dict[str, str]:
    """Solver label (``solver_label``, else ``solver``) -> its legend text: the label with the model its
    ``optimal`` rows are optimal in appended ("rotor (persistent)", "madpipe P=4 (contiguous stages, 1F1B)"),
    when the label names none (no parenthesis) and those rows' ``scope`` names one model of `SCOPE_MODELS`;
    else the label itself. The sweep configs' labels (the tables' keys) are unchanged."""
    if "solver_label" in rows:
        labels = rows["solver_label"].fillna(rows["solver"]) if "solver" in rows else rows["solver_label"]
    else:
        labels = rows["solver"] if "solver" in rows else pd.Series(dtype=object)
    shown = {str(lab): str(lab) for lab in labels.dropna()}
    if "scope" not in rows or "status" not in rows:
        return shown
    optimal = rows[rows["status"] == "optimal"]
    for label, scopes in optimal["scope"].groupby(labels[optimal.index]):
        if "(" in str(label):
            continue
        models = {model for scope in scopes.dropna().astype(str) for start, model in SCOPE_MODELS
                  if scope.startswith(start)}
        if len(models) == 1:
            shown[str(label)] = f"{label} ({models.pop()})"
    return shown

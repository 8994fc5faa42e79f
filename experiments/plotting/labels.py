"""Legend text of solver series: a solver's label with the restricted model its ``optimal`` rows are
optimal in, as the rows' ``scope`` names it (issue 19 item 6: "rotor (persistent)", "cpsat (phase
model)"; a label with a parenthetical gets the model inside it, "rotor (no transfer; persistent)",
`with_model`); pofo's and revolve's ``feasible`` rows, optimal within their class by design, name that
class (`CLASS_SCOPE_MODELS`, `class_optimal`): "pofo (persistent, offloaded checkpoints)".
Used by the command-line figures (`experiments.figures`, `experiments.paper_figures`) and
the facade's `SweepResult.plot`; no pyplot import."""

from __future__ import annotations

import pandas as pd

__all__ = ["ALL_SCHEDULES", "CLASS_SCOPE_MODELS", "SCOPE_MODELS", "class_optimal", "model_labels", "row_labels",
           "scope_model", "with_model"]


#: (start of a row's ``scope``, the model): the restricted model a solver's ``optimal`` rows are optimal in,
#: as the solver's scope string names it (`model_labels`); a scope takes the model of the longest start it
#: begins with (`scope_model`: pofo's "persistent schedules with offloaded checkpoints" is no rotor's)
SCOPE_MODELS: tuple[tuple[str, str], ...] = (
    ("persistent schedules", "persistent"),                                  # rotor
    ("persistent schedules with offloaded checkpoints", "persistent, offloaded checkpoints"),  # pofo
    ("checkpointing only (rotor: persistent schedules", "persistent"),       # remat-only (offload)
    ("offload-only (store-all order)", "store-all order"),                   # cpsat (offload)
    ("offload-exact: phase-form compute sequences", "phase model, whole-piece transfers"),  # offload-exact
    ("phase-form compute sequences (each stage at most once per phase) with at most one Off/Pre pair per idle gap",
     "phase model, one Off/Pre per idle gap"),                               # exact-combined
    ("H-Revolve abstract model", "H-Revolve model"),                         # hrevolve
    ("DAG partitions (all antichain splits", "DAG partitions"),             # dag, dag-cpsat (pipeline)
    ("DAG partitions (antichain splits", "coarsened DAG partitions"),        # dag, dag-cpsat: a coarsened lattice
    ("DAG partitions (splits of the linearised chain only", "contiguous stages"),  # dag, dag-cpsat: the chain's
    ("interleaved allocations of <=", "interleaved contiguous stages"),      # interleave-dp, interleave-cpsat
    ("join-persistent schedules", "persistent per branch"),                  # dp (join networks)
    ("contiguous stages on <=", "contiguous stages, 1F1B"),                  # madpipe, pipedream, cpsat (pipeline)
    ("straight pipelines and V-shaped allocations", "straight or V-shaped stages"),  # interleave-v
    ("all schedules of the join simulator", "all schedules"),                # exact (join networks)
    ("frontier-advancing schedules in the file's order", "file's order"),   # checkmate
    ("phase model", "phase model"),                                          # milp, cpsat (chains)
    ("dp's schedule; optimal among all schedules", "all schedules"),        # milp, cpsat (joins): store-all fits
    ("join phase model", "join phase model"),                                # cpsat (join networks)
    ("at most 2 computations per node", "<= 2 computations per node"),      # cpsat (graphs)
)


#: (start of a row's ``scope``, the model): solvers that report ``feasible`` by design while their scope
#: states that the answer is optimal within a class of schedules (no claim for the problem's own model):
#: pofo's DP is optimal among persistent schedules with offloaded checkpoints at the stated slots, and
#: returns an outside schedule only when faster (docs/offload.md, *Solvers*); revolve's number of forwards
#: is optimal for Revolve's homogeneous model (docs/chain.md). Their rows name the model as an ``optimal``
#: row's would, unless cut short (`class_optimal`). A heuristic's scope ("no claim") is never listed here.
CLASS_SCOPE_MODELS: tuple[tuple[str, str], ...] = (
    ("persistent schedules with offloaded checkpoints", "persistent, offloaded checkpoints"),  # pofo
    ("Revolve (optimal number of forwards for its homogeneous model", "Revolve's model"),     # revolve
)


def model_labels(rows: pd.DataFrame) -> dict[str, str]:
    """Solver label (``solver_label``, else ``solver``) -> its legend text: the label with the model its
    ``optimal`` rows are optimal in ("rotor (persistent)", "madpipe P=4 (contiguous stages, 1F1B)", "rotor (no
    transfer; persistent)": `with_model`), when those rows' ``scope`` names one model of `SCOPE_MODELS`
    (`scope_model`); else the label itself. The sweep configs' labels (the tables' keys) are unchanged.

    Rows of several problems (a ``problem`` column holding more than one: a mixed grid) are grouped by
    (problem, label): a label that runs on several problems gets a model only when its rows of every one of
    them name that same model, so that the one text is true of each of its series (cpsat's chain rows are
    not "<= 2 computations per node" because its graph rows are); `row_labels` gives each problem's series
    its own model instead. Any index will do (duplicates too: a concatenation of tables): the rows are read
    by position, as with a fresh RangeIndex."""
    rows = rows.reset_index(drop=True)  # `_group_texts` selects by index labels: duplicates would not do
    labels = _solver_labels(rows)
    shown = {str(lab): str(lab) for lab in labels.dropna()}
    texts: dict[str, set[str]] = {}
    for (_, label), text in _group_texts(rows, labels).items():
        texts.setdefault(label, set()).add(text)
    for label, found in texts.items():
        if len(found) == 1:
            shown[label] = found.pop()
    return shown


def row_labels(rows: pd.DataFrame) -> pd.Series:
    """The legend text of each row of `rows` (a Series on its index): its solver label with the model that
    the ``optimal`` rows of that label *and problem* are optimal in (as `model_labels` words it), so that in
    a mixed grid each problem's series of one solver names its own model ("cpsat (<= 2 computations per
    node)" on graphs, "cpsat (phase model)" on chains); for rows of one problem, ``model_labels`` mapped
    over the labels. Any index will do (duplicates too), as for `model_labels`; the result keeps `rows`'."""
    index = rows.index
    rows = rows.reset_index(drop=True)  # read by position (`model_labels`)
    labels = _solver_labels(rows)
    texts = _group_texts(rows, labels)
    problems = _problems(rows)
    return pd.Series([texts.get((problem, str(label)), str(label)) for problem, label in zip(problems, labels)],
                     index=index, dtype=object)


def _solver_labels(rows: pd.DataFrame) -> pd.Series:
    """Each row's solver label: ``solver_label``, else ``solver`` (an empty Series without either)."""
    if "solver_label" in rows:
        return rows["solver_label"].fillna(rows["solver"]) if "solver" in rows else rows["solver_label"]
    return rows["solver"] if "solver" in rows else pd.Series(dtype=object)


def _problems(rows: pd.DataFrame) -> pd.Series:
    """Each row's problem ("" without a ``problem`` column, or where it is missing): the grouping key
    of `_group_texts` beside the label."""
    if "problem" not in rows:
        return pd.Series("", index=rows.index, dtype=object)
    return rows["problem"].fillna("").astype(str)


def _group_texts(rows: pd.DataFrame, labels: pd.Series) -> dict[tuple[str, str], str]:
    """(problem, label) -> legend text for each label present, with the problem of `_problems`: the label
    with the model (`with_model`) when the group's ``optimal`` rows' scopes name exactly one model
    (`scope_model`), else the label itself."""
    out = {(problem, str(label)): str(label) for problem, label in zip(_problems(rows), labels) if pd.notna(label)}
    if "scope" not in rows or "status" not in rows:
        return out
    claimed = (rows["status"] == "optimal") | class_optimal(rows)
    optimal = rows[claimed]
    keys = [_problems(rows)[optimal.index], labels[optimal.index]]
    for (problem, label), group in optimal.groupby(keys):
        models = {_row_model(str(status), str(scope)) for status, scope in
                  zip(group["status"], group["scope"]) if pd.notna(scope)} - {None}
        models = _narrowest(models)
        if len(models) == 1:
            out[(str(problem), str(label))] = with_model(str(label), str(models.pop()))
    return out


#: the model of a row optimal among all schedules (`SCOPE_MODELS`): an answer optimal in every model
ALL_SCHEDULES = "all schedules"


def _narrowest(models: set[str]) -> set[str]:
    """`models` of one series less `ALL_SCHEDULES` when another is there: a row optimal among all schedules
    (a join's cpsat where store-all fits) is no slower than the optimum of any model, so a series whose other
    rows are optimal in the join phase model is still "cpsat (join phase model)"; alone, it names "all
    schedules"."""
    return models - {ALL_SCHEDULES} if len(models) > 1 else models


def class_optimal(rows: pd.DataFrame) -> pd.Series:
    """Which rows (a boolean Series on the index) hold a class-optimal answer reported ``feasible``: the
    status ``feasible``, a ``scope`` beginning with a start of `CLASS_SCOPE_MODELS`, and not cut short --
    no non-empty ``skipped`` in a ``details`` column (pofo under a time limit: stages left out) nor a
    true ``timed_out``. Infeasible and failed rows never count."""
    if "scope" not in rows or "status" not in rows:
        return pd.Series(False, index=rows.index, dtype=bool)
    named = rows["scope"].map(lambda s: isinstance(s, str) and _class_model(s) is not None).astype(bool)
    ok = (rows["status"] == "feasible") & named
    if "details" in rows:
        ok &= ~rows["details"].map(_cut_short).astype(bool)
    if "timed_out" in rows:
        ok &= ~rows["timed_out"].map(lambda t: t is True or str(t).lower() == "true").astype(bool)
    return ok


def _cut_short(details: object) -> bool:
    """Whether a row's ``details`` (a dict, or its JSON text as a CSV holds it) say stages were skipped."""
    if isinstance(details, str):
        import json

        try:
            details = json.loads(details)
        except ValueError:
            return "skipped" in details
    return isinstance(details, dict) and bool(details.get("skipped"))


def _class_model(scope: str) -> str | None:
    """The model of `CLASS_SCOPE_MODELS` that a scope names (the longest start), else None."""
    found = [(len(start), model) for start, model in CLASS_SCOPE_MODELS if scope.startswith(start)]
    return max(found)[1] if found else None


def _row_model(status: str, scope: str) -> str | None:
    """The model a counted row is optimal in: an ``optimal`` row's by `scope_model`, a class-optimal
    ``feasible`` row's by `_class_model`."""
    return scope_model(scope) if status == "optimal" else _class_model(scope)


def scope_model(scope: str) -> str | None:
    """The model of `SCOPE_MODELS` that a row's ``scope`` names (that of the longest start the scope begins
    with); None for a scope that names none (a heuristic's, or one of no listed model)."""
    found = [(len(start), model) for start, model in SCOPE_MODELS if scope.startswith(start)]
    return max(found)[1] if found else None


def with_model(label: str, model: str) -> str:
    """The legend text of solver label `label` whose ``optimal`` rows are optimal in `model`: the label
    itself when it names that model already ("cpsat (phase model)", "remat-only (rotor: persistent)"; case
    aside); else the model inside the label's closing parenthetical ("rotor (no transfer)" -> "rotor (no
    transfer; persistent)"), or appended in one ("rotor" -> "rotor (persistent)")."""
    if model.lower() in label.lower():
        return label
    if label.endswith(")") and "(" in label:
        return f"{label[:-1]}; {model})"
    return f"{label} ({model})"

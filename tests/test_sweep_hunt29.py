"""Sweeps (hunt 29).

1. A sweep of a profiled network (``model = ...``) pins torch to ``[measure] threads`` only while it profiles:
   the caller's thread count is put back (``memsched.sweep`` in a notebook), resumed or not.
2. An empty ``--output`` / ``output=`` / ``--results`` is bad input naming it (exit 2), not the default folder.
3. A budget repeated for an instance is named in the instance's memory unit, not as bytes.
4. ``--list`` with ``--verify`` is refused naming ``--list``, not silently dropped.
5. In a mixed-problem grid a solver's legend text names a model only where its rows of that problem say so
   (cpsat's chain rows are not "<= 2 computations per node" because its graph rows are).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from conftest import sweep_toml

matplotlib.use("Agg")

from memsched.solvers.errors import InputError  # noqa: E402

import memsched  # noqa: E402

#: a quick grid of the tiny chain
QUICK = sweep_toml("q", budgets=["60%", "100%"], defaults={"slots": 50}, instances=[{"example": "tiny"}],
                   solvers=["store-all", "rotor"])


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    cfg = tmp_path / name
    cfg.write_text(text)
    return cfg


# ---------------------------------------------------------------------------- 1. the caller's torch threads
def test_a_sweep_of_a_profiled_network_keeps_the_callers_torch_threads(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import memsched.models.chain.profiler as profiler

    real, seen = profiler.profile_model, []

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(profiler, "profile_model", recording)
    cfg = _write(tmp_path, sweep_toml("thr", budgets=["80%", "100%"], defaults={"slots": 20},
                                      instances=[{"model": "lstm", "batch": 1, "seq_len": 3, "width": 4}],
                                      solvers=["rotor"], tables={"measure": {"threads": 1}}))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        first = memsched.sweep(str(cfg), output=str(tmp_path / "out"))
        assert torch.get_num_threads() == 2
        assert seen == [1]  # profiled with the sweep's threads, as its cells run
        again = memsched.sweep(str(cfg), output=str(tmp_path / "out"))  # every row resumed, the profile stored
        assert torch.get_num_threads() == 2
        assert seen == [1] and len(again.rows) == len(first.rows) == 2
    finally:
        torch.set_num_threads(before)


def test_threads_are_put_back_when_profiling_fails(tmp_path):
    torch = pytest.importorskip("torch")
    from memsched.experiments.sweep.instances import pinned_threads

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(RuntimeError), pinned_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("profiling failed")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------- 2. an empty output path
def test_an_empty_output_is_bad_input_naming_the_option(tmp_path, cli, monkeypatch):
    cfg = _write(tmp_path, QUICK)
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--list"], ["--verify"]):
        res = cli("sweep", cfg, "--output", "", "--no-progress", *extra)
        assert res.code == 2, (extra, res.out, res.err)
        assert "--output" in res.err and "empty" in res.err, res.err
    with pytest.raises(InputError) as err:
        memsched.sweep(str(cfg), output="")
    assert err.value.field == "output" and "empty" in str(err.value)
    assert not (tmp_path / "results").exists()  # nothing written in the default folder


def test_an_empty_results_folder_is_bad_input(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = cli("figures", "--results", "")
    assert res.code == 2, res.out + res.err
    assert "--results" in res.err and "empty" in res.err, res.err
    assert list(tmp_path.iterdir()) == []  # no figures drawn from (or into) the current folder


# ---------------------------------------------------------------------------- 3. a repeated budget's unit
def test_a_repeated_budget_is_named_in_the_instances_memory_unit(tmp_path, cli):
    file = memsched.data_path("join", "siamese8.json")  # sizes in MB
    cfg = _write(tmp_path, sweep_toml("u", budgets=["17MB", 17], instances=[{"file": str(file)}], solvers=["dp"]))
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress")
    assert res.code == 2, res.out + res.err
    assert "is the same 17 MB (16.21 MiB)" in res.err and "bytes" not in res.err, res.err
    assert not (tmp_path / "out").exists()


def test_a_repeated_budget_of_a_bytes_instance_still_says_bytes(tmp_path, cli):
    cfg = _write(tmp_path, sweep_toml("b", budgets=["100%", 28], instances=[{"example": "tiny"}],
                                      solvers=["store-all"]))  # tiny's reference peak: 28 bytes
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress")
    assert res.code == 2, res.out + res.err
    assert "'100%' is the same 28 bytes)" in res.err, res.err


# ---------------------------------------------------------------------------- 4. --list with --verify
def test_list_with_verify_is_refused_naming_list(tmp_path, cli):
    cfg, out = _write(tmp_path, QUICK), tmp_path / "out"
    assert cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1").code == 0
    res = cli("sweep", cfg, "--output", out, "--list", "--verify", "--no-progress")
    assert res.code == 2, res.out + res.err
    assert "--list" in res.err and "not with --verify" in res.err, res.err
    assert res.out == ""  # neither mode ran


# ---------------------------------------------------------------------------- 5. legends of a mixed grid
GRAPH_SCOPE = "at most 2 computations per node; optimal among all schedules: the ..."
PHASE = "phase model: between consecutive backward ops at most one forward per stage; exact sizes; CP-SAT"


def _mixed_rows() -> list[dict]:
    """cpsat on a chain (optimal only where store-all fits: no model named), on a graph (its model), and
    rotor on the chain (persistent)."""
    def row(instance: str, problem: str, solver: str, fraction: float, scope: str) -> dict:
        return {"instance": instance, "problem": problem, "solver": solver, "solver_label": solver,
                "budget": int(100 * fraction), "budget_fraction": fraction, "status": "optimal",
                "objective": 10.0 + fraction, "overhead": fraction / 10, "scope": scope}
    fits = "store-all fits the budget: optimal among all schedules"
    return [row("c", "chain", "cpsat", 1.0, fits), row("c", "chain", "cpsat", 0.6, fits),
            row("g", "graph", "cpsat", 1.0, GRAPH_SCOPE), row("g", "graph", "cpsat", 0.6, GRAPH_SCOPE),
            row("c", "chain", "rotor", 0.6, "persistent schedules, exact sizes")]


def test_model_labels_of_a_mixed_grid_name_no_other_problems_model():
    from memsched.experiments.plotting.labels import model_labels, row_labels

    rows = pd.DataFrame(_mixed_rows())
    assert model_labels(rows) == {"cpsat": "cpsat", "rotor": "rotor (persistent)"}
    assert list(row_labels(rows)) == ["cpsat"] * 2 + ["cpsat (<= 2 computations per node)"] * 2 \
        + ["rotor (persistent)"]
    both = rows.assign(scope=[PHASE, PHASE, GRAPH_SCOPE, GRAPH_SCOPE, rows["scope"].iloc[4]])
    assert model_labels(both)["cpsat"] == "cpsat"  # two models: none named
    assert list(row_labels(both))[:3] == ["cpsat (phase model)"] * 2 + ["cpsat (<= 2 computations per node)"]
    graph_only = rows[rows["problem"] == "graph"]
    assert model_labels(graph_only) == {"cpsat": "cpsat (<= 2 computations per node)"}  # one problem: as before


def test_a_single_problem_grid_is_labelled_as_before():
    from memsched.experiments.plotting.labels import model_labels, row_labels

    rows = pd.DataFrame([{"problem": "chain", "solver": "cpsat", "status": "optimal", "scope": PHASE},
                         {"problem": "chain", "solver": "cpsat", "status": "optimal",
                          "scope": "store-all fits the budget: optimal among all schedules"},
                         {"problem": "chain", "solver": "rotor", "status": "feasible", "scope": "persistent"}])
    assert model_labels(rows) == {"cpsat": "cpsat (phase model)", "rotor": "rotor"}
    assert list(row_labels(rows)) == ["cpsat (phase model)"] * 2 + ["rotor"]
    assert model_labels(rows.drop(columns="problem")) == model_labels(rows)


def test_sweep_result_plot_of_a_mixed_grid_labels_no_chain_series_with_the_graph_model():
    from memsched.results import SweepResult

    fig = SweepResult(_mixed_rows()).plot()
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    chain_axes = next(ax for ax in fig.axes if ax.get_title() == "c")
    chain_series = {line.get_label() for line in chain_axes.get_lines()}
    assert "cpsat (<= 2 computations per node)" not in chain_series, chain_series
    graph_axes = next(ax for ax in fig.axes if ax.get_title() == "g")
    assert "cpsat (<= 2 computations per node)" in {line.get_label() for line in graph_axes.get_lines()}
    assert "rotor (persistent)" in texts

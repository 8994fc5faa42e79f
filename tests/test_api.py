"""The facade on the one import name: `import memsched` (issue 18)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError

import memsched

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data"
CNN12 = DATA / "examples" / "cnn12.json"


@pytest.fixture(scope="module")
def chain():
    return memsched.load(CNN12)


def test_import_is_light():
    code = ("import sys, memsched; f = memsched.solve, memsched.Result, memsched.sweep, memsched.plot; "
            "heavy = [m for m in ('torch', 'pandas', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy; print(sorted(memsched.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for name in ("load", "profile", "solve", "simulate", "run", "sweep", "plot"):
        assert f"'{name}'" in out.stdout


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        memsched.no_such_thing  # noqa: B018


def test_a_chain_file_with_a_host_link_is_an_offloading_instance(tmp_path):
    import json

    data = json.loads(CNN12.read_text())
    data["host_link"] = {"bandwidth": 12e9, "latency": 0.0}
    (tmp_path / "linked.json").write_text(json.dumps(data))
    inst = memsched.load(tmp_path / "linked.json")
    assert memsched.problem_of(inst) == "offload" and inst.bandwidth == 12e9


def test_load_recognises_every_format():
    cases = {DATA / "examples" / "tiny.json": "chain", DATA / "join" / "siamese8.json": "join",
             DATA / "graphs" / "linear10.json": "graph", DATA / "pipeline" / "tiny-resnet.graph.txt": "pipeline"}
    for path, problem in cases.items():
        assert memsched.problem_of(memsched.load(path)) == problem
    assert memsched.problem_of(memsched.load(CNN12, bandwidth="12GB/s")) == "offload"
    assert memsched.problem_of(memsched.load(CNN12, problem="pipeline")) == "pipeline"


def test_bad_input_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "memsched.chain/1", "input_size": 4, "stages": [], "loss": {}}')
    with pytest.raises(InputError, match="bad.json"):
        memsched.load(bad)
    with pytest.raises(InputError):
        memsched.problem_of(object())
    with pytest.raises(InputError, match="budget"):
        memsched.solve(memsched.load(CNN12), "-5%", solver="rotor")
    with pytest.raises(InputError, match="devices"):
        memsched.solve(DATA / "pipeline" / "tiny-resnet.graph.txt", "100%", solver="madpipe")
    chain = memsched.load(CNN12)
    with pytest.raises(InputError, match="50%"):  # 0.5 meant as a share was 0 bytes: "infeasible"
        memsched.solve(chain, 0.5, solver="rotor")
    with pytest.raises(InputError, match="PiB"):
        memsched.solve(chain, 1e30, solver="rotor")
    for slots in ("x", 1.5, True, -1):  # "x" was a TypeError from deep inside
        with pytest.raises(InputError, match="slots"):
            memsched.solve(chain, "50%", solver="rotor", slots=slots)


def test_arguments_of_the_wrong_type_are_input_errors():
    """Each was a TypeError or OverflowError from deep inside ("'int' object is not iterable",
    "cannot convert float infinity to integer")."""
    chain = memsched.load(CNN12)
    cases = [
        (lambda: memsched.solve(chain, "50%", solver=3), "solver"),
        (lambda: memsched.solve(chain, "50%", solver=[]), "solver"),
        (lambda: memsched.solve(chain, "50%", solver=["rotor", 1]), "solver"),
        (lambda: memsched.solve(chain, "50%", solver="milp", time_limit=math.inf), "time_limit"),
        (lambda: memsched.solve(chain, "50%", solver="milp", time_limit=1e30), "time_limit"),
        (lambda: memsched.simulate(chain, 5), "schedule"),
        (lambda: memsched.simulate(chain, [1]), "schedule"),
        (lambda: memsched.sweep(chain, object(), ["rotor"]), "budgets"),
        (lambda: memsched.sweep(chain, ["50%"], 7), "solver"),
        (lambda: memsched.load(5), "path"),
        (lambda: memsched.solve(DATA / "examples" / "tiny.json", "0.1%", solver="rotor"), "less than one byte"),
    ]
    for call, field in cases:
        with pytest.raises(memsched.InputError, match=field):
            call()
    assert memsched.InputError is InputError and issubclass(InputError, ValueError)


def test_a_misspelt_option_is_an_error_not_ignored():
    """`segmnts=3` used to be ignored (the default segment count answered); an option is valid when
    one of the named solvers takes it."""
    chain = memsched.load(CNN12)
    with pytest.raises(InputError, match="segmnts.*segments"):
        memsched.solve(chain, "50%", solver="periodic", segmnts=3)
    with pytest.raises(InputError, match="worker"):
        memsched.sweep(chain, ["50%"], ["rotor", "milp"], worker=2)
    assert memsched.solve(chain, "90%", solver="periodic", segments=3).raw.details.get("segments", 3) == 3
    assert len(memsched.solve(chain, "90%", solver=["rotor", "milp"], time_limit=5, backend="scip").results) == 2


def test_a_sweep_over_one_budget_given_alone():
    """`memsched.sweep(chain, "50%", ...)` read the string as the budgets "5", "0" and "%"."""
    chain = memsched.load(CNN12)
    one = memsched.sweep(chain, "50%", ["rotor"]).to_pandas()
    assert len(one) == 1 and one["budget_spec"].tolist() == ["50%"]


def test_solve_matches_the_registry_and_the_simulator(chain):
    budget = memsched.budget(chain, "60%")
    assert budget == int(registry.problem_module("chain").reference_peak(chain) * 0.6)
    r = memsched.solve(chain, "60%", solver="rotor", slots=200)
    raw = registry.solve("chain", chain, "rotor", budget, slots=200)
    assert r.status == raw.status == "optimal"
    assert r.makespan == pytest.approx(raw.objective)
    assert r.peak_memory == raw.peak_memory <= budget
    replay = memsched.simulate(chain, r.schedule, budget=budget)
    assert replay.status == "valid" and replay.violation is None
    assert replay.makespan == pytest.approx(r.makespan) and replay.peak_memory == r.peak_memory
    row = r.to_pandas().iloc[0]
    assert row["solver"] == "rotor" and row["objective"] == pytest.approx(r.makespan)
    assert r.to_json()["makespan"] == pytest.approx(r.makespan)


def test_replay_of_a_schedule_over_budget_is_invalid(chain):
    r = memsched.solve(chain, "100%", solver="store-all")
    tight = memsched.simulate(chain, r, budget=r.peak_memory - 1)
    assert tight.status == "invalid" and tight.violation
    assert not tight.found


def test_comparison_best_and_ratios(chain):
    cmp = memsched.solve(chain, "50%", solver=["rotor", "periodic", "store-all"], slots=200)
    assert [r.solver for r in cmp] == ["rotor", "periodic", "store-all"]
    assert cmp["store-all"].status == "infeasible" and cmp["store-all"].min_budget > cmp["rotor"].budget
    assert cmp.best is cmp["rotor"]
    frame = cmp.to_pandas()
    assert frame.loc[frame.solver == "rotor", "ratio_to_best"].item() == pytest.approx(1.0)
    assert frame.loc[frame.solver == "periodic", "ratio_to_best"].item() >= 1.0


def test_rich_display_shows_status_numbers_and_the_timeline(chain):
    r = memsched.solve(chain, "60%", solver="rotor", slots=200)
    page = r._repr_html_()
    for word in ("optimal", "makespan", f"{r.makespan:.6g}", "peak memory", "lower bound", "data:image/png;base64"):
        assert word in page
    none = memsched.solve(chain, "10%", solver="rotor")
    assert none.status == "infeasible" and "data:image/png" not in none._repr_html_()
    assert "smallest feasible budget" in none._repr_html_()


def test_plot_figures(chain):
    r = memsched.solve(chain, "60%", solver="rotor", slots=200)
    p = memsched.solve(chain, "60%", solver="periodic")
    fig = memsched.plot(r)
    gids = {a.get_gid() for ax in fig.axes for a in ax.get_children()}
    assert {"memory", "budget", "peak"} <= gids
    both = memsched.plot(chain, {"rotor": r, "periodic": p.schedule}, budget="60%")
    assert len(both.axes) == 4
    assert memsched.plot(chain, r.schedule) is not None
    with pytest.raises(InputError):
        memsched.plot(chain)


def test_instance_sweep_rotor_never_worse_than_periodic(chain):
    sw = memsched.sweep(chain, budgets=["40%", "60%", "80%", "100%"], solvers=["rotor", "periodic"], slots=200)
    frame = sw.to_pandas()
    assert len(frame) == 8 and set(frame["status"]) <= {"optimal", "feasible", "infeasible"}
    wide = sw.pivot("objective")
    both = wide.dropna()
    assert len(both) >= 2 and (both["rotor"] <= both["periodic"] + 1e-9).all()
    assert wide["rotor"].notna().all()  # rotor fits wherever periodic does, and at 40% too
    done = frame[frame["objective"].notna()]
    assert (done["overhead"] == done["objective"] / chain.total_time() - 1).all()
    fig = sw.plot()
    assert len(fig.axes[0].get_lines()) == 2
    assert "data:image/png" in sw._repr_html_()


def test_sweep_file_runs_through_the_engine(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nbudgets = ["60%", "100%"]\n[[instances]]\nexample = "tiny"\n'
                      '[[solvers]]\nname = "rotor"\n[[solvers]]\nname = "store-all"\n')
    sw = memsched.sweep(config, output=tmp_path / "out")
    assert len(sw) == 4 and (tmp_path / "out" / "tiny.csv").exists()
    assert set(sw.to_pandas()["solver"]) == {"rotor", "store-all"}
    # the rows' units are the instances' (they were unknown: "objective (time unit of the instance)")
    assert sw.units == {"tiny": ("ms", "bytes")}
    assert sw.plot(y="objective").axes[0].get_ylabel().endswith("(ms)")
    assert sw.plot(y="peak_memory").axes[0].get_ylabel() == "peak memory (bytes)"  # tiny: a few hundred bytes


def test_pipeline_and_offload_through_the_facade():
    pipe = DATA / "pipeline" / "tiny-resnet.graph.txt"
    r = memsched.solve(pipe, "100%", solver="madpipe", devices=2)
    assert r.problem == "pipeline" and r.found and r.period == pytest.approx(r.objective)
    bal = memsched.solve(pipe, "100%", solver="balance-time", devices=2)
    if bal.found:
        assert r.period <= bal.period + 1e-9
    chain = memsched.load(CNN12)
    off = memsched.solve(chain, "50%", solver=["remat-only", "pofo"], bandwidth="12GB/s", slots=200)
    assert off[0].problem == "offload" and all(x.found for x in off)
    assert off["pofo"].makespan <= off["remat-only"].makespan + 1e-9


def test_a_local_models_package_does_not_shadow_memsched(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("MINE = True\n")
    code = ("import models, experiments, memsched, memsched.models, memsched.experiments.plotting; "
            "assert models.MINE and experiments.MINE; "
            "assert memsched.models.__file__ != models.__file__; "
            f"r = memsched.solve({str(CNN12)!r}, '60%', solver='rotor', slots=100); assert r.found; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.torch
@pytest.mark.slow
def test_profile_and_run_for_real():
    pytest.importorskip("torch")
    chain = memsched.profile("resnet18", batch=2, image_size=32, width=8, depth=1, device="cpu", repeats=1)
    assert memsched.problem_of(chain) == "chain" and chain.length >= 4
    out = memsched.run("resnet18", "95%", solver="rotor", chain=chain, batch=2, image_size=32, width=8, depth=1,
                       device="cpu", time_repeats=1)
    assert out.status == "optimal" and out.grad_check is True, out.data.get("message")
    assert out["predicted"]["peak_memory"] <= out["budget"]
    assert out.to_pandas().iloc[0]["measured_peak_memory"] > 0


def test_run_result_reads_the_run_json():
    data = {"model": "resnet18", "solver": "rotor", "device": "cpu", "status": "optimal", "budget": 3 * 2**20,
            "predicted": {"makespan": 10.0, "peak_memory": 2**21}, "measured": {"time": 11.0, "peak_memory": 2**21 + 8},
            "grad_check": True}
    out = memsched.RunResult(data)
    assert out.grad_check is True and out["budget"] == 3 * 2**20
    row = out.to_pandas().iloc[0]
    assert row["predicted_makespan"] == 10.0 and row["measured_peak_memory"] == 2**21 + 8
    bars = [p.get_height() for ax in out.plot().axes for p in ax.patches]
    assert bars == [10.0, 11.0, 2.0, pytest.approx(2.0 + 8 / 2**20)]
    assert "data:image/png" in out._repr_html_()
    with pytest.raises(AttributeError):
        out.no_such_key  # noqa: B018

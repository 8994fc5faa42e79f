"""`memsched run --profile-file F` writes F only once the budget is turned into bytes and the solver took
the instance: a run refused as bad input (exit 2: a share below one byte of the profiled peak, a solver
that refuses the chain) leaves an existing F as it was, for every problem; an infeasible run (exit 1)
still writes the whole profile. `memsched.run` checks `timing` before anything is built and refuses
`timing` / `repeats` with a `chain=` / `instance=` (nothing is profiled), as ``memsched run`` refuses
``--timing`` / ``--repeats`` with an instance file, by the same check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, one_line_refusal
from memsched.solvers.errors import InputError

import memsched

torch = pytest.importorskip("torch")

#: a tiny ResNet-18 profiled once per op, its steps timed once on one thread
TINY = ["--batch", "2", "--image-size", "32", "--width", "8", "--depth", "1", "--threads", "1", "--repeats", "1",
        "--time-repeats", "1", "--no-independent"]
#: the extra flags of each problem's run (the join network is siamese, the others ResNet-18)
PROBLEMS = {"chain": [], "offload": ["--bandwidth", "1GB/s"], "graph": ["--problem", "graph"], "join": []}


def _run_argv(problem: str, budget: str, out: Path, *extra: str) -> list[str]:
    model = "siamese" if problem == "join" else "resnet18"
    return ["run", model, "--budget", budget, *TINY, *PROBLEMS[problem], *extra, "--profile-file", str(out)]


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_a_share_below_one_byte_keeps_the_profile_file(cli, tmp_path, problem):
    """The hunt's repro: 1e-9% passes the early check (some peak up to MAX_BYTES makes a byte of it) but is
    less than a byte of the profiled peak; the file was written by then."""
    out = tmp_path / "pf3.json"
    out.write_text("kept")
    res = cli(*_run_argv(problem, "1e-9%", out))
    one_line_refusal(res, "--budget: 1e-9% of the reference peak")
    assert out.read_text() == "kept"


def test_a_solver_refusing_the_profiled_chain_writes_nothing(cli, tmp_path):
    """Revolve refuses a heterogeneous chain (registry.solve's bad input): no file, not even a new one."""
    out = tmp_path / "new.json"
    res = cli(*_run_argv("chain", "90%", out, "--solver", "revolve"))
    one_line_refusal(res, "Revolve needs a homogeneous chain")
    assert not out.exists()


@pytest.mark.parametrize("problem", ["chain", "graph"])
def test_an_infeasible_run_still_writes_the_profile(cli, tmp_path, problem):
    """Exit 1 is no bad input: the profile is whole, and `memsched run FILE` can take it at another budget."""
    out = tmp_path / "pf.json"
    out.write_text("replaced")
    res = cli(*_run_argv(problem, "1%", out))
    assert res.code == 1, res.err
    data = json.loads(out.read_text())
    assert (data["format"] if problem == "chain" else data["graph"]["meta"]["model"]).startswith(
        "memsched.chain" if problem == "chain" else "resnet18")


def test_prepare_with_a_profile_file_still_writes_it(tmp_path):
    """`models.run.prepare(profile_file=)` (used as is by callers outside `run`) writes the profile itself."""
    import memsched.models.run as models_run

    out = tmp_path / "lstm.json"
    target = models_run.prepare("chain", "lstm", sizes={"batch": 2, "seq_len": 4, "width": 16, "device": "cpu"},
                                profile_repeats=1, profile_file=str(out))
    assert target.save_profile is not None and json.loads(out.read_text())["format"].startswith("memsched.chain")


# ---------------------------------------------------------------------------- memsched.run's profiling arguments
@pytest.fixture
def nothing_run(monkeypatch) -> list[dict[str, Any]]:
    """The keyword arguments `memsched.run` passes on to `execute.run_model` (which builds, profiles and runs);
    its stand-in refuses to run, so a test that reaches it with bad arguments fails."""
    import memsched.execute

    calls: list[dict[str, Any]] = []

    def fake(model: Any, budget: Any, solver: Any = None, **kw: Any) -> dict[str, Any]:
        calls.append(kw)
        raise AssertionError("reached run_model: the arguments were not refused first")

    monkeypatch.setattr(memsched.execute, "run_model", fake)
    return calls


@pytest.fixture
def chain_file() -> Path:
    """A chain file: the costs given (the checks refuse the run before it is read against a network)."""
    return EXAMPLES / "tiny.json"


@pytest.mark.parametrize("problem", [None, "join", "graph", "offload"])
def test_run_checks_timing_before_anything_is_built(nothing_run, problem):
    """Without an instance, a bogus timing was refused only once the network was built (and profiled): for
    every problem (join and graph profilers check it late too)."""
    model = "siamese" if problem == "join" else "resnet18"
    link = {"bandwidth": "1GB/s"} if problem == "offload" else {}
    with pytest.raises(InputError) as err:
        memsched.run(model, "90%", problem=problem, timing="bogus", **link)
    assert err.value.field == "timing" and "unknown timing 'bogus'" in err.value.message
    assert not nothing_run


@pytest.mark.parametrize("given", ["instance", "chain", "chain object"])
@pytest.mark.parametrize("argument, value", [("timing", "bogus"), ("timing", "in_step"), ("repeats", 1)])
def test_run_refuses_profiling_arguments_with_given_costs(nothing_run, chain_file, given, argument, value):
    """The hunt's repro: ``memsched.run(..., instance=FILE, timing='bogus')`` ran, ignoring the timing."""
    costs = {given.split()[0]: memsched.load(chain_file) if given == "chain object" else str(chain_file)}
    with pytest.raises(InputError) as err:
        memsched.run("resnet18", "90%", **costs, **{argument: value})
    assert err.value.field == argument, err.value
    if value != "bogus":
        assert "this run profiles nothing" in err.value.message and "time_repeats" in err.value.message
        assert (str(chain_file) if given != "chain object" else "the chain given") in err.value.message
    assert not nothing_run


def test_run_profiles_with_3_repeats_when_left_out(monkeypatch):
    import memsched.execute

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(memsched.execute, "run_model", lambda *a, **kw: calls.append(kw) or {})
    memsched.run("resnet18", "90%")
    memsched.run("resnet18", "90%", repeats=7, timing="isolated")
    assert [(c["repeats"], c["timing"]) for c in calls] == [(3, None), (7, "isolated")]


def test_the_cli_refuses_timing_with_an_instance_file_as_before(cli, run_stub, chain_file):
    """``memsched run`` shares the refusal (`execute.refuse_profiling_options`): its flags spelt as flags."""
    for option in (["--timing", "in_step"], ["--repeats", "2"]):
        res = cli("run", "resnet18", "--chain", chain_file, "--budget", "90%", *option)
        line = one_line_refusal(res, f"{option[0]}: is a profiling option and this run profiles nothing")
        assert f"the instance file {chain_file} (--time-repeats times the executed steps)" in line
    assert not run_stub


def test_timings_are_the_profilers():
    from memsched.models.chain.profiler import TIMINGS as CHAIN
    from memsched.models.graph.export import TIMINGS as GRAPH

    from memsched.execute import TIMINGS

    assert set(TIMINGS) == set(CHAIN) == set(GRAPH)


def test_a_ctrl_c_during_the_solve_keeps_the_profile(cli, tmp_path, monkeypatch):
    """The profile is finished work when the solve starts: a Ctrl-C in a (long) solve still writes it, then
    exits 130 as every interrupt does (review 51: written only after the solve, it was lost)."""
    import memsched.models.run as models_run

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(models_run.registry, "solve", interrupted)
    out = tmp_path / "pf.json"
    res = cli(*_run_argv("chain", "90%", out))
    assert res.code == 130, res.err
    assert json.loads(out.read_text())["format"].startswith("memsched.chain")

"""Join runs and profiles (session 35 hunt): `memsched run` takes a join file's ``meta.units.time``
(seconds, counted MFLOP) as the chain path does; the join profiler gives the joint loss copies it
may modify in place and profiles a branch whose output is an integer tensor (no gradient reaches
it, as in the executor); the share heuristics' messages name the unit of a branch's share."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn

from memsched.models.join.profiler import profile_join, profile_join_loss  # noqa: E402
from memsched.models.join.zoo import JoinModel  # noqa: E402
from memsched.models.run import prepare, run  # noqa: E402
from memsched.solvers.join import Join  # noqa: E402
from memsched.solvers.join.baselines import solve_equal  # noqa: E402


def _mse_model(loss: Any = None, name: str = "tiny") -> JoinModel:
    """Two small Linear branches (batch 4, width 8) and a loss over both outputs."""
    torch.manual_seed(0)
    branches = [[nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 8)], [nn.Linear(8, 8)]]
    inputs = [torch.randn(4, 8), torch.randn(4, 8)]
    loss = loss or (lambda outs, t: sum((o ** 2).mean() for o in outs))
    return JoinModel(branches, inputs, loss, None, name, ["a", "b"], config={"batch": 4})


def _in_unit(join: Join, unit: str, scale: float) -> Join:
    """`join` with every time multiplied by `scale` and ``meta.units.time`` set to `unit`."""
    d = copy.deepcopy(join.to_dict())  # its meta may be the join's own dict
    for branch in d["branches"]:
        for st in branch["stages"]:
            for key in ("fwd_time", "bwd_time", "fwd_time_all", "fwd_time_nograd"):
                if key in st:
                    st[key] *= scale
    d["loss"]["bwd_time"] *= scale
    d["meta"]["units"] = {**(d["meta"].get("units") or {}), "time": unit}
    return Join.from_dict(d)


@pytest.fixture(scope="module")
def profiled() -> tuple[JoinModel, Join]:
    model = _mse_model()
    return model, profile_join(model, repeats=1, warmup=0)


# ---------------------------------------------------------------- 1. the join file's time unit
@pytest.mark.parametrize(("unit", "scale"), [("s", 1e-3), ("MFLOP", 1.0), (None, 1.0)])
def test_prepare_join_takes_the_files_time_unit(profiled: tuple[JoinModel, Join], unit: str | None,
                                                scale: float) -> None:
    model, join = profiled
    inst = _in_unit(join, unit, scale) if unit else join
    target = prepare("join", model, instance=inst, profile_repeats=1)
    assert target.time_unit == (unit or "ms")


def test_run_of_a_counted_join_has_no_time_ratio(profiled: tuple[JoinModel, Join]) -> None:
    model, join = profiled
    out = run(model, "100%", problem="join", instance=_in_unit(join, "MFLOP", 1.0), time_repeats=1,
              profile_repeats=1, store_all=False)
    assert out["units"]["time"] == "MFLOP"
    assert out["ratio"]["time"] is None


def test_run_of_a_join_in_seconds_converts_the_makespan(profiled: tuple[JoinModel, Join]) -> None:
    model, join = profiled
    out = run(model, "100%", problem="join", instance=_in_unit(join, "s", 1e-3), time_repeats=1,
              profile_repeats=1, store_all=False)
    assert out["units"]["time"] == "s"
    predicted_s = out["compared"]["time"]["predicted"]
    assert out["ratio"]["time"] == pytest.approx(out["measured"]["time"] / (predicted_s * 1000.0))


# ---------------------------------------------------------------- 2. a loss modifying the outputs in place
def _inplace_loss(outs: list[Any], target: Any) -> Any:
    for o in outs:
        o.mul_(2.0)
    return sum((o ** 2).mean() for o in outs)


def test_profile_join_loss_accepts_an_in_place_loss_and_keeps_the_outputs() -> None:
    outputs = [torch.randn(4, 8), torch.randn(4, 8)]
    kept = [o.clone() for o in outputs]
    out = profile_join_loss(_inplace_loss, outputs, None, repeats=1, warmup=0)
    assert out["bwd_time"] >= 0 and out["bwd_overhead"] >= 0
    assert all(torch.equal(o, k) for o, k in zip(outputs, kept))


def test_run_profiles_and_runs_a_join_whose_loss_modifies_the_outputs_in_place() -> None:
    out = run(_mse_model(_inplace_loss, "inplace"), "100%", problem="join", time_repeats=1, profile_repeats=1,
              store_all=False)
    assert out["grad_check"] is True


# ---------------------------------------------------------------- 3. a branch with an integer output
class _Argmax(nn.Module):
    def forward(self, x: Any) -> Any:
        return x.argmax(dim=-1)


def _labelled_model() -> JoinModel:
    """Branch 1 ends in argmax: its integer output labels branch 0's logits (no gradient reaches it)."""
    torch.manual_seed(0)
    branches = [[nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 5)], [nn.Linear(8, 5), _Argmax()]]
    inputs = [torch.randn(4, 8), torch.randn(4, 8)]
    return JoinModel(branches, inputs, lambda outs, t: F.cross_entropy(outs[0], outs[1]), None, "intout",
                     ["student", "teacher"], config={"batch": 4})


def test_profile_join_with_an_integer_branch_output() -> None:
    model = _labelled_model()
    join = profile_join(model, repeats=1, warmup=0)
    assert join.lengths == [2, 2]
    assert int(join.branches[1].x[2]) == 4 * 8  # the int64 labels' bytes
    assert all(p.grad is None for blocks in model.branches for b in blocks for p in b.parameters())


def test_run_of_a_join_with_an_integer_branch_output() -> None:
    out = run(_labelled_model(), "100%", problem="join", time_repeats=1, profile_repeats=1, store_all=False)
    assert out["grad_check"] is True


# ---------------------------------------------------------------- 4. the share heuristics name the share's unit
def _lopsided(scale: int, unit: str | None) -> Join:
    """A 3-stage branch of 100-unit outputs beside a 1-stage one: equal shares starve the first."""
    def st(x: int, t: int) -> dict[str, Any]:
        return dict(fwd_time=1, bwd_time=1, out_size=x * scale, tape_size=t * scale, fwd_overhead=0, bwd_overhead=0)

    d: dict[str, Any] = {"format": "memsched.join/1", "branches": [
        {"input_size": 10 * scale, "stages": [st(100, 200)] * 3},
        {"input_size": 10 * scale, "stages": [st(10, 20)]}], "loss": {"bwd_time": 1, "bwd_overhead": 0}}
    if unit:
        d["meta"] = {"units": {"time": "ms", "memory": unit}}
    return Join.from_dict(d)


@pytest.mark.parametrize("unit", ["KiB", None])
def test_equal_share_message_at_exact_sizes_names_the_files_unit(unit: str | None) -> None:
    res = solve_equal(_lopsided(1, unit), 700, slots=0)
    assert res.status == "infeasible"
    assert f"fits its share of 350 {unit or 'bytes'}" in res.message


def test_equal_share_message_in_slots_says_slots() -> None:
    # too large for an exact-size retry: the finer retry still rounds to slots
    res = solve_equal(_lopsided(10**7, None), 7 * 10**9, slots=50)
    assert res.status == "infeasible" and res.details["slots"] > 0
    assert f"fits its share of {res.details['shares'][0]} slots (sizes rounded up to" in res.message

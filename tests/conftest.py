"""Shared fixtures: paths of the example files, a command-line runner, and `sweep_toml`, the text
of a sweep file built from Python values (test modules import it: ``from conftest import sweep_toml``),
and `trains_like_plain_autograd`, the check of the trainers (`memsched.ScheduledChain` / `ScheduledGraph`);
the helpers several test modules share (tests never import each other): the chain brute forces, random
chains and budget draws of the property tests, pipeline, offloading and graph instances, and the partial
table an interrupted bench keeps beside its CSV (`partial_of`, `partial_table`)."""

from __future__ import annotations

import argparse
import csv
import functools
import importlib.abc
import io
import json
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from memsched.solvers.chain import Chain
    from memsched.solvers.chain.schedule import Schedule
    from memsched.solvers.graph import Graph
    from memsched.solvers.offload import OffloadInstance
    from memsched.solvers.pipeline import Pipeline

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "solvers" / "data" / "examples"


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __iter__(self):
        """(code, out, err), so that ``code, out, err = run_cli(...)`` reads it."""
        return iter((self.code, self.out, self.err))

    def json(self):
        return json.loads(self.out)


def sigint_as_in_a_terminal() -> None:
    """`preexec_fn` of a command a test interrupts: SIGINT at its default disposition, as for a
    command in a terminal's foreground. A CI job started in the background inherits SIGINT
    *ignored* (POSIX shells do that to background jobs) and Python keeps it so, which lost a
    Ctrl-C that came between two backend calls and failed the interrupt tests now and then."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*argv: str) -> CliResult:
    """Run `memsched ARGV` in-process; returns exit code, stdout and stderr."""
    from memsched.experiments.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return CliResult(code, out.getvalue(), err.getvalue())


def live_pids(proc_file: str, needle: bytes) -> list[int]:
    """Pids of the running (not zombie) processes whose ``/proc/PID/<proc_file>`` (``cmdline``, ``environ``)
    contains `needle`; processes that end while they are read are skipped. Linux only."""
    import os

    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/{proc_file}", "rb") as f:
                text = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in text and state != "Z":
            found.append(int(entry))
    return found


def one_line(err: str, *names: str) -> str:
    """The one line of `err` (stderr of a refused command: no traceback), which holds each of `names`."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def one_line_refusal(res: CliResult, text: str) -> str:
    """Bad input as the commands answer it: exit 2, one line on stderr containing `text`, no traceback
    and no internal error. Returns that line."""
    assert res.code == 2, (res.code, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert text in lines[0], lines[0]
    assert "Traceback" not in res.err and "internal error" not in res.err
    return lines[0]


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def step_clocks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CPU clocks the meters asked for (`models.measure.StepMeter` of the executed steps, `Timer`), in order."""
    import memsched.models.measure as measure

    seen: list[str] = []
    real = measure.cpu_clock

    def spy(clock: str) -> Any:
        seen.append(clock)
        return real(clock)

    monkeypatch.setattr(measure, "cpu_clock", spy)
    return seen


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture
def offload(tmp_path: Path) -> Path:
    """examples/tiny.json (4 stages) with a host link of 2000 bytes/s: an offloading instance file."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["host_link"] = {"bandwidth": 2000, "latency": 0.0}
    path = tmp_path / "off.json"
    path.write_text(json.dumps(data))
    return path


def _toml(value: Any) -> str:
    """One TOML value: strings (as JSON strings, which TOML reads alike), booleans, numbers,
    paths (as strings), arrays and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))


def _keys(table: dict[str, Any]) -> str:
    return "".join(f"{k} = {_toml(v)}\n" for k, v in table.items())


def sweep_toml(name: str | None = None, *, budgets: list[str], instances: list[dict[str, Any]],
               solvers: list[str | dict[str, Any]], defaults: dict[str, Any] | None = None,
               tables: dict[str, dict[str, Any]] | None = None, **top: Any) -> str:
    """The TOML text of a sweep file: `name`, `budgets` and the other top-level keys `top`, the
    ``[defaults]`` and other named `tables`, one ``[[instances]]`` per dict of `instances` and one
    ``[[solvers]]`` per entry of `solvers` (a solver name, or a dict of its keys)."""
    head = {"name": name} if name is not None else {}
    text = _keys({**head, "budgets": budgets, **top})
    for title, table in {**({"defaults": defaults} if defaults else {}), **(tables or {})}.items():
        text += f"[{title}]\n" + _keys(table)
    for inst in instances:
        text += "[[instances]]\n" + _keys(inst)
    for solver in solvers:
        text += "[[solvers]]\n" + _keys({"name": solver} if isinstance(solver, str) else solver)
    return text


# ------------------------------------------------------------------------------ training
def _plain_step(model, x, y):
    from torch.nn import functional as F

    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach()


def trains_like_plain_autograd(step, net, twin, x, y):
    """Three SGD steps of ``step(x, y)`` (training `net`) and of plain autograd on `twin` (a copy)
    draw the same dropout masks and end with the same parameters; a second step without
    ``zero_grad`` doubles the gradients, as ``loss.backward()`` does (the loss: cross-entropy)."""
    import torch

    opt, opt_twin = torch.optim.SGD(net.parameters(), lr=0.5), torch.optim.SGD(twin.parameters(), lr=0.5)
    for seed in range(3):  # recomputed stages replay their RNG state
        torch.manual_seed(seed)
        opt.zero_grad()
        loss = step(x, y)
        opt.step()
        torch.manual_seed(seed)
        opt_twin.zero_grad()
        ref = _plain_step(twin, x, y)
        opt_twin.step()
        assert torch.allclose(loss, ref)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    net.zero_grad()
    torch.manual_seed(7)
    step(x, y)
    once = [p.grad.clone() for p in net.parameters()]
    torch.manual_seed(7)
    step(x, y)
    assert all(torch.allclose(p.grad, 2 * g, atol=1e-6) for p, g in zip(net.parameters(), once) if g.abs().sum() > 0)


def both_modes_match_plain_autograd(trainer, net, twin, x, seed: int) -> None:
    """`trainer` (a `ScheduledChain` of `net` with ``input_grad``, stand-in loss: the output's mean)
    gives plain autograd's loss and gradients on `twin` (a copy of `net`), input included: by
    ``step_with_input_grad(x)`` and as a drop-in module, each under the same seed as the reference."""
    import torch

    torch.manual_seed(seed)
    loss, delta0 = trainer.step_with_input_grad(x)
    torch.manual_seed(seed)
    leaf = x.clone().requires_grad_(True)
    ref = twin(leaf).float().mean()
    ref.backward()
    assert torch.allclose(loss, ref.detach())
    assert delta0 is not None and torch.allclose(delta0, leaf.grad, atol=1e-7)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-7)
    net.zero_grad(), twin.zero_grad()  # the drop-in module, the same masks again
    leaf, ref_leaf = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    torch.manual_seed(seed + 1)
    trainer(leaf).float().mean().backward()
    torch.manual_seed(seed + 1)
    twin(ref_leaf).float().mean().backward()
    assert torch.allclose(leaf.grad, ref_leaf.grad, atol=1e-7)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-7)


class RunReached(Exception):
    """Raised by `captured_run`'s stand-in: the facade's checks let `memsched.run`'s arguments through."""


@pytest.fixture
def captured_run(monkeypatch):
    """The keyword arguments `memsched.run` hands to `models.run.run` (which is not run: it raises
    `RunReached`), one dict per call with ``model`` and ``budget``. Imports torch when used."""
    import memsched.models.run

    calls: list[dict] = []

    def fake_run(model, budget, **kwargs):
        calls.append(dict(kwargs, model=model, budget=budget))
        raise RunReached

    monkeypatch.setattr(memsched.models.run, "run", fake_run)
    return calls


def join_replays(join, budget: int, res) -> None:
    """A join solver's returned schedule (if any) replays in the join simulator within `budget`, with
    the reported peak and makespan."""
    import math

    from memsched.solvers.join import simulate

    if res.schedule is None:
        return
    sim = simulate(join, res.schedule, budget)
    assert sim.valid, sim.violation
    assert sim.peak_memory <= budget and res.peak_memory == sim.peak_memory
    assert math.isclose(res.objective, sim.makespan, rel_tol=1e-9, abs_tol=1e-9)


@pytest.fixture
def run_stub(monkeypatch):
    """The keyword arguments `memsched run` passes to `memsched.models.run.run`, whose stand-in
    answers "infeasible: stub" (exit 1): what the command reaches, without running anything."""
    pytest.importorskip("torch")
    import memsched.models.run

    calls: list[dict] = []

    def fake_run(model, budget, **kwargs):
        calls.append(dict(kwargs, model=model, budget=budget))
        return {"predicted": None, "message": "stub"}

    monkeypatch.setattr(memsched.models.run, "run", fake_run)
    return calls


def wait_rows(jpath: Path, n: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    """Wait until the journal `jpath` holds `n` rows while the sweep `proc` runs (fails the test after
    `timeout` s, or when `proc` ended first)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if jpath.exists() and jpath.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    pytest.fail(f"{jpath} did not reach {n} rows in {timeout} s")


def persistent_schedules(L: int, i: int = 0, l: int | None = None) -> tuple[tuple[Any, ...], ...]:
    """Every persistent schedule (op tuples) of the sub-chain (i, l) of a chain of `L` stages (default
    the whole chain): the leaf, C_all (F_all(i), the rest, B(i)), or C_ck with each split j (F_ck(i),
    F_n(i+1..j-1), then (j, l), then (i, j-1)): the rotor recurrence's decompositions, for brute forces."""
    return _persistent(L, i, L if l is None else l)


@functools.cache
def _persistent(L: int, i: int, l: int) -> tuple[tuple[Any, ...], ...]:
    from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss

    if i == l:
        return ((Loss(L),) if i == L else (F_all(i), Bwd(i)),)
    out = [(F_all(i), *sub, Bwd(i)) for sub in _persistent(L, i + 1, l)]
    for j in range(i + 1, l + 1):
        advance = (F_ck(i), *(F_n(k) for k in range(i + 1, j)))
        out += [advance + right + left for right in _persistent(L, j, l) for left in _persistent(L, i, j - 1)]
    return tuple(out)


def plain_reference(net, x, y):
    """A copy of `net` after one plain autograd step of cross-entropy on (`x`, `y`): the reference
    a scheduled step's gradients and buffers are compared with (`assert_as_plain`)."""
    import copy

    import torch.nn.functional as F

    ref = copy.deepcopy(net)
    F.cross_entropy(ref(x), y).backward()
    return ref


def assert_as_plain(got, ref) -> None:
    """Gradients of `got` to 1e-10 (relative to the largest) and its buffers bit for bit equal to those
    of `ref` (`plain_reference`); `got` must have buffers (the tests' spectral norms' u and v)."""
    import torch

    for (name, p), (_, rp) in zip(got.named_parameters(), ref.named_parameters()):
        assert p.grad is not None and rp.grad is not None, name
        err = (p.grad - rp.grad).abs().max().item()
        assert err <= 1e-10 * max(1.0, rp.grad.abs().max().item()), (name, err)
    buffers = list(got.named_buffers())
    assert buffers
    for (name, b), (_, rb) in zip(buffers, ref.named_buffers()):
        assert torch.equal(b, rb), name


@pytest.fixture
def float64_default():
    """torch's default dtype float64 inside the test (exact comparisons with plain autograd), then back."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


# ------------------------------------------------------------------------------ chain property tests
# (moved from test_chain_exact.py: the phase / unrestricted brute force, random chains, budgets)
#: hypothesis settings of the chain property tests: 60 examples, no deadline (solvers vary in speed)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute_force(chain: Chain, budget: int, *, phase: bool = False) -> tuple[float | None, Schedule | None]:
    """Least makespan over all op sequences (Dijkstra on the simulator's states); with
    `phase`, forwards between two backward ops must run in increasing stage order. Returns
    (makespan, schedule), or (None, None) when nothing fits `budget`. Exponential: chains of <= 5 stages."""
    import heapq
    import itertools

    from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op, Schedule

    L = chain.length
    x, xb = [int(v) for v in chain.x], [int(v) for v in chain.xbar]
    ofa, ofn, ob = [int(v) for v in chain.o_fa], [int(v) for v in chain.o_fn], [int(v) for v in chain.o_b]
    if x[0] > budget:
        return None, None

    def memory(acts: int, tapes: int, nb: int) -> int:
        m = sum(x[j] for j in range(L + 1) if acts >> j & 1) + sum(xb[j] for j in range(1, L + 1) if tapes >> j & 1)
        return m + (x[nb + 1] if nb < L else 0)  # the gradient delta_{nb+1}

    start = (1, 0, L, -1)  # standalone activations, tapes (bit masks), next backward, last forward
    dist, prev, tie = {start: 0.0}, {}, itertools.count()
    heap = [(0.0, next(tie), start)]
    while heap:
        d, _, s = heapq.heappop(heap)
        if d > dist[s]:
            continue
        acts, tapes, nb, last = s
        if nb == -1:
            ops = []
            while s in prev:
                s, op = prev[s]
                ops.append(op)
            return d, Schedule(ops[::-1], L)
        m = memory(acts, tapes, nb)
        succ = []
        for i in range(L):
            if (phase and i <= last) or not (acts >> i & 1 or (i >= 1 and tapes >> i & 1)):
                continue
            if not tapes >> (i + 1) & 1 and m + xb[i + 1] + ofa[i] <= budget:
                succ.append((Op(F_ALL, i), acts, tapes | 1 << (i + 1), nb, chain.u_fa[i]))
            if not acts >> (i + 1) & 1 and m + x[i + 1] + ofn[i] <= budget:
                succ.append((Op(F_CK, i), acts | 1 << (i + 1), tapes, nb, chain.u_fn[i]))
                succ.append((Op(F_N, i), (acts | 1 << (i + 1)) & ~(1 << i), tapes, nb, chain.u_fn[i]))
        if nb == L:
            if (acts >> L & 1 or tapes >> L & 1) and m + x[L] + ob[L] <= budget:
                succ.append((Op(LOSS, L), acts & ~(1 << L), tapes, L - 1, chain.u_b[L]))
        elif (tapes >> (nb + 1) & 1 and (acts >> nb & 1 or (nb >= 1 and tapes >> nb & 1))
              and m + x[nb] + ob[nb] <= budget):
            succ.append((Op(B, nb), acts & ~(1 << nb), tapes & ~(1 << (nb + 1)), nb - 1, chain.u_b[nb]))
        for op, a2, t2, nb2, dt in succ:
            s2 = (a2, t2, nb2, (-1 if op.kind in (B, LOSS) else op.index) if phase else -1)
            d2 = d + float(dt)
            if d2 < dist.get(s2, float("inf")) - 1e-12:
                dist[s2], prev[s2] = d2, (s, op)
                heapq.heappush(heap, (d2, next(tie), s2))
    return None, None


@st.composite
def chains(draw, max_length: int = 5, release: bool = False) -> Chain:
    """Random chains with per-mode forward overheads and times; with `release`, B(i) releases its
    inputs early (``bwd_overhead_released`` down to -(out_size + tape_size))."""
    from memsched.solvers.chain import Chain

    L = draw(st.integers(1, max_length))
    size = st.integers(1, 6)
    stages = []
    for _ in range(L):
        out = draw(size)
        o_fa, o_fn = draw(st.integers(0, 2)), draw(st.integers(0, 4))  # per-mode forward overheads
        u_fa, u_fn = draw(st.integers(1, 5)), draw(st.integers(0, 5))  # per-mode forward times
        stages.append({"fwd_time": max(u_fa, u_fn), "fwd_time_all": u_fa, "fwd_time_nograd": u_fn,
                       "bwd_time": draw(st.integers(1, 8)), "out_size": out,
                       "tape_size": out + draw(st.integers(0, 6)), "fwd_overhead": max(o_fa, o_fn),
                       "fwd_overhead_all": o_fa, "fwd_overhead_nograd": o_fn, "bwd_overhead": draw(st.integers(0, 2))})
        if release:
            freed = stages[-1]["out_size"] + stages[-1]["tape_size"]
            stages[-1]["bwd_overhead_released"] = max(-freed, stages[-1]["bwd_overhead"]
                                                      - draw(st.integers(0, freed + 2)))
    loss = {"bwd_time": draw(st.integers(0, 2)), "bwd_overhead": draw(st.integers(0, 1))}
    return Chain.from_stages(draw(size), stages, loss)


def check_replay(chain: Chain, budget: int, res) -> None:
    """A chain solver's result `res` at `budget`: its schedule (if any) replays valid within the budget with
    the reported makespan, and its lower bound (if any) is at most its objective (1e-6 slack)."""
    from memsched.solvers.chain import simulate

    if res.schedule is not None:
        sim = simulate(chain, res.schedule, budget)
        assert sim.valid, sim.violation
        assert sim.makespan == pytest.approx(res.objective)
        assert sim.peak_memory <= budget
    if res.lower_bound is not None and res.objective is not None:
        assert res.lower_bound <= res.objective + 1e-6


def budget_for(chain: Chain, frac: float, *, feasible: bool = False) -> int:
    """A budget `frac` of the way from the input size (or, with `feasible`, from the peak of
    recompute-all, which always fits) to the store-all peak. Most such budgets admit no schedule when
    `feasible` is false: property tests comparing optima draw theirs with `tight_budget` instead."""
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.registry import solve

    lo = solve("chain", chain, "recompute-all", 0).min_budget if feasible else int(chain.x[0])
    return lo + int(round(frac * (reference_peak(chain) - lo)))


def least_phase_budget(chain: Chain) -> int:
    """The least integer budget M at which a phase schedule exists (brute force; bisection between
    x[0] - 1, where nothing fits, and the store-all peak, where store-all fits: a schedule that fits
    M fits every larger budget)."""
    from memsched.solvers.chain import reference_peak

    lo, hi = int(chain.x[0]) - 1, reference_peak(chain)  # invariant: infeasible at lo, feasible at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if brute_force(chain, mid, phase=True)[0] is None:
            lo = mid
        else:
            hi = mid
    return hi


#: draws for `tight_budget`: below 0 (about one example in eight) just under the least budget, else a
#: fraction of the way from the least budget up to the store-all peak
TIGHT_FRACS = st.floats(-0.15, 1.0)


def tight_budget(chain: Chain, frac: float, least: int) -> int:
    """A budget for property tests that mostly admits a schedule: with `frac` >= 0, `frac` of the way
    from `least` (the least feasible budget of the scope under test) to the store-all peak, rounded
    down (so below the peak when `frac` < 1 and `least` < peak); with `frac` < 0, `least` - 1, where
    the exact models must answer infeasible."""
    from memsched.solvers.chain import reference_peak

    if frac < 0:
        return least - 1
    peak = reference_peak(chain)
    return least + int(frac * (max(peak, least) - least))


# ------------------------------------------------------------------------------ rotor (persistent) references
# (moved from test_chain_rotor.py)
def persistent_brute_force(chain: Chain) -> list[tuple[int, float]]:
    """(peak, makespan) of every persistent schedule, replayed by the simulator (the rotor DP's brute force)."""
    from memsched.solvers.chain import simulate
    from memsched.solvers.chain.schedule import Schedule

    out = []
    for ops in persistent_schedules(chain.length):
        sim = simulate(chain, Schedule(ops, chain.length))
        assert sim.valid, sim.violation
        out.append((sim.peak_memory, sim.makespan))
    return out


def best_within(pairs: list[tuple[int, float]], budget: int) -> float:
    """The least makespan of the (peak, makespan) `pairs` whose peak fits `budget` (inf if none does)."""
    import math

    return min((t for p, t in pairs if p <= budget), default=math.inf)


@st.composite
def tiny_chains(draw, max_L: int = 4, overheads: bool = True, forward_overheads: bool = True,
                release: bool = False) -> Chain:
    """Tiny random chains; with `release`, B(i) releases its inputs early (o_b down to -(x + xbar))."""
    from memsched.solvers.chain import Chain

    L = draw(st.integers(1, max_L))
    ints = lambda lo, hi, n: draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    x = ints(1, 4, L + 1)
    xbar = [xi + extra for xi, extra in zip(x[1:], ints(0, 3, L))]
    o_f = ints(0, 4, L) if overheads and forward_overheads else [0] * L
    o_b = ints(0, 4, L) if overheads else [0] * L
    u_f = [float(v) for v in ints(1, 4, L)]
    u_b = [float(v) for v in ints(1, 5, L + 1)]
    o_bh = None
    if release:
        o_bh = o_b + [draw(st.integers(0, 2)) if overheads else 0]
        o_b = [max(ob - draw(st.integers(0, x[i + 1] + xbar[i] + 2)), -(x[i + 1] + xbar[i]))
               for i, ob in enumerate(o_b)]
    return Chain(u_f=u_f + [0.0], u_b=u_b, x=x + [0], xbar=[0] + xbar + [0], o_f=o_f + [0],
                 o_b=o_b + [o_bh[-1] if o_bh else draw(st.integers(0, 2)) if overheads else 0], o_bh=o_bh)


def assert_dp_equals_brute_force(chain: Chain) -> None:
    """The rotor table at every budget, and its least memory, equal the best persistent schedule's."""
    from memsched.solvers.chain.dp import rotor_min_budget, rotor_table

    pairs = persistent_brute_force(chain)
    top = max(p for p, _ in pairs) + 2
    x0 = int(chain.x[0])
    table = rotor_table(chain, top - x0)
    assert rotor_min_budget(chain) == min(p for p, _ in pairs)
    for budget in range(x0, top + 1):
        assert table.optimum(budget) == pytest.approx(best_within(pairs, budget), abs=1e-9), budget


# ------------------------------------------------------------------------------ pipelines
# (moved from test_pipeline_interleave.py and test_pipeline_dag.py)
def interleave_chain(seed: int, L: int = 5) -> Pipeline:
    """A random pipeline of `L` layers (integer times; activations and parameters in thousands of bytes)."""
    import numpy as np
    from memsched.solvers.pipeline import Pipeline

    rng = np.random.default_rng(seed)
    return Pipeline(fwd=rng.integers(1, 10, L).astype(float), bwd=rng.integers(1, 20, L).astype(float),
                    act=rng.integers(1, 100, L) * 1000, params=rng.integers(0, 50, L) * 1000, input_size=5000)


def interleave_brute_force(inst: Pipeline, P: int, budget: int | None, smax: int) -> float:
    """Smallest simulated period over every cut into <= smax stages and every device map of `P` devices
    (inf when none fits `budget`)."""
    import itertools
    import math

    from memsched.solvers.pipeline import Partition, simulate

    L, best = inst.length, math.inf
    for S in range(1, min(L, smax) + 1):
        for cuts in itertools.combinations(range(1, L), S - 1):
            edges = (0, *cuts, L)
            bounds = [(edges[k], edges[k + 1] - 1) for k in range(S)]
            for dev in itertools.product(range(P), repeat=S):
                part = Partition.from_bounds(bounds)
                part.device_of = list(dev)
                ev = simulate(inst, part, budget, devices=P)
                if ev.violation is None:
                    best = min(best, ev.period)
    return best


def random_dag(seed: int, L: int = 7, p_edge: float = 0.35) -> Pipeline:
    """A random layer DAG in index (topological) order: each layer feeds the next (so the
    network is connected) and, with probability p_edge, a later one; one sink (the last layer)."""
    import numpy as np
    from memsched.solvers.pipeline import Pipeline

    rng = np.random.default_rng(seed)
    succ = [[l + 1] for l in range(L - 1)] + [[]]
    for u in range(L - 2):
        for v in range(u + 2, L):
            if rng.random() < p_edge:
                succ[u].append(v)
    return Pipeline(fwd=rng.uniform(1, 10, L), bwd=rng.uniform(1, 20, L), act=rng.integers(1, 100, L) * 1000,
                    params=rng.integers(0, 50, L) * 1000, input_size=5000, succ=succ, name=f"dag{seed}")


def runner_args(**over: object) -> argparse.Namespace:
    """The pipeline runner's arguments (`check_arguments`) with its defaults, `over` replacing some."""
    base: dict[str, object] = {"devices": 2, "layers": 8, "width": 256, "batch": 64, "micro_batches": 4,
                               "schedule": "1f1b", "solver": "madpipe", "memory": None, "device": "cpu", "steps": 3}
    base.update(over)
    return argparse.Namespace(**base)


# ------------------------------------------------------------------------------ offloading
# (moved from test_offload_hunt_fixes2.py, test_offload_exact_combined.py and test_offload_modes.py)
#: docs/offload.md's tiny example (tape of stage 0 = 4 bytes here), store-all peak 21
OFFLOAD_TINY: dict[str, Any] = {
    "format": "memsched.chain/1", "name": "tiny", "input_size": 4,
    "stages": [{"name": "conv1", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 4, "tape_size": 4,
                "fwd_overhead": 0, "bwd_overhead": 0},
               {"name": "conv2", "fwd_time": 2.0, "bwd_time": 4.0, "out_size": 2, "tape_size": 6,
                "fwd_overhead": 1, "bwd_overhead": 1}],
    "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
    "meta": {"units": {"time": "ms", "memory": "bytes"}},
    "host_link": {"bandwidth": 2000, "latency": 0.0},
}


def offload_tiny(stage1_time: float | None = None, bandwidth: float = 2000, tape0: int = 4) -> OffloadInstance:
    """`OFFLOAD_TINY` on a link of `bandwidth` bytes/s, stage 0's tape `tape0` bytes, with stage 1's forward
    and backward and the loss lasting `stage1_time` (when given)."""
    import copy

    from memsched.solvers.chain import Chain
    from memsched.solvers.offload import OffloadInstance

    data = copy.deepcopy(OFFLOAD_TINY)
    data["stages"][0]["tape_size"] = tape0
    if stage1_time is not None:
        data["stages"][1]["fwd_time"] = data["stages"][1]["bwd_time"] = stage1_time
        data["loss"]["bwd_time"] = stage1_time
    return OffloadInstance(Chain.from_dict(data), bandwidth)


FAST_LINK = 1125899906842624  # the largest bandwidth accepted (2^50 bytes/s): a value moves in ~1e-11 ms


def offload_int_instance(L: int, x, extra, u_f, u_b, o_f, o_b, per_byte: float) -> OffloadInstance:
    """An offloading instance of the first `L` stages of the lists (`x`: L + 1 sizes, tapes x + `extra`):
    integer sizes and times; moving one byte takes `per_byte` time units (whole ticks)."""
    import numpy as np
    from memsched.solvers.chain import Chain
    from memsched.solvers.offload import OffloadInstance

    chain = Chain(u_f=np.array(list(u_f[:L]) + [0], dtype=float), u_b=np.array(u_b[: L + 1], dtype=float),
                  x=np.array(list(x[: L + 1]) + [0]), xbar=np.array([0] + [x[j] + extra[j] for j in range(1, L + 1)]
                                                                   + [0]),
                  o_f=np.array(list(o_f[:L]) + [0]), o_b=np.array(o_b[: L + 1]))
    return OffloadInstance(chain, bandwidth=chain.time_units_per_second() / per_byte)


def mode_chain(L: int, seed: int, *, fa_larger: bool | None = None, times: bool = False, **kw) -> Chain:
    """A random chain whose F_all and F_ck / F_n overheads are drawn apart (either may be larger,
    or the one named by `fa_larger`); with `times`, no-grad forward times u_fn drawn below F_all's
    u_fa = u_f too (whole numbers when the times are)."""
    import numpy as np
    from memsched.solvers.chain import Chain
    from memsched.solvers.chain.generate import random_chain

    base = random_chain(L, seed, overhead=1.0, **kw)
    rng = np.random.default_rng(7000 + seed)
    lo, hi = (0.0, 0.3), (1.0, 2.5)
    if fa_larger is None:
        ra, rn = rng.uniform(0, 2.0, L), rng.uniform(0, 2.0, L)
    else:
        ra, rn = (rng.uniform(*hi, L), rng.uniform(*lo, L)) if fa_larger else (rng.uniform(*lo, L), rng.uniform(*hi, L))
    o_fa = np.append(np.floor(ra * base.x[1: L + 1]), 0).astype(np.int64)
    o_fn = np.append(np.floor(rn * base.x[1: L + 1]), 0).astype(np.int64)
    chain = Chain.with_mode_overheads(base.u_f, base.u_b, base.x, base.xbar, o_fa, o_fn, base.o_b, name=base.name)
    if not times:
        return chain
    u_fn = rng.uniform(0.0, 1.0, L) * chain.u_f[:L]
    return chain.with_mode_times(chain.u_f, np.append(np.floor(u_fn) if kw.get("integer_times") else u_fn, 0.0))


def fa_cheap_instance() -> tuple[OffloadInstance, int]:
    """(instance, budget): o_fa = 0 and o_fn huge; the budget is store-all's per-mode peak, below the
    peak charged with max(o_fa, o_fn)."""
    from memsched.solvers.chain import Chain
    from memsched.solvers.chain import reference_peak as store_all_peak
    from memsched.solvers.offload import OffloadInstance

    L = 3
    chain = Chain.with_mode_overheads(
        u_f=[1.0, 1.0, 1.0, 0.0], u_b=[2.0, 2.0, 2.0, 1.0], x=[2, 2, 2, 2, 0], xbar=[0, 3, 3, 3, 0],
        o_fa=[0, 0, 0, 0], o_fn=[40, 40, 40, 0], o_b=[0, 0, 0, 0])
    assert L == chain.length
    return OffloadInstance(chain, 1e3), store_all_peak(chain)


# ------------------------------------------------------------------------------ graphs
# (moved from test_bad_input_options.py, test_graph_run_hunt26.py and test_graph_workspace.py)
#: the 4-node example of docs/graph.md, "Instance format"
GRAPH_EXAMPLE = {"directed": True, "multigraph": False, "graph": {"name": "linear3", "order": [0, 1, 2, 3]},
                 "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 4, "name": "f0", "backward": False},
                           {"id": 1, "cost_cpu": 1.0, "cost_ram": 4, "name": "loss", "backward": True},
                           {"id": 2, "cost_cpu": 2.0, "cost_ram": 4, "name": "b0", "backward": True},
                           {"id": 3, "cost_cpu": 0.5, "cost_ram": 2, "name": "b_in", "backward": True}],
                 "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2},
                           {"source": 2, "target": 3}]}


def graph_file_without_link(path, out, source: str, target: str) -> None:
    """Copy the graph file `path` to `out` without the link `source` -> `target` (node names)."""
    data = json.loads(path.read_text())
    ids = {n["name"]: n["id"] for n in data["nodes"]}
    kept = [e for e in data["links"] if (e["source"], e["target"]) != (ids[source], ids[target])]
    assert len(kept) == len(data["links"]) - 1
    data["links"] = kept
    out.write_text(json.dumps(data))


def with_workspace(g: Graph, seed: int) -> Graph:
    """`g` with random per-node workspaces W_v (seeded by `seed`): 0 for about two nodes in three, else
    between 1 and twice the largest cost_ram."""
    import dataclasses
    import random

    rng = random.Random(seed)
    hi = int(max(g.cost_ram))
    return dataclasses.replace(g, workspace=[rng.choice((0, 0, rng.randint(1, 2 * hi))) for _ in range(g.n)])


# ------------------------------------------------------------------------------ figures
# (moved from test_write_errors.py)
def main_figure_results(root: Path) -> Path:
    """`root` made a results folder with a one-cell sweep of the main figure (rotor on the tiny
    example, at 100%), in ``<root>/chain_solvers/``; returns `root`."""
    from memsched.experiments.sweep import run_sweep

    cfg = root / "chain_solvers.toml"
    cfg.write_text(sweep_toml("chain_solvers", budgets=["100%"], instances=[{"example": "tiny"}], solvers=["rotor"]))
    run_sweep(cfg, output=root / "chain_solvers", workers=1, progress=False, isolate=False)
    return root


def write_file(tmp_path, name, data):
    """`data` written to ``tmp_path / name`` (a dict or list as JSON, text as it is); the path."""
    import json

    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def wait_for(pred: Any, timeout: float) -> bool:
    """Poll `pred()` every 0.1 s for up to `timeout` seconds; its last value (signal tests: ranks up, ranks gone)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return bool(pred())


#: the start of a bench's partial file (experiments/benchtable.py, `resumable`): then the run's settings as JSON
PARTIAL_SETTINGS = "# memsched partial table; settings: "


def partial_of(out: Path) -> Path:
    """The partial file of a bench writing the table `out`: ``x.csv`` -> ``x.partial.csv`` beside it."""
    return out.with_name(out.name.removesuffix(".csv") + ".partial.csv")


def partial_table(out: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(header, rows) of the partial file an interrupted bench kept beside its table `out` (`partial_of`): its
    first line (the settings) checked and skipped; a value read back as the bench reads it (JSON, else the
    text as it is), so 4, 0.5, None and "4" come back apart; an empty cell (a missing value) left out."""
    path = partial_of(out)
    lines = path.read_text().splitlines(keepends=True)
    assert lines and lines[0].startswith(PARTIAL_SETTINGS), lines[:1]
    json.loads(lines[0][len(PARTIAL_SETTINGS):])  # the settings: JSON

    def value(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            return text

    reader = csv.DictReader(lines[1:])
    rows = [{k: value(v) for k, v in row.items() if v} for row in reader]
    return list(reader.fieldnames or ()), rows


def shown_lines(text: str) -> list[str]:
    """The non-blank lines `text` (a command's stderr) leaves on a terminal: each line's carriage-return
    segments written over each other, so a progress bar that erased itself (tqdm, ``leave=False``) is gone and
    one left on screen stays."""
    lines = []
    for line in text.split("\n"):
        screen = ""
        for segment in line.split("\r"):
            screen = segment + screen[len(segment):]
        if screen.strip():
            lines.append(screen.rstrip())
    return lines


def call_main(main: Any, argv: list[str], capsys: Any) -> tuple[Any, str, str]:
    """(exit status, stdout, stderr) of a script's ``main(argv)`` run in-process; a KeyboardInterrupt that escapes
    fails the test (rather than stopping the whole session)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped main()")
    out, err = capsys.readouterr()
    return code, out, err



def nonblank_lines(text: str) -> list[str]:
    """The lines of `text` (a command's output) that are not blank."""
    return [line for line in text.splitlines() if line.strip()]


def interrupt_at(stop: Any, real: Any, calls: list[int] | None = None) -> Any:
    """`real`, but a Ctrl-C (`KeyboardInterrupt`) in place of one call: its `stop`-th when `stop` is an int, the
    first whose arguments the callable `stop` accepts, none for None. `calls` (when given) counts the calls."""
    calls = [] if calls is None else calls

    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if (len(calls) == stop) if isinstance(stop, int) else (stop is not None and stop(*args, **kwargs)):
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return call


def interrupted_then_resumed(main: Any, argv: list[str], out: Path, monkeypatch: Any, capsys: Any, owner: Any,
                             name: str, stop: Any) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Run a bench's `main(argv)` (writing the table `out`) with `owner.name` interrupted as `interrupt_at(stop)`
    says, then again to the end: (the lines the interrupted run printed, those the resumed run printed, the rows
    its partial file held). Checks on the way: exit 130 with rows kept and no table, then exit 0 resuming from
    them, the partial file gone."""
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, interrupt_at(stop, getattr(owner, name)))
        code, first, err = call_main(main, argv, capsys)
    assert code == 130, err[-2000:]
    _, kept = partial_table(out)
    assert kept and not out.exists()
    code, second, err = call_main(main, argv, capsys)
    assert code == 0, err[-2000:]
    assert "resuming from" in err and not partial_of(out).exists()
    return nonblank_lines(first), nonblank_lines(second), kept


class InterruptingImport(importlib.abc.MetaPathFinder):
    """A finder (for the front of ``sys.meta_path``) that answers the import of `name` with a `KeyboardInterrupt`:
    a Ctrl-C during that import."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == self.name:
            raise KeyboardInterrupt
        return None


def order_with_recomputations(n: int, again: dict[int, int]) -> list[int]:
    """A graph order 0..n-1 in which node ``again[b]`` is computed once more just before each node
    b in `again` (a forward node recomputed right before its backward node: its first computation
    then keeps no tape)."""
    seq: list[int] = []
    for v in range(n):
        if v in again:
            seq.append(again[v])
        seq.append(v)
    return seq


# ---------------------------------------------------------------------------- notebook 04's explorer, from code
#: the code cells that define the explorer and show its three panels, by id (the demonstration cells after them
#: take a minute on the default network and are left out)
EXPLORER_CELLS = ["22bcdfa4", "0500f38d", "09acf274", "93400d5e", "3d35deb0", "55b17e7c"]
#: the cell before which the tiny chain is loaded, so that the panels are first built and drawn on it (seconds)
EXPLORER_LOAD_BEFORE = "09acf274"


def explorer_chain_file(folder: Path, name: str, *, memory_unit: str | None = None, host_link: bool = False) -> Path:
    """A 4-stage heterogeneous chain named `name` (Revolve refuses it) whose reference peak is 28 of its size units
    (`memory_unit`; bytes for None), with a host link of 1 GB/s when `host_link` (an offloading chain file),
    written under `folder` with a fresh name."""
    stages = [(1.0, 2.0, 4, 8, 0, 0), (2.0, 4.0, 2, 6, 1, 1), (1.0, 2.0, 2, 4, 0, 2), (0.5, 1.0, 1, 2, 0, 0)]
    keys = ("fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead")
    units: dict[str, str] = {"time": "ms"} | ({"memory": memory_unit} if memory_unit else {})
    data: dict[str, Any] = {"format": "memsched.chain/1", "name": name, "input_size": 4,
                            "stages": [{"name": f"s{i}", **dict(zip(keys, s))} for i, s in enumerate(stages)],
                            "loss": {"bwd_time": 0.5, "bwd_overhead": 0}, "meta": {"units": units}}
    if host_link:
        data["host_link"] = {"bandwidth": 1e9, "latency": 0.0}
    path = folder / f"chain-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps(data))
    return path


class _DisplayHandle:
    """What `display(..., display_id=True)` returns in Jupyter: `update` replaces the shown item."""

    def __init__(self, item: Any):
        self.item = item

    def update(self, item: Any) -> None:
        self.item = item


def _stub_display(*objs: Any, display_id: Any = None, **_: Any) -> _DisplayHandle | None:
    return _DisplayHandle(objs[0]) if display_id else None


def explorer_notebook() -> Path:
    """Notebook 04: the one of the repository `memsched` is imported from (its `solvers` folder's parent), so
    that the widget tests check the tree under test."""
    import memsched

    return Path(memsched.solvers.__file__).resolve().parents[1] / "notebooks" / "04_interactive_explorer.ipynb"


def run_explorer(folder: Path, tiny: Path) -> dict:
    """The namespace of the explorer's cells (`EXPLORER_CELLS`, a stub `display`), the chain file `tiny` loaded
    before the panels are drawn; figures kept as drawn (their PNGs, half the time, are not what is tested)."""
    import IPython.display

    notebook = explorer_notebook()
    cells = {c["id"]: "".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]}
    namespace: dict = {"__name__": "explorer"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IPython.display, "display", _stub_display)
        for cell in EXPLORER_CELLS:
            if cell == EXPLORER_LOAD_BEFORE:
                namespace["path"].value = str(tiny)
                namespace["load_network"]()
            exec(compile(cells[cell], f"{notebook.name}:{cell}", "exec"), namespace)
            if "rendered" in namespace:
                namespace["rendered"] = lambda item: item
    namespace["folder"] = folder
    return namespace


def explorer_load(explorer: dict, path: Path | str) -> None:
    """What the explorer's "load / profile" button does, for the file at `path`."""
    explorer["path"].value = str(path)
    explorer["on_load"](None)


# ---------------------------------------------------------------------------- bench_vs_torch rows
def vs_torch_row(tool: str, setting: str, peak: int, overhead: float, **extra: str) -> dict:
    """A row of experiments.bench_vs_torch's CSV (text values, as read back) for gpt2 tiny: `peak` bytes and
    `overhead` (time 100 ms x (1 + overhead)), paired and unpaired; `extra` adds or replaces columns."""
    return {"model": "gpt2", "size": "tiny", "tool": tool, "setting": setting, "status": "ok",
            "peak_bytes": str(peak), "time_ms": str(100 * (1 + overhead)), "overhead": str(overhead),
            "overhead_unpaired": str(overhead), **extra}


#: torch, two checkpoint_sequential points and two memsched points; on the paired overheads segments=2 is
#: unmatched (memsched 1.25 > 1.02 * 1.20) and segments=3 matched (1.31 <= 1.02 * 1.30)
VS_TORCH_ROWS = [
    vs_torch_row("torch", "no checkpointing", 1000, 0.0),
    vs_torch_row("checkpoint_sequential", "segments=2", 600, 0.20),
    vs_torch_row("checkpoint_sequential", "segments=3", 500, 0.30),
    vs_torch_row("memsched-block", "rotor", 600, 0.25),
    vs_torch_row("memsched-block", "rotor", 480, 0.31),
]

"""Shared fixtures: paths of the example files, a command-line runner, and `sweep_toml`, the text
of a sweep file built from Python values (test modules import it: ``from conftest import sweep_toml``),
and `trains_like_plain_autograd`, the check of the trainers (`memsched.ScheduledChain` / `ScheduledGraph`)."""

from __future__ import annotations

import functools
import io
import json
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

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

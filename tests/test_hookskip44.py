"""Session 44: the chain executor ran saved-tensor hooks (`input_hooks`) around every F_all(i), also where
a_i is read from the live tape abar_i. That a_i lives until B(i-1), after B(i), so abar_{i+1} holding its
storage costs no byte, and the hooks (a storage key, a detached copy, a version check per saved tensor) were
pure Python overhead: about 3% of a step on GPT small and ResNet-50 small against torch's
checkpoint_sequential (the duels of experiments/vs_torch_duel.py). The hooks now run only where a_i is a
standalone activation (the case of session 39: F_n(i) may free it while abar_{i+1} lives)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memsched.models.chain.executor as executor_module  # noqa: E402
from memsched.models.chain.executor import ChainExecutor, check_gradients  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.solvers.chain import simulate  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule  # noqa: E402

L = 4
#: store-all: a_0 is standalone, a_1..a_3 come from the live tapes abar_1..abar_3
STORE_ALL = Schedule([F_all(0), F_all(1), F_all(2), F_all(3), Loss(L), Bwd(3), Bwd(2), Bwd(1), Bwd(0)], L)
#: a_1 standalone (F_ck(0)) and freed by F_n(1) while abar_2 lives: F_all(1) needs the hooks
FREEING = Schedule([F_ck(0), F_all(1), F_n(1), F_all(2), F_all(3), Loss(L), Bwd(3), Bwd(2), F_all(0), Bwd(1),
                    Bwd(0)], L)


def _net() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(16, 128), nn.Tanh()), nn.Sequential(nn.Linear(128, 64), nn.Tanh()),
              nn.Sequential(nn.Linear(64, 32), nn.Tanh()), nn.Sequential(nn.Linear(32, 8), nn.Tanh())]
    return blocks, torch.randn(32, 16), torch.randint(0, 8, (32,))


def _loss(a: torch.Tensor, target: Any) -> torch.Tensor:
    return nn.functional.cross_entropy(a, target)


def _hooked_stages(monkeypatch: pytest.MonkeyPatch, schedule: Schedule) -> list[int]:
    """The stages i whose F_all(i) ran under `input_hooks`, in one measured step of `schedule`; the step's
    measured peak must equal its prediction and its gradients plain autograd's."""
    blocks, x, target = _net()
    chain = profile_chain(blocks, _loss, x, target, repeats=1, warmup=0)
    hooked: list[int] = []
    real = executor_module.input_hooks

    def counting(t: torch.Tensor, slot: Any) -> Any:
        hooked.append(t.shape[-1])  # the input's width names the stage: 16, 128, 64, 32
        return real(t, slot)

    monkeypatch.setattr(executor_module, "input_hooks", counting)
    simulate(chain, schedule).raise_if_invalid()
    result = ChainExecutor(blocks, _loss).step(schedule, x, target, chain=chain, seed=1, measure_time=False)
    ok, msg = check_gradients(result, blocks, _loss, x, target, seed=1)
    assert ok, msg
    assert result.peak_memory == (result.tracker_predicted_peak or result.predicted_peak)
    return hooked


def test_store_all_hooks_only_the_standalone_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """Store-all reads a_1..a_3 from live tapes: only F_all(0), on the standalone a_0, is hooked (per run)."""
    hooked = _hooked_stages(monkeypatch, STORE_ALL)
    assert hooked and set(hooked) == {16}


def test_a_standalone_input_that_f_n_frees_keeps_its_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """F_all(1) on the standalone a_1 (F_ck(0)), freed by F_n(1) while abar_2 lives, is hooked, as is F_all(2)
    on the standalone a_2 that F_n(1) made; F_all(3) reads a_3 from the live tape abar_3 and is not."""
    hooked = _hooked_stages(monkeypatch, FREEING)
    assert {128, 64} <= set(hooked) and 32 not in hooked

"""Hunt 29 fixes: a factory that moves its network (``model.to(device)``, ``.to(dtype)``) builds under the
counted cost models (fake tensors, `models.costs.shape_exact_model`) as the same network without the move;
an offloading schedule's unknown operation lists the transfers Off and Pre too."""

from __future__ import annotations

import textwrap

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.offload.schedule import OffloadSchedule

FACTORIES = """
    import torch
    from torch import nn

    def _net():
        return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.BatchNorm1d(8), nn.Linear(8, 4))

    def build(batch=2, device="cpu", dtype=None):
        model = _net().to(device)
        if dtype is not None:
            model = model.to(dtype)
        return model.float().cpu(), torch.randn(batch, 8, device=device)

    def build_noto(batch=2, device="cpu"):
        return _net(), torch.randn(batch, 8, device=device)

    def build_mlp(batch=1, device="cpu"):
        model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))
        return model.to(device), torch.randn(batch, 16, device=device)

    def build_fails(batch=2, device="cpu"):
        _net().to(device)
        raise ValueError("broken factory")
"""


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """A folder holding ``todev.py`` (the factories above), made the working directory."""
    pytest.importorskip("torch")
    (tmp_path / "todev.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stages(chain) -> list:
    """The chain's sizes and counted costs (not its name)."""
    d = chain.to_dict()
    return [d["input_size"], d["stages"]]


@pytest.mark.parametrize("cost", ["flops", "roofline:a100"])
def test_factory_moving_its_network_profiles_under_counted_costs(factories, cost: str) -> None:
    from memsched.models.chain.profiler import profile_model

    moved, _ = profile_model("todev.py:build", cost=cost, batch=2)
    plain, _ = profile_model("todev.py:build_noto", cost=cost, batch=2)
    assert _stages(moved) == _stages(plain)
    assert moved.meta["parameter_bytes"] == plain.meta["parameter_bytes"]


def test_factory_moving_its_network_in_bfloat16_under_counted_costs(factories) -> None:
    from memsched.models.chain.profiler import profile_model

    moved, _ = profile_model("todev.py:build", cost="flops", dtype="bfloat16", batch=2)
    plain, _ = profile_model("todev.py:build_noto", cost="flops", dtype="bfloat16", batch=2)
    assert moved.meta["dtype"] == plain.meta["dtype"] == "bfloat16"
    assert _stages(moved) == _stages(plain)


def test_factory_moving_its_network_exports_a_counted_graph(factories) -> None:
    from memsched.models.graph.export import export_training_graph

    moved = export_training_graph("todev.py:build", cost="flops", batch=2)
    plain = export_training_graph("todev.py:build_noto", cost="flops", batch=2)
    assert moved.to_dict()["nodes"] == plain.to_dict()["nodes"]


def test_max_batch_of_a_factory_moving_its_network(factories, capsys) -> None:
    from memsched.experiments.cli import main

    assert main(["max-batch", "todev.py:build_mlp", "--memory", "1MB", "--limit", "4"]) in (0, None)
    assert "largest batch: 4" in capsys.readouterr().out


def test_fake_conversions_keep_identity_and_restore_module_apply(factories) -> None:
    import torch
    from memsched.models.costs import is_fake, shape_exact_model
    from memsched.models.zoo import build_model
    from torch import nn

    original = nn.Module._apply
    with shape_exact_model():
        emb, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        head.weight = emb.weight
        weight = emb.weight
        nn.Sequential(emb, head).to("cpu").to(torch.float16)
        assert emb.weight is weight is head.weight and is_fake(weight) and weight.dtype == torch.float16
        with pytest.raises(InputError, match="build_fails.*broken factory"):
            build_model("todev.py:build_fails")
    assert nn.Module._apply is original
    with pytest.raises(ValueError), shape_exact_model():
        raise ValueError
    assert nn.Module._apply is original
    real = nn.Linear(2, 2)
    weight = real.weight
    assert real.to(torch.float64).weight is weight and not is_fake(weight)


def _offload(ops: list) -> OffloadSchedule:
    data = {"format": "memsched.schedule/1", "problem": "offload", "length": 2, "ops": ops}
    return OffloadSchedule.from_json(data, 2, path="s.json")


def test_unknown_offload_operation_lists_the_transfers() -> None:
    with pytest.raises(InputError, match=r"ops\[1\]: unknown operation 'off' \(one of F_all, F_ck, F_n, B, Loss, "
                                         r"Off, Pre\)"):
        _offload([{"op": "F_all", "stage": 0}, {"op": "off", "value": "a", "index": 1}])


def test_transfer_not_an_object_says_how_to_write_it() -> None:
    with pytest.raises(InputError, match=r"ops\[0\]: a transfer is an object \{\"op\": \"Pre\""):
        _offload([["Pre", "a", 1]])
    assert [str(op) for op in _offload([["fe", 0], {"op": "Off", "value": "a", "index": 1}]).ops] == \
        [str(op) for op in _offload([{"op": "F_all", "stage": 0}, {"op": "Off", "value": "a", "index": 1}]).ops]

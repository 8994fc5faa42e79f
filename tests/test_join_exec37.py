"""Join runs (session 37 hunt): a joint loss that concatenates the branch outputs gives every branch
its delta_L as a view of one gradient buffer, which the executor now copies so that B(b, L_b - 1)
frees branch b's bytes as the simulator predicts (and the profiler counts the copies in the loss's
overhead); a join file's recorded size the network cannot be built at names the file and its
``meta.<key>``; a join file's stage outputs are compared with the rebuilt network's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memsched.experiments.cli import main  # noqa: E402
from memsched.models.join.executor import execute_join  # noqa: E402
from memsched.models.join.profiler import profile_join_branches, profile_join_loss, profile_join_model  # noqa: E402
from memsched.models.run import prepare  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.join import reference_peak  # noqa: E402

import memsched  # noqa: E402

#: a tiny CLIP (image and text branches) and its siamese sizes
CLIP = {"batch": 2, "image_size": 16, "seq_len": 4, "width": 4, "depth": 1, "text_width": 8, "text_depth": 1,
        "vocab": 50, "embed_dim": 8}
SIAMESE = {"batch": 2, "image_size": 16, "width": 4, "depth": 1, "embed_dim": 200}


def _block(i: int, o: int) -> nn.Module:
    return nn.Sequential(nn.Linear(i, o), nn.Tanh())


def _cat_loss(outputs: Any, target: Any) -> Any:
    """A joint loss over the concatenated outputs: autograd gives each branch a view of one buffer."""
    return torch.cat(outputs, 1).pow(2).sum()


def test_concatenating_loss_measured_peak_is_the_prediction() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    enc = [_block(64, 256)] + [_block(256, 256) for _ in range(3)]  # one shared encoder (Siamese)
    xs = [torch.randn(32, 64), torch.randn(32, 64)]
    join = profile_join_branches([enc, enc], _cat_loss, xs, None, repeats=1, warmup=1)
    budget = int(0.8 * reference_peak(join))
    result = memsched.solve(join, budget, "dp")
    assert result.schedule is not None
    res, ok = execute_join([enc, enc], _cat_loss, result.schedule, xs, None, join=join, measure_time=False)
    assert ok is True
    assert res.peak_memory == res.tracker_predicted_peak
    assert res.peak_memory <= budget


def test_shared_deltas_are_copied_owned_ones_kept() -> None:
    from memsched.models.join.executor import own_deltas

    buf = torch.randn(4, 16)
    a, b = buf[:, :8], buf[:, 8:]
    owned = torch.randn(4, 8)
    part = torch.randn(40)[:32].view(4, 8)  # a view of a larger buffer
    out = own_deltas([a, b, owned, None, part])
    assert out[2] is owned and out[3] is None
    for got, was in ((out[0], a), (out[1], b), (out[4], part)):
        assert got is not None and torch.equal(got, was)
        assert got.untyped_storage().nbytes() == got.numel() * got.element_size()
    assert out[0] is not None and out[1] is not None
    assert out[0].untyped_storage().data_ptr() != out[1].untyped_storage().data_ptr()


@pytest.mark.parametrize("probe", [True, False])
def test_profiled_loss_overhead_counts_the_copies(probe: bool) -> None:
    torch.manual_seed(0)
    outs = [torch.randn(32, 256), torch.randn(32, 256)]
    v = torch.randn(512, 1)
    out = profile_join_loss(lambda o, t: (torch.cat(o, 1) @ v).sum(), outs, None, repeats=1, warmup=0,
                            probe=probe)
    copies = sum(o.numel() * o.element_size() for o in outs)  # the buffer lives while they are made
    assert out["bwd_overhead"] >= copies
    assert out["tracker_overhead"] >= copies


# ----------------------------------------------------------------- join files run with their sizes
def _profiled(tmp_path: Path, model: str, sizes: dict[str, Any], name: str, **meta: Any) -> Path:
    """A join file of `model` profiled at `sizes`, its meta changed by `meta` (None deletes a key)."""
    path = tmp_path / f"{name}.json"
    profile_join_model(model, repeats=1, warmup=0, out=str(path), **sizes)
    data = json.loads(path.read_text())
    for key, value in meta.items():
        if value is None:
            data["meta"].pop(key, None)
        else:
            data["meta"][key] = value
    path.write_text(json.dumps(data))
    return path


def test_recorded_text_width_names_the_file_and_field(tmp_path: Path) -> None:
    path = _profiled(tmp_path, "clip", CLIP, "tw", text_width=129)
    with pytest.raises(InputError, match="not a multiple of the number of heads") as err:
        prepare("join", "clip", instance=str(path))
    assert err.value.path == str(path) and err.value.field == "meta.text_width"


def test_text_encoder_width_given_directly_keeps_its_name() -> None:
    from memsched.models.join.zoo import text_encoder_blocks

    with pytest.raises(InputError) as err:
        text_encoder_blocks(width=129, depth=1, vocab=10, max_len=4, embed_dim=4)
    assert err.value.field in ("--width", "width")


def test_cli_recorded_encoder_names_the_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _profiled(tmp_path, "siamese", SIAMESE, "enc", encoder=51)
    assert main(["run", str(path), "--budget", "99%", "--time-repeats", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: meta.encoder: unknown ResNet encoder 51" in err[0]


def test_cli_join_file_stage_outputs_are_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _profiled(tmp_path, "siamese", SIAMESE, "noemb", embed_dim=None)  # rebuilt at the default 128
    last = len(json.loads(path.read_text())["branches"][0]["stages"]) - 1
    assert main(["run", str(path), "--budget", "95%", "--time-repeats", "1", "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"{path}: branches[0].stages[{last}].out_size: stage {last} was profiled" in err[0]
    assert captured.out == ""


def test_join_file_at_its_own_sizes_still_runs(tmp_path: Path) -> None:
    path = _profiled(tmp_path, "siamese", SIAMESE, "ok")
    assert prepare("join", "siamese", instance=str(path)).problem == "join"

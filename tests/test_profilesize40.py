"""`memsched profile` at sizes beyond the chain format's limits (a size over 1 PiB, a time over 1e15 time
units, sizes summing over 1 PiB) is bad input, exit 2, one line naming the sizing options that caused it
(``--batch 16777216 --image-size 640``), and nothing written. It named an internal array instead
(``xbar[1]: must be a non-negative size ...``), wrote a chain file whose sizes add up to more than 1 PiB
(which every command then refused to load), and failed as an internal error (exit 3) where torch's
tensor sizes overflow 64 bits. Networks are profiled with ``--cost flops``: fake tensors, nothing allocated."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from memsched.solvers.chain import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.units import MAX_BYTES

BIG_BATCH = "16777216"  # 2**24, the largest --batch


def profile(*argv: str) -> tuple[int, str, str]:
    """`memsched profile resnet18 --cost flops ARGV` in-process: (exit code, stdout, stderr)."""
    res = run_cli("profile", "resnet18", "--cost", "flops", *argv)
    return res.code, res.out, res.err


def assert_one_line_naming(err: str, *needles: str) -> None:
    """One line on stderr, no traceback, naming the options (not only an internal array)."""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_an_activation_over_1_pib_names_batch_and_image_size(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    code, _, err = profile("--batch", BIG_BATCH, "--image-size", "640", "-o", str(out))
    assert code == 2, err
    # the tape of stage 0 (1209462790554112 bytes): the options first, then the entry and the limit
    assert_one_line_naming(err, f"error: --batch {BIG_BATCH} --image-size 640: ", "xbar[1] = 1209462790554112 bytes",
                           "1 PiB", "lower --batch or --image-size")
    assert not out.exists()


@pytest.mark.parametrize("to_file", [True, False])
def test_sizes_summing_over_1_pib_write_nothing(tmp_path: Path, to_file: bool) -> None:
    """Each size under 1 PiB, their sum over it: the loader refuses such a file, so it is not written
    (an existing file is kept), nor printed."""
    out = tmp_path / "c.json"
    out.write_text("kept")
    code, stdout, err = profile("--batch", BIG_BATCH, "--image-size", "448", *(["-o", str(out)] if to_file else []))
    assert code == 2, err
    assert_one_line_naming(err, f"--batch {BIG_BATCH} --image-size 448: ", "add up to", "1 PiB",
                           "lower --batch or --image-size")
    assert stdout == "" and out.read_text() == "kept"


def test_sizes_overflowing_64_bits_are_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    code, _, err = profile("--batch", BIG_BATCH, "--image-size", "1000000", "-o", str(out))
    assert code == 2, err  # was 3, an internal error (torch's "Storage size calculation overflowed")
    assert_one_line_naming(err, f"--batch {BIG_BATCH} --image-size 1000000: ", "overflow", "lower --batch")
    assert not out.exists()


def test_a_profile_within_the_limits_is_written_and_loads(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    code, stdout, err = profile("--batch", "2", "--image-size", "64", "-o", str(out))
    assert code == 0 and "-> " in stdout, err
    chain = Chain.load(out)
    assert chain.length == 10 and chain.meta["model"] == "resnet18" and int(chain.x[0]) == 2 * 3 * 64 * 64 * 4


def args(**given: object) -> argparse.Namespace:
    """The parsed options of `memsched profile MODEL`, every sizing option left out unless `given`."""
    sizes = {name: None for name in ("batch", "image_size", "seq_len", "width", "depth", "vocab")}
    return argparse.Namespace(model="net.py:build", **{**sizes, **given})


def test_a_time_over_the_limit_names_the_options() -> None:
    """`Chain.check`'s own refusal of a time above 1e15 (the file's unit) becomes one naming the options."""
    from memsched.experiments.commands.profile import within_chain_format

    with pytest.raises(InputError) as caught, within_chain_format(args(seq_len=1000, width=4096), "MFLOP"):
        Chain.from_stages(8, [{"fwd_time": 2e15, "bwd_time": 1.0, "out_size": 8, "tape_size": 8,
                               "fwd_overhead": 0, "bwd_overhead": 0}], {"bwd_time": 1.0, "bwd_overhead": 0})
    assert caught.value.field == "--seq-len 1000 --width 4096"
    assert "u_f[0] = 2e+15 MFLOP exceeds" in caught.value.message and "lower --seq-len or --width" in str(caught.value)


def test_without_sizing_options_the_network_is_named() -> None:
    from memsched.experiments.commands.profile import within_chain_format

    with pytest.raises(InputError) as caught, within_chain_format(args(), "ms"):
        Chain(np.ones(2), np.ones(2), [MAX_BYTES + 1, 8, 0], [0, MAX_BYTES + 1, 0], np.zeros(2), np.zeros(2))
    assert caught.value.field == "MODEL" and "net.py:build at its default sizes" in caught.value.message
    assert f"x[0] = {MAX_BYTES + 1} bytes" in caught.value.message


def test_other_chain_errors_are_not_taken_for_sizes() -> None:
    """A negative size is a bug in the profile, not a size the user chose: raised as it is."""
    from memsched.experiments.commands.profile import within_chain_format

    with pytest.raises(InputError) as caught, within_chain_format(args(batch=8), "ms"):
        Chain(np.ones(2), np.ones(2), [8, -1, 0], [0, 8, 0], np.zeros(2), np.zeros(2))
    assert caught.value.field == "x[1]"

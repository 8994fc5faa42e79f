"""`memsched profile` and `memsched run` on tiny zoo models (CPU)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

torch.set_num_threads(1)

TINY_GPT = ["--batch", "2", "--seq-len", "8", "--width", "16", "--depth", "3", "--vocab", "32", "--device", "cpu",
            "--repeats", "1"]
TINY_RESNET = ["--batch", "2", "--image-size", "32", "--width", "4", "--depth", "1", "--device", "cpu",
               "--repeats", "1"]
#: the sizes alone: `run` refuses the profiling option --repeats when an instance file gives the costs
RESNET_SIZES = TINY_RESNET[:-2]


def test_profile_writes_a_chain_file(cli, tmp_path):
    out = tmp_path / "gpt.json"
    res = cli("profile", "gpt2", *TINY_GPT, "-o", out)
    assert res.code == 0, res.err
    data = json.loads(out.read_text())
    assert data["format"] == "memsched.chain/1"
    assert len(data["stages"]) == 5
    assert data["meta"]["model"] == "gpt2"


def test_run_json_has_the_design_keys(cli):
    res = cli("run", "gpt2", *TINY_GPT, "--budget", "70%", "--solver", "periodic", "--json", "--time-repeats", "1")
    assert res.code == 0, res.err
    out = res.json()
    for key in ("model", "budget", "solver", "predicted", "measured", "grad_check", "device"):
        assert key in out, key
    assert set(out["predicted"]) >= {"makespan", "peak_memory"}
    assert set(out["measured"]) >= {"time", "peak_memory"}
    assert out["grad_check"] is True and out["device"] == "cpu"
    assert out["measured"]["peak_memory"] <= 1.01 * out["predicted"]["peak_memory"] + 4096
    assert out["vs_store_all"]["predicted"]["memory"] <= 0.7 + 1e-9


def test_run_text_output_and_chain_file(cli, tmp_path):
    path = tmp_path / "r.json"
    res = cli("profile", "resnet18", *TINY_RESNET, "-o", path)
    assert res.code == 0, res.err
    res = cli("run", path, "--model", "resnet18", *RESNET_SIZES, "--budget", "100%", "--solver", "store-all",
              "--time-repeats", "1")
    assert res.code == 0, res.err
    assert "grad check: ok" in res.out
    res = cli("run", "resnet18", "--chain", path, *RESNET_SIZES, "--budget", "100%", "--solver", "recompute-all",
              "--json", "--time-repeats", "1")
    assert res.code == 0, res.err
    assert res.json()["recomputations"] > 0


def test_run_infeasible_and_bad_input(cli, tmp_path):
    res = cli("run", "gpt2", *TINY_GPT, "--budget", "10", "--solver", "periodic")
    assert res.code == 1
    res = cli("run", "gpt2", *TINY_GPT, "--budget", "10", "--solver", "periodic", "--json")
    assert res.code == 1 and res.json()["status"] == "infeasible"
    assert cli("run", "alexnet", "--budget", "1GB").code == 2
    assert cli("run", "gpt2", *TINY_GPT, "--budget", "lots").code == 2
    assert cli("run", "gpt2", *TINY_GPT, "--budget", "1GB", "--solver", "nope").code == 2
    path = tmp_path / "g.json"
    assert cli("profile", "gpt2", *TINY_GPT, "-o", path).code == 0
    res = cli("run", "resnet18", "--chain", path, *RESNET_SIZES, "--budget", "1GB", "--solver", "store-all")
    assert res.code == 2 and "stages" in res.err
    assert "\n" not in res.err.strip()


@pytest.mark.parametrize("args, field", [
    (["--problem", "graph", "--bandwidth", "1GB/s"], "--bandwidth"),
    (["siamese", "--bandwidth", "1GB/s"], "--bandwidth"),
    (["--latency", "0.1"], "--latency"),
])
def test_run_refuses_a_host_link_it_would_ignore(cli, args, field):
    """A bandwidth outside offloading, or a latency without a host link, is refused (it was ignored)."""
    model = [] if args[0] == "siamese" else ["resnet18"]
    res = cli("run", *model, *args, "--budget", "90%", *TINY_RESNET)
    assert res.code == 2 and field in res.err and "\n" not in res.err.strip()


def test_run_dispatches_offload_and_join(cli):
    """`memsched run` with --bandwidth executes an offloading schedule; a join model runs the join DP."""
    res = cli("run", "resnet18", "--budget", "95%", "--bandwidth", "1GB/s", "--batch", "2", "--image-size", "32",
              "--width", "8", "--threads", "1", "--time-repeats", "1", "--device", "cpu", "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["grad_check"] is True and out["measured"]["peak_memory"] <= out["budget"]
    res = cli("run", "siamese", "--budget", "90%", "--batch", "2", "--image-size", "32", "--width", "8",
              "--threads", "1", "--time-repeats", "1", "--device", "cpu", "--json")
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True


def test_dtype_halves_every_activation_and_trains_alike(cli, tmp_path):
    files = {}
    for dtype in ("float32", "bfloat16"):
        files[dtype] = tmp_path / f"{dtype}.json"
        res = cli("profile", "resnet18", *TINY_RESNET, "--dtype", dtype, "-o", files[dtype])
        assert res.code == 0, res.err
    full, half = (json.loads(files[d].read_text()) for d in ("float32", "bfloat16"))
    assert half["meta"]["dtype"] == "bfloat16" and half["name"].endswith("-bf16")
    assert [s["out_size"] for s in half["stages"]] == [s["out_size"] // 2 for s in full["stages"]]
    res = cli("run", "resnet18", *TINY_RESNET, "--dtype", "bfloat16", "--budget", "100%", "--json",
              "--time-repeats", "1")
    assert res.code == 0, res.err
    assert res.json()["grad_check"] is True and res.json()["instance"].endswith("-bf16")
    res = cli("run", "siamese", "--batch", "2", "--image-size", "32", "--width", "8", "--repeats", "1",
              "--dtype", "bfloat16", "--budget", "100%", "--device", "cpu", "--json", "--time-repeats", "1")
    assert res.code == 0 and res.json()["grad_check"] is True, res.err
    res = cli("profile", "resnet18", "--dtype", "float64")
    assert res.code == 2 and "--dtype" in res.err

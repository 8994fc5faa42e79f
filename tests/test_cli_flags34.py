"""Hunt 34 (command-line flags): `memsched plot --bandwidth` draws a pipeline partition on that bandwidth (as
`memsched simulate` replays it) instead of refusing the partition as an offloading schedule; `memsched max-batch
--help` does not offer ``--cost measured``, which it refuses; ``--progress`` with ``--no-progress`` is refused
(exit 2, one line) by every command that has the pair."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from conftest import one_line_refusal, run_cli  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def partition_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`memsched partition cnn12.json --devices 2 --memory 100% --json` (communication not charged)."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    res = run_cli("partition", examples / "cnn12.json", "--devices", "2", "--memory", "100%", "--json")
    assert res.code == 0, res.err
    out: dict[str, Any] = res.json()
    assert out["schedule"]["format"] == "memsched.partition/1"
    return out


def _partition_file(tmp_path: Path, result: dict[str, Any], shape: str) -> Path:
    """The partition as a file: the whole result object, its bare ``schedule`` (a memsched.partition/1
    object), or that bare object without its ``format``."""
    data = result if shape == "result" else dict(result["schedule"])
    if shape == "bare-no-format":
        del data["format"]
    path = tmp_path / f"{shape}.json"
    path.write_text(json.dumps(data))
    return path


def _plotted_periods(monkeypatch: pytest.MonkeyPatch, argv: list[Any]) -> tuple[Any, list[float]]:
    """Run `memsched plot ARGV`, recording the period of each pipeline timeline it draws (the instance's
    time unit): (the CLI result, those periods)."""
    from memsched.experiments import plotting
    from memsched.experiments.plotting.timeline import timeline_for

    periods: list[float] = []
    original = plotting.plot_schedule

    def recording(problem: str, instance: Any, schedule: Any, **kw: Any) -> Any:
        assert problem == "pipeline"
        periods.append(timeline_for(problem, instance, schedule, kw.get("budget")).objective)
        return original(problem, instance, schedule, **kw)

    monkeypatch.setattr(plotting, "plot_schedule", recording)
    return run_cli("plot", *argv), periods


# ---------------------------------------------------------------------------- bug 1: plot --bandwidth
@pytest.mark.parametrize("shape", ["result", "bare", "bare-no-format"])
def test_plot_draws_a_partition_on_the_bandwidth_given(tmp_path, monkeypatch, examples, partition_result, shape):
    part = _partition_file(tmp_path, partition_result, shape)
    cnn12 = examples / "cnn12.json"
    sim = run_cli("simulate", cnn12, part, "--bandwidth", "1GB/s", "--json")
    assert sim.code == 0, sim.err
    free = run_cli("simulate", cnn12, part, "--json")
    assert free.code == 0, free.err
    assert sim.json()["period"] > free.json()["period"]  # the link is charged: observable in the period

    png = tmp_path / "part.png"
    res, periods = _plotted_periods(monkeypatch, [cnn12, part, "-o", png, "--bandwidth", "1GB/s"])
    assert res.code == 0, res.err
    assert res.out.strip() == str(png)
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert periods == [pytest.approx(sim.json()["period_file_units"])]

    res, periods = _plotted_periods(monkeypatch, [cnn12, part, "-o", png])
    assert res.code == 0, res.err
    assert periods == [pytest.approx(free.json()["period_file_units"])]


def test_plot_latency_of_a_partition_still_needs_a_bandwidth(tmp_path, examples, partition_result):
    part = _partition_file(tmp_path, partition_result, "result")
    res = run_cli("plot", examples / "cnn12.json", part, "-o", tmp_path / "p.png", "--latency", "0.001")
    one_line_refusal(res, "--latency")
    assert not (tmp_path / "p.png").exists()


# ---------------------------------------------------------------------------- bug 2: max-batch --help
def test_max_batch_help_does_not_offer_measured_costs():
    res = run_cli("max-batch", "--help")
    assert res.code == 0, res.err
    text = " ".join(res.out.split())
    found = re.search(r"--cost MODEL (.*?)(?= --json| -\S|$)", text)
    assert found is not None, text
    cost_help = found.group(1)
    assert "flops" in cost_help and "roofline" in cost_help
    assert "run the network" not in cost_help
    assert re.search(r"measured (is|are) refused", cost_help), cost_help


def test_max_batch_still_refuses_measured():
    one_line_refusal(run_cli("max-batch", "resnet18", "--memory", "1GB", "--cost", "measured"), "--cost")


# ---------------------------------------------------------------------------- bug 3: --progress --no-progress
COMMANDS = {
    "solve": ("solve", "{examples}/cnn12.json", "--budget", "60%"),
    "partition": ("partition", "{examples}/cnn12.json", "--devices", "2", "--memory", "100%"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("flags", [("--progress", "--no-progress"), ("--no-progress", "--progress")])
def test_progress_and_no_progress_together_are_refused(examples, command, flags):
    argv = [a.format(examples=examples) for a in COMMANDS[command]]
    line = one_line_refusal(run_cli(*argv, *flags), "not allowed with argument")
    assert line.startswith(f"memsched {command}: error:")
    assert flags[0] in line and flags[1] in line


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("flags", [("--no-progress",), ("--progress", "--progress"), ()])
def test_progress_flags_alone_are_still_accepted(examples, command, flags):
    argv = [a.format(examples=examples) for a in COMMANDS[command]]
    res = run_cli(*argv, *flags, "--json")
    assert res.code == 0, res.err
    usage = " ".join(run_cli(command, "--help").out.split())
    assert "[--progress | --no-progress]" in usage

"""A graph of a network split by layer (``--granularity layer``) records that split and is rerun at it.

1. `models.graph.export` wrote the zoo config's "granularity" (block|layer) over the export's own
   (op|module), and `models.run.instance_sizes` dropped a graph's granularity, so `memsched run FILE`
   rebuilt the default block split: "graph ... has forward nodes the network does not compute". The
   export now keeps ``meta.granularity`` op|module and records the split as ``meta.split``; a run fills it in
   as ``--granularity`` and refuses a contradicting one. Files written before (``granularity`` "layer",
   no ``split``) read the old field as the split.
2. ``memsched run`` printed the predicted makespan with two decimals ("0.00 ms" for a roofline graph:
   below 1 it now prints four significant digits).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.run import describe, instance_sizes  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402

import memsched  # noqa: E402

TINY = {"batch": 1, "seq_len": 8, "width": 16, "depth": 1, "vocab": 50}


def _layer_graph(path):
    built = build_model("gpt2", granularity="layer", **TINY)
    return export_training_graph(built, cost="flops", out=str(path))


def test_export_keeps_its_granularity_and_records_the_split(tmp_path):
    meta = _layer_graph(tmp_path / "g.json").meta
    assert meta["granularity"] == "op" and meta["split"] == "layer" and meta["model"] == "gpt2"
    block = export_training_graph(build_model("gpt2", **TINY), cost="flops", granularity="module")
    assert block.meta["granularity"] == "module" and block.meta["split"] == "block"


def test_run_rebuilds_the_recorded_split(tmp_path, capsys):
    from memsched.experiments.cli import main

    path = tmp_path / "g.json"
    _layer_graph(path)
    assert main(["run", str(path), "--budget", "90%", "--time-repeats", "1", "--threads", "1"]) == 0
    assert "grad check: ok" in capsys.readouterr().out
    assert main(["run", "gpt2", "--chain", str(path), "--problem", "graph", "--budget", "90%",
                 "--time-repeats", "1", "--threads", "1", "--granularity", "block"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--granularity" in err and "granularity layer, not block" in err and len(err.splitlines()) == 1


def test_instance_sizes_of_graph_splits():
    def graph(**meta):
        return SimpleNamespace(meta={"model": "gpt2", "batch": 1, **meta})

    assert instance_sizes(graph(granularity="op", split="layer"), "gpt2", {}, "graph")["granularity"] == "layer"
    assert instance_sizes(graph(granularity="layer"), "gpt2", {}, "graph")["granularity"] == "layer"  # older file
    assert "granularity" not in instance_sizes(graph(granularity="op"), "gpt2", {}, "graph")
    with pytest.raises(memsched.InputError, match="granularity block, not layer") as err:
        instance_sizes(graph(granularity="op"), "gpt2", {"granularity": "layer"}, "graph")
    assert "granularity" in str(err.value.field)
    with pytest.raises(memsched.InputError, match="granularity layer, not block"):
        instance_sizes(graph(granularity="module", split="layer"), "gpt2", {"granularity": "block"}, "graph")
    with pytest.raises(memsched.InputError, match="unknown granularity") as err:
        instance_sizes(graph(granularity="op", split="atoms"), "gpt2", {}, "graph", path="g.json")
    assert err.value.field == "graph.meta.split"


def test_a_small_predicted_makespan_keeps_four_significant_digits():
    out = {"instance": "g", "device": "cpu", "solver": "checkmate", "status": "optimal", "budget": 1024,
           "problem": "graph", "units": {"time": "ms"}, "memory_method": "LiveTensorTracker", "grad_check": True,
           "predicted": {"makespan": 0.00210227, "peak_memory": 512},
           "measured": {"time": 1.5, "peak_memory": 512}}
    line = describe(out).splitlines()[1]
    assert "makespan 0.002102 ms" in line, line

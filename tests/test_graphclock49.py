"""Graph runs of `memsched run` (hunt: graphclock):

1. A graph file profiled with one torch thread (``meta.clock`` "thread") and run with more timed its
   steps on the thread's CPU time, which misses the other threads' work (388.87 ms against 20.8 ms
   with ``--threads 1`` for the same store-all schedule), and the run's ``clock`` still said
   "thread". The clock now follows the thread count in force, as for chains (`default_clock`):
   the run's steps and its ``clock`` say "wall"; `GraphExecutor.step`'s default does the same.
2. A network plain autograd cannot train (a ReLU's saved output modified in place) was, with
   ``--problem graph``, an internal error (exit 3) from the gradient check's plain-autograd
   reference, after ``--profile-file`` was written; the chain problem's bad-input line (exit 2,
   ``MODEL: ... fails in plain autograd``) now, and no file written.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

RUN = ["--solver", "checkpoint-all", "--budget", "100%", "--no-independent", "--time-repeats", "1"]

NETS = textwrap.dedent('''
    import torch
    from torch import nn
    from torch.nn import functional as F


    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(8, 8)

        def forward(self, x):
            h = torch.relu(self.l(x))
            h.mul_(2.0)  # modifies relu's saved output: plain loss.backward() fails
            return h


    def good(batch: int = 2):
        net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
        return net, torch.randn(batch, 8), torch.randint(0, 4, (batch,)), F.cross_entropy


    def bad(batch: int = 2):
        net = nn.Sequential(nn.Linear(8, 8), InPlace(), nn.Linear(8, 4))
        return net, torch.randn(batch, 8), torch.randint(0, 4, (batch,)), F.cross_entropy
''')


@pytest.fixture(autouse=True)
def threads_kept():
    """Each test sets torch's threads: put them back afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def nets(tmp_path: Path) -> Path:
    path = tmp_path / "nets.py"
    path.write_text(NETS)
    return path


def _one_thread_graph(cli, nets: Path, tmp_path: Path) -> Path:
    """A graph file profiled by ``memsched run --problem graph --threads 1``: ``meta.clock`` "thread"."""
    out = tmp_path / "g.json"
    res = cli("run", f"{nets}:good", "--problem", "graph", *RUN, "--repeats", "1", "--threads", "1",
              "--profile-file", out, "--json")
    assert res.code == 0, res.err
    assert res.json()["clock"] == "thread"
    assert json.loads(out.read_text())["graph"]["meta"]["clock"] == "thread"
    return out


# ---------------------------------------------------------------------------- 1. the clock
def test_a_one_thread_graph_run_with_two_threads_is_timed_by_the_wall_clock(cli, nets: Path, tmp_path: Path,
                                                                           step_clocks: list[str]) -> None:
    graph = _one_thread_graph(cli, nets, tmp_path)
    torch.set_num_threads(2)
    del step_clocks[:]
    res = cli("run", graph, *RUN, "--json")
    assert res.code == 0, res.err
    assert res.json()["clock"] == "wall"  # before: "thread", and the steps timed so
    assert step_clocks and set(step_clocks) == {"wall"}


def test_a_one_thread_graph_run_with_one_thread_keeps_the_thread_clock(cli, nets: Path, tmp_path: Path,
                                                                      step_clocks: list[str]) -> None:
    graph = _one_thread_graph(cli, nets, tmp_path)
    torch.set_num_threads(2)
    del step_clocks[:]
    res = cli("run", graph, *RUN, "--threads", "1", "--json")
    assert res.code == 0, res.err
    assert res.json()["clock"] == "thread"
    assert step_clocks and set(step_clocks) == {"thread"}


def test_a_graph_run_reports_the_clock_of_the_threads_as_a_chain_run_does(cli, nets: Path, tmp_path: Path) -> None:
    """The same network's chain file profiled on one thread, run with two: both say "wall"."""
    graph = _one_thread_graph(cli, nets, tmp_path)
    chain = tmp_path / "c.json"
    assert cli("profile", f"{nets}:good", "--threads", "1", "--repeats", "1", "-o", chain).code == 0
    torch.set_num_threads(2)
    clocks = []
    for file, solver in ((graph, "checkpoint-all"), (chain, "store-all")):
        res = cli("run", file, *RUN, "--solver", solver, "--json")
        assert res.code == 0, res.err
        clocks.append(res.json()["clock"])
    assert clocks == ["wall", "wall"]


@pytest.mark.parametrize("threads, clock", [(1, "thread"), (2, "wall")])
def test_the_graph_executor_default_clock_follows_the_threads(threads: int, clock: str,
                                                              step_clocks: list[str]) -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    x, y = torch.randn(2, 8), torch.randint(0, 4, (2,))
    torch.set_num_threads(1)
    graph = export_training_graph([net], example_input=x, loss_fn=F.cross_entropy, target=y, cost="measured",
                                  ram="tape", repeats=1, warmup=0)
    assert graph.meta["clock"] == "thread"
    torch.set_num_threads(threads)
    del step_clocks[:]
    GraphExecutor([net], F.cross_entropy, graph, x).step(range(graph.n), x, y, measure_memory=False)
    assert step_clocks and set(step_clocks) == {clock}


# ---------------------------------------------------------------------------- 2. plain autograd fails
def test_a_graph_run_of_a_network_plain_autograd_cannot_train_is_bad_input(cli, nets: Path, tmp_path: Path) -> None:
    out = tmp_path / "bad.json"
    res = cli("run", f"{nets}:bad", "--problem", "graph", *RUN, "--repeats", "1", "--profile-file", out)
    assert res.code == 2, res.err  # before: 3, a raw RuntimeError
    assert "MODEL: " in res.err and "fails in plain autograd" in res.err and "internal error" not in res.err
    assert not out.exists()  # before: written, then the run failed
    chain = cli("run", f"{nets}:bad", "--problem", "chain", *RUN, "--solver", "store-all", "--repeats", "1")
    assert chain.code == 2 and res.err.strip() == chain.err.strip()


def test_a_graph_file_of_a_network_plain_autograd_cannot_train_is_bad_input(cli, nets: Path, tmp_path: Path) -> None:
    graph = tmp_path / "bad.json"
    assert cli("export-graph", f"{nets}:bad", "--cost", "measured", "--ram", "tape", "--repeats", "1",
               "-o", graph).code == 0
    res = cli("run", graph, *RUN)
    assert res.code == 2, res.err  # before: 3
    assert "fails in plain autograd" in res.err and "internal error" not in res.err

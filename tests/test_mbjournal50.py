"""Session 50 fix of ``memsched max-batch --journal FILE``: bad sizing options (``resnet18 --seq-len 8``, a
factory taking no ``--depth``), found at the first size probed, left an empty FILE behind (the journal was
created before any probe). A new journal is now created with its first row: bad input leaves nothing written
(exit 2, one line), while an existing journal is still opened and read before any probe (resumed as before)
and is never truncated or removed by a search that records nothing.

Most tests run the real command on sizing options that fail before anything is built; one replaces
`max_batch.probe_size` by a table of verdicts (milliseconds each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import one_line_refusal, run_cli

pytest.importorskip("torch")

from memsched.experiments.commands import max_batch  # noqa: E402
from memsched.experiments.commands.max_batch import Probe  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

#: a factory taking a batch and a sequence length only (no depth, width, vocab or image size)
FACTORY = """import torch
from torch import nn


def build(batch=2, seq_len=4):
    return nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4)), torch.randn(batch, seq_len, 16)
"""

#: sizing options a zoo network refuses before anything is built, and the field each error names
BAD_ZOO = {
    "resnet18 --seq-len": (("resnet18", "--seq-len", "8"), "--seq-len"),
    "resnet18 --vocab": (("resnet18", "--vocab", "10"), "--vocab"),
    "vgg16 --depth": (("vgg16", "--depth", "2"), "--depth"),
    "lstm --image-size": (("lstm", "--image-size", "32"), "--image-size"),
}


def probe(size: int, fits: bool) -> Probe:
    """A probe's numbers (bytes, the cost model's time unit); a schedule when it fits."""
    return Probe(size=size, fits=fits, status="optimal" if fits else "infeasible", budget=10**8,
                 parameter_bytes=1000, store_all_peak=1000 * size, store_all_time=10.0,
                 makespan=10.0 if fits else None, overhead=1.0 if fits else None,
                 peak_memory=1000 * size if fits else None, bound=1.2, nodes=4, solve_time_s=0.0)


def fake_probes(monkeypatch: pytest.MonkeyPatch, largest: int, bad: bool = False) -> None:
    """`max_batch.probe_size` answered without building anything: batches up to `largest` fit; with `bad`,
    every size is bad input (as a sizing option the network takes not, found at the first size)."""
    def fake(model: str, sizes: dict[str, Any], *, size: int, **kw: Any) -> Probe:
        if bad:
            raise InputError("resnet18 takes no --seq-len (an image model)", field="--seq-len")
        return probe(size, size <= largest)

    monkeypatch.setattr(max_batch, "probe_size", fake)


@pytest.mark.parametrize("name", BAD_ZOO)
def test_bad_sizing_option_leaves_no_new_journal(tmp_path: Path, name: str) -> None:
    """The hunter's commands: exit 2, one line naming the option, no journal file made."""
    argv, field = BAD_ZOO[name]
    journal = tmp_path / "jn.jsonl"
    res = run_cli("max-batch", *argv, "--memory", "8MB", "--journal", str(journal))
    one_line_refusal(res, field)
    assert res.out == ""
    assert not journal.exists(), "an empty journal was left behind"
    assert list(tmp_path.iterdir()) == []


def test_factory_without_the_option_leaves_no_new_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``net.py:build --depth 3`` with a factory taking no depth: exit 2 naming --depth, no journal made."""
    (tmp_path / "net.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    res = run_cli("max-batch", "net.py:build", "--depth", "3", "--memory", "8MB", "--journal", "jn.jsonl")
    one_line_refusal(res, "--depth")
    assert not (tmp_path / "jn.jsonl").exists()


def test_bad_input_at_the_first_size_leaves_no_new_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input raised by the first probe itself (not by a check before the search): still no file."""
    fake_probes(monkeypatch, 100, bad=True)
    journal = tmp_path / "jn.jsonl"
    res = run_cli("max-batch", "resnet18", "--memory", "1GB", "--limit", "1000", "--journal", str(journal))
    one_line_refusal(res, "--seq-len")
    assert not journal.exists()


@pytest.mark.parametrize("text", ["", "not json\n"], ids=["empty", "foreign"])
def test_existing_file_is_left_as_it_was(tmp_path: Path, text: str) -> None:
    """A refused run makes no FILE; one that existed before a refused run (empty, or holding lines of its own)
    is neither removed nor changed."""
    journal = tmp_path / "jn.jsonl"
    argv = ("max-batch", "resnet18", "--seq-len", "8", "--memory", "8MB", "--journal", str(journal))
    one_line_refusal(run_cli(*argv), "--seq-len")
    assert not journal.exists()
    journal.write_text(text)
    res = run_cli(*argv)  # a foreign line is reported (`warning: FILE: unreadable line 1 ignored`), then the error
    assert res.code == 2 and "--seq-len" in res.err.strip().splitlines()[-1], res.err
    assert journal.read_text() == text


def test_new_journal_is_created_with_its_first_row_and_resumed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a refused run (no FILE made), a search that probes creates the journal (one row per probe); a
    rerun reads it before probing, resumes every probe and leaves its bytes as they were; a refused run with
    the same FILE leaves them too."""
    journal = tmp_path / "jn.jsonl"
    argv = ("max-batch", "resnet18", "--image-size", "32", "--tolerance", "0", "--limit", "1000", "--memory", "1GB",
            "--journal", str(journal))
    fake_probes(monkeypatch, 100, bad=True)
    one_line_refusal(run_cli(*argv), "--seq-len")
    assert not journal.exists()
    fake_probes(monkeypatch, 100)
    res = run_cli(*argv, "--json")
    assert res.code == 0, res.err
    answer = json.loads(res.out)
    rows = journal.read_text().splitlines()
    assert answer["largest"] == 100 and answer["journal"]["run"] == len(rows) > 0
    before = journal.read_bytes()
    res = run_cli(*argv, "--json")
    assert res.code == 0 and json.loads(res.out)["journal"] == {"path": str(journal), "resumed": len(rows), "run": 0}
    assert journal.read_bytes() == before
    fake_probes(monkeypatch, 100, bad=True)
    res = run_cli(*argv[:-2], "--memory", "2GB", "--journal", str(journal))  # other settings: nothing resumed
    one_line_refusal(res, "--seq-len")
    assert journal.read_bytes() == before

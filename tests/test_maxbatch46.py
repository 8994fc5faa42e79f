"""Session 46 fixes of ``memsched max-batch``: a ``--journal`` row that is JSON but not a probe as max-batch
writes it (a number of the wrong type or out of range, a size other than its key's) is reported and ignored
like an unreadable line, and that probe runs again (it was taken as finished: exit 3, or a row ``big fits``);
a ``--journal`` in a missing folder, or under a file, is bad input naming ``--journal`` before any probe
(the folders were made); an interrupted ``--json`` answer has the note of its largest size (it was null).

Most tests replace `max_batch.probe_size` by a table of verdicts (milliseconds each); one runs the hunter's
tiny resnet18 for real, so that the rows real probes write are checked to be read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

pytest.importorskip("torch")

from memsched.experiments.commands import max_batch  # noqa: E402
from memsched.experiments.commands.max_batch import Probe  # noqa: E402

#: a batch search answered by `fake_probes` (--tolerance 0: the exact largest)
BATCH = ("max-batch", "resnet18", "--image-size", "32", "--tolerance", "0", "--limit", "1000", "--memory", "1GB")
#: the hunter's network, probed for real (batch 1 refused: BatchNorm on a 1x1 map; 2 and 4 fit)
TINY = ("max-batch", "resnet18", "--memory", "4MB", "--image-size", "32", "--width", "8", "--threads", "1",
        "--limit", "4")


def probe(size: int, fits: bool) -> Probe:
    """A probe's numbers (bytes, the cost model's time unit); a schedule when it fits."""
    return Probe(size=size, fits=fits, status="optimal" if fits else "infeasible", budget=10**8,
                 parameter_bytes=1000, store_all_peak=1000 * size, store_all_time=10.0,
                 makespan=10.0 if fits else None, overhead=1.0 if fits else None,
                 peak_memory=1000 * size if fits else None, bound=1.2, nodes=4, solve_time_s=0.0)


def fake_probes(monkeypatch: pytest.MonkeyPatch, largest: int, calls: list[int], interrupt_at: int = 0) -> None:
    """`max_batch.probe_size` answered without building anything: batches up to `largest` fit; the probe of
    `interrupt_at` is interrupted (Ctrl-C). Each size probed is appended to `calls`."""
    def fake(model: str, sizes: dict[str, Any], *, size: int, **kw: Any) -> Probe:
        calls.append(size)
        if size == interrupt_at:
            raise KeyboardInterrupt
        return probe(size, size <= largest)

    monkeypatch.setattr(max_batch, "probe_size", fake)


def cli(*argv: object) -> tuple[int, str, str]:
    res = run_cli(*(str(a) for a in argv))
    return res.code, res.out, res.err


def rows(journal: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in journal.read_text().splitlines()]


def damage(journal: Path, size: int, edit: Any) -> int:
    """Rewrite the row of `size` in `journal` by `edit(row)`; returns its line number (1-based)."""
    lines = journal.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line)["size"] == size)
    row = json.loads(lines[n])
    edit(row)
    lines[n] = json.dumps(row)
    journal.write_text("\n".join(lines) + "\n")
    return n + 1


def set_probe(**fields: Any) -> Any:
    return lambda row: row["probe"].update(fields)


# --- bug 1: a row of the wrong types is reported and ignored, its probe runs again --------------------------------

#: (size damaged, how): the hunter's five (overhead "x", fits "false", budget null, store_all_peak [1], size
#: "big") and their kin; 96 fits, 128 does not
DAMAGE = {
    "overhead text": (96, set_probe(overhead="x")),
    "fits text": (128, set_probe(fits="false")),
    "budget null": (96, set_probe(budget=None)),
    "store_all_peak list": (96, set_probe(store_all_peak=[1])),
    "probe size text": (96, set_probe(size="big")),
    "probe size another": (96, set_probe(size=97)),
    "fits as 1": (96, set_probe(fits=1)),
    "bytes as float": (96, set_probe(parameter_bytes=1000.5)),
    "negative time": (96, set_probe(store_all_time=-1.0)),
    "NaN overhead": (96, set_probe(overhead=float("nan"))),
    "fits without a schedule": (96, set_probe(makespan=None, overhead=None)),
    "unknown field": (96, set_probe(colour="red")),
    "row size text": (96, lambda row: row.update(size="96")),
    "sizes not the key's": (96, lambda row: row["sizes"].update(batch=97)),
    "settings not the key's": (96, lambda row: row["settings"].update(memory=2 * 10**9)),
}


@pytest.mark.parametrize("name", DAMAGE)
def test_damaged_probe_row_is_ignored_and_probed_again(monkeypatch, tmp_path, name):
    """Batches up to 100 fit; the journal of a finished search, one row damaged: the rerun warns about that
    line as the sweep warns about an unreadable one, probes that size again (only it), and answers 100."""
    journal = tmp_path / "probes.jsonl"
    calls: list[int] = []
    fake_probes(monkeypatch, 100, calls)
    assert cli(*BATCH, "--journal", journal)[0] == 0
    kept = len(rows(journal))
    size, edit = DAMAGE[name]
    line = damage(journal, size, edit)

    calls.clear()
    code, out, err = cli(*BATCH, "--journal", journal, "--json")
    assert code == 0, err
    assert f"warning: {journal}: unreadable line {line} ignored" in err
    answer = json.loads(out)
    assert answer["largest"] == 100 and answer["result"]["size"] == 100
    assert calls == [size]
    assert answer["journal"] == {"path": str(journal), "resumed": kept - 1, "run": 1}
    assert all(isinstance(p["size"], int) and isinstance(p["fits"], bool) for p in answer["probes"])


def test_damaged_refused_row_is_ignored(monkeypatch, tmp_path):
    """A refused size's row filed under another size (its ``size`` edited) is no row of that key: ignored."""
    journal = tmp_path / "probes.jsonl"
    calls: list[int] = []
    fake_probes(monkeypatch, 100, calls)
    assert cli(*BATCH, "--journal", journal)[0] == 0
    line = damage(journal, 96, lambda row: row.update(probe=None, overheads={}, refused="too small", size=95))
    calls.clear()
    code, out, err = cli(*BATCH, "--journal", journal)
    assert code == 0 and f"unreadable line {line} ignored" in err and calls == [96]
    assert "largest batch: 100 " in out and "  refused  " not in out


def test_clean_journal_of_real_probes_is_resumed(tmp_path):
    """The rows real probes write (the hunter's tiny resnet18) are all read back, without a warning; the
    hunter's damage to one of them (overhead "x") is reported and that batch is probed again (it was exit 3:
    "Unknown format code 'f' for object of type 'str'")."""
    journal = tmp_path / "mb.jsonl"
    code, out, err = cli(*TINY, "--journal", journal)
    assert code == 0, err
    assert "largest batch: 4 " in out
    assert [r["size"] for r in rows(journal)] == [1, 2, 4] and rows(journal)[0]["refused"]

    code, out, err = cli(*TINY, "--journal", journal)
    assert code == 0 and "warning" not in err
    assert f"journal {journal}: 3 sizes resumed from the journal, 0 run now" in out

    line = damage(journal, 4, set_probe(overhead="x"))
    code, out, err = cli(*TINY, "--journal", journal)
    assert code == 0, err
    assert f"warning: {journal}: unreadable line {line} ignored" in err
    assert f"journal {journal}: 2 sizes resumed from the journal, 1 run now" in out
    assert "largest batch: 4 (overhead x1.000" in out


# --- bug 2: --journal's folder is checked before any work, as -o's ---------------------------------------------

def test_journal_in_a_missing_folder_is_bad_input(monkeypatch, tmp_path):
    """``--journal newdir/sub/j.jsonl``: exit 2 naming --journal and the missing folder, nothing probed, no
    folder made (docs/cli.md: an output path in a missing folder is bad input checked before any work)."""
    calls: list[int] = []
    fake_probes(monkeypatch, 100, calls)
    path = tmp_path / "newdir" / "sub" / "j.jsonl"
    code, out, err = cli(*BATCH, "--journal", path)
    assert code == 2 and out == "" and calls == []
    assert "--journal" in err and f"{str(path.parent)!r} does not exist" in err
    assert not (tmp_path / "newdir").exists()


def test_journal_under_a_file_names_the_option(monkeypatch, tmp_path):
    """``--journal a.json/j.jsonl`` with a.json a file: exit 2 naming --journal and the path given (it was
    "a.json: cannot make the folder of max-batch's journal of probes (File exists)")."""
    calls: list[int] = []
    fake_probes(monkeypatch, 100, calls)
    (tmp_path / "a.json").write_text("{}")
    path = tmp_path / "a.json" / "j.jsonl"
    code, out, err = cli(*BATCH, "--journal", path)
    assert code == 2 and out == "" and calls == []
    assert f"{path}: --journal: " in err and "cannot make the folder" not in err
    assert (tmp_path / "a.json").read_text() == "{}"


# --- bug 3: an interrupted answer has its largest size's note ----------------------------------------------------

def test_interrupted_json_note_is_the_finished_answers(monkeypatch):
    """Batches up to 96 fit, Ctrl-C at 112 (after 128 did not fit, 96 did): the interrupted object's note
    is the one a finished search answering 96 gives (it was null; null means no size fits)."""
    calls: list[int] = []
    fake_probes(monkeypatch, 96, calls)
    code, out, _ = cli(*BATCH, "--json")
    finished = json.loads(out)
    assert code == 0 and finished["largest"] == 96 and finished["note"]

    fake_probes(monkeypatch, 96, calls, interrupt_at=112)
    code, out, _ = cli(*BATCH, "--json")
    answer = json.loads(out)
    assert code == 130 and answer["status"] == "interrupted" and answer["largest"] == 96
    assert answer["note"] == finished["note"]
    assert "--batch 96 --budget 100000000" in answer["note"]


def test_interrupted_before_any_fit_has_no_note(monkeypatch):
    calls: list[int] = []
    fake_probes(monkeypatch, 96, calls, interrupt_at=1)
    code, out, _ = cli(*BATCH, "--json")
    answer = json.loads(out)
    assert code == 130 and answer["largest"] is None and answer["note"] is None


def test_every_probe_field_has_a_check():
    """A field added to `Probe` without a check in `PROBE_FIELDS` would make every journal row it writes damage."""
    from dataclasses import fields

    from memsched.experiments.commands.max_batch import PROBE_FIELDS, Probe

    assert {f.name for f in fields(Probe)} == set(PROBE_FIELDS)

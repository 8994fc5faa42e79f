"""Review fixes: ``--option table_budget`` checked by the solver in the file's memory unit on the command line as in
Python; empty paths refused naming the argument (``memsched sweep ""``, `memsched.load("")`, ...); one default problem
for `run` (`execute._default_problem`) and one torch-threads pin (`sweep.instances.pinned_threads`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_file
from memsched.solvers.errors import InputError

import memsched

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _tiny_in(tmp_path: Path, unit: str) -> Path:
    """examples/tiny.json with its sizes declared in memory unit `unit`."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data.setdefault("meta", {}).setdefault("units", {})["memory"] = unit
    return write_file(tmp_path, f"t_{unit}.json", data)


# --------------------------------------------------------------------------- 1. table_budget in the file's unit
@pytest.mark.parametrize("unit", ["kB", "MiB"])
@pytest.mark.parametrize("value", ["0", "abc"])
def test_cli_refuses_table_budget_in_the_files_unit_as_python_does(tmp_path, unit, value):
    path = _tiny_in(tmp_path, unit)
    res = run_cli("solve", path, "--budget", "20", "--option", f"table_budget={value}")
    assert res.code == 2
    with pytest.raises(InputError) as err:
        memsched.solve(str(path), 20, table_budget=0 if value == "0" else value)
    python = str(err.value)
    assert f"a number of {unit}" in python and "(at most 1 PiB)" in python
    assert f"error: --option {python}" in res.err  # the same text, the option spelt as on the command line


# --------------------------------------------------------------------------- 2. empty paths
def test_sweep_cli_refuses_an_empty_config_by_name():
    res = run_cli("sweep", "")
    assert res.code == 2
    assert "config: is empty" in res.err and "is a directory" not in res.err


@pytest.mark.parametrize("call, field", [
    (lambda: memsched.load(""), "path"),
    (lambda: memsched.solve("", "50%"), "instance"),
    (lambda: memsched.sweep("", ["50%"]), "target"),
    (lambda: memsched.simulate(str(EXAMPLES / "tiny.json"), ""), "schedule"),
    (lambda: memsched.simulate("", []), "instance"),
    (lambda: memsched.budget("", "50%"), "instance"),
])
def test_python_refuses_an_empty_path_naming_the_argument(call, field):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value).startswith(f"{field}: is empty, expected ")
    assert "is a directory" not in str(err.value)


# --------------------------------------------------------------------------- 3. one default problem, one pin
class _Named:
    """An object (your own network, say) whose ``str`` happens to be a join network's name."""

    def __str__(self) -> str:
        return "clip"


def test_only_a_name_names_a_join_network():
    from memsched.api import _early_release_problem
    from memsched.execute import _default_problem

    assert _default_problem("clip", None, None) == "join"
    assert _default_problem(_Named(), None, None) == "chain"
    assert _default_problem(_Named(), None, "1GB/s") == "offload"
    _early_release_problem(_Named(), None, None)  # a chain: accepted
    with pytest.raises(InputError, match="not to join"):
        _early_release_problem("clip", None, None)


def test_pinned_threads_of_none_leaves_torch_alone():
    torch = pytest.importorskip("torch")
    from memsched.experiments.sweep.instances import pinned_threads

    before = torch.get_num_threads()
    with pinned_threads(None):
        assert torch.get_num_threads() == before
    with pinned_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before

"""The facade's rough edges and notebook 04's prose (hunt 43):

1. notebook 04 says which unit each column of its tables is in, and names only columns the tables show
   (not ``budget``; ``lower_bound`` is a time, as the objective, not a size);
2. notebook 04 no longer says pofo's DP takes "a second or more" a budget on a profiled network (about
   0.3 s on the default chain): the offloading curve's budget count is justified by what it costs;
3. `memsched.ScheduledChain` / `ScheduledGraph` given no model name the argument as Python spells it
   (``model``), as `memsched.run` and `memsched.profile` do, not the command line's ``MODEL``;
4. ``RunResult[key]`` for an item the run lacks is an `InputError` naming ``key`` that is also a
   `KeyError`, as ``Comparison[name]`` is;
5. `memsched.sweep(..., progress=True)` draws a bar over the cells (instance sweeps and sweep files),
   as ``memsched sweep`` does, instead of blaming the solver for an unknown option ``progress``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import memsched
from memsched import InputError

#: the notebook of the checkout memsched is imported from (its solvers/data/examples are two levels below it)
NOTEBOOK = Path(memsched.data_path("examples")).resolve().parents[2] / "notebooks" / "04_interactive_explorer.ipynb"


def _cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]]


def _table_columns(cells: list[str]) -> list[str]:
    """The columns notebook 04's ``table()`` shows (its ``columns = [...]`` list)."""
    code = next(c for c in cells if "def table(" in c)
    match = re.search(r"def table\(.*?\n\s+columns = (\[.*?\])", code, re.S)
    assert match, "table() lists its columns"
    return list(ast.literal_eval(match.group(1)))


def test_notebook_04_names_only_the_tables_columns_each_in_its_unit():
    from memsched.results import ROW_COLUMNS

    cells = _cells()
    columns = _table_columns(cells)
    intro = cells[0]
    named = set(re.findall(r"`([a-z_]+)`", intro)) & set(ROW_COLUMNS)
    assert named and named <= set(columns), f"the intro names columns the tables lack: {named - set(columns)}"
    clause = next(part for part in re.split(r"[;.]\s", intro) if "`lower_bound`" in part)
    assert "time" in clause, f"lower_bound is a time (the objective's unit), not a size: {clause!r}"


def test_notebook_04_states_pofo_s_real_cost_per_budget():
    text = "\n".join(_cells())
    for stale in ("a\nsecond or more per budget", "second or more per budget", "takes seconds a budget"):
        assert stale not in text
    code = next(c for c in _cells() if "OFFLOAD_FRACTIONS =" in c)
    count = int(re.search(r"OFFLOAD_FRACTIONS = np\.linspace\([^,]+,[^,]+,\s*(\d+)\)", code).group(1))
    prose = next(c for c in _cells() if c.startswith("## 2. Offloading"))
    assert f"drawn on {count} budgets" in prose


def _refused(make) -> InputError:
    with pytest.raises(InputError) as err:
        make()
    return err.value


def test_trainers_name_the_model_argument_as_python_spells_it():
    import torch
    from memsched.models.network import checked_blocks
    from memsched.solvers.errors import flag
    from torch import nn

    x = torch.zeros(2, 3)
    for make in (lambda: memsched.ScheduledChain(3, None), lambda: memsched.ScheduledChain([], None),
                 lambda: memsched.ScheduledChain([nn.Linear(3, 3), 3], None),
                 lambda: memsched.ScheduledGraph(3, None, example_input=x),
                 lambda: memsched.ScheduledGraph([], None, example_input=x)):
        err = _refused(make)
        assert err.field == "model" and str(err).startswith("model: "), str(err)
    assert flag("time_limit") == "--time-limit"  # the spelling is the command line's again afterwards
    assert _refused(lambda: checked_blocks(3, "run")).field == "MODEL"  # the command line's checks: unchanged


def test_a_run_s_missing_item_is_input_error_and_key_error():
    run = memsched.RunResult({"model": "m", "solver": "rotor", "status": "optimal"})
    assert run["model"] == "m" and "solver" in run and "nope" not in run
    err = _refused(lambda: run["nope"])
    assert isinstance(err, KeyError) and err.field == "key"
    assert str(err).startswith("key: no item 'nope' in this run") and "model, solver, status" in str(err)
    with pytest.raises(KeyError):  # dict-style code keeps working
        run["nope"]
    with pytest.raises(AttributeError):
        run.nope  # noqa: B018


def test_an_instance_sweep_draws_a_bar_over_its_cells(capsys):
    chain = memsched.data_path("examples", "cnn12.json")
    quiet = memsched.sweep(chain, budgets=["50%", "80%"], solvers=["rotor", "periodic"]).to_pandas()
    assert capsys.readouterr().err == ""  # off by default, as memsched.solve's progress
    shown = memsched.sweep(chain, budgets=["50%", "80%"], solvers=["rotor", "periodic"], progress=True).to_pandas()
    err = capsys.readouterr().err
    assert "4/4" in err and "run" in err and "80% periodic" in err, err
    columns = ["solver", "budget", "status", "objective"]
    assert shown[columns].equals(quiet[columns])  # the bar changes nothing else
    refused = _refused(lambda: memsched.sweep(chain, budgets=["50%"], solvers=["rotor"], progress="yes"))
    assert refused.field == "progress" and "True or False" in str(refused)


def test_a_sweep_file_draws_the_engine_s_bar(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nbudgets = ["60%", "100%"]\n[[instances]]\nexample = "tiny"\n'
                      '[[solvers]]\nname = "rotor"\n')
    sw = memsched.sweep(config, output=tmp_path / "out", progress=True)
    assert len(sw) == 2 and "2/2" in capsys.readouterr().err
    refused = _refused(lambda: memsched.sweep(config, output=tmp_path / "out", progress=1))
    assert refused.field == "progress"

"""The facade's errors name arguments as Python spells them (``time_limit``, the keyword option
``scale``, ``solver='rotor'``), the command line's as it does (``--time-limit``, ``--option
scale``, ``--solver rotor``): one check, its spelling a parameter (`solvers.errors.flag`,
`option_field`, `python_spelling`)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXAMPLES, ROOT
from memsched.solvers import registry
from memsched.solvers.errors import flag, option_field, python_spelling

import memsched

CNN12 = EXAMPLES / "cnn12.json"
JOIN = ROOT / "solvers" / "data" / "join" / "tiny.json"
GRAPH = ROOT / "solvers" / "data" / "graphs" / "linear10.json"


def python_error(call: Any) -> memsched.InputError:
    """The `InputError` of `call()`: one line, no command-line spelling (``--``) in it."""
    with pytest.raises(memsched.InputError) as err:
        call()
    text = str(err.value)
    assert "--" not in text and len(text.splitlines()) == 1, text
    return err.value


def test_flag_and_option_field_spell_for_the_caller():
    assert (flag("time_limit"), flag("slots", 500), option_field("scale"), option_field("segments", 4)) == \
        ("--time-limit", "--slots 500", "--option scale", "--option segments=4")
    with python_spelling():
        assert (flag("time_limit"), flag("slots", 500), option_field("scale"), option_field("segments", 4)) == \
            ("time_limit", "slots=500", "scale", "segments=4")
    assert flag("time_limit") == "--time-limit"  # back to the command line's after the block


# ---------------------------------------------------------------- the solvers' own option checks
@pytest.mark.parametrize("target, kwargs, field", [
    (CNN12, {"solver": "periodic", "segments": 10**5}, "segments"),                  # chain.baselines
    (CNN12, {"solver": "cpsat", "bandwidth": "1GB/s", "scale": 1e14}, "scale"),     # offload.cpsat
    (CNN12, {"solver": "vdnn", "bandwidth": "1GB/s", "lookahead": 0}, "lookahead"),  # offload.baselines
    (CNN12, {"solver": "cpsat", "parameters": "no_such:1"}, "parameters"),          # exact.cpsat_runner
    (JOIN, {"solver": "cpsat", "orders": [[0, 0]]}, "orders"),                       # join.cpsat
    (GRAPH, {"solver": "checkmate-approx", "seed": -1}, "seed"),                     # graph.lp_bounds
])
def test_solver_option_errors_name_the_keyword(target, kwargs, field):
    err = python_error(lambda: memsched.solve(target, "80%", **kwargs))
    assert err.field == field and str(err).startswith(f"{field}: ")


def test_facade_type_checks_name_the_keyword():
    err = python_error(lambda: memsched.solve(CNN12, "80%", solver="milp", warm_start="x"))
    assert err.field == "warm_start"


def test_time_limit_is_named_as_in_python():
    err = python_error(lambda: memsched.solve(CNN12, "80%", solver="rotor", time_limit=-1))
    assert err.field == "time_limit"


def test_solver_names_and_hints_are_spelled_as_in_python():
    err = python_error(lambda: memsched.solve(CNN12, "80%", solver="nope"))
    assert err.field == "solver"
    err = python_error(lambda: memsched.solve(CNN12, "80%", solver="revolve"))  # heterogeneous: rotor instead
    assert err.field == "solver" and "solver='rotor'" in str(err)
    rows = memsched.sweep(CNN12, budgets=["80%"], solvers=["revolve"]).to_pandas()
    assert rows["status"].tolist() == ["unsupported"] and "--" not in rows["message"][0]


def test_slots_are_named_as_in_python():
    from memsched.solvers.chain.generate import random_chain

    chain = random_chain(40, 1, size_range=(10**6, 10**7))  # exact sizes: too large a rotor table
    err = python_error(lambda: memsched.solve(chain, "50%", solver="rotor", slots=0))
    assert err.field == "slots" and "slots=500" in str(err)


# ---------------------------------------------------------------- the command line keeps its spelling
def test_the_command_line_keeps_its_spelling(cli):
    python_error(lambda: memsched.solve(CNN12, "80%", solver="periodic", segments=10**5))
    res = cli("solve", CNN12, "--budget", "80%", "--solver", "periodic", "--option", "segments=100000")
    assert res.code == 2 and "--option segments:" in res.err, res.err
    res = cli("solve", CNN12, "--budget", "80%", "--solver", "revolve")
    assert res.code == 2 and "--solver: " in res.err and "--solver rotor" in res.err, res.err
    with pytest.raises(memsched.InputError) as err:  # outside the facade: the command line's spelling
        registry.solve("chain", memsched.load(CNN12), "periodic", 10**9, segments=10**5)
    assert err.value.field == "--option segments"


# ---------------------------------------------------------------- the PyTorch side
def test_zoo_sizes_are_named_as_in_python():
    pytest.importorskip("torch")
    err = python_error(lambda: memsched.profile("gpt2", image_size=16))
    assert err.field == "image_size" and "takes no image_size" in str(err)
    err = python_error(lambda: memsched.profile("resnet18", seq_len=8))
    assert err.field == "seq_len"
    from memsched.models.zoo import build_model

    with pytest.raises(memsched.InputError, match="--image-size"):  # called directly: the command line's
        build_model("gpt2", image_size=16)

"""H-Revolve's Python input checks and the docs of its operation spellings.

- `HRevolveInstance` stores the chain length l as an int (3.0 -> 3, so `solve_hrevolve` runs);
  `hrevolve`, `hrevolve_tables` and `simulate_hrevolve` refuse an l that is not a whole number >= 0
  (negative, 2.5, a bool, NaN) with an `InputError` naming ``l``, not an IndexError / TypeError
  from deep in the DP; a level's slots = math.inf or NaN is the `InputError` its message describes
  (None is the spelling of unlimited), not an OverflowError.
- docs/offload.md does not claim the page ends with H-Revolve; docs/cli.md and the command's help
  spell the printed ops as the text output writes them (``Fbar``, not ``B``) and the JSON kinds.

The docs are read from the tree of the imported package, so the test checks the tree under test.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import memsched.solvers as solvers_pkg
import numpy as np
import pytest
from conftest import run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.offload.hrevolve import (
    HRevolveInstance,
    hrevolve,
    hrevolve_cost,
    hrevolve_tables,
    simulate_hrevolve,
    solve_hrevolve,
)

DOCS = Path(solvers_pkg.__file__).resolve().parent.parent / "docs"
ONE = ((1, 0, 0),)


def test_instance_length_is_stored_as_int_and_solves():
    inst = HRevolveInstance(3.0, ONE)  # type: ignore[arg-type]  # an integral float, as before
    assert inst.length == 3 and type(inst.length) is int
    res = solve_hrevolve(inst)
    assert res.objective == solve_hrevolve(HRevolveInstance(3, ONE)).objective == 10.0
    assert type(HRevolveInstance(np.int64(4), ONE).length) is int  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 2.5, True, math.nan, math.inf, "3", None])
def test_instance_refuses_a_bad_length(bad):
    with pytest.raises(InputError) as err:
        HRevolveInstance(bad, ONE)
    assert err.value.field == "length" and "non-negative integer" in str(err.value)


@pytest.mark.parametrize("bad", [-1, 2.5, True, False, math.nan, -math.inf])
@pytest.mark.parametrize("fn", [hrevolve, hrevolve_tables, hrevolve_cost], ids=lambda f: f.__name__)
def test_dp_refuses_a_bad_chain_length(fn, bad):
    with pytest.raises(InputError) as err:
        fn(bad, [(1, 0, 0)])
    assert err.value.field == "l" and "non-negative integer" in str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_simulator_refuses_a_bad_chain_length():
    with pytest.raises(InputError, match="non-negative integer"):
        simulate_hrevolve(-1, [(1, 0, 0)], [])  # was "valid" (no backward step to run)


@pytest.mark.parametrize("slots", [math.inf, math.nan, -1, 1.5, True])
def test_bad_slots_are_the_described_value_error(slots):
    with pytest.raises(InputError, match=r"level 1: slots must be a non-negative integer or None") as err:
        HRevolveInstance(3, ((1, 0, 0), (slots, 1, 1)))
    assert err.value.field == "level 1"
    with pytest.raises(ValueError, match="slots"):
        hrevolve(3, [(1, 0, 0), (slots, 1, 1)])


def test_valid_inputs_still_work():
    cost, ops = hrevolve(3.0, [(1.0, 0, 0), (None, 2, 3)])  # type: ignore[arg-type]
    assert (cost, ops) == hrevolve(np.int64(3), [(np.int64(1), 0, 0), (None, 2, 3)])  # type: ignore[arg-type]
    assert simulate_hrevolve(3, [(1, 0, 0), (None, 2, 3)], ops).cost == cost
    assert hrevolve(0, [(0, 0, 0)], 1, 2)[0] == 2
    assert hrevolve_tables(5, [(2, 0, 0)]).optimum == hrevolve_cost(5, [(2, 0, 0)])
    assert HRevolveInstance(2, ((None, 1, 1),)).levels[0].slots is None
    assert solve_hrevolve(HRevolveInstance(5, ((1, 0, 0), (None, 2, 3))), budget=2).status == "optimal"
    with pytest.raises(InputError) as err:
        solve_hrevolve(HRevolveInstance(5, ((1, 0, 0),)), budget=math.inf)  # was an OverflowError
    assert err.value.field == "budget"


# --- docs ----------------------------------------------------------------------------------------

ARGS = ("hrevolve", "5", "--level", "1,0,0", "--level", "inf,2,3")
TEXT_OP = re.compile(r"F\d+|Fbar\d+|[WRD]\^\d+\(x\d+\)")


def _cli_section() -> str:
    text = (DOCS / "cli.md").read_text()
    return text.split("## `memsched hrevolve`", 1)[1].split("\n## ", 1)[0]


def test_cli_docs_spell_the_ops_as_printed():
    res = run_cli(*ARGS)
    assert res.code == 0, res.err
    sched = next(line for line in res.out.splitlines() if line.startswith("schedule"))
    ops = sched.split()[1:]
    assert ops and all(TEXT_OP.fullmatch(op) for op in ops), ops
    assert "Fbar6" in ops and not any(op.startswith("B") for op in ops)
    kinds = {op[0] for op in run_cli(*ARGS, "--json").json()["schedule"]["ops"]}
    assert kinds == {"F", "B", "W", "R", "D"}
    section = _cli_section()
    assert "Fbar" in section and "F, B, W, R, D (its first" not in section
    # the documented example is the real output's beginning
    example = re.search(r"`(W\^1\(x0\) F1 [^`]*?) \.\.\. ", section)
    assert example and sched.split(None, 1)[1].startswith(example.group(1))
    assert all(f'"{k}"' in section for k in "FBWRD")
    help_text = run_cli("hrevolve", "--help").out
    help_text = " ".join(help_text.split())
    assert "Fbar" in help_text and "(F, B, W, R, D;" not in help_text


def test_offload_page_does_not_claim_to_end_with_hrevolve():
    text = (DOCS / "offload.md").read_text()
    assert "The page ends\nwith H-Revolve" not in text and "page ends with H-Revolve" not in " ".join(text.split())
    headings = re.findall(r"^##+ (.*)$", text, flags=re.M)
    after = headings[next(i for i, h in enumerate(headings) if h.startswith("H-Revolve")) + 1:]
    assert after, "H-Revolve is the last section: the intro's claim would hold"
    intro = " ".join(text.split("## Notation", 1)[0].split())
    assert "H-Revolve" in intro and "follow" in intro

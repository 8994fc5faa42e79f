"""Session 41: messages built as "not a {problem} ..." read "not a offload schedule" for the offloading
problem; they now take the article the word needs (`solvers.errors.article`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.solvers.errors import InputError

import memsched

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_an_offload_schedule_of_the_wrong_form_is_named_with_its_article() -> None:
    with pytest.raises(InputError) as err:
        memsched.simulate(str(EXAMPLES / "tiny.json"), [("F_all", 0), ("Loss", 1)], bandwidth=1e9)
    assert "not an offload schedule: list" in str(err.value)
    assert err.value.field == "schedule"

"""The pipeline runner refuses a ``--memory`` below one byte before profiling (it solved with a budget of 0
bytes and reported the model infeasible, exit 1), as ``memsched partition`` refuses it."""
from __future__ import annotations

import pytest
from conftest import runner_args


@pytest.mark.torch
@pytest.mark.parametrize("memory", [0.5, 1e-300, 0.0, -3.0, float("nan")])
def test_memory_below_one_byte_is_refused(memory: float) -> None:
    from memsched.models.pipeline.runner import check_arguments
    from memsched.solvers.errors import InputError

    with pytest.raises(InputError) as info:
        check_arguments(runner_args(memory=memory))
    assert info.value.field == "--memory"


@pytest.mark.torch
def test_one_byte_and_more_pass_the_check() -> None:
    from memsched.models.pipeline.runner import check_arguments

    check_arguments(runner_args(memory=1.0))
    check_arguments(runner_args(memory=12345.5))

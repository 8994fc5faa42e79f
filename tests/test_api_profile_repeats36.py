"""`memsched.profile` refuses a `repeats` given with a counted cost model, as the CLI refuses
``--repeats`` there (nothing is timed, so the value would be ignored); left out it is 3."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from memsched.solvers.errors import InputError  # noqa: E402

import memsched  # noqa: E402


@pytest.mark.parametrize("repeats", [3, 5])
def test_repeats_with_a_counted_cost_is_refused(repeats: int) -> None:
    with pytest.raises(InputError) as caught:
        memsched.profile("resnet18", cost="flops", repeats=repeats, batch=2, image_size=32)
    assert caught.value.field == "repeats"


def test_repeats_left_out_with_a_counted_cost_profiles() -> None:
    chain = memsched.profile("resnet18", cost="flops", batch=2, image_size=32)
    assert chain.length >= 2


@pytest.mark.parametrize("repeats", [0, 10**4 + 1, 2.5])
def test_repeats_out_of_range_is_refused(repeats: object) -> None:
    with pytest.raises(InputError) as caught:
        memsched.profile("resnet18", repeats=repeats, batch=2, image_size=32)
    assert caught.value.field == "repeats"

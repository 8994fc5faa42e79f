"""A refused ``--option`` lists only the keys ``--option`` takes: never one the command sets with its own flag."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("key", ["memory_gb", "foo"])
def test_a_refused_pipeline_option_lists_no_flag_key(cli, examples, key):
    res = cli("partition", examples / "random10.json", "--devices", "3", "--memory", "1GB", "--solver", "cpsat",
              "--option", f"{key}=1")
    assert res.code == 2, res.err
    listed = set(res.err.strip().split("its options: ", 1)[1].rstrip(")").split(", "))
    assert "hint" in listed
    assert not listed & {"devices", "micro_batches", "schedule", "time_limit", "slots"}, listed

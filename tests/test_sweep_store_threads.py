"""The sweep's instance store keys a profiled network by the torch threads it was profiled with
(``[measure] threads``): a sweep rerun with other threads profiles again instead of resuming
with the other threads' profile; ids of default-thread entries (and of generated ones) stay."""
from __future__ import annotations

import hashlib
import json

from memsched.experiments.sweep.config import InstanceSpec
from memsched.experiments.sweep.instance_store import InstanceStore, spec_id

MODEL = InstanceSpec(0, "model", {"model": "lstm", "batch": 1, "seq_len": 3, "width": 4})
GENERATED = InstanceSpec(1, "generate", {"generate": "random_chain", "length": 5})


def old_id(spec: InstanceSpec) -> str:
    """The id before threads were part of it (what stores already written hold)."""
    ident = {"kind": spec.kind, "params": spec.params, "problem": spec.problem}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_default_threads_keep_the_ids_stores_hold():
    assert spec_id(MODEL) == spec_id(MODEL, 1) == old_id(MODEL)
    assert spec_id(GENERATED, 4) == old_id(GENERATED)


def test_other_threads_give_another_id():
    assert len({spec_id(MODEL, 1), spec_id(MODEL, 2), spec_id(MODEL, 3)}) == 3


def test_a_profile_stored_with_one_thread_is_not_reused_with_two(tmp_path):
    store = InstanceStore(tmp_path / "instances")
    store.put(MODEL, b'{"format": "memsched.chain/1"}\n', label="lstm", problem="chain", source="profile",
              built=True, threads=1)
    assert store.built(MODEL, threads=1) is not None
    assert store.built(MODEL, threads=2) is None
    again = InstanceStore(tmp_path / "instances")  # read back from the index file
    assert again.built(MODEL) is not None and again.built(MODEL, threads=2) is None

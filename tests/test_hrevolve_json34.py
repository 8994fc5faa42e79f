"""`memsched hrevolve --json` prints every key docs/cli.md lists for it, with or without a
schedule: the instance's keys always, the schedule's keys null when there is none."""

from __future__ import annotations

import json

from conftest import run_cli

INSTANCE_KEYS = {"length", "levels", "u_f", "u_b"}
SCHEDULE_KEYS = {"peak_slots", "counts", "orders_tried", "orders", "schedule"}


def test_infeasible_hierarchy_keeps_the_documented_keys():
    res = run_cli("hrevolve", "5", "--level", "0,0,0", "--level", "0,2,2", "--uf", "2", "--json")
    assert res.code == 1, res.err
    doc = json.loads(res.out)
    assert doc["status"] == "infeasible"
    assert INSTANCE_KEYS | SCHEDULE_KEYS <= doc.keys()
    assert (doc["length"], doc["levels"], doc["u_f"], doc["u_b"]) == (5, [[0, 0.0, 0.0], [0, 2.0, 2.0]], 2.0, 1.0)
    assert all(doc[k] is None for k in SCHEDULE_KEYS)


def test_feasible_answer_has_the_same_keys():
    res = run_cli("hrevolve", "3", "--level", "1,0,0", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert INSTANCE_KEYS | SCHEDULE_KEYS <= doc.keys()
    assert doc["length"] == 3 and doc["orders"] == 1 and doc["schedule"] is not None

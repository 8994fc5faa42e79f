"""Comparing two runs of an executed sweep (`experiments.sweep.compare_tables`): the measured columns an executed
cell adds (time spread, the independent peak, the load) change from run to run, so they are ignored as the
measured time and peak are; the deterministic ones (predicted peak, status, objective) are still compared."""

from __future__ import annotations

import pandas as pd
from memsched.experiments.sweep import VOLATILE_COLUMNS, compare_tables

MEASURED = ("measured_time_ms", "measured_peak", "memory_ratio", "time_ratio", "independent_peak",
            "independent_ratio", "time_ms_min", "time_ms_q1", "time_ms_q3", "time_ms_max", "time_ratio_min",
            "time_ratio_max", "load_1min")


def _row(scale: float) -> dict[str, object]:
    row: dict[str, object] = {"key": "k1", "status": "optimal", "objective": 12.5, "predicted_peak": 1000.0}
    row.update({c: scale * (i + 1) for i, c in enumerate(MEASURED)})
    return row


def test_measured_columns_of_an_executed_cell_are_volatile() -> None:
    assert set(MEASURED) <= set(VOLATILE_COLUMNS)
    a, b = pd.DataFrame([_row(1.0)]), pd.DataFrame([_row(1.3)])
    na, nb = compare_tables(a, b)
    assert na.equals(nb)


def test_a_deterministic_column_still_differs() -> None:
    changed = _row(1.0) | {"predicted_peak": 1001.0}
    na, nb = compare_tables(pd.DataFrame([_row(1.0)]), pd.DataFrame([changed]))
    assert not na.equals(nb)

"""`Comparison._repr_html_` (Jupyter's table of a comparison) gives peaks in the instance's memory
unit, scaled as the single results' summaries show them, and missing values as "–", never "None"."""
from __future__ import annotations

import re

from conftest import EXAMPLES

import memsched


def cells(html: str) -> list[str]:
    return re.findall(r"<td>([^<]*)</td>", html)


def test_peaks_are_sizes_and_missing_values_are_dashes():
    comparison = memsched.solve(EXAMPLES / "random10.json", "60%", ["rotor", "store-all"])
    rotor, store_all = comparison["rotor"], comparison["store-all"]
    assert rotor.found and not store_all.found
    row = cells(comparison._repr_html_())
    assert "None" not in row
    assert row[3].endswith("MiB") and str(rotor.peak_memory) not in row[3]  # 62.9 MiB, not 65991889
    assert row[7:9] == ["store-all", store_all.status]
    assert [row[i] for i in (9, 10, 11, 13)] == ["–"] * 4  # objective, peak, bound, ratio to best

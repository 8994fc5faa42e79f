"""A pipeline partition over its budget names the memory unit after the budget, as every other problem's
violation does (docs/cli.md, `simulate`'s JSON `violation`)."""
from __future__ import annotations

import json

from conftest import EXAMPLES, run_cli


def test_over_budget_names_bytes_after_the_budget(tmp_path) -> None:
    chain = str(EXAMPLES / "cnn12.json")
    part = run_cli("partition", chain, "--devices", "2", "--memory", "2GB", "--json")
    assert part.code == 0, part.err
    (tmp_path / "part.json").write_text(part.out)
    res = run_cli("simulate", chain, str(tmp_path / "part.json"), "--budget", "1000", "--json")
    violation = json.loads(res.out)["violation"]
    assert violation.endswith("> budget 1000 bytes"), violation
    assert violation.startswith("stage ") and "bytes per device" in violation

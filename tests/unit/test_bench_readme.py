"""docs/performance.md's speed table is the saved latest run's (`benchmarks/results/latest.json`),
as `make bench` prints it: a new run's results saved without the page, or its table edited by
hand, fail here."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.run import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_the_performance_page_table_is_the_latest_run() -> None:
    results = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())
    table = [line for line in markdown(results).splitlines() if line.startswith("|")]
    assert len(table) >= 2 + 4 * len(results["formats"])  # header, rule, four rows a format
    readme = (ROOT / "docs" / "performance.md").read_text().splitlines()
    at = readme.index(table[0])
    assert readme[at : at + len(table)] == table

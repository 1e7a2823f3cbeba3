"""`make bench`'s state-size line: the hour into the larger state against the smaller, judged
by the 1.5x target, and the sizes it takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import ROOT, report, state_summary


def _results(small_s: float, big_s: float) -> dict:
    runs = [
        {"rows": 1_000_000, "hour_s": small_s, "jvm_peak_mb": 2100},
        {"rows": 20_000_000, "hour_s": big_s, "jvm_peak_mb": 3900},
    ]
    return {"formats": {}, "state": state_summary(runs, 1_000_000)}


@pytest.mark.parametrize(("big_s", "said"), [(30.0, "1.5x (target <= 1.5x: met"),
                                             (45.0, "2.25x (target <= 1.5x: NOT met")])  # fmt: skip
def test_the_state_line_says_the_ratio_and_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], big_s: float, said: str
) -> None:
    report(_results(20.0, big_s), tmp_path)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("state:"))
    assert "into 1,000,000 rows 20.0 s" in line and f"into 20,000,000 rows {big_s} s" in line
    assert said in line and "JVM peak 3,900 MB" in line


def test_state_rows_take_two_sizes_or_none() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--state-rows", "1m"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode != 0 and "--state-rows two sizes like 1m,20m" in r.stderr

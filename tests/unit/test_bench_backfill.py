"""The day-of-backfill benchmark (benchmarks/backfill.py): its day's dumps hold every hour, its
pipeline reads them with no hour past the day scheduled, and its table sums each task's
instances as Airflow's API reported them (no run's task left out or counted twice)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.backfill import by_task, markdown, write_day, write_pipeline
from recon.config import load_config
from recon.layout import raw_hour_folder

START = datetime(2026, 3, 1, 5, tzinfo=UTC)


def test_the_day_has_a_dump_for_every_hour_and_its_pipeline_ends_with_it(tmp_path: Path) -> None:
    records = write_day(tmp_path, START, 4, txns=20)
    assert records > 4 * 20  # one to three changes a transaction
    for i in range(4):
        folder = raw_hour_folder(tmp_path / "raw", "day", START + timedelta(hours=i))
        assert list(folder.glob("part-*")), folder
    cfg = load_config(write_pipeline(tmp_path / "p", tmp_path, "wh", START, 4))
    assert cfg.start == START
    assert cfg.airflow.end_date == START + timedelta(hours=3)


def test_each_tasks_instances_are_summed_once() -> None:
    tasks = [
        {"run": r, "task": t, "state": "success", "seconds": s, "queued_to_start": q}
        for r, t, s, q in (
            ("a", "decode", 4.0, 0.5),
            ("b", "decode", 6.0, 1.5),
            ("c", "decode", 20.0, None),
            ("a", "merge_publish", 9.0, 0.0),
            ("b", "merge_publish", None, None),  # never ran: no duration
        )
    ]
    got = {t["task"]: t for t in by_task(tasks)}
    assert got["decode"] == {
        "task": "decode",
        "instances": 3,
        "median_seconds": 6.0,
        "total_seconds": 30.0,
        "median_queued_seconds": 1.0,
    }
    assert got["merge_publish"]["instances"] == 1 and got["merge_publish"]["total_seconds"] == 9.0
    result = {
        "hours": 3,
        "records": 3000,
        "by_task": list(got.values()),
        "airflow": {"wall_seconds": 90.0, "run_seconds": [30.0, 40.0, None]},
        "recon_run": {"wall_seconds": 30.0},
        "rows_equal": True,
    }
    text = markdown(result)
    assert "| decode | 3 | 6.0 | 30.0 | 77% | 1.0 |" in text
    assert "| merge_publish | 1 | 9.0 | 9.0 | 23% | 0.0 |" in text
    assert "(3.00x); rows equal: yes" in text and "a run's median 35.0 s" in text

"""The offset index: what earlier hours read, whole days from rollups that follow their folders."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recon.decode.input.offset_index import earlier_intervals
from recon.hours import parse_hour
from recon.layout import Layout, hour_text, replace_dir

START = parse_hour("2026-01-01T00")


def _decode(layout: Layout, i: int, lo: int, partitions: int = 2) -> None:
    """What a decode of hour i leaves: its folder replaced by a new one (`replace_dir`)."""
    hour = START + timedelta(hours=i)
    staging = layout.state / "_staging" / f"h{i}-{lo}"
    staging.mkdir(parents=True)
    rows = {
        "topic": ["t"] * partitions,
        "partition": pa.array(range(partitions), pa.int32()),
        "lo": [lo] * partitions,
        "hi": [lo + 9] * partitions,
    }
    pq.write_table(pa.table(rows), staging / "part-0.parquet")
    replace_dir(staging, layout.offsets(hour))


def _rows(layout: Layout, i: int) -> list[tuple[str, int, int, int, str]]:
    t = earlier_intervals(layout, START + timedelta(hours=i))
    return list(zip(*(t[c].to_pylist() for c in t.column_names), strict=True))


def _want(hours: dict[int, int], partitions: int = 2) -> list[tuple[str, int, int, int, str]]:
    return [
        ("t", p, lo, lo + 9, hour_text(START + timedelta(hours=i)))
        for i, lo in sorted(hours.items())
        for p in range(partitions)
    ]


def test_earlier_hours_are_read_whole_days_from_rollups_that_follow_the_folders(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path, "p")
    lo = {i: i * 10 for i in range(60)}  # two and a half days
    for i, x in lo.items():
        _decode(layout, i, x)
    rollups = layout.state / "offsets_by_day"

    assert _rows(layout, 0) == []
    assert _rows(layout, 5) == _want(
        {i: x for i, x in lo.items() if i < 5}
    )  # its own day: no rollup
    assert not rollups.exists()
    assert _rows(layout, 50) == _want({i: x for i, x in lo.items() if i < 50})
    assert sorted(p.name for p in rollups.iterdir()) == [
        "day=2026-01-01.parquet",
        "day=2026-01-02.parquet",
    ]

    # a rolled-up day is read from its rollup, not from its hour folders: a file changed in
    # place (which a decode never does: it replaces the folder) is not seen
    inside = layout.offsets(START + timedelta(hours=3)) / "part-0.parquet"
    stat = os.stat(inside.parent)
    pq.write_table(pq.read_table(inside).set_column(2, "lo", pa.array([999, 999])), inside)
    os.utime(inside.parent, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _rows(layout, 50) == _want({i: x for i, x in lo.items() if i < 50})

    # an hour of a rolled-up day decoded again: its new intervals, the day built again
    lo[3] = 5000
    _decode(layout, 3, lo[3])
    assert _rows(layout, 50) == _want({i: x for i, x in lo.items() if i < 50})
    # an hour gone (its folder deleted)
    shutil.rmtree(layout.offsets(START + timedelta(hours=30)))
    del lo[30]
    assert _rows(layout, 50) == _want({i: x for i, x in lo.items() if i < 50})
    # a rollup that cannot be read is built again
    (rollups / "day=2026-01-02.parquet").write_bytes(b"not parquet")
    assert _rows(layout, 50) == _want({i: x for i, x in lo.items() if i < 50})
    # later hours see the hours before them only
    assert _rows(layout, 24) == _want({i: x for i, x in lo.items() if i < 24})
    assert _rows(layout, 59) == _want({i: x for i, x in lo.items() if i < 59})


def test_an_hour_with_other_partitions_and_an_empty_hour(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "p")
    _decode(layout, 0, 0, partitions=3)
    layout.offsets(START + timedelta(hours=1)).mkdir(parents=True)  # decoded, nothing read
    _decode(layout, 2, 100, partitions=1)
    got = _rows(layout, 30)
    assert got == [*_want({0: 0}, partitions=3), *_want({2: 100}, partitions=1)]
    assert _rows(layout, 30) == got  # and again from the rollup

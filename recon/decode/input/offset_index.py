"""Which offsets earlier hours read: for the decode's cross-hour dedupe and the audit's offset
gaps, at a cost that does not grow hour by hour with the pipeline's age.

Each decoded hour writes its offset intervals to `_state/p/offsets/hour=H/` (a row per Kafka
partition, more when the hour has gaps). Reading every earlier hour's folder made each hour
pay for all the hours before it (2,000 hours of history: 5-9 s of Spark in every decode, 1.2 s
in every audit). Whole days before the hour's own are read from a rollup instead,
`_state/p/offsets_by_day/day=YYYY-MM-DD.parquet`: the rows of the day's hours, each with its
hour, and in the file's metadata each hour folder's identity (inode and modification time; a
decode of the hour again replaces its folder, which changes both). A rollup whose identities
do not match the folders is built again from them, and saved only when no folder changed while
it was read. The folders stay the truth: a rollup can be deleted at any time.

`recon expire` (`retention_hours`) folds the hour folders before its window into one file,
`_state/p/offsets_expired.parquet`: per partition the runs those hours read, adjacent runs
joined, each labelled with the newest hour in it. A later hour still finds a replay or a gap
against them; what it cannot do is compare the content of a record at such an offset (the
hours' content hashes are gone with them): it counts as read before, as in hours decoded
before hashes were kept.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recon.layout import Layout, hour_text

INTERVALS = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("lo", pa.int64()), ("hi", pa.int64())]
)
"""An hour folder's files: one row per run of consecutive offsets of a Kafka partition."""
SCHEMA = INTERVALS.append(pa.field("hour", pa.string()))
"""The index's rows: the intervals with the hour that read them."""
_IDS = b"recon.hour_folders"


def _identity(folder: Path) -> str | None:
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return None
    return f"{st.st_ino}:{st.st_mtime_ns}"


def hour_intervals(folder: Path, hour: str) -> pa.Table:
    """One hour folder's intervals, with its hour (no rows when it has no files)."""
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return SCHEMA.empty_table()
    t = pq.read_table(files, columns=INTERVALS.names)
    t = t.append_column("hour", pa.array([hour] * t.num_rows, pa.string()))
    return t.cast(SCHEMA)


def _hour_folders(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    with os.scandir(root) as it:
        return {
            e.name.split("=", 1)[1]: Path(e.path)
            for e in it
            if e.name.startswith("hour=") and e.is_dir()
        }


def _day(layout: Layout, day: str, folders: dict[str, Path]) -> pa.Table:
    """The intervals of one day's hours, from its rollup when that still matches the folders."""
    ids = {h: _identity(f) for h, f in sorted(folders.items())}
    ids = {h: i for h, i in ids.items() if i is not None}
    rollup = layout.state / "offsets_by_day" / f"day={day}.parquet"
    if rollup.is_file():
        try:
            t = pq.read_table(rollup)
            meta = t.schema.metadata or {}
            if json.loads(meta.get(_IDS, b"{}")) == ids:
                return t.replace_schema_metadata(None).cast(SCHEMA)
        except (OSError, ValueError, pa.ArrowException):
            pass  # unreadable or from another version: built again below
    parts = [hour_intervals(folders[h], h) for h in ids]
    t = pa.concat_tables([SCHEMA.empty_table(), *parts])
    again = {h: _identity(folders[h]) for h in ids}
    if again == ids:  # no hour of the day was decoded again meanwhile: save it
        rollup.parent.mkdir(parents=True, exist_ok=True)
        tmp = rollup.with_name(f".{rollup.name}.{uuid.uuid4().hex}.tmp")
        pq.write_table(t.replace_schema_metadata({_IDS: json.dumps(ids).encode()}), tmp)
        os.replace(tmp, rollup)
    return t


def acknowledged_at(layout: Layout, hour: datetime | str) -> dict[tuple[str, int], str]:
    """Per (topic, partition), the hour of the newest offset reset acknowledged at or before
    `hour` (`recon acknowledge-reset`): from that hour on, the partition's offsets are a new
    sequence, and what hours before it read is not compared with them."""
    path = layout.acknowledged_resets
    if not path.is_file():
        return {}
    H = hour if isinstance(hour, str) else hour_text(hour)
    out: dict[tuple[str, int], str] = {}
    for a in json.loads(path.read_text(encoding="utf-8")).get("resets", []):
        key = (str(a["topic"]), int(a["partition"]))
        if a["hour"] <= H and a["hour"] > out.get(key, ""):
            out[key] = a["hour"]
    return out


def earlier_intervals(layout: Layout, hour: datetime) -> pa.Table:
    """The offset intervals every hour before `hour` read (topic, partition, lo, hi, hour), in
    hour order: whole days from their rollups, the hour's own day from its hour folders; less
    those of a partition read before the offset reset acknowledged for it (`acknowledged_at`)."""
    return _before_resets_dropped(_earlier_intervals(layout, hour), acknowledged_at(layout, hour))


def _before_resets_dropped(t: pa.Table, acks: dict[tuple[str, int], str]) -> pa.Table:
    """`t` less the runs of a partition read before the reset acknowledged for it (`acks`:
    `acknowledged_at`)."""
    if not acks or not t.num_rows:
        return t
    old = None
    for (topic, part), at in acks.items():
        m = pc.and_(
            pc.and_(pc.equal(t["topic"], topic), pc.equal(t["partition"], part)),
            pc.less(t["hour"], at),
        )
        old = m if old is None else pc.or_(old, m)
    return t.filter(pc.invert(old))


def _earlier_intervals(layout: Layout, hour: datetime) -> pa.Table:
    H = hour_text(hour)
    expired = _read_expired(layout)
    parts = [expired.filter(pc.less(expired["hour"], H))] if expired.num_rows else []
    folders = {h: f for h, f in _hour_folders(layout.offsets_root).items() if h < H}
    by_day: dict[str, dict[str, Path]] = {}
    for h, f in folders.items():
        by_day.setdefault(h[:10], {})[h] = f
    for day, hours in sorted(by_day.items()):
        if day < H[:10]:
            parts.append(_day(layout, day, hours))
        else:
            parts.extend(hour_intervals(f, h) for h, f in sorted(hours.items()))
    return pa.concat_tables([SCHEMA.empty_table(), *parts])


def _expired_file(layout: Layout) -> Path:
    return layout.state / "offsets_expired.parquet"


def _read_expired(layout: Layout) -> pa.Table:
    f = _expired_file(layout)
    return pq.read_table(f).cast(SCHEMA) if f.is_file() else SCHEMA.empty_table()


def coalesce(t: pa.Table) -> pa.Table:
    """Per (topic, partition) the union of the runs of `t`, overlapping and adjacent ones
    joined, each labelled with the newest hour among its parts."""
    runs: list[list[Any]] = []  # [topic, partition, lo, hi, hour]
    srt = t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("lo", "ascending")])
    for topic, part, lo, hi, hour in zip(*(srt[c].to_pylist() for c in SCHEMA.names), strict=True):
        last = runs[-1] if runs else None
        if last is not None and last[:2] == [topic, part] and lo <= last[3] + 1:
            last[3], last[4] = max(last[3], hi), max(last[4], hour)
        else:
            runs.append([topic, part, lo, hi, hour])
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in runs], SCHEMA)


def expire_intervals(layout: Layout, cutoff: str) -> int:
    """Fold the hour folders before `cutoff` into the expired runs (see the module's
    docstring) and delete them and the day rollups wholly before it; returns the folders
    deleted. The runs of a partition read before an offset reset acknowledged at or before
    the cutoff are dropped, not folded (later hours never compare with them). The file is
    replaced before any folder is deleted: killed in between, the runs are there twice."""
    old = {h: f for h, f in _hour_folders(layout.offsets_root).items() if h < cutoff}
    if not old:
        return 0
    t = pa.concat_tables(
        [_read_expired(layout), *(hour_intervals(f, h) for h, f in sorted(old.items()))]
    )
    t = _before_resets_dropped(t, acknowledged_at(layout, cutoff))
    target = _expired_file(layout)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(coalesce(t), tmp)
    os.replace(tmp, target)
    for f in old.values():
        shutil.rmtree(f)
    rollups = layout.state / "offsets_by_day"
    for r in sorted(rollups.glob("day=*.parquet")) if rollups.is_dir() else []:
        if r.stem.removeprefix("day=") < cutoff[:10]:
            r.unlink()
    return len(old)

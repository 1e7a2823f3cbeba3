"""A decode task's summary of its output (`recon.decode.summary.TaskSummary`), and the adding up
of several tasks' summaries the decode stage does (`summary_rows`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pyarrow.compute as pc
import pytest

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_raw
from recon.decode.summary import SUMMARY_COLUMNS, TaskSummary, summary_rows
from recon.demo import sample

H0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
TXNS = sample.workload(H0, 1, txns_per_hour=12, seed=5)


def _task(records: list[RawRecord], fmt: str) -> list[dict[str, Any]]:
    """What a decode task of `records` writes as its summary (`write_task_files`)."""
    summary = TaskSummary()
    written = 0
    for batch in decode_raw(iter(records), fmt, DecodeContext(), shapes=True):
        kinds = batch.column("kind")
        for kind in pc.unique(kinds).to_pylist():
            part = batch.filter(pc.equal(kinds, kind))
            written += 0 if summary.add(kind, part) else part.num_rows
    assert written > 0
    return summary.rows()


def _key(r: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(r[c]) for c in (*SUMMARY_COLUMNS, "n", "ddl_seen", "newest"))


@pytest.mark.parametrize("fmt", ["dataworks_json", "debezium_json", "canal_json"])
def test_task_summaries_add_up_to_the_summary_of_all_the_records(fmt: str) -> None:
    records = sample.to_records(sample.ENCODERS[fmt](TXNS), "t")
    # partition 7 holds partition 0's records again (the same shapes), and each one garbage
    records += [replace(r, partition=7) for r in records if r.partition == 0]
    records += [RawRecord("t", p, 900, None, b"\x00not json", 1) for p in (0, 7)]
    records.sort(key=lambda r: (r.partition, r.offset))
    partitions = sorted({r.partition for r in records})
    tasks = [_task([r for r in records if r.partition == p], fmt) for p in partitions]
    whole = summary_rows(_task(records, fmt))
    added = summary_rows([row for task in tasks for row in task])
    assert sorted(map(_key, added)) == sorted(map(_key, whole))
    # two tasks counted some of the same groups: the same shape, the same reason
    shared = {_key(r)[:-3] for r in tasks[0]} & {_key(r)[:-3] for r in tasks[-1]}
    assert any(k[0] == "event" for k in shared) and any(k[0] == "quarantine" for k in shared)
    events = sum(r["n"] for r in whole if r["kind"] == "event")
    stats = {r["name"]: r["n"] for r in summary_rows(
        {**r, "topic": None, "partition": None} for r in whole if r["kind"] == "stat"
    )}  # fmt: skip
    assert stats["records_in"] == len(records) and events > 0


def test_task_files_hold_what_was_decoded_with_dictionaries_and_statistics_where_named(
    tmp_path: Any,
) -> None:
    """A decode task's event file reads back as the events decoded; only the columns named
    (`DICTIONARY_COLUMNS`, `STATISTICS_COLUMNS`, each a column of the file) are dictionary
    encoded or carry statistics: an image's values and the order key do not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from recon.decode.tasks.task_files import (
        DICTIONARY_COLUMNS,
        STATISTICS_COLUMNS,
        write_task_files,
    )

    records = sample.to_records(sample.ENCODERS["debezium_json"](TXNS), "t")
    records.sort(key=lambda r: (r.partition, r.offset))
    batches = list(decode_raw(iter(records), "debezium_json", DecodeContext(), shapes=True))
    (rows,) = write_task_files(batches, str(tmp_path))
    path = dict(zip(rows["kind"].to_pylist(), rows["path"].to_pylist(), strict=True))["event"]
    decoded = pa.Table.from_batches(batches)
    events = decoded.filter(pc.equal(decoded["kind"], "event")).drop_columns(["kind"])
    assert pq.read_table(path).equals(events) and events.num_rows > 0
    meta = pq.ParquetFile(path).metadata
    columns = {c.path_in_schema: c for c in map(meta.row_group(0).column, range(meta.num_columns))}
    assert set(DICTIONARY_COLUMNS) | set(STATISTICS_COLUMNS) <= set(columns)
    dictionary = {p for p, c in columns.items() if "RLE_DICTIONARY" in c.encodings}
    assert {"db", "op", "after.key_value.key"} <= dictionary <= set(DICTIONARY_COLUMNS)
    assert {p for p, c in columns.items() if c.is_stats_set} == set(STATISTICS_COLUMNS)

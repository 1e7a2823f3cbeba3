"""Hours of any size (issue 17): one hour of a few hundred MB of raw records, far more than the
768 MB heap it runs with could hold as a cache, decodes, merges and publishes a table equal, column
for column, to the source's final state; for Debezium JSON with schemas (as its JSON
converter writes by default) and for Tencent protobuf with envelopes cut into segments that
straddle dump files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recon.config import load_config
from recon.core.model import RawRecord
from recon.demo import sample
from recon.demo.demo import _comparable, _expected_rows, write_dump
from recon.publish.export import export_rows
from tests.support.builders import write_pipeline
from tests.support.bulk import bulk_workload

H0 = datetime(2026, 3, 2, 0, tzinfo=UTC)
# 768 MB: Spark keeps 300 MB for itself and gives 60% of the rest to execution and storage
# (about 280 MB), far less than the hour's 371 MB of messages; 512 MB passed alone but had no
# margin left when the machine was busy
SMALL_HEAP = json.dumps({"spark.driver.memory": "768m"})


def _recon(*args: str, spark_conf: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if spark_conf is not None:
        env["RECON_SPARK_CONF"] = spark_conf
    return subprocess.run(
        [sys.executable, "-m", "recon.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )


def _pipeline(tmp: Path, name: str, fmt: str, recs: list[RawRecord], hours: int) -> Path:
    hour_list = [H0 + timedelta(hours=i) for i in range(hours)]
    write_dump(tmp / "raw", name, recs, "parquet", hour_list, files_per_hour=4)
    tables = {"shop.orders": {"ddl": sample.CREATE_SQL}} if fmt == "tencent_dts_pb" else None
    return write_pipeline(
        tmp / f"{name}.yaml", name=name, format=fmt, start=H0, tables=tables, buckets=8
    )


@pytest.mark.parametrize(
    ("fmt", "encode", "changes"),
    [
        ("debezium_json", sample.encode_debezium, 220_000),  # ~370 MB of messages
        ("tencent_dts_pb", lambda t: sample.encode_tencent(t, segment_bytes=400), 100_000),
    ],
)
def test_an_hour_larger_than_the_heap_publishes_the_source_state(
    tmp_path: Path, fmt: str, encode: object, changes: int
) -> None:
    txns = bulk_workload(H0, changes, keys=40_000, seed=5)
    recs = sample.to_records(encode(txns), "big")  # type: ignore[operator]
    if fmt == "debezium_json":  # two Kafka partitions by key, offsets numbered per partition
        next_offset = [0, 0]
        for r in recs:
            r.partition = zlib.crc32(r.key or b"") % 2
            r.offset, next_offset[r.partition] = (
                next_offset[r.partition],
                next_offset[r.partition] + 1,
            )
    big = _pipeline(tmp_path / "one", "big", fmt, recs, 1)
    size = sum(f.stat().st_size for f in (tmp_path / "one" / "raw").rglob("*.parquet"))
    first = H0.strftime("%Y-%m-%dT%H")
    r = _recon("run", "--pipeline", str(big), "--from", first, spark_conf=SMALL_HEAP)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    one = [_comparable(row) for row in export_rows(load_config(big), "shop.orders")]
    # every column of every row equals the source's final state (what the same records spread
    # over smaller hours also give: the demo and the MariaDB tests check that per hour)
    expected = _expected_rows(sample.final_state(txns))
    assert len(one) > 10_000
    assert one == expected
    messages = sum(len(r.value or b"") for r in recs)
    print(
        f"{fmt}: {len(recs)} records, {messages / 1e6:.0f} MB of messages in {size / 1e6:.0f} MB of dumps"
    )

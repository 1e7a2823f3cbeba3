"""What the decode tasks read of a dump in place (`recon.decode.input.dump_input`) is what Spark reads
of it (`recon.decode.input.dumps._read_parquet`, the staging copy's source): the Kafka timestamp in
milliseconds, bit for bit (Spark's double arithmetic, which may come out a millisecond less),
and the content hash, Spark's `xxhash64` of key and value (hypothesis, against real Spark)."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from recon.decode.input.dump_input import (
    _INT96_SAFE_MICROS,
    _int96_timestamp,
    _raw_batch,
    content_hashes,
    open_dump,
    readable_in_place,
)
from recon.decode.input.dumps import KAFKA_PARQUET_SCHEMA, _read_parquet
from recon.rawdumps import list_hour

HOUR = datetime(2026, 11, 20, 0, tzinfo=UTC)
_BYTES = st.none() | st.binary(max_size=70)
_RANGE = {"ms": 253_402_300_799_999, "us": 253_402_300_799_999_999}  # Spark's years 1-9999


@settings(max_examples=15, deadline=None)
@given(
    unit=st.sampled_from(["ms", "us"]),
    data=st.data(),
)
def test_a_dump_read_in_place_has_sparks_timestamps_and_hashes(spark, unit: str, data) -> None:
    hi = _RANGE[unit]
    rows = data.draw(
        st.lists(
            st.tuples(_BYTES, _BYTES, st.integers(-hi // 2, hi) | st.none()),
            min_size=1,
            max_size=30,
        )
    )
    schema = KAFKA_PARQUET_SCHEMA.set(5, pa.field("timestamp", pa.timestamp(unit, tz="UTC")))
    n = len(rows)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "raw" / "t" / "dt=2026-11-20" / "hour=00"
        folder.mkdir(parents=True)
        cols = {f.name: pa.nulls(n, f.type) for f in schema}
        cols["key"] = pa.array([r[0] for r in rows], pa.binary())
        cols["value"] = pa.array([r[1] for r in rows], pa.binary())
        cols["timestamp"] = pa.array([r[2] for r in rows], schema.field("timestamp").type)
        cols["partition"] = pa.array([0] * n, pa.int32())
        cols["offset"] = pa.array(range(n), pa.int64())
        pq.write_table(pa.table(cols, schema=schema), folder / "part-0.parquet")
        hf = list_hour(Path(tmp) / "raw", "t", HOUR)
        read = _read_parquet(spark, hf).select(
            "offset", "ts_ms", F.xxhash64("key", "value").alias("h")
        )
        want = sorted((r["offset"], r["ts_ms"], r["h"]) for r in read.collect())
        batch = pq.read_table(folder / "part-0.parquet").to_batches()[0]
        raw = _raw_batch(batch, "t")
        hashes = content_hashes(raw.column("key"), raw.column("value")).to_pylist()
        offsets, ts = raw.column("offset").to_pylist(), raw.column("ts_ms").to_pylist()
        got = sorted(zip(offsets, ts, hashes, strict=True))
    assert got == want


@settings(max_examples=10, deadline=None)
@given(
    rows=st.lists(
        st.tuples(_BYTES, _BYTES, st.integers(_INT96_SAFE_MICROS, _RANGE["us"]) | st.none()),
        min_size=1,
        max_size=30,
    )
)
def test_a_dump_spark_wrote_with_int96_timestamps_is_read_in_place_as_spark_reads_it(
    spark, rows: list[tuple[bytes | None, bytes | None, int | None]]
) -> None:
    """Spark writes a timestamp as INT96 unless told otherwise (so does a dump of its Kafka
    source): such a dump is read in place, its times as Spark reads them."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "raw" / "t" / "dt=2026-11-20" / "hour=00"
        data = [(k, v, "t", 0, i, ts) for i, (k, v, ts) in enumerate(rows)]
        df = spark.createDataFrame(
            data, "key binary, value binary, topic string, partition int, offset long, us long"
        )
        df = df.select("*", F.timestamp_micros("us").alias("timestamp")).drop("us")
        conf = "spark.sql.parquet.outputTimestampType"
        ours = spark.conf.get(conf)  # TIMESTAMP_MICROS (`recon.sparkconf`); INT96: Spark's default
        spark.conf.set(conf, "INT96")
        try:
            df.coalesce(1).write.parquet(str(folder))
        finally:
            spark.conf.set(conf, ours)
        (path,) = folder.glob("part-*.parquet")
        pf = open_dump(str(path))
        assert _int96_timestamp(pf) and readable_in_place(pf.schema_arrow, int96=True)
        assert not readable_in_place(pf.schema_arrow)  # a time with no zone, not INT96: no
        hf = list_hour(Path(tmp) / "raw", "t", HOUR)
        want = sorted(
            tuple(r) for r in _read_parquet(spark, hf).select("offset", "ts_ms").collect()
        )
        raw = pa.Table.from_batches([_raw_batch(b, "t") for b in pf.iter_batches()])
        got = sorted(zip(raw["offset"].to_pylist(), raw["ts_ms"].to_pylist(), strict=True))
    assert got == want

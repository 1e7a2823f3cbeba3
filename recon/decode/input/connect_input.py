"""Kafka Connect S3 sink files as the Kafka source's records (`recon.rawdumps`, layout
`kafka-connect-s3`).

Each connector file `<topic>+<partition>+<startOffset>.<ext>` holds one partition's records in
offset order; a record's offset is the start offset plus its index in the file. The files keep
values only (no key, headers or Kafka timestamp): a record's timestamp is taken as the start of
its hour folder (the TimeBasedPartitioner put it there by a time in that hour), which is what the
audit ages open transactions by.

- `.avro` (AvroFormat with ByteArrayConverter): each record an Avro `bytes` value (or a union of
  null and bytes); any other value schema is refused with one line naming the file and schema.
- `.bin` / `.bin.gz` (ByteArrayFormat): values between `dump.separator`s (a line separator by
  default); an empty last piece is no record, and an empty value is read as a null one (a
  Kafka tombstone: the format cannot tell them apart, and no JSON format has an empty message).
- `.json` / `.json.gz` (JsonFormat): one value per line, its text as written.

A decode turns the hour's files into Parquet files of the Kafka source's schema under
`_state/<p>/connect/hour=H/` (`normalize`), a Spark task per few files, once per file version
(its size and modification time name the copy), and the decode reads those as it reads
Spark-Kafka dumps: in place, the offsets of overlapping files (the connector's re-deliveries)
counted as duplicates.
"""

from __future__ import annotations

import gzip
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recon.decode.input.dumps import KAFKA_PARQUET_SCHEMA
from recon.errors import ReconError
from recon.layout import Layout
from recon.rawdumps import BINARY_FORMATS, DumpConfig, HourFiles, connect_name

_BATCH = 50_000


class ConnectFileError(ReconError):
    """A connector file that cannot be read as records (one line: the file and why)."""


def avro_value_schema_ok(schema: Any) -> bool:
    """True for an Avro `bytes` schema, or a union of `null` and `bytes`."""
    if isinstance(schema, dict):
        return bool(schema.get("type") == "bytes" and not schema.get("logicalType"))
    if isinstance(schema, list):
        kinds = [avro_value_schema_ok(s) or s == "null" for s in schema]
        return all(kinds) and any(avro_value_schema_ok(s) for s in schema)
    return bool(schema == "bytes")


def _avro_values(path: Path) -> Iterator[bytes | None]:
    with open(path, "rb") as f:
        try:
            reader = fastavro.reader(f)
        except (ValueError, EOFError, OSError) as err:
            raise ConnectFileError(f"{path}: not an Avro file ({err})") from None
        if not avro_value_schema_ok(reader.writer_schema):
            raise ConnectFileError(
                f"{path}: its value schema is {reader.writer_schema!r}, not bytes; dump the "
                "topic with value.converter=org.apache.kafka.connect.converters."
                "ByteArrayConverter so each record is the message's own bytes"
            )
        try:
            yield from reader  # type: ignore[misc]
        except (ValueError, EOFError, OSError) as err:
            raise ConnectFileError(f"{path}: a damaged Avro block ({err})") from None


def _split_values(path: Path, separator: bytes) -> Iterator[bytes | None]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise ConnectFileError(f"{path}: cannot be read ({err})") from None
    pieces = data.split(separator)
    if pieces and pieces[-1] == b"":
        pieces.pop()
    for piece in pieces:
        yield piece or None


def file_values(path: Path, dump: DumpConfig) -> Iterator[bytes | None]:
    """The values of one connector file, in offset order."""
    if path.name.endswith(".avro"):
        yield from _avro_values(path)
    else:  # `.bin`, `.json` and their gzip: a value per separator (a line for JSON)
        yield from _split_values(path, dump.separator if ".bin" in path.name else b"\n")


def avro_records(path: Path, limit: int) -> int:
    """Records in an Avro file, from its blocks' counts (what sizing needs); `limit` when it
    cannot be read."""
    total = 0
    try:
        with open(path, "rb") as f:
            for block in fastavro.block_reader(f):
                total += block.num_records
                if total >= limit:
                    return limit
    except (ValueError, EOFError, OSError):
        return limit
    return total


def convert(src: Path, dst: Path, topic: str, hour: datetime, dump: DumpConfig) -> None:
    """One connector file as a Parquet dump of the Kafka source's schema, written whole or not
    at all (a temporary name, then a rename)."""
    found = connect_name(topic, src.name)
    if found is None:  # pragma: no cover - listed by `connect_name` already
        raise ConnectFileError(f"{src}: not named <topic>+<partition>+<offset>.<ext>")
    partition, start, _ = found
    ms = int(hour.timestamp() * 1000)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex[:8]}.tmp")
    f = KAFKA_PARQUET_SCHEMA.field
    try:  # a copy read once or twice and then kept for the quarantine's look-ups: no codec
        with pq.ParquetWriter(tmp, KAFKA_PARQUET_SCHEMA, compression="none") as w:
            for i, values in enumerate(_batches(file_values(src, dump))):
                n = len(values)
                first = start + i * _BATCH
                w.write_batch(
                    pa.record_batch(
                        [
                            pa.nulls(n, pa.binary()),
                            pa.array(values, pa.binary()),
                            pa.repeat(pa.scalar(topic, pa.string()), n),
                            pa.repeat(pa.scalar(partition, pa.int32()), n),
                            pa.array(np.arange(first, first + n, dtype=np.int64)),
                            pa.repeat(pa.scalar(ms, f("timestamp").type), n),
                            pa.nulls(n, pa.int32()),
                            pa.nulls(n, f("headers").type),
                        ],
                        schema=KAFKA_PARQUET_SCHEMA,
                    )
                )
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def _batches(values: Iterable[bytes | None]) -> Iterator[list[bytes | None]]:
    batch: list[bytes | None] = []
    for v in values:
        batch.append(v)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def copy_name(src: Path) -> str:
    """The converted copy's name: the file's name, size and modification time (a file the
    connector rewrote is converted again)."""
    st = src.stat()
    return f"{src.name}.{st.st_size}-{st.st_mtime_ns}.parquet"


def refuse_binary_in_bin(fmt: str, files: Iterable[str]) -> None:
    """A `.bin` file of a binary format: its values cannot be split by a separator."""
    if fmt not in BINARY_FORMATS:
        return
    for f in files:
        if ".bin" in Path(f).name:
            raise ConnectFileError(
                f"{f}: a ByteArrayFormat (.bin) file of format {fmt}, whose binary values a "
                "separator cannot delimit; dump the topic with format.class="
                "io.confluent.connect.s3.format.avro.AvroFormat and ByteArrayConverter"
            )


def _convert_task(items: Iterable[tuple[str, str, str, str, DumpConfig]]) -> Iterator[str]:
    """A Spark task: convert each (source, copy, topic, hour) not converted yet; '' when it was
    done, else the error's one line (the driver raises it)."""
    for src, dst, topic, hour, dump in items:
        if Path(dst).is_file():
            yield ""
            continue
        try:
            convert(Path(src), Path(dst), topic, datetime.fromisoformat(hour), dump)
            yield ""
        except ConnectFileError as err:
            yield str(err)


def normalize(
    spark: Any,
    layout: Layout,
    fmt: str,
    dump: DumpConfig,
    hour: datetime,
    files: list[HourFiles],
) -> list[HourFiles]:
    """The hour's listing with its connector files as converted Parquet dumps (converted by
    Spark tasks where not yet); a listing of the other layout as it is."""
    todo: list[tuple[str, str, str, str, DumpConfig]] = []
    out: list[HourFiles] = []
    for hf in files:
        if not hf.connect:
            out.append(hf)
            continue
        refuse_binary_in_bin(fmt, hf.connect)
        folder = layout.connect(hour) / hf.topic
        copies = []
        for f in hf.connect:
            dst = folder / copy_name(Path(f))
            copies.append(str(dst))
            todo.append((f, str(dst), hf.topic, hour.isoformat(), dump))
        _drop_stale(folder, {Path(c).name for c in copies})
        out.append(replace(hf, parquet=tuple(copies)))
    pending = [t for t in todo if not Path(t[1]).is_file()]
    if pending:
        n = min(len(pending), 4 * spark.sparkContext.defaultParallelism)
        errors = spark.sparkContext.parallelize(pending, n).mapPartitions(_convert_task).collect()
        for e in errors:
            if e:
                raise ConnectFileError(e)
    return out


def _drop_stale(folder: Path, keep: set[str]) -> None:
    """Copies of file versions that are gone (the connector rewrote or removed a file)."""
    if folder.is_dir():
        for p in folder.glob("*.parquet"):
            if p.name not in keep:
                p.unlink(missing_ok=True)

"""Kafka Connect S3 sink dumps for tests: the records of a Spark-Kafka dump tree written again
as the connector writes them (`recon.rawdumps`, layout `kafka-connect-s3`).

Per hour folder and partition, each run of consecutive offsets becomes files of at most
`per_file` records named `<topic>+<partition>+<startOffset:010d>.<ext>`, written in a shuffled
order; `redeliver` adds, per partition-hour, a file that covers its first offsets again (the
connector's at-least-once re-delivery after a task restart).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import fastavro
import pyarrow.parquet as pq

from recon.rawdumps import DEFAULT_PATH_FORMAT, path_format_strftime

Value = bytes | None


def read_spark_kafka_hour(folder: Path) -> dict[tuple[int, int], Value]:
    """(partition, offset) -> value of one Spark-Kafka hour folder (its duplicates once)."""
    out: dict[tuple[int, int], Value] = {}
    for f in sorted(folder.iterdir()):
        if f.name.endswith(".parquet"):
            for r in pq.read_table(f, columns=["partition", "offset", "value"]).to_pylist():
                out[(r["partition"], r["offset"])] = r["value"]
        elif ".jsonl" in f.name:
            data = gzip.decompress(f.read_bytes()) if f.name.endswith(".gz") else f.read_bytes()
            for line in data.splitlines():
                if line.strip():
                    j = json.loads(line)
                    v = j.get("value")
                    out[(j["partition"], j["offset"])] = None if v is None else base64.b64decode(v)
    return out


def _runs(offsets: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for o in sorted(offsets):
        if runs and o == runs[-1][-1] + 1:
            runs[-1].append(o)
        else:
            runs.append([o])
    return runs


def encode(values: list[Value], ext: str) -> bytes:
    if ext == ".avro":
        buf = io.BytesIO()
        fastavro.writer(buf, ["null", "bytes"], values, codec="deflate")
        return buf.getvalue()
    body = b"".join((v or b"") + b"\n" for v in values)
    return gzip.compress(body) if ext.endswith(".gz") else body


def to_connect(
    src_raw: Path,
    dst_raw: Path,
    topic: str,
    ext: str,
    per_file: int = 40,
    redeliver: int = 3,
    seed: int = 7,
    path_format: str = DEFAULT_PATH_FORMAT,
) -> int:
    """Write `topic`'s Spark-Kafka dumps under `src_raw` as connector files under `dst_raw`;
    returns the records written again by re-delivery."""
    rnd = random.Random(seed)
    pattern = path_format_strftime(path_format)
    again = 0
    for day in sorted((src_raw / topic).glob("dt=*")):
        for hour_dir in sorted(day.glob("hour=*")):
            hour = datetime.strptime(f"{day.name[3:]}T{hour_dir.name[5:]}", "%Y-%m-%dT%H")
            out = dst_raw / topic / hour.replace(tzinfo=UTC).strftime(pattern)
            out.mkdir(parents=True, exist_ok=True)
            records = read_spark_kafka_hour(hour_dir)
            files: list[tuple[str, list[Value]]] = []
            for p in sorted({p for p, _ in records}):
                runs = _runs([o for q, o in records if q == p])
                for run in runs:
                    for i in range(0, len(run), per_file):
                        chunk = run[i : i + per_file]
                        files.append(
                            (f"{topic}+{p}+{chunk[0]:010d}{ext}", [records[(p, o)] for o in chunk])
                        )
                first = runs[0][:redeliver]
                if redeliver and len(runs[0]) > redeliver:
                    # a restarted task wrote its first offsets again, into a file of its own name
                    # (the connector names a file by its first offset: one offset later here)
                    again += len(first) - 1
                    files.append(
                        (f"{topic}+{p}+{first[1]:010d}{ext}", [records[(p, o)] for o in first[1:]])
                    )
            rnd.shuffle(files)
            for name, values in files:
                (out / name).write_bytes(encode(values, ext))
    return again

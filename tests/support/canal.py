"""A small Canal JSON pipeline for the Airflow tests: a dump of N hours of the sample workload
and a pipeline YAML over it (one table, four buckets)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from recon.demo import sample
from recon.demo.demo import write_dump
from tests.support.builders import write_pipeline


def write_canal_dump(raw: Path, topic: str, start: datetime, hours: int, seed: int) -> None:
    txns = sample.workload(start, hours, txns_per_hour=8, seed=seed)
    recs = sample.to_records(sample.encode_canal_json(txns), topic)
    write_dump(raw, topic, recs, "jsonl", [start + timedelta(hours=i) for i in range(hours)])


def write_canal_pipeline(
    folder: Path, name: str, raw: Path | str, wh: Path, start: datetime, **extra: object
) -> Path:
    """`<folder>/<name>.yaml`, topic `<name>`, table shop.orders (plus `extra` keys)."""
    extra.setdefault("buckets", 4)
    return write_pipeline(
        folder / f"{name}.yaml",
        name=name,
        format="canal_json",
        raw=raw,
        warehouse=wh,
        start=start,
        **extra,  # type: ignore[arg-type]
    )

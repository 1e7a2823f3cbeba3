"""`recon export` (contract 5.2): a published table's rows as JSON Lines, sorted by key, with
values rendered the way the source shows them (exact decimals, base64 binary, ISO times)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from recon.config import PipelineConfig
from recon.core.values import INTEGER_LOGICAL, date_text, datetime_text
from recon.layout import atomic_writer
from recon.publish.iceberg import load_table, snapshot_at_hour


def render_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return v
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            return datetime_text(v.astimezone(UTC), "T") + "Z"
        return datetime_text(v)
    if isinstance(v, date):
        return date_text(v)
    return str(v)


def export_rows(
    cfg: PipelineConfig,
    name: str,
    with_metadata: bool = False,
    snapshot_id: int | None = None,
    hour: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The published rows of one table (a version by snapshot id or hour), sorted by key."""
    table = load_table(cfg, name)
    if hour is not None:
        snapshot_id = snapshot_at_hour(cfg, name, table, hour)
    if snapshot_id is None and table.current_snapshot() is None:
        return
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    pk = json.loads(table.properties.get("recon.primary-key", "[]"))
    logical = json.loads(table.properties.get("recon.logical-types", "{}"))
    ints = {c for c, t in logical.items() if t in INTEGER_LOGICAL}
    floats32 = {f.name for f in data.schema if pa.types.is_float32(f.type)}
    cols = [f.name for f in data.schema if with_metadata or not f.name.startswith("_cdc_")]
    keys = [c for c in pk if c in data.column_names] or [
        c for c in cols if not c.startswith("_cdc_")
    ]
    if data.num_rows:
        data = data.sort_by(
            [(c, "ascending") for c in keys if _sortable(data.schema.field(c).type)]
        )
    for batch in data.select(cols).to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            yield {
                k: int(v)
                if k in ints and isinstance(v, Decimal)
                else _float32(v)
                if k in floats32 and v is not None
                else render_value(v)
                for k, v in row.items()
            }


def _float32(v: float) -> float:
    """A FLOAT column's value as its shortest decimal (0.1, not 0.10000000149011612)."""
    return float(np.format_float_positional(np.float32(v), unique=True, trim="-"))


def _sortable(t: Any) -> bool:
    return not (pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_struct(t))


def write_export(rows: Iterator[dict[str, Any]], out: Path) -> int:
    """Stream the rows to `out` (replaced atomically at the end); how many were written."""
    n = 0
    with atomic_writer(out) as f:
        for r in rows:
            f.write((json.dumps(r, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode())
            n += 1
    return n

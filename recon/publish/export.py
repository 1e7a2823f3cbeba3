"""`recon export` (contract 5.2): a published table's rows as JSON Lines, sorted by key, with
values rendered the way the source shows them (exact decimals, base64 binary, ISO times)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import And, GreaterThan, IsNull, LessThanOrEqual, Or
from pyiceberg.table import Table

from recon.config import PipelineConfig
from recon.core.values import INTEGER_LOGICAL, date_text, datetime_text
from recon.layout import atomic_writer
from recon.publish.history import columns_at, load_history
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
        return iter(())
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    cols = [f.name for f in data.schema if with_metadata or not f.name.startswith("_cdc_")]
    return rendered(table, data, cols)


def export_as_of_time(
    cfg: PipelineConfig, name: str, at: datetime, with_metadata: bool = False
) -> Iterator[dict[str, Any]]:
    """The rows of table `name` as its source held them at commit time `at` (UTC), from its
    history (`recon.publish.history`): the versions valid then, sorted by key, rendered as
    `export_rows` renders them (`with_metadata`: with the history's `__` columns)."""
    table = load_history(cfg, name)
    if table.current_snapshot() is None:
        return iter(())
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    t = (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    valid = And(
        LessThanOrEqual("__valid_from", t),  # type: ignore[call-arg,arg-type]
        Or(IsNull("__valid_to"), GreaterThan("__valid_to", t)),  # type: ignore[call-arg,arg-type]
    )
    data = table.scan(row_filter=valid).to_arrow()
    shown = columns_at(table, t // 1000)
    for c, since, default in shown:
        if since is not None and default is not None:
            data = _filled(data, c, since, default)
    cols = [c for c, _, _ in shown]
    if with_metadata:
        cols += [f.name for f in data.schema if f.name.startswith("__")]
    return rendered(table, data, cols)


def _filled(data: pa.Table, col: str, since_ms: int, default: str) -> pa.Table:
    """Column `col` of history rows with `default` where it is NULL in a version that started
    before the column was added (`since_ms`): the source filled it then, with no change event.
    A default that does not cast to the column's type is left NULL."""
    i = data.schema.get_field_index(col)
    try:
        value = pa.scalar(default, pa.string()).cast(data.schema.field(i).type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return data
    start = data.schema.field("__valid_from").type
    before = pc.less(data["__valid_from"], pa.scalar(since_ms * 1000, pa.int64()).cast(start))
    gone = pc.and_(before, pc.is_null(data[col]))
    return data.set_column(i, col, pc.if_else(gone, value, data[col]))


def rendered(table: Table, data: pa.Table, cols: list[str]) -> Iterator[dict[str, Any]]:
    """Columns `cols` of the rows `data` read from `table`, sorted by its key, each value in the
    export rendering (`render_value`; integers and FLOATs as the source shows them)."""
    pk = json.loads(table.properties.get("recon.primary-key", "[]"))
    logical = json.loads(table.properties.get("recon.logical-types", "{}"))
    ints = {c for c, t in logical.items() if t in INTEGER_LOGICAL}
    floats32 = {f.name for f in data.schema if pa.types.is_float32(f.type)}
    keys = [c for c in pk if c in cols] or [c for c in cols if not c.startswith("_cdc_")]
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

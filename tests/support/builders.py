"""The one pipeline-YAML builder of the test suite: every test that needs a pipeline writes it
through `write_pipeline` (and changes it through `edit_pipeline`)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from recon.config import PipelineConfig, load_config


def write_pipeline(
    path: Path,
    *,
    name: str,
    format: str,
    raw: Path | str = "raw",
    warehouse: Path | str = "wh",
    topics: list[str] | None = None,
    start: datetime | str = "2026-11-20T00:00:00Z",
    tables: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    """Write a pipeline YAML at `path` (relative paths resolve against its folder); topics
    default to the pipeline's name, tables to `shop.orders` with nothing declared."""
    doc = {
        "name": name,
        "format": format,
        "raw_path": str(raw),
        "topics": topics or [name],
        "warehouse": str(warehouse),
        "start": start.isoformat() if isinstance(start, datetime) else start,
        "tables": {"shop.orders": {}} if tables is None else tables,
        **extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def edit_pipeline(path: Path | str, **changes: Any) -> Path:
    """Change top-level keys of a pipeline YAML (`tables={...}` replaces the whole mapping)."""
    p = Path(path)
    doc = yaml.safe_load(p.read_text())
    doc.update(changes)
    p.write_text(yaml.safe_dump(doc))
    return p


def pipeline(tmp: Path, tables: dict[str, Any], **extra: Any) -> PipelineConfig:
    """A loaded pipeline `t` (Debezium JSON, four buckets) under `tmp`, for stage tests."""
    extra.setdefault("buckets", 4)
    p = write_pipeline(
        tmp / "t.yaml",
        name="t",
        format="debezium_json",
        raw=tmp / "raw",
        warehouse=tmp / "wh",
        start="2026-01-01T00:00:00Z",
        tables=tables,
        **extra,
    )
    return load_config(p)

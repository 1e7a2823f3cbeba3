"""`recon trace`: every change that made one row, each with the source record it came from.

From the table's history (`recon.publish.history`: one version per change, with its source
position and the hour that published it) the key's versions are read by a filtered scan; each
change is then found among its hour's decoded events (its order key, at its record's
coordinates) for its decoded images, and among that hour's dump files (or the hour before's,
for a record carried over) for the file and, on request, the bytes. Only the hours the key
changed in are read: never every dump.
"""

from __future__ import annotations

import base64
import gzip
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyiceberg.expressions import EqualTo

from recon.config import PipelineConfig, load_config
from recon.decode.input.connect_input import file_values
from recon.errors import ReconError
from recon.hours import format_hour, parse_hour
from recon.layout import read_json
from recon.objstore import local_copies
from recon.publish.export import render_value
from recon.publish.history import load_history
from recon.publish.iceberg import load_table, snapshot_at_hour
from recon.rawdumps import DumpConfig, connect_name, dump_files

SOURCE = ("topic", "partition", "offset", "gtid", "binlog_file", "binlog_pos", "seq")


def key_text(key: str, pk: list[str]) -> str:
    """The state's text of a key (`recon.merge.contributions.pk_key`: a JSON array of the key
    columns' texts) from what a user types: the value of a one-column key, or `col=value`
    pairs joined by commas."""
    if len(pk) == 1 and not key.startswith(f"{pk[0]}="):
        values = [key]
    else:
        pairs = dict(p.split("=", 1) for p in key.split(",") if "=" in p)
        if set(pairs) != set(pk):
            raise ReconError(
                f"--key {key!r} does not name the key columns {', '.join(pk)}; write it as "
                + ",".join(f"{c}=VALUE" for c in pk)
            )
        values = [pairs[c] for c in pk]
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def trace(
    pipeline: str, table: str, key: str, as_of_hour: str | None = None, raw: bool = False
) -> list[dict[str, Any]]:
    """Every change of the row `key` of `table` (up to `as_of_hour`), oldest first."""
    cfg = load_config(pipeline)
    hist = load_history(cfg, table)
    pk = json.loads(hist.properties.get("recon.primary-key", "[]"))
    wanted = key_text(key, pk)
    found = hist.scan(row_filter=EqualTo("__key", wanted)).to_arrow().to_pylist()  # type: ignore[call-arg,arg-type]
    last = format_hour(parse_hour(as_of_hour, "--as-of-hour")) if as_of_hour else None
    versions = sorted(
        (v for v in found if last is None or v["__hour"] <= last), key=lambda v: v["__order_key"]
    )
    published = load_table(cfg, table)
    out = []
    for v in versions:
        change = _change(v)
        hour = v["__hour"]
        change["published"] = {
            "hour": hour,
            "snapshot_id": snapshot_at_hour(cfg, table, published, hour),
        }
        change["decoded"] = _decoded(cfg, v)
        change["record"] = _record(cfg, v, raw) if v["__topic"] is not None else None
        if v["__op"] == "repair":
            change["repair"] = _repair(cfg, table, v)
        out.append(change)
    return out


def _repair(cfg: PipelineConfig, table: str, v: dict[str, Any]) -> dict[str, Any] | None:
    """The `recon reconcile --repair` that made version `v`, from its hour's report folder
    (`repair-<table>.json`): the newest repair of the hour listing the key."""
    path = cfg.layout.audit(parse_hour(v["__hour"], "hour")) / f"repair-{table}.json"
    runs = read_json(path)["repairs"] if path.is_file() else []
    for run in reversed(runs):
        for k in run["keys"]:
            if k["key"] == v["__key"]:
                return {"repair_id": run["repair_id"], "source": run["source"], "kind": k["kind"],
                        "before": k["before"], "after": k["after"]}  # fmt: skip
    return None


def _change(v: dict[str, Any]) -> dict[str, Any]:
    """A version as trace shows it: the change's op, order key, times and source position,
    and the row it made."""
    return {
        "op": v["__op"],
        "order_key": v["__order_key"],
        "valid_from": _iso(v["__valid_from"]),
        "valid_to": _iso(v["__valid_to"]),
        "closed_by_hour": v["__closed_hour"],
        "source": {c: v[f"__{c}"] for c in SOURCE},
        "row": {k: render_value(x) for k, x in v.items() if not k.startswith(("__", "_cdc_"))},
    }


def _iso(t: Any) -> str | None:
    return None if t is None else t.isoformat()


def _decoded(cfg: PipelineConfig, v: dict[str, Any]) -> dict[str, Any] | None:
    """The decoded event of the change (its images as the decode wrote them), from its hour's
    events: those at its record's coordinates, the one with its order key. None: the events
    are no longer kept, or the change is a snapshot's row."""
    folder = cfg.layout.events(parse_hour(v["__hour"]))
    if v["__topic"] is None or not folder.is_dir():
        return None
    at = (
        (ds.field("topic") == v["__topic"])
        & (ds.field("partition") == v["__partition"])
        & (ds.field("offset") == v["__offset"])
    )
    cols = ["order_key", "op", "db", "tbl", "before", "after", "event_index", "event_time_ms"]
    rows = ds.dataset(str(folder), format="parquet").to_table(columns=cols, filter=at)
    for e in rows.to_pylist():
        if bytes(e["order_key"]).hex() == v["__order_key"]:
            return {
                "hour_decoded": v["__hour"],
                "source_table": f"{e['db']}.{e['tbl']}",
                "op": e["op"],
                "event_index": e["event_index"],
                "before": None if e["before"] is None else dict(e["before"]),
                "after": None if e["after"] is None else dict(e["after"]),
            }
    return None


def _record(cfg: PipelineConfig, v: dict[str, Any], raw: bool) -> dict[str, Any] | None:
    """The dump file holding the change's record (its hour's, else the hour before's: a record
    carried over), and its key and value in base64 when `raw`."""
    hour = parse_hour(v["__hour"])
    where = (v["__topic"], int(v["__partition"]), int(v["__offset"]))
    for h in (hour, hour - timedelta(hours=1)):
        files = [f for f, _ in dump_files(cfg.raw_root, [where[0]], [h], cfg.dump)]
        for name, path in zip(files, local_copies(files, cfg.layout.object_mirror), strict=True):
            got = _find(path, where, cfg.dump)
            if got is not None:
                out: dict[str, Any] = {"file": name, "hour_dumped": format_hour(h)}
                if raw:
                    out["key_base64"] = _b64(got[0])
                    out["value_base64"] = _b64(got[1])
                return out
    return None


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _find(
    path: Path, where: tuple[str, int, int], dump: DumpConfig
) -> tuple[bytes | None, bytes | None] | None:
    """(key, value) of the record at `where` (topic, partition, offset) in one dump file."""
    topic, part, off = where
    named = connect_name(topic, path.name)
    if named is not None:
        p, start, _ = named
        if p != part or off < start:
            return None
        for i, value in enumerate(file_values(path, dump)):
            if start + i == off:
                return None, value
        return None
    if path.name.endswith(".parquet"):
        names = pq.ParquetFile(path).schema_arrow.names
        cols = [c for c in ("key", "value") if c in names]
        at = [("partition", "==", part), ("offset", "==", off)]
        rows = pq.read_table(path, columns=cols, filters=at).to_pylist()
        return (rows[0].get("key"), rows[0].get("value")) if rows else None
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            j = json.loads(line)
            if int(j["partition"]) == part and int(j["offset"]) == off:
                k, val = j.get("key"), j.get("value")
                return (
                    None if k is None else base64.b64decode(k),
                    None if val is None else base64.b64decode(val),
                )
    return None

"""The audit of one pipeline-hour (contract 5.3 and 6): `report.json` + `report.html` under
`<warehouse>/audit/<pipeline>/<YYYY-MM-DDTHH>/`, one row in the audit table, and a verdict.

Everything here reads what the decode and merge stages left for the hour (their counters, the
offsets index, carried and quarantined records, the hour's events) and never the tables' data:
the cost follows the hour, not the history. The report's shape is `schemas/audit-report.v1.json`.

The conservation identity is checked as a chain, each link from counts made independently:
1. records read = distinct + duplicates (in the hour, and of earlier hours);
2. distinct + carried in = consumed + carried out + quarantined, where consumed counts the
   records the decoders used (for events, control entries, or a reassembled group) and no record
   is both carried and quarantined;
3. events decoded = events the merge saw (configured tables + not configured + DDL);
4. per table: changes = applied + skipped (below snapshot watermark, stale, already applied).
A link that does not hold is a `balance` finding, and always fails the hour.
"""

from __future__ import annotations

import html
import json
import os
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recon.config import PipelineConfig
from recon.errors import ReconError
from recon.hours import format_hour

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPORT_SCHEMA = "recon.audit-report/1"
SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "audit-report.v1.json"
SAMPLES_PER_REASON = 3
_MAX_LISTED_GAPS = 50


def audit_dir(cfg: PipelineConfig, hour: datetime) -> Path:
    return cfg.warehouse / "audit" / cfg.name / format_hour(hour)


# -- offsets: gaps inside and between hours ------------------------------------------------------
def _runs_by_partition(paths: Any, hour: datetime) -> tuple[dict, dict]:
    """(runs of this hour, runs of the earlier hours) per (topic, partition)."""
    import pyarrow.parquet as pq

    root = paths.offsets_root()
    this: dict[tuple[str, int], list[tuple[int, int]]] = {}
    earlier: dict[tuple[str, int], list[tuple[int, int]]] = {}
    H = format_hour(hour)
    if not root.is_dir():
        return this, earlier
    for d in sorted(root.glob("hour=*")):
        h = d.name.split("=", 1)[1]
        if h > H:
            continue
        files = sorted(d.glob("*.parquet"))
        if not files:
            continue
        for r in pq.read_table(files).to_pylist():
            k = (r["topic"], int(r["partition"]))
            run = (int(r["lo"]), int(r["hi"]))
            (this if h == H else earlier).setdefault(k, []).append(run)
    return this, earlier


def _holes(runs: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """Offsets in [lo, hi] no run covers, as inclusive ranges."""
    out = []
    nxt = lo
    for a, b in sorted(runs):
        if b < nxt:
            continue
        if a > nxt:
            out.append((nxt, min(a - 1, hi)))
        nxt = max(nxt, b + 1)
        if nxt > hi:
            break
    if nxt <= hi:
        out.append((nxt, hi))
    return [(a, b) for a, b in out if a <= b]


def offset_gaps(paths: Any, hour: datetime) -> dict[tuple[str, int], dict[str, Any]]:
    """Per partition read this hour: gaps inside the hour's offset range, the gap between the
    previous hours' last offset and this hour's first, and gaps of earlier hours still open."""
    this, before = _runs_by_partition(paths, hour)
    out = {}
    for k, runs in this.items():
        lo, hi = min(a for a, _ in runs), max(b for _, b in runs)
        earlier = before.get(k, [])
        upto = earlier + runs
        prev_hi = max((b for _, b in earlier), default=None)
        first = min(a for a, _ in upto)
        all_holes = _holes(upto, first, max(hi, prev_hi or hi))
        inside = [
            g for g in all_holes if g[0] > (prev_hi if prev_hi is not None else -1) and g[1] <= hi
        ]
        between = None
        if prev_hi is not None and lo > prev_hi + 1:
            g = (prev_hi + 1, lo - 1)
            if any(a <= g[0] and b >= g[1] for a, b in all_holes):
                between = g
                inside = [x for x in inside if x != g]
        still_open = [g for g in all_holes if prev_hi is not None and g[1] <= prev_hi]
        out[k] = {
            "inside": inside,
            "between_hours": between,
            "earlier_still_open": still_open,
            "previous_last_offset": prev_hi,
        }
    return out


# -- the hour's events: freshness, GTID continuity ---------------------------------------------
def _event_facts(spark: SparkSession | None, paths: Any, hour: datetime) -> dict[str, Any]:
    ev_dir = paths.events(hour)
    facts: dict[str, Any] = {"newest_event_ms": {}, "gtid": {}}
    if spark is None or not ev_dir.is_dir() or not any(ev_dir.glob("*.parquet")):
        return facts
    from pyspark.sql import functions as F

    ev = spark.read.parquet(str(ev_dir)).withColumn("table", F.concat_ws(".", "db", "tbl"))
    for r in ev.groupBy("table").agg(F.max("event_time_ms").alias("t")).collect():
        if r["t"] is not None:
            facts["newest_event_ms"][r["table"]] = int(r["t"])
    # GTID numbers per source: MySQL uuid:N, MariaDB domain-server-seq (ordered per domain)
    src = F.when(F.col("gtid").contains(":"), F.lower(F.substring_index("gtid", ":", 1))).otherwise(
        F.concat(F.lit("domain "), F.split_part("gtid", F.lit("-"), F.lit(1)))
    )
    num = F.when(F.col("gtid").contains(":"), F.substring_index("gtid", ":", -1)).otherwise(
        F.split_part("gtid", F.lit("-"), F.lit(3))
    )
    g = ev.where(F.col("gtid").isNotNull() & (F.col("gtid") != "")).select(
        src.alias("src"), num.try_cast("bigint").alias("n")
    )
    for r in (
        g.where(F.col("n").isNotNull())
        .groupBy("src")
        .agg(F.min("n").alias("lo"), F.max("n").alias("hi"), F.countDistinct("n").alias("k"))
        .collect()
    ):
        facts["gtid"][r["src"]] = {
            "first": int(r["lo"]),
            "last": int(r["hi"]),
            "distinct": int(r["k"]),
        }
    return facts


def _carried_age_hours(paths: Any, hour: datetime) -> float | None:
    """Age at the hour's end of the oldest record carried out of it (an open transaction)."""
    import pyarrow.parquet as pq

    d = paths.carry(hour)
    files = sorted(d.glob("*.parquet")) if d.is_dir() else []
    if not files:
        return None
    t = pq.read_table(files, columns=["raw_ts_ms"]).column("raw_ts_ms").to_pylist()
    ts = [x for x in t if x is not None]
    if not ts:
        return None
    end = hour + timedelta(hours=1)
    return (end.timestamp() * 1000 - min(ts)) / 3600_000


def quarantine_samples(paths: Any, hour: datetime) -> dict[str, list[dict[str, Any]]]:
    """A few quarantined records per reason, with their coordinates and bytes (base64)."""
    import base64

    import pyarrow.dataset as ds

    d = paths.quarantine(hour)
    if not d.is_dir() or not any(d.rglob("*.parquet")):
        return {}
    data = ds.dataset(str(d), format="parquet")
    cols = [
        c for c in ("topic", "partition", "offset", "reason", "raw_value") if c in data.schema.names
    ]
    out: dict[str, list[dict[str, Any]]] = {}
    for batch in data.to_batches(columns=cols, batch_size=1024):
        for r in batch.to_pylist():
            reason = str(r.get("reason") or "")
            bucket = out.setdefault(reason.split(":", 1)[0], [])
            if len(bucket) < SAMPLES_PER_REASON:
                v = r.get("raw_value")
                bucket.append(
                    {
                        "topic": r.get("topic"),
                        "partition": r.get("partition"),
                        "offset": r.get("offset"),
                        "reason": reason[:500],
                        "value_base64": base64.b64encode(v[:512]).decode() if v else None,
                    }
                )
        if len(out) > 20 and all(len(v) >= SAMPLES_PER_REASON for v in out.values()):
            break
    return out


# -- the report ---------------------------------------------------------------------------------
def build_report(
    spark: SparkSession | None, cfg: PipelineConfig, hour: datetime, run_id: str | None = None
) -> dict[str, Any]:
    from recon.decode.stage import StatePaths

    paths = StatePaths(cfg.warehouse, cfg.name)
    H = format_hour(hour)
    dec_file = paths.counters(hour)
    merge_file = paths.base / "merge" / "hours" / f"hour={H}.json"
    if not dec_file.is_file():
        raise ReconError(f"hour {H} of pipeline {cfg.name} is not decoded; run `recon run` first")
    if not merge_file.is_file():
        raise ReconError(
            f"hour {H} of pipeline {cfg.name} is not merged; run `recon merge --hour {H}` first"
        )
    dec = json.loads(dec_file.read_text())
    mer = json.loads(merge_file.read_text())
    tot = dec.get("totals", {})
    end = hour + timedelta(hours=1)
    findings: list[dict[str, Any]] = []

    def find(kind: str, message: str, **where: Any) -> None:
        findings.append({"kind": kind, "message": message, **where})

    # input per partition, with gaps
    gaps = offset_gaps(paths, hour)
    partitions = []
    for p in dec.get("partitions", []):
        k = (p["topic"], int(p["partition"]))
        g = gaps.get(k, {"inside": [], "between_hours": None, "earlier_still_open": []})
        missing_inside = sum(b - a + 1 for a, b in g["inside"])
        partitions.append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "records": p.get("records", 0),
                "bytes": p.get("bytes", 0),
                "first_offset": p.get("min_offset"),
                "last_offset": p.get("max_offset"),
                "duplicates_in_hour": p.get("duplicates_in_hour", 0),
                "duplicates_of_earlier_hours": p.get("duplicates_cross_hour", 0),
                "offset_gaps": [list(x) for x in g["inside"][:_MAX_LISTED_GAPS]],
                "offsets_missing": missing_inside,
                "gap_from_previous_hour": list(g["between_hours"]) if g["between_hours"] else None,
                "earlier_gaps_still_open": len(g["earlier_still_open"]),
                "decoder": p.get("decoder", {}),
            }
        )
        where = {"topic": p["topic"], "partition": p["partition"]}
        if g["inside"]:
            find(
                "offset_gap",
                f"{missing_inside} offsets missing inside the hour in {len(g['inside'])} gap(s), "
                f"first {g['inside'][0][0]}..{g['inside'][0][1]}",
                **where,
            )
        if g["between_hours"]:
            a, b = g["between_hours"]
            find(
                "offset_gap",
                f"offsets {a}..{b} missing between the previous hour's last offset and this "
                "hour's first",
                **where,
            )
        dups = p.get("duplicates_in_hour", 0) + p.get("duplicates_cross_hour", 0)
        if dups:
            find("duplicate", f"{dups} records delivered more than once (dropped)", **where)

    # decoding
    q_reasons = dec.get("quarantine_reasons", {})
    quarantined = int(tot.get("records_quarantined", 0))
    if quarantined:
        find(
            "quarantined",
            f"{quarantined} records quarantined: "
            + ", ".join(f"{r} ({n})" for r, n in sorted(q_reasons.items())),
        )
    if tot.get("segments_orphaned"):
        find(
            "orphan_segment",
            f"{tot['segments_orphaned']} segments of envelopes that never completed",
        )
    if tot.get("seq_gaps"):
        find(
            "seq_gap",
            f"{tot['seq_gaps']} jumps in the producer's sequence numbers, "
            f"{tot.get('seq_missing', 0)} entries missing",
        )
    age = _carried_age_hours(paths, hour)
    limit = cfg.audit.open_transaction_hours
    if age is not None and age > limit:
        find(
            "open_transaction",
            f"a transaction has stayed open for {age:.1f} h (over {limit} h): its records are "
            "carried from hour to hour and none of it is applied",
        )
    facts = _event_facts(spark, paths, hour)
    gtid = {}
    prev_report = audit_dir(cfg, hour - timedelta(hours=1)) / "report.json"
    prev_gtid = (
        json.loads(prev_report.read_text()).get("decoding", {}).get("gtid", {})
        if prev_report.is_file()
        else {}
    )
    for srcid, g in sorted(facts["gtid"].items()):
        span = g["last"] - g["first"] + 1
        gtid[srcid] = dict(g, missing_inside=span - g["distinct"])
        before = prev_gtid.get(srcid, {}).get("last")
        if before is not None and g["first"] > before + 1:
            gtid[srcid]["missing_since_previous_hour"] = g["first"] - before - 1
            find(
                "gtid_gap",
                f"GTIDs {before + 1}..{g['first'] - 1} of {srcid} are in neither this hour nor "
                "the previous one",
            )
        if span > g["distinct"]:
            find(
                "gtid_gap",
                f"{span - g['distinct']} GTIDs of {srcid} between {g['first']} and {g['last']} "
                "have no change in this stream (filtered upstream, or lost)",
            )

    # tables
    tables = {}
    newest_all = max(facts["newest_event_ms"].values(), default=None)
    for name, t in sorted(mer.get("tables", {}).items()):
        skipped = dict(t.get("skipped", {}))
        changes = sum(t.get("changes_by_op", {}).values())
        applied = int(t.get("applied", 0))
        newest = facts["newest_event_ms"].get(name)
        pub = t.get("published", {})
        tables[name] = {
            "rows_before": t.get("rows_before"),
            "rows_after": t.get("rows_after"),
            "changes_by_op": t.get("changes_by_op", {}),
            "applied": applied,
            "skipped": skipped,
            "pk_changes": t.get("pk_changes", 0),
            "snapshot_rows_loaded": t.get("snapshot_rows_loaded", 0),
            "duplicate_keys": pub.get("duplicate_keys", 0),
            "uncastable_values": pub.get("uncastable", {}),
            "checksum": t.get("checksum"),
            "schema_version": t.get("schema_version"),
            "schema_changed": t.get("schema_changed", False),
            "ddl_seen": t.get("ddl_seen", 0),
            "newest_source_time": _iso(newest),
            "freshness_seconds": None
            if newest is None
            else round(end.timestamp() - newest / 1000, 3),
            "published_snapshot_id": pub.get("snapshot_id"),
            "balanced": changes == applied + sum(skipped.values()),
        }
        if pub.get("duplicate_keys"):
            find("balance", f"{pub['duplicate_keys']} duplicate primary keys published", table=name)
        if pub.get("uncastable"):
            find(
                "quarantined",
                f"values that do not fit their column type were published as NULL: "
                f"{pub['uncastable']}; declare the table's `ddl:`",
                table=name,
            )

    # the identity, link by link
    read = int(tot.get("records", 0))
    distinct = int(tot.get("records_in", 0))
    dup_in, dup_x = int(tot.get("duplicates_in_hour", 0)), int(tot.get("duplicates_cross_hour", 0))
    carried_in = int(tot.get("records_carried_in", 0))
    carried_out = int(tot.get("records_carried_out", 0))
    consumed = distinct + carried_in - carried_out - quarantined
    events_decoded = sum(dec.get("events_by_op", {}).values())
    events_merged = (
        sum(
            sum(t.get("changes_by_op", {}).values()) + t.get("ddl_seen", 0)
            for t in mer["tables"].values()
        )
        + sum(mer.get("not_configured", {}).values())
        + int(mer.get("ddl_not_configured", 0))  # DDL of tables not published
        + sum(mer.get("not_merged", {}).values())  # a run limited to some tables
        + int(mer.get("ddl_not_merged", 0))
    )
    for name, n in sorted(mer.get("not_merged", {}).items()):
        find(
            "not_merged",
            f"{n} changes of this hour were not merged: the run was limited to "
            f"{', '.join(mer.get('merged_tables', []))}; run the hour again for this table",
            table=name,
        )
    links: dict[str, Any] = {
        "records": {
            "read": read,
            "distinct": distinct,
            "duplicates_in_hour": dup_in,
            "duplicates_of_earlier_hours": dup_x,
            "balanced": read == distinct + dup_in + dup_x,
        },
        "dispositions": {
            "distinct": distinct,
            "carried_in": carried_in,
            "consumed": consumed,
            "carried_out": carried_out,
            "quarantined": quarantined,
            "control": {
                k: int(tot.get(k, 0))
                for k in ("heartbeats", "checkpoints", "tombstones", "transaction_markers")
                if tot.get(k)
            },
            "balanced": consumed >= 0,
        },
        "events": {
            "decoded": events_decoded,
            "merged": events_merged,
            "not_configured": mer.get("not_configured", {}),
            "not_merged": mer.get("not_merged", {}),
            "balanced": events_decoded == events_merged,
        },
        "tables": {n: t["balanced"] for n, t in tables.items()},
    }
    table_ok: dict[str, bool] = links["tables"]
    balanced = all(links[k]["balanced"] for k in ("records", "dispositions", "events")) and all(
        table_ok.values()
    )
    links["balanced"] = balanced
    if not balanced:
        bad = [k for k in ("records", "dispositions", "events") if not links[k]["balanced"]]
        bad += [f"table {n}" for n, ok in table_ok.items() if not ok]
        find("balance", "the conservation identity does not balance: " + ", ".join(bad))
    if newest_all is None and not (tot.get("heartbeats") or tot.get("checkpoints")):
        if read == 0:
            find("stale", "no records at all this hour: nothing shows the source is alive")
    elif newest_all is not None and end.timestamp() - newest_all / 1000 > 7200:
        if not (tot.get("heartbeats") or tot.get("checkpoints")):
            find("stale", "the newest source change is over 2 h older than the hour's end")

    fail_on = set(cfg.audit.fail_on) | {"balance"}
    for f in findings:
        f["severity"] = "fail" if f["kind"] in fail_on else "warn"
    verdict = (
        "fail"
        if any(f["severity"] == "fail" for f in findings)
        else ("warn" if findings else "pass")
    )
    return {
        "schema": REPORT_SCHEMA,
        "pipeline": cfg.name,
        "hour": H,
        "hour_start": hour.isoformat(),
        "hour_end": end.isoformat(),
        "run_id": run_id or mer.get("run_id") or dec.get("run_id"),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "format": cfg.format,
        "verdict": verdict,
        "fail_on": sorted(fail_on),
        "findings": findings,
        "input": {"partitions": partitions, "records": read, "bytes": int(tot.get("bytes", 0))},
        "decoding": {
            "events_by_op": dec.get("events_by_op", {}),
            "segments_reassembled": int(tot.get("segments_reassembled", 0)),
            "envelopes_reassembled": int(tot.get("envelopes_reassembled", 0)),
            "segments_orphaned": int(tot.get("segments_orphaned", 0)),
            "records_carried_in": carried_in,
            "records_carried_out": carried_out,
            "transactions_committed": int(tot.get("transactions_committed", 0)),
            "transactions_carried": int(tot.get("transactions_carried", 0)),
            "transactions_abandoned": int(tot.get("transactions_abandoned", 0)),
            "oldest_open_transaction_hours": None if age is None else round(age, 2),
            "heartbeats": int(tot.get("heartbeats", 0)),
            "checkpoints": int(tot.get("checkpoints", 0)),
            "seq_gaps": int(tot.get("seq_gaps", 0)),
            "gtid": gtid,
            "ddl": dec.get("ddl", []),
            "quarantined": quarantined,
            "quarantine_reasons": q_reasons,
            "quarantine_samples": quarantine_samples(paths, hour),
            "counters": tot,
        },
        "tables": tables,
        "freshness": {
            "newest_source_time": _iso(newest_all),
            "lag_seconds": None
            if newest_all is None
            else round(end.timestamp() - newest_all / 1000, 3),
            "heartbeats": int(tot.get("heartbeats", 0)),
            "checkpoints": int(tot.get("checkpoints", 0)),
        },
        "identity": links,
        "reconcile": None,
    }


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


# -- writing --------------------------------------------------------------------------------------
def write_report(cfg: PipelineConfig, hour: datetime, report: dict[str, Any]) -> Path:
    """report.json and report.html, each replaced atomically; returns the folder."""
    d = audit_dir(cfg, hour)
    d.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("report.json", json.dumps(report, indent=2, default=str)),
        ("report.html", render_html(report)),
    ):
        tmp = d / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, d / name)
    return d


def append_audit_table(cfg: PipelineConfig, report: dict[str, Any]) -> None:
    """One row per pipeline-hour in `<pipeline>.recon_audit.hours` (a re-run replaces it)."""
    import pyarrow as pa
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import EqualTo

    from recon.publish.iceberg import get_catalog

    tables = report["tables"].values()
    row = {
        "hour": report["hour"],
        "run_id": report["run_id"],
        "verdict": report["verdict"],
        "findings": json.dumps([f["kind"] for f in report["findings"]]),
        "records": report["input"]["records"],
        "bytes": report["input"]["bytes"],
        "quarantined": report["decoding"]["quarantined"],
        "offsets_missing": sum(p["offsets_missing"] for p in report["input"]["partitions"]),
        "events": sum(report["decoding"]["events_by_op"].values()),
        "applied": sum(int(t["applied"]) for t in tables),
        "rows_after": sum(int(t["rows_after"] or 0) for t in tables),
        "lag_seconds": report["freshness"]["lag_seconds"],
        "balanced": bool(report["identity"]["balanced"]),
        "generated_at": report["generated_at"],
    }
    schema = pa.schema(
        [
            ("hour", pa.string()),
            ("run_id", pa.string()),
            ("verdict", pa.string()),
            ("findings", pa.string()),
            ("records", pa.int64()),
            ("bytes", pa.int64()),
            ("quarantined", pa.int64()),
            ("offsets_missing", pa.int64()),
            ("events", pa.int64()),
            ("applied", pa.int64()),
            ("rows_after", pa.int64()),
            ("lag_seconds", pa.float64()),
            ("balanced", pa.bool_()),
            ("generated_at", pa.string()),
        ]
    )
    data = pa.Table.from_pylist([row], schema=schema)
    cat = get_catalog(cfg)
    ident = (cfg.name, "recon_audit", "hours")
    try:
        table = cat.load_table(ident)
    except NoSuchTableError:
        cat.create_namespace_if_not_exists(ident[:2])
        table = cat.create_table(ident, schema=schema)
    this_hour = EqualTo("hour", report["hour"])  # type: ignore[call-arg,arg-type]
    with warnings.catch_warnings():  # the first run of an hour has no row to replace
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        table.overwrite(data, overwrite_filter=this_hour)


def audit_hour(
    spark: SparkSession | None,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    audited_by: str | None = None,
) -> dict[str, Any]:
    """Build, validate and write the hour's report; `audited_by`: the run that (re)wrote it,
    when it is not the run that merged the hour (an audit_only DAG run)."""
    report = build_report(spark, cfg, hour, run_id)
    report["audited_by"] = audited_by or report["run_id"]
    if SCHEMA_FILE.is_file():
        import jsonschema

        jsonschema.validate(report, json.loads(SCHEMA_FILE.read_text()))
    write_report(cfg, hour, report)
    append_audit_table(cfg, report)
    return report


def load_report(cfg: PipelineConfig, hour: datetime) -> dict[str, Any]:
    p = audit_dir(cfg, hour) / "report.json"
    if not p.is_file():
        raise ReconError(
            f"{p}: no report for {format_hour(hour)}; run `recon run --pipeline ... --from "
            f"{format_hour(hour)}` (or `recon audit`) first"
        )
    return dict(json.loads(p.read_text()))


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What `recon report` prints: verdict first, then the findings and the tables."""
    lines = [
        f"{report['pipeline']} {report['hour']}: {report['verdict'].upper()} "
        f"({len(report['findings'])} finding(s)); identity "
        + ("balances" if report["identity"]["balanced"] else "DOES NOT BALANCE")
    ]
    for f in report["findings"]:
        where = " ".join(
            f"{k}={f[k]}" for k in ("table", "topic", "partition") if f.get(k) is not None
        )
        lines.append(
            f"  [{f['severity']}] {f['kind']}: {f['message']}" + (f" ({where})" if where else "")
        )
    inp = report["input"]
    lines.append(
        f"  input: {inp['records']} records, {inp['bytes']} bytes in {len(inp['partitions'])} "
        f"partition(s); quarantined {report['decoding']['quarantined']}"
    )
    for name, t in report["tables"].items():
        lines.append(
            f"  {name}: {t['rows_before']} -> {t['rows_after']} rows, applied {t['applied']}, "
            f"skipped {sum(t['skipped'].values())}, schema v{t['schema_version']}, "
            f"freshness {t['freshness_seconds']} s"
        )
    lag = report["freshness"]["lag_seconds"]
    lines.append(
        f"  newest source change {report['freshness']['newest_source_time']} (lag {lag} s)"
    )
    return lines


# -- HTML -------------------------------------------------------------------------------------
_COLORS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e"}


def _bars(items: list[tuple[str, float]], unit: str) -> str:
    """A small horizontal bar chart as inline SVG."""
    if not items:
        return "<p class=muted>nothing to chart</p>"
    top = max(v for _, v in items) or 1
    h = 22 * len(items) + 4
    rows = []
    for i, (label, v) in enumerate(items):
        w = max(2, int(300 * v / top))
        y = 4 + 22 * i
        rows.append(
            f'<text x="0" y="{y + 14}" font-size="12">{html.escape(label)}</text>'
            f'<rect x="190" y="{y}" width="{w}" height="16" fill="#0969da"></rect>'
            f'<text x="{196 + w}" y="{y + 13}" font-size="12">{v:g} {unit}</text>'
        )
    return f'<svg role="img" width="620" height="{h}">{"".join(rows)}</svg>'


def render_html(r: dict[str, Any]) -> str:
    e = html.escape
    v = r["verdict"]
    parts = [
        "<!doctype html><html><head><meta charset=utf-8>",
        f"<title>{e(r['pipeline'])} {e(r['hour'])}: {v}</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:24px;max-width:1000px}"
        "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;"
        "padding:3px 8px;text-align:left}th{background:#f6f8fa}.muted{color:#57606a}"
        "code{font-size:12px}</style></head><body>",
        f'<h1 id="verdict" style="color:{_COLORS[v]}">{v.upper()}</h1>',
        f"<p><b>{e(r['pipeline'])}</b> hour <b>{e(r['hour'])}</b> "
        f"({e(r['hour_start'])} to {e(r['hour_end'])}), run <code>{e(str(r['run_id']))}</code>, "
        f"format {e(r['format'])}. Identity: "
        + ("balances" if r["identity"]["balanced"] else "<b>does not balance</b>")
        + f". Fails on: {e(', '.join(r['fail_on']))}.</p>",
        "<h2>Findings</h2>",
    ]
    if r["findings"]:
        parts.append("<table><tr><th>severity</th><th>kind</th><th>where</th><th>what</th></tr>")
        for f in r["findings"]:
            where = " ".join(
                f"{k}={f[k]}" for k in ("table", "topic", "partition") if f.get(k) is not None
            )
            parts.append(
                f"<tr><td style='color:{_COLORS[f['severity']]}'>{e(f['severity'])}</td>"
                f"<td>{e(f['kind'])}</td><td>{e(where)}</td><td>{e(f['message'])}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append("<p>None.</p>")
    parts.append(
        "<h2>Tables</h2><table><tr><th>table</th><th>rows before</th><th>rows after</th>"
        "<th>changes</th><th>applied</th><th>skipped</th><th>PK changes</th><th>schema</th>"
        "<th>freshness</th><th>checksum</th></tr>"
    )
    for name, t in r["tables"].items():
        sk = ", ".join(f"{k} {n}" for k, n in t["skipped"].items() if n) or "0"
        ch = ", ".join(f"{k} {n}" for k, n in t["changes_by_op"].items()) or "0"
        parts.append(
            f"<tr><td>{e(name)}</td><td>{t['rows_before']}</td><td>{t['rows_after']}</td>"
            f"<td>{e(ch)}</td><td>{t['applied']}</td><td>{e(sk)}</td><td>{t['pk_changes']}</td>"
            f"<td>v{t['schema_version']}</td><td>{t['freshness_seconds']} s</td>"
            f"<td><code>{e(str(t['checksum']))}</code></td></tr>"
        )
    parts.append(
        "</table><h2>Input</h2><table><tr><th>topic/partition</th><th>records</th>"
        "<th>offsets</th><th>duplicates</th><th>gaps</th></tr>"
    )
    for p in r["input"]["partitions"]:
        gaps = ", ".join(f"{a}..{b}" for a, b in p["offset_gaps"]) or "none"
        if p["gap_from_previous_hour"]:
            a, b = p["gap_from_previous_hour"]
            gaps += f"; from previous hour {a}..{b}"
        parts.append(
            f"<tr><td>{e(p['topic'])}/{p['partition']}</td><td>{p['records']}</td>"
            f"<td>{p['first_offset']}..{p['last_offset']}</td>"
            f"<td>{p['duplicates_in_hour'] + p['duplicates_of_earlier_hours']}</td>"
            f"<td>{e(gaps)}</td></tr>"
        )
    parts.append("</table><h3>Records per partition</h3>")
    parts.append(
        _bars(
            [(f"{p['topic']}/{p['partition']}", p["records"]) for p in r["input"]["partitions"]], ""
        )
    )
    parts.append("<h3>Freshness (seconds from newest change to hour end)</h3>")
    parts.append(
        _bars(
            [
                (n, t["freshness_seconds"])
                for n, t in r["tables"].items()
                if t["freshness_seconds"] is not None
            ],
            "s",
        )
    )
    d = r["decoding"]
    parts.append(
        f"<h2>Decoding</h2><p>events {e(json.dumps(d['events_by_op']))}; segments reassembled "
        f"{d['segments_reassembled']}, orphaned {d['segments_orphaned']}; transactions committed "
        f"{d['transactions_committed']}, carried {d['transactions_carried']}; records carried in "
        f"{d['records_carried_in']}, out {d['records_carried_out']}; heartbeats {d['heartbeats']},"
        f" checkpoints {d['checkpoints']}; DDL {len(d['ddl'])}.</p>"
    )
    parts.append(f"<h3>Quarantine ({d['quarantined']})</h3>")
    for reason, samples in d["quarantine_samples"].items():
        parts.append(
            f"<p><b>{e(reason)}</b> ({d['quarantine_reasons'].get(reason, len(samples))})</p><ul>"
        )
        for s in samples:
            parts.append(
                f"<li>{e(str(s['topic']))}/{s['partition']}@{s['offset']}: {e(s['reason'])}"
                f"<br><code>{e(str(s['value_base64'])[:200])}</code></li>"
            )
        parts.append("</ul>")
    if r.get("reconcile"):
        parts.append(
            "<h2>Reconciliation with the source</h2><table><tr><th>table</th><th>source</th>"
            "<th>rows table/source</th><th>missing</th><th>extra</th><th>different</th>"
            "<th>in flight</th></tr>"
        )
        for name, x in r["reconcile"].items():
            parts.append(
                f"<tr><td>{e(name)}</td><td>{e(x['source']['kind'])}</td>"
                f"<td>{x['rows_table']}/{x['rows_source']}</td><td>{x['missing']}</td>"
                f"<td>{x['extra']}</td><td>{x['different']}</td><td>{x['in_flight']}</td></tr>"
            )
        parts.append("</table><ul>")
        for name, x in r["reconcile"].items():
            for kind, samples in x["samples"].items():
                for smp in samples:
                    parts.append(
                        f"<li>{e(name)} {e(kind)} {e(str(smp['key']))}: table "
                        f"<code>{e(json.dumps(smp['table']))}</code> source "
                        f"<code>{e(json.dumps(smp['source']))}</code></li>"
                    )
        parts.append("</ul>")
    ident = r["identity"]
    parts.append(
        "<h2>Conservation identity</h2><pre>"
        + e(json.dumps({k: v for k, v in ident.items()}, indent=2))
        + "</pre></body></html>"
    )
    return "".join(parts)

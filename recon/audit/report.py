"""The audit report of one pipeline-hour (contract 5.3 and 6): `AuditReport` is the shape of
`report.json` (`schemas/audit-report.v1.json`, validated on write), built from the facts by the
rules; `report.html` is rendered from it (`recon.audit.render`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import jsonschema

from recon.audit import rules
from recon.audit.render import render_html
from recon.audit.rules import NO_GAPS, Finding, Verdict, where
from recon.config import PipelineConfig
from recon.decode.stats import Stat
from recon.errors import ReconError
from recon.layout import hour_text, read_json, write_json_atomic, write_text_atomic

if TYPE_CHECKING:  # the UI renders reports without the readers (no Spark in the api-server)
    from recon.audit.facts import HourFacts

REPORT_SCHEMA = "recon.audit-report/1"
SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "audit-report.v1.json"


class AuditReport(TypedDict):
    schema: str
    pipeline: str
    hour: str
    hour_start: str
    hour_end: str
    run_id: str | None
    audited_by: NotRequired[str | None]
    generated_at: str
    format: str
    verdict: Verdict
    fail_on: list[str]
    findings: list[Finding]
    input: dict[str, Any]
    decoding: dict[str, Any]
    tables: dict[str, dict[str, Any]]
    freshness: dict[str, Any]
    identity: dict[str, Any]
    reconcile: dict[str, Any] | None
    repairs: NotRequired[dict[str, list[dict[str, Any]]]]
    """Per table, the repairs made to this hour's version (`recon reconcile --repair`)."""


def _partitions(
    facts: HourFacts, cfg: PipelineConfig
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Each partition's input row, and its offset and duplicate findings."""
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for p in facts.dec.get("partitions", []):
        key = (p["topic"], int(p["partition"]))
        gaps = (
            rules.offset_gaps(facts.runs[key], facts.earlier_runs.get(key, []))
            if key in facts.runs
            else NO_GAPS
        )
        opts = cfg.topic_options.get(p["topic"])
        gaps, expected = rules.expected_gaps(
            gaps, bool(opts and opts.transactional), bool(opts and opts.compacted)
        )
        row, found = rules.partition_report(
            p, gaps, facts.resets_acknowledged.get(key), expected if opts else None
        )
        rows.append(row)
        findings += found
    return rows, findings


def build_report(
    facts: HourFacts, cfg: PipelineConfig, hour: datetime, run_id: str | None = None
) -> AuditReport:
    """The hour's report: the rules applied to the facts, and the verdict."""
    dec, mer = facts.dec, facts.mer
    end = hour + timedelta(hours=1)
    partitions, findings = _partitions(facts, cfg)
    findings += rules.decoding_findings(dec, facts.open_age_hours, cfg.audit.open_transaction_hours)
    gtid, found = rules.gtid_report(facts.gtid, facts.previous_gtid)
    findings += found
    tables = {}
    for name, t in sorted(mer.get("tables", {}).items()):
        tables[name], found = rules.table_report(name, t, facts.newest_event_ms.get(name), end)
        findings += found
    findings += rules.not_merged_findings(mer)
    findings += rules.order_findings(dec, mer, first_hour=hour <= cfg.start)
    links, found = rules.identity(dec, mer, tables)
    findings += found
    newest_all = max(facts.newest_event_ms.values(), default=None)
    findings += rules.staleness(dec, newest_all, end)
    verdict, fail_on = rules.judge(findings, cfg.audit.fail_on)
    return {
        "schema": REPORT_SCHEMA,
        "pipeline": cfg.name,
        "hour": hour_text(hour),
        "hour_start": hour.isoformat(),
        "hour_end": end.isoformat(),
        "run_id": run_id or mer.get("run_id") or dec.get("run_id"),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "format": cfg.format,
        "verdict": verdict,
        "fail_on": fail_on,
        "findings": findings,
        "input": {
            "partitions": partitions,
            "records": links["records"]["read"],
            "bytes": int(dec["totals"].get(Stat.BYTES, 0)),
        },
        "decoding": _decoding(facts, gtid),
        "tables": tables,
        "freshness": _freshness(dec["totals"], newest_all, end),
        "identity": links,
        "reconcile": None,
    }


def _decoding(facts: HourFacts, gtid: dict[str, Any]) -> dict[str, Any]:
    dec = facts.dec
    tot = dec["totals"]

    def n(stat: Stat) -> int:
        return int(tot.get(stat, 0))

    age = facts.open_age_hours
    return {
        "events_by_op": dec.get("events_by_op", {}),
        "segments_reassembled": n(Stat.SEGMENTS_REASSEMBLED),
        "envelopes_reassembled": n(Stat.ENVELOPES_REASSEMBLED),
        "segments_orphaned": n(Stat.SEGMENTS_ORPHANED),
        "records_carried_in": n(Stat.RECORDS_CARRIED_IN),
        "records_carried_out": n(Stat.RECORDS_CARRIED_OUT),
        "transactions_committed": n(Stat.TRANSACTIONS_COMMITTED),
        "transactions_carried": n(Stat.TRANSACTIONS_CARRIED),
        "transactions_abandoned": n(Stat.TRANSACTIONS_ABANDONED),
        "oldest_open_transaction_hours": None if age is None else round(age, 2),
        "heartbeats": n(Stat.HEARTBEATS),
        "checkpoints": n(Stat.CHECKPOINTS),
        "seq_gaps": n(Stat.SEQ_GAPS),
        "gtid": gtid,
        "ddl": dec.get("ddl", []),
        "quarantined": n(Stat.RECORDS_QUARANTINED),
        "quarantine_reasons": dec.get("quarantine_reasons", {}),
        "quarantine_samples": facts.quarantine_samples,
        "counters": tot,
    }


def _freshness(tot: dict[str, int], newest_ms: int | None, end: datetime) -> dict[str, Any]:
    return {
        "newest_source_time": rules.iso_ms(newest_ms),
        "lag_seconds": None if newest_ms is None else round(end.timestamp() - newest_ms / 1000, 3),
        "heartbeats": int(tot.get(Stat.HEARTBEATS, 0)),
        "checkpoints": int(tot.get(Stat.CHECKPOINTS, 0)),
    }


def with_findings(
    report: AuditReport, kind: rules.FindingKind, table: str, new: list[Finding]
) -> None:
    """Replace the report's findings of `kind` for `table` by `new` (severity by its fail_on)
    and settle the verdict again."""
    kept = [f for f in report["findings"] if not (f["kind"] == kind and f.get("table") == table)]
    for f in new:
        f["severity"] = "fail" if f["kind"] in report["fail_on"] else "warn"
    report["findings"] = kept + new
    sev = [f.get("severity") for f in report["findings"]]
    report["verdict"] = "fail" if "fail" in sev else ("warn" if sev else "pass")


def validate(report: AuditReport) -> None:
    jsonschema.validate(report, json.loads(SCHEMA_FILE.read_text()))


def write_report(
    cfg: PipelineConfig,
    hour: datetime,
    report: AuditReport,
    compared: list[dict[str, Any]] | None = None,
) -> Path:
    """report.json and report.html (with `compared`, the hour beside the day before it:
    `recon.audit.table.day_comparison`), each replaced atomically; returns the folder."""
    d = cfg.layout.audit(hour)
    write_json_atomic(d / "report.json", report)
    write_text_atomic(d / "report.html", render_html(report, compared))
    return d


def load_report(cfg: PipelineConfig, hour: datetime) -> AuditReport:
    """The hour's report; an error saying so when the hour's last run failed before its audit
    (its `failed.json`), so that an older report never reads as the current one."""
    failed = cfg.layout.audit(hour) / "failed.json"
    if failed.is_file():
        f = read_json(failed)
        raise ReconError(
            f"hour {hour_text(hour)} did not run to the end: its {f['stage']} stage failed at "
            f"{f['at']}: {f['error']}"
        )
    p = cfg.layout.report(hour)
    if not p.is_file():
        raise ReconError(
            f"{p}: no report for {hour_text(hour)}; run `recon run --pipeline ... --from "
            f"{hour_text(hour)}` (or `recon audit`) first"
        )
    report: AuditReport = read_json(p)
    return report


def summary_lines(report: AuditReport) -> list[str]:
    """What `recon report` prints: verdict first, then the findings and the tables."""
    lines = [
        f"{report['pipeline']} {report['hour']}: {report['verdict'].upper()} "
        f"({len(report['findings'])} finding(s)); identity "
        + ("balances" if report["identity"]["balanced"] else "DOES NOT BALANCE")
    ]
    for f in report["findings"]:
        lines.append(
            f"  [{f.get('severity')}] {f['kind']}: {f['message']}"
            + (f" ({where(f)})" if where(f) else "")
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

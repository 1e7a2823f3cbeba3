"""What the CLI prints: one line per decoded hour, per published table, the verdict line and
findings of an audit. `Printer` is the `Progress` the operations report to."""

from __future__ import annotations

from datetime import datetime

from recon.audit.report import AuditReport, summary_lines
from recon.config import PipelineConfig
from recon.decode.stats import DecodeCounters, Stat
from recon.merge.result import MergeResult
from recon.ops.run import Progress


def print_counters(c: DecodeCounters) -> None:
    """One line per decoded hour."""
    t = c["totals"]
    dups = t.get(Stat.DUPLICATES_IN_HOUR, 0) + t.get(Stat.DUPLICATES_CROSS_HOUR, 0)
    quarantined = t.get(Stat.RECORDS_QUARANTINED, 0) + t.get(Stat.UNREADABLE_LINES, 0)
    print(
        f"{c['pipeline']} {c['hour']}: {t.get(Stat.RECORDS, 0)} records read, "
        f"{dups} duplicates, "
        f"{sum(c['events_by_op'].values())} events {c['events_by_op']}, "
        f"{quarantined} quarantined, "
        f"{t.get(Stat.RECORDS_CARRIED_OUT, 0)} carried to the next hour"
    )


def print_merge(m: MergeResult) -> None:
    """One line per published table."""
    for name, t in m["tables"].items():
        sk = {k: v for k, v in t["skipped"].items() if v}
        pub = t["published"]
        print(
            f"{m['pipeline']} {m['hour']}: {name}: {t['rows_before']} -> {t['rows_after']} rows, "
            f"applied {t['applied']} {t['entered_by_op'] or '{}'}, skipped {sk or '{}'}, "
            f"schema v{t['schema_version']}, "
            + (f"snapshot {pub['snapshot_id']}" if pub["committed"] else "no change to publish")
        )
        if t.get("uncastable_columns"):
            print(
                f"{m['pipeline']} {m['hour']}: {name}: WARNING {t['skipped'].get('uncastable')} "
                f"changes set aside (quarantined): values that do not fit their column "
                f"{t['uncastable_columns']}; declare the column's real type with `ddl:`"
            )
        if pub.get("uncastable"):
            print(
                f"{m['pipeline']} {m['hour']}: {name}: WARNING values that do not fit their "
                f"column type were published as NULL: {pub['uncastable']}; declare the column's "
                "real type with `ddl:` in the pipeline's table entry"
            )


def print_report(report: AuditReport, cfg: PipelineConfig, hour: datetime) -> None:
    """The verdict line and the findings of one hour's audit."""
    lines = summary_lines(report)
    print(lines[0] + f"; report {cfg.layout.audit(hour)}/report.html")
    for line in lines[1:]:
        if line.lstrip().startswith("["):
            print(line)


class Printer(Progress):
    def decoded(self, counters: DecodeCounters) -> None:
        print_counters(counters)

    def merged(self, result: MergeResult) -> None:
        print_merge(result)

    def audited(self, report: AuditReport, cfg: PipelineConfig, hour: datetime) -> None:
        print_report(report, cfg, hour)

    def note(self, text: str) -> None:
        print(text)

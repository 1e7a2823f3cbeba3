"""Per pipeline-hour metrics through Airflow's own metrics: StatsD or OpenTelemetry, as its
`[metrics]` section configures (nothing is sent when both are off).

Each stage task sends, when its stage ends, `recon.<pipeline>.<stage>.seconds` (a gauge); the
decode `recon.<pipeline>.decode.records`; the audit, for each hour it audited, gauges of the
hour's report (`hour_metrics`: records read, duplicates, quarantined, events decoded and merged,
lag of the newest source change in seconds, verdict as 0 pass / 1 warn / 2 fail) and a counter
`recon.<pipeline>.verdict.<verdict>`. With StatsD's default prefix they arrive as
`airflow.recon.<pipeline>.<name>`. A metric that cannot be sent never fails the task.
"""

from __future__ import annotations

from typing import Any

VERDICT_LEVEL = {"pass": 0, "warn": 1, "fail": 2}


def hour_metrics(report: dict[str, Any]) -> dict[str, float]:
    """The gauges of one audited hour, from its report."""
    ident = report["identity"]
    records = ident["records"]
    out: dict[str, float] = {
        "records": records["read"],
        "duplicates": records["duplicates_in_hour"] + records["duplicates_of_earlier_hours"],
        "quarantined": ident["dispositions"]["quarantined"],
        "events": ident["events"]["decoded"],
        "events_merged": ident["events"]["merged"],
        "verdict": VERDICT_LEVEL[report["verdict"]],
    }
    lag = (report.get("freshness") or {}).get("lag_seconds")
    if lag is not None:
        out["lag_seconds"] = float(lag)
    return out


def stage_metrics(
    pipeline: str, stage: str, summary: dict[str, Any], reports: list[dict[str, Any]]
) -> tuple[dict[str, float], list[str]]:
    """(gauges, counters) a stage task sends: its duration and records, and per hour audited
    `hour_metrics` and the verdict's counter."""
    prefix = f"recon.{pipeline}"
    gauges: dict[str, float] = {}
    if "seconds" in summary:
        gauges[f"{prefix}.{stage}.seconds"] = float(summary["seconds"])
    if stage == "decode":
        gauges[f"{prefix}.decode.records"] = float(summary.get("records", 0))
    counters = []
    for report in reports:
        gauges.update({f"{prefix}.{k}": v for k, v in hour_metrics(report).items()})
        counters.append(f"{prefix}.verdict.{report['verdict']}")
    return gauges, counters


def send(gauges: dict[str, float], counters: list[str]) -> None:
    """Through the task process's Airflow metrics client (initialized by the task runner)."""
    from airflow.sdk.observability.stats import Stats

    for name, value in gauges.items():
        Stats.gauge(name, value)
    for name in counters:
        Stats.incr(name)

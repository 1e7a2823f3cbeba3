"""The audit's finding kinds, severities and verdicts: names the config (`rules:`,
`expected_gaps`) and the audit's rules share (stdlib only)."""

from __future__ import annotations

from typing import Literal, get_args

FindingKind = Literal[
    "offset_gap",
    "duplicate",
    "quarantined",
    "orphan_segment",
    "open_transaction",
    "seq_gap",
    "gtid_gap",
    "reconcile_mismatch",
    "stale",
    "balance",
    "not_merged",
    "unreadable_ddl",
    "hour_order",
    "type_change",
    "offset_reset",
    "unread_file",
    "repaired",
]
FINDINGS: tuple[str, ...] = get_args(FindingKind)
Severity = Literal["warn", "fail"]
Verdict = Literal["pass", "warn", "fail"]

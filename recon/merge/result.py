"""What the merge stage leaves for the audit: `_state/<p>/merge/hours/hour=H.json`."""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict

from recon.config import PipelineConfig
from recon.layout import read_json
from recon.merge.manifest import SnapshotInfo
from recon.publish.result import HistoryResult, PublishResult


class Skipped(TypedDict):
    below_snapshot_watermark: int
    stale: int
    """Older than what the state holds for the key."""
    already_applied: int
    """Already in the state (a re-run of an hour)."""
    uncastable: NotRequired[int]
    """Set aside: a value in the change does not fit its column (quarantined with its bytes)."""


class TableMerge(TypedDict):
    rows_before: int
    rows_after: int
    checksum: str
    changes_by_op: dict[str, int]
    """Events of the hour routed to this table, by op (DDL apart)."""
    entered_by_op: dict[str, int]
    """Events that entered the merge (past the watermark), by op."""
    applied: int
    pk_changes: int
    snapshot_rows_loaded: int
    repaired: NotRequired[int]
    """Keys corrected from the source (`recon reconcile --repair`), apart from the changes."""
    skipped: Skipped
    uncastable_columns: NotRequired[dict[str, int]]
    """Column -> changes set aside because its value does not fit the column."""
    not_comparable_to_watermark: int
    ddl_seen: int
    schema_version: int
    schema_changed: bool
    schema_changes: NotRequired[list[str]]
    """This hour's entries of the table's schema history: columns added, types promoted
    (Iceberg's rules), and type conflicts (the column keeps its published type)."""
    buckets_touched: int
    buckets: int
    primary_key: list[str]
    published: PublishResult
    history: NotRequired[HistoryResult]
    """The hour's commit to the table's history (`history: true`)."""
    folded_in_decode: NotRequired[int]
    """Changes the decode tasks found superseded by a later change of their key
    (`recon.decode.premerge.prefold`): the merge folded the winners that stand for them, not them."""
    checked_in_decode: NotRequired[bool]
    """Whether the decode's classes of the hour's values showed them all to fit their columns
    (`recon.merge.unfit.fit_in_decode`): the merge cast none of them to check them."""


class MergeResult(TypedDict):
    hours_missing_before: NotRequired[list[str]]
    """Hours from the pipeline's start up to this one that were not merged when this one was
    (the first 24 of them); its published version misses their changes."""
    hours_missing_count: NotRequired[int]
    pipeline: str
    hour: str
    run_id: str
    tables: dict[str, TableMerge]
    merged_tables: list[str]
    not_merged: dict[str, int]
    """Changes of configured tables a run limited to other tables left out."""
    ddl_not_merged: int
    not_configured: dict[str, int]
    """Changes of tables the pipeline does not publish."""
    ddl_not_configured: int
    snapshot: SnapshotInfo | None


def read_merge_result(cfg: PipelineConfig, hour: datetime) -> MergeResult:
    """What the merge of `hour` left (`_state/<p>/merge/hours/hour=H.json`)."""
    result: MergeResult = read_json(cfg.layout.merge_result(hour))
    return result

"""The decode stage's counters: one name per thing counted (`Stat`), and the typed shape of
`_state/<p>/decode/hour=H.json` (`DecodeCounters`), which the audit reads.

Counters are per (topic, partition) and summed into `totals`; names that carry a detail (a
quarantine reason, a control entry's kind) are made by the functions below and contain `:` or
start with `non_dml_`, so they never collide with a `Stat`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, NotRequired, TypedDict

from recon.layout import read_json

if TYPE_CHECKING:
    from recon.config import PipelineConfig
    from recon.decode.summary import DecodedShapes


class Stat(StrEnum):
    # what the decode stage counts around the decoders
    RECORDS = "records"
    BYTES = "bytes"
    DUPLICATES_IN_HOUR = "duplicates_in_hour"
    DUPLICATES_CROSS_HOUR = "duplicates_cross_hour"
    OFFSET_RESETS = "offset_resets"
    """Records at an offset read before with other content (kept: a topic re-created)."""
    UNREADABLE_LINES = "unreadable_lines"
    # the stream driver
    RECORDS_IN = "records_in"
    RECORDS_CARRIED_IN = "records_carried_in"
    RECORDS_CARRIED_OUT = "records_carried_out"
    RECORDS_QUARANTINED = "records_quarantined"
    RECORDS_CONSUMED = "records_consumed"
    """Records a decoder used up: their events emitted, or counted as control records."""
    RECORDS_LOST = "records_lost"
    """Records a decoder let go without emitting, carrying or quarantining them (a bug): kept in
    quarantine, counted apart, so the hour's identity does not balance."""
    CARRY_SKIPPED_QUARANTINED = "carry_skipped_quarantined"
    DECODER_FINISH_ERRORS = "decoder_finish_errors"
    # control records and entries, counted and dropped on purpose
    HEARTBEATS = "heartbeats"
    CHECKPOINTS = "checkpoints"
    ROLLBACKS = "rollbacks"
    TOMBSTONES = "tombstones"
    TRANSACTION_MARKERS = "transaction_markers"
    EMPTY_PACKETS = "empty_packets"
    GTID_ENTRIES = "gtid_entries"
    EMPTY_ENVELOPES = "empty_envelopes"
    # reassembly of segmented envelopes (Tencent)
    SEGMENTS_REASSEMBLED = "segments_reassembled"
    ENVELOPES_REASSEMBLED = "envelopes_reassembled"
    SEGMENTS_ORPHANED = "segments_orphaned"
    SEGMENTS_CARRIED = "segments_carried"
    SEQ_GAPS = "seq_gaps"
    SEQ_MISSING = "seq_missing"
    # transactions
    TRANSACTIONS_COMMITTED = "transactions_committed"
    TRANSACTIONS_CARRIED = "transactions_carried"
    TRANSACTIONS_ABANDONED = "transactions_abandoned"
    EVENTS_ABANDONED = "events_abandoned"
    COMMITS_WITHOUT_BEGIN = "commits_without_begin"
    DDL_UNREADABLE = "ddl_unreadable"
    """A DDL that changes a table but could not be read (quarantined; its table's definition
    is unknown until it is given again)."""
    # update pairs (DataWorks)
    SEQUENCE_ID_NOT_NUMERIC = "sequence_id_not_numeric"
    UPDATE_PAIRS_JOINED = "update_pairs_joined"
    UPDATE_BEFOR_CARRIED = "update_befor_carried"
    UPDATE_BEFOR_REPEATED = "update_befor_repeated"
    UPDATE_BEFOR_APPLIED_ALONE = "update_befor_applied_alone"
    """An UPDATE_BEFOR whose UPDATE_AFTER never came in its partition (a key-changing update
    of a topic partitioned by key), applied as the removal of its key."""
    UPDATE_BEFOR_PAIRED_ACROSS_PARTITIONS = "update_befor_paired_across_partitions"
    """An UPDATE_BEFOR whose UPDATE_AFTER (same sequenceId) came in another partition of the
    hour: applied as the removal of its key, in the hour."""
    UPDATE_AFTER_UNPAIRED = "update_after_unpaired"


def non_dml(kind: str) -> str:
    """A control message the format defines and the merge has no use for (by its kind)."""
    return f"non_dml_{kind.lower() or 'unknown'}"


def quarantined_because(reason: str) -> str:
    """Quarantined records per reason (the text before the first `:`)."""
    return "quarantined:" + reason.split(":", 1)[0]


def finish_error(err: BaseException) -> str:
    return f"decoder_finish_error:{err}"


def is_detail(name: str) -> bool:
    """Detail counters are listed per partition but not summed into the totals."""
    return ":" in name


class PartitionCounters(TypedDict):
    topic: str
    partition: int
    records: int
    bytes: int
    min_offset: int | None
    max_offset: int | None
    duplicates_in_hour: int
    duplicates_cross_hour: int
    offset_resets: NotRequired[int]
    decoder: dict[str, int]
    """The stream driver's and the decoder's counters (`Stat` names and details)."""


class DecodeCounters(TypedDict):
    """`_state/<p>/decode/hour=H.json`: written last by the decode stage (its presence = done)."""

    pipeline: str
    hour: str
    run_id: str
    format: str
    previous_hour_decoded: bool
    carried_in_available: bool
    previous_carried_out: NotRequired[int | None]
    """Records the hour before carried out (None: not decoded, or the pipeline's first hour);
    the audit compares it with the records carried in."""
    totals: dict[str, int]
    """`Stat` name -> sum over partitions (detail counters left out)."""
    events_by_op: dict[str, int]
    ddl: list[str]
    quarantine_reasons: dict[str, int]
    partitions: list[PartitionCounters]
    newest_event_ms: NotRequired[dict[str, int]]
    """Newest source time (epoch ms) of the hour's events per table ("db.table"), for the
    audit's freshness (absent: decoded before the decode kept it; the audit reads the events)."""
    event_shapes: NotRequired[DecodedShapes]
    """What the merge must know of the events before it reads them (absent: decoded before
    the decode counted it; the merge counts it then)."""
    unread_files: NotRequired[list[str]]
    """Files in the hour's dump folders that match no dump name (Kafka Connect layout): read
    by nothing, each named in an `unread_file` finding."""


def total(counters: DecodeCounters, stat: Stat) -> int:
    return int(counters["totals"].get(stat, 0))


def read_counters(cfg: PipelineConfig, hour: datetime) -> DecodeCounters:
    """What the decode of `hour` counted (`_state/<p>/decode/hour=H.json`)."""
    counters: DecodeCounters = read_json(cfg.layout.decode_counters(hour))
    return counters

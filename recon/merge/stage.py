"""The `merge` stage of one pipeline-hour: canonical events -> per-key table state -> publish.

State (contract 4; paths from `recon.layout`): per table, key-hash buckets of state rows, each
bucket a folder written by the run that last touched it, listed in the manifest
(`recon.merge.manifest`) with row counts and a checksum. An hour rewrites only the buckets its
changes touch, so its cost follows the hour's changes, not the table's size.

Merge rules (contract 5.1, `recon.merge.state`): per key the contribution with the highest order
key wins; deletes and primary-key changes leave tombstones; a table without a key is a multiset.
The manifest is committed after the publish, so a run killed at any point leaves the previous
state and published version in force, and re-running converges.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.model import EVENT_SCHEMA
from recon.core.schema import TableSchema
from recon.core.watermark import Watermark
from recon.decode.summary import DecodedShapes
from recon.errors import ManifestError, NotDecodedError, ReconError
from recon.faults import checkpoint
from recon.hours import retention_cutoff
from recon.layout import (
    folder_files,
    has_parquet,
    hour_text,
    new_attempt,
    partition_folder,
    read_json,
    write_json_atomic,
)
from recon.merge.contributions import (
    CHECKSUM_TERMS,
    STATE_COLS,
    STATE_DDL,
    SUP,
    contributions,
    key_bucket,
    route_expr,
    row_key,
    watermark_skips,
)
from recon.merge.manifest import (
    BucketFile,
    DeltaFile,
    Manifest,
    SnapshotInfo,
    TableEntry,
    bucket_dirs,
    cheaper_rewritten,
    check_tables,
    checks_digest,
    checks_needed,
    copy_manifest,
    due_for_compaction,
    load_manifest,
    merged_hours,
    newest_hour_of,
    save_manifest,
    snapshot_pending,
    state_rows,
    unloaded_snapshot_bytes,
)
from recon.merge.repairs import repair_rows
from recon.merge.result import MergeResult, TableMerge
from recon.merge.schemas import (
    HourSummary,
    normalize_image,
    resolve_schemas,
    summarize_hour,
    summary_of_shapes,
)
from recon.merge.snapshot import copy_snapshot, load_watermark, snapshot_rows
from recon.merge.state import (
    DELTA_COLS,
    FOLD_CONF,
    NARROW_COLS,
    U64,
    BucketStats,
    EnteredCounts,
    bucket_stats,
    contribution_counts,
    fold,
    fold_delta,
    live_rows,
    numbered,
    old_winners,
    skip_counts,
)
from recon.merge.unfit import (
    UNFIT,
    any_unfit,
    fit_in_decode,
    flag_unfit,
    write_unfit_quarantine,
)
from recon.merge.winners import (
    FOLDED_COLUMNS,
    clean_tables,
    keyed_as_stated,
    no_sup,
    read_winners,
    superseded_by_table,
    value_classes_by_table,
    without_sup,
)
from recon.publish.history import POSITION_COLUMNS as HISTORY_POSITIONS
from recon.publish.history import keeps_history, publish_history, versions
from recon.publish.iceberg import (
    publish_table,
    published_hours,
    published_types,
    unfit_value_checks,
)
from recon.publish.result import HistoryResult, PublishResult
from recon.spark.session import (
    SMALL_HOUR_BYTES,
    SMALL_HOUR_ROWS,
    arrow_ddl,
    job_named,
    kept_as_rows,
    release,
    sized_for,
    sql_conf,
)

# What the merge computes and reads more than once (the hour's contributions, as rows:
# `kept_as_rows`; a keyless table's live rows, cached) is kept on local disk, never in memory:
# an hour of any size must not have to fit in the heap (a cache of a big hour ran out of
# memory in a 512 MB heap).
# The hour's events are not kept: they are a Parquet read already, and writing them to Spark's
# disk cache cost more than every later read of the files (500k changes into 1M rows: the hour
# 18.8 / 18.3 -> 16.3 / 15.8 s without it)
CACHE = StorageLevel.DISK_ONLY

log = logging.getLogger(__name__)


def merge_hour(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    run_id: str | None = None,
    buckets: int = 16,
    publish: bool = True,
    tables: list[str] | None = None,
) -> MergeResult:
    """Merge one decoded hour into the state and publish every configured table, or only
    `tables` (the other tables' changes of the hour are counted as not merged; merging them
    later, in any order, gives the same state). `publish=False`: state only, for tests."""
    names = check_tables(cfg, tables)
    if not cfg.layout.decode_counters(hour).is_file():
        H = hour_text(hour)
        raise NotDecodedError(
            f"hour {H} of pipeline {cfg.name} is not decoded yet; run `recon decode --hour {H}` "
            "(or `recon run`) first"
        )
    merge = _HourMerge(spark, cfg, hour, run_id or uuid.uuid4().hex[:12], names, buckets)
    with sized_for(spark, small=_small_merge(cfg, hour)):
        result = merge.run(publish, limited=tables is not None)
    for name, t in result["tables"].items():
        log.info(
            "%s %s: %s: %s -> %s rows, %s changes applied, snapshot %s",
            cfg.name, result["hour"], name, t["rows_before"], t["rows_after"], t["applied"],
            t["published"].get("snapshot_id"),
        )  # fmt: skip
    return result


@dataclass
class _HourMerge:
    """One hour's merge as named steps; each step leaves its result on the instance."""

    spark: SparkSession
    cfg: PipelineConfig
    hour: datetime
    run_id: str
    names: list[str]
    default_buckets: int
    man: Manifest = field(init=False)
    events: DataFrame = field(init=False)
    summary: HourSummary = field(init=False)
    events_files: list[tuple[str, int, int]] = field(default_factory=list)
    winners: DataFrame | None = None
    """The hour's winners (`recon.merge.winners`), when the decode wrote them for these events."""
    winners_files: list[tuple[str, int, int]] = field(default_factory=list)
    superseded: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per table and op, the events the winners leave out."""
    prefolded: list[str] = field(default_factory=list)
    """The tables merged from the winners this hour (`prefold_tables`)."""
    value_classes: dict[str, dict[str, Counter[str]]] | None = None
    """Per table and column, the decode's classes of its checked values (None: not counted)."""
    checked_in_decode: list[str] = field(default_factory=list)
    """The tables whose values the decode's classes show to fit (`fit_in_decode`): none of
    their values is cast to check it."""
    schemas: dict[str, TableSchema] = field(init=False)
    schema_changed: dict[str, bool] = field(init=False)
    skipped_wm: dict[str, int] = field(default_factory=dict)
    not_comparable: dict[str, int] = field(default_factory=dict)
    contrib: DataFrame = field(init=False)
    to_fold: DataFrame = field(init=False)
    """The contributions of the changes not set aside."""
    snapshot_for: list[str] = field(default_factory=list)
    snapshot_info: SnapshotInfo | None = None
    touched: dict[str, set[int]] = field(default_factory=dict)
    changed_keys: dict[str, int] = field(default_factory=dict)
    """About how many keys each table's hour changes (`contribution_counts`)."""
    mor: list[str] = field(default_factory=list)
    """The tables this hour merges on read (`merge_on_read`): a delta per touched bucket."""
    olds: DataFrame = field(init=False)
    """The merge-on-read tables' changed keys' old winners (`old_winners`), kept on disk."""
    written: DataFrame = field(init=False)
    """The state rows this run wrote (with `DELTA_COLS`), read back."""
    skips: dict[str, tuple[int, int]] = field(default_factory=dict)
    live: DataFrame = field(init=False)
    bstats: dict[tuple[str, int], BucketStats] = field(default_factory=dict)
    entered: EnteredCounts = field(init=False)
    publishing: bool = True
    """Whether this merge publishes (`recon rebuild` merges all but its last hour without)."""
    old_read: bool = False
    unfit: dict[str, dict[str, int]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    flagged: DataFrame = field(init=False)
    """The hour's events, each with the columns whose values do not fit (`UNFIT`)."""
    published: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each table's column types readers already see (`published_types`), read once."""
    checks_digest: dict[str, str] = field(default_factory=dict)
    """Each table's `checks_digest`, kept in its written buckets' records."""
    _checks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    attempt: str = field(default_factory=new_attempt)

    @property
    def H(self) -> str:
        return hour_text(self.hour)

    @property
    def by_table_op(self) -> dict[str, dict[str, int]]:
        """Per table, the hour's events by op (from the hour's summary)."""
        return self.summary.by_table_op

    def run(self, publish: bool, limited: bool) -> MergeResult:
        try:
            return self.merge(publish, limited)
        finally:
            # on failure too: a kept copy would be reused by a later merge of the same plan in
            # this Spark application (a retry), though its inputs changed (a decode again)
            for name in ("contrib", "live", "olds"):
                if name in self.__dict__:
                    release(getattr(self, name))

    def merge(self, publish: bool, limited: bool) -> MergeResult:
        self.publishing = publish
        self.man = load_manifest(self.cfg)
        check_state_matches_tables(self.cfg, self.man, self.names, self.H)
        self.missing = hours_missing(
            self.cfg.start, self.hour, self.man["hours"], self.man.get("partial_hours"), self.names
        )
        self.read_events()
        self.resolve_schemas()
        self.build_contributions()
        self.find_touched_buckets()
        self.set_aside_unfit()
        self.mor = [n for n in self.names if self.merge_on_read(n)]
        ms_tables = [n for n in self.names if not self.schemas[n].primary_key]
        self.write_state(self.new_state(ms_tables), ms_tables)
        self.check_events_unchanged()
        new_man = copy_manifest(self.man)
        tables_out = {n: self.finish_table(n, new_man, publish) for n in self.names}
        for n in self.histories:
            tables_out[n]["history"] = self.publish_history(n)
        checkpoint("merge:published")
        self.commit_manifest(new_man)
        result = self.result(tables_out, limited)
        write_json_atomic(self.cfg.layout.merge_result(self.hour), result)
        return result

    # -- steps ----------------------------------------------------------------------------------
    def forget_before_ms(self) -> int | None:
        """With `retention_hours`: the start of the window ending with this hour, in ms (deletes
        older than it leave no tombstone in the buckets the hour rewrites: `fold`)."""
        keep = self.cfg.retention_hours
        return int(retention_cutoff(self.hour, keep).timestamp() * 1000) if keep else None

    def new_state(self, ms_tables: list[str]) -> DataFrame:
        """The state rows the hour writes: the new state of the buckets it rewrites (`fold`),
        and the deltas of those it merges on read (`fold_delta`); counts the changes stale or
        already in (`skips`) on the way."""
        changes = sum(n for t in self.names for n in self.by_table_op.get(t, {}).values())
        columns = {n: [c for c, _ in self.schemas[n].columns] for n in self.names}
        out: list[DataFrame] = []
        if len(self.mor) < len(self.names):
            old = self.read_old_state()
            rewrite = (
                self.to_fold.where(~F.col("table").isin(self.mor)) if self.mor else self.to_fold
            )
            several = any(self.deltas_of(n) for n in self.names if n not in self.mor)
            if self.old_read:  # nothing to be stale against, or already in, before a first state
                self.skips = skip_counts(old, rewrite, ms_tables, changes, several)
            out.append(fold(old, rewrite, ms_tables, columns, self.forget_before_ms()))
        if self.mor:
            changed = self.to_fold.where(F.col("table").isin(self.mor))
            several = any(self.deltas_of(n) for n in self.mor)
            olds = old_winners(self.read_narrow_state(self.mor), changed, changes, several)
            self.olds = kept_as_rows(olds)
            self.skips.update(skip_counts(self.olds, changed, [], changes))
            out.append(fold_delta(self.olds, changed, columns))
        return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), out)

    def resolve_schemas(self) -> None:
        """The tables' schemas after the hour, and its events' images in their columns."""
        self.schemas, self.schema_changed, normalize = resolve_schemas(
            self.cfg, self.man, self.summary, self.hour, self.names
        )
        self.events = normalize(self.events)
        if self.winners is not None:
            self.winners = normalize(self.winners)
        for n in self.histories:
            if not self.schemas[n].primary_key:
                raise ReconError(
                    f"table {n} keeps a history (`history: true` in {self.cfg.source_file}) but "
                    "has no primary key: declare one with `primary_key: [col, ...]` in its "
                    "options, or remove `history: true`"
                )

    def read_events(self) -> None:
        ev_dir = self.cfg.layout.events(self.hour)
        # before Spark lists them: a decode in between is then seen by the check, too
        self.events_files = folder_files(ev_dir)
        if has_parquet(ev_dir):
            events = self.spark.read.parquet(str(ev_dir))
            if "defaults" not in events.columns:  # written before events carried defaults
                events = events.withColumn("defaults", F.lit(None).cast("map<string,string>"))
        else:
            events = self.spark.createDataFrame([], arrow_ddl(EVENT_SCHEMA))
        self.events = events.withColumn("table", route_expr(self.cfg))
        decoded = read_json(self.cfg.layout.decode_counters(self.hour)).get("event_shapes")
        summary = self.decoded_summary(decoded)
        self.summary = summary or summarize_hour(self.events)
        if summary is not None and decoded is not None:
            self.read_winners(decoded)
            self.value_classes = value_classes_by_table(self.cfg, decoded)

    def decoded_summary(self, decoded: DecodedShapes | None) -> HourSummary | None:
        """The summary from what the decode counted of these very events (None: an hour decoded
        before it counted it, or whose events have changed since)."""
        if not decoded or [tuple(f) for f in decoded["events_files"]] != self.events_files:
            return None
        return summary_of_shapes(self.cfg, decoded["shapes"])

    def read_winners(self, decoded: DecodedShapes) -> None:
        """The hour's winners and what they leave out (`recon.merge.winners`), if the decode
        wrote them for these very events."""
        layout = self.cfg.layout
        win_dir = layout.winners(self.hour)
        self.winners_files = folder_files(win_dir)  # before Spark lists them, as the events'
        won = read_winners(
            self.spark, decoded, self.winners_files, self.events_files,
            layout.events(self.hour), win_dir,
        )  # fmt: skip
        if won is not None:
            self.winners = won.withColumn("table", route_expr(self.cfg))
            self.superseded = superseded_by_table(self.cfg, decoded)

    def prefold_tables(self, wm: Watermark | None) -> list[str]:
        """The tables this hour merges from its winners (`recon.merge.winners`): not those
        keeping a history, which takes every change."""
        if self.winners is None:
            return []
        keyed = [
            n
            for n in self.names
            if keyed_as_stated(n, self.schemas[n], self.summary) and n not in self.histories
        ]
        if not keyed:
            return []
        # with a watermark, the events are read anyway: for the changes it skips
        known = [n for n in keyed if n in self.checked_in_decode] if wm is None else []
        rest = [n for n in keyed if n not in known]
        if not rest:
            return keyed
        checked = [n for n in rest if n not in self.checked_in_decode]
        unfit = any_unfit(self.schemas, checked, self.published)
        clean = clean_tables(self.events, rest, unfit, wm)
        return [n for n in keyed if n in known or n in clean]

    def fit_in_decode(self) -> list[str]:
        """The tables whose hour's values the decode's classes show to fit their columns
        (`recon.merge.unfit.fit_in_decode`): none of their values is cast to check it, as the
        cast of every typed value of an hour whose keys change once (no winners) was a tenth
        of the merge's first job."""
        got = self.value_classes
        if got is None:
            return []
        return [
            n for n in self.names
            if fit_in_decode(self.schemas[n], self.published[n], got.get(n, {}))
        ]  # fmt: skip

    def check_events_unchanged(self) -> None:
        """The hour's events are read by several jobs, not copied first: an hour decoded again
        while it merged (a `recon decode` by hand beside the DAG) stops the merge before it
        publishes anything, rather than merge a mix of two decodes."""
        layout = self.cfg.layout
        if folder_files(layout.events(self.hour)) != self.events_files or (
            self.winners is not None
            and folder_files(layout.winners(self.hour)) != self.winners_files
        ):
            raise ReconError(
                f"hour {self.H} of pipeline {self.cfg.name} was decoded again while it merged; "
                f"run the merge of {self.H} again (nothing was published)"
            )

    def set_aside_unfit(self) -> None:
        """Changes with a value that does not fit its column leave the merge for the
        quarantine (`recon.merge.unfit`): their contributions are not folded (they were counted
        apart, in the same job as the others: `find_touched_buckets`)."""
        write_unfit_quarantine(
            self.spark, self.cfg, self.hour, self.flagged, self.schemas, self.names,
            bool(self.unfit),
        )  # fmt: skip
        self.to_fold = self.contrib.where(F.size(UNFIT) == 0) if self.unfit else self.contrib

    def buckets_of(self, name: str) -> int:
        entry = self.man["tables"].get(name)
        return int(entry["buckets"]) if entry else self.default_buckets

    def build_contributions(self) -> None:
        """The events' contributions, kept on disk for the jobs that read them; each names the
        columns whose values do not fit (`UNFIT`: a change set aside, counted with the others
        in one job, then left out: one pass over the events, where the check was one more)."""
        self.published = {n: published_types(self.cfg, n) for n in self.names}
        self.checked_in_decode = self.fit_in_decode()
        to_check = [n for n in self.names if n not in self.checked_in_decode]
        self.flagged = flag_unfit(self.events, self.schemas, to_check, self.published)
        pending = [n for n in self.names if snapshot_pending(self.man, n)]
        copy_snapshot(self.cfg, pending)
        wm = load_watermark(self.cfg.snapshot_path) if self.cfg.snapshot_path else None
        self.prefolded = self.prefold_tables(wm)
        pks = {n: s.primary_key for n, s in self.schemas.items()}
        positions = HISTORY_POSITIONS if self.histories else ()
        contrib = contributions(self.changes_to_fold(wm), pks, carried=(UNFIT, *positions))
        self.snapshot_info = self.man["snapshot"]
        self.snapshot_for = [
            n for n in self.names if wm is not None and snapshot_pending(self.man, n)
        ]
        if wm is not None and self.snapshot_for:
            snap = snapshot_rows(self.spark, self.cfg, self.schemas, wm, self.snapshot_for)
            if snap is not None:
                contrib = _with_rows(contrib, snap)
            self.snapshot_info = {
                "watermark": wm.to_json(),
                "loaded_in_hour": self.H,
                "run_id": self.run_id,
            }
        repaired = repair_rows(self.spark, self.cfg, self.H, self.names)
        if repaired is not None:  # corrections of this hour's version (`recon.merge.repairs`)
            contrib = _with_rows(contrib, repaired)
        bucket = key_bucket({n: self.buckets_of(n) for n in self.names})
        self.contrib = kept_as_rows(
            numbered(
                contrib.withColumn("bucket", bucket)
                # its term of the bucket checksums, computed for the winners (`fold`)
                .withColumn("ck", F.lit(None).cast("bigint"))
            )
        )

    def changes_to_fold(self, wm: Watermark | None) -> DataFrame:
        """The events the hour's contributions come from: each table's winners, for the tables
        merged from them (`prefolded`), else its events; each with `UNFIT`, and the order keys
        its contributions superseded (`recon.merge.contributions.SUP_COLUMNS`)."""
        rest = [n for n in self.names if n not in self.prefolded]
        parts = []
        if rest or not self.prefolded:
            ev = self.flagged.where(F.col("table").isin(rest) & (F.col("op") != "ddl"))
            if wm is not None:  # a change set aside is neither skipped nor counted as such
                ev, self.skipped_wm, self.not_comparable = watermark_skips(
                    ev, wm, among=F.size(UNFIT) == 0
                )
            extra = [c for c in HISTORY_POSITIONS if self.histories and c not in FOLDED_COLUMNS]
            parts.append(without_sup(ev).select(*FOLDED_COLUMNS, *extra))
        if self.prefolded and self.winners is not None:
            won = self.winners.where(F.col("table").isin(self.prefolded) & (F.col("op") != "ddl"))
            # their every change fits (`prefold_tables`)
            won = won.withColumn(UNFIT, F.array().cast("array<string>"))
            parts.append(won.select(*FOLDED_COLUMNS))
        return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)

    def find_touched_buckets(self) -> None:
        touched, self.entered, self.unfit, self.changed_keys = contribution_counts(
            self.contrib, UNFIT
        )
        self.touched = {n: touched.get(n, set()) for n in self.names}
        for n in self.prefolded:  # the changes the winners stand for entered as theirs did
            by_op = self.entered["by_op"].setdefault(n, {})
            for op, k in self.superseded.get(n, {}).items():
                by_op[op] = by_op.get(op, 0) + k
        for n in self.names:  # a schema change rewrites the whole published table; so do terms
            # of another form (`CHECKSUM_TERMS`: every bucket's checksum is summed again), and
            # so does the first publish of a state merged without publishing (`unpublished`)
            rewrite = self.schema_changed[n] or self.old_terms(n) or self.unpublished(n)
            if rewrite and n in self.man["tables"]:
                self.touched[n] |= {int(b) for b in self.man["tables"][n]["files"]}

    def unpublished(self, n: str) -> bool:
        """Whether this merge publishes table `n` and its state was merged on without
        publishing since its last version (`recon rebuild`'s hours before its last, a killed
        rebuild): then its whole table is published from the state."""
        entry = self.man["tables"].get(n)
        return self.publishing and entry is not None and "snapshot_id" not in entry

    def old_terms(self, n: str) -> bool:
        """Whether table `n`'s state holds checksum terms of another form than `row_checksum`
        computes (`CHECKSUM_TERMS`): its next merge computes them all again."""
        entry = self.man["tables"].get(n)
        if entry is None or not entry["files"]:
            return False
        return entry.get("checksum_terms") != CHECKSUM_TERMS

    def merge_on_read(self, n: str) -> bool:
        """Whether table `n`'s hour adds a delta to each touched bucket (its changed keys' new
        state rows) and publishes only their rows, with position deletes of the rows they
        replace, instead of rewriting the buckets: the pipeline's `write_mode` asks for it, and
        the hour changes no more than rows (a table with a key, already in the state and
        published; no schema change, snapshot load or checksum terms of another form; every
        value of the touched buckets known to fit), and no touched bucket's deltas are due to
        be folded into it (`COMPACT_SHARE`, `MAX_DELTAS`), nor would be with the hour's delta
        (`cheaper_rewritten`): then the hour rewrites them."""
        entry = self.man["tables"].get(n)
        if self.cfg.write_mode != "merge-on-read" or entry is None or not entry["files"]:
            return False
        if not self.schemas[n].primary_key or entry.get("snapshot_id") is None:
            return False
        if self.schema_changed[n] or self.old_terms(n) or n in self.snapshot_for:
            return False
        checks = self.value_checks()[n]
        if checks and checks_needed(entry, self.touched[n], self.checks_digest[n], False):
            return False
        files = [entry["files"][str(b)] for b in self.touched[n] if str(b) in entry["files"]]
        if any(due_for_compaction(f) for f in files):
            return False
        return not cheaper_rewritten(files, self.changed_keys.get(n, 0))

    def value_checks(self) -> dict[str, list[tuple[str, str]]]:
        """Each table's checks of its written rows' values (`unfit_value_checks`), built once
        an hour with their digests (`checks_digest`), for the mode's choice and the counts."""
        if not self.checks_digest:
            self._checks = {
                n: unfit_value_checks(self.schemas[n], self.published[n], "row") for n in self.names
            }
            self.checks_digest = {n: checks_digest(c) for n, c in self._checks.items()}
        return self._checks

    def deltas_of(self, n: str) -> bool:
        """Whether a touched bucket of table `n` has deltas (a key may have several rows)."""
        entry = self.man["tables"].get(n)
        files = entry["files"] if entry else {}
        return any(str(b) in files and files[str(b)].get("deltas") for b in self.touched[n])

    def state_dirs(self, n: str) -> list[str]:
        """The folders of table `n`'s touched buckets in the state (bases and deltas)."""
        files = self.man["tables"].get(n, {"files": {}})["files"]
        base = self.cfg.layout.merge
        return [
            str(base / d)
            for b in sorted(self.touched[n])
            if str(b) in files
            for d in bucket_dirs(files[str(b)])
        ]

    def read_state(self, names: list[str]) -> DataFrame:
        """The state rows of the touched buckets of tables `names` (bases and deltas)."""
        dirs = [d for n in names for d in self.state_dirs(n)]
        if not dirs:
            return self.spark.createDataFrame([], STATE_DDL)
        return self.spark.read.schema(STATE_DDL).parquet(*dirs).select(*STATE_COLS)

    def read_narrow_state(self, names: list[str]) -> DataFrame:
        """`read_state` without images, each table's files read apart and their table's name
        a literal, not a text read from every row (`old_winners`' scan of a 20M-row state,
        warm: 3.4-3.9 s against 4.6-5.6 s)."""
        parts = [
            self.spark.read.schema(STATE_DDL)
            .parquet(*dirs)
            .select(F.lit(n).alias("table"), *NARROW_COLS[1:])
            for n in names
            if (dirs := self.state_dirs(n))
        ]
        if not parts:
            return self.spark.createDataFrame([], STATE_DDL).select(*NARROW_COLS)
        return functools.reduce(DataFrame.unionByName, parts)

    def read_old_state(self) -> DataFrame:
        """The state rows of the touched buckets the hour rewrites (not those of `mor`)."""
        rewritten = [n for n in self.names if n not in self.mor]
        old = self.read_state(rewritten)
        self.old_read = any(
            str(b) in self.man["tables"].get(n, {"files": {}})["files"]
            for n in rewritten
            for b in self.touched[n]
        )
        if not self.old_read:
            return old
        recount = [n for n in self.names if self.old_terms(n)]
        if recount:  # terms of another form: the fold computes them again (`CHECKSUM_TERMS`)
            old = old.withColumn("ck", F.when(~F.col("table").isin(recount), F.col("ck")))
        return self.in_current_columns(old)

    def in_current_columns(self, old: DataFrame) -> DataFrame:
        """State rows written before a schema change, in the schema's columns (renamed,
        dropped, defaults filled); a keyless table's copies are keyed by their whole row, so
        they get the key (and bucket) of the row they now are."""
        changing = [
            n
            for n, s in self.schemas.items()
            if self.schema_changed[n] and (s.former or s.dropped or s.defaults)
        ]
        if not changing:
            return old
        fixed = old.withColumn(
            "row", normalize_image(F.col("row"), F.col("table"), self.schemas)
        ).withColumn(  # the row changed: its checksum term is computed again
            "ck", F.when(~F.col("table").isin(changing), F.col("ck"))
        )
        rekey = [n for n in changing if not self.schemas[n].primary_key]
        if not rekey:
            return fixed
        again = F.col("table").isin(rekey)
        return fixed.withColumn(
            "key", F.when(again, row_key(F.col("row"))).otherwise(F.col("key"))
        ).withColumn(
            "bucket",
            F.when(again, key_bucket({n: self.buckets_of(n) for n in rekey})).otherwise(
                F.col("bucket")
            ),
        )

    def write_state(self, new_state: DataFrame, ms_tables: list[str]) -> None:
        run_dir = self.cfg.layout.merge_run(self.run_id, self.hour, self.attempt)
        with (
            job_named(self.spark, "merge: the touched buckets' new state"),
            sql_conf(self.spark, FOLD_CONF),
        ):
            (  # each bucket is in one task already (`fold`): one file per bucket. No
                # dictionaries: most columns are a value per key, and building a dictionary of
                # them to throw it away cost ~0.4 s of writing 100k keys (the files are no
                # bigger without)
                new_state.withColumn("_t", F.col("table"))
                .withColumn("_b", F.col("bucket"))
                .write.mode("overwrite")
                .option("parquet.enable.dictionary", "false")
                .partitionBy("_t", "_b")
                .parquet(str(run_dir))
            )
        checkpoint("merge:state-written")
        ddl = STATE_DDL + ", o_sign int, o_ck bigint"  # `DELTA_COLS`: NULL in rewritten rows
        state = self.spark.read.schema(ddl).parquet(str(run_dir)).select(*STATE_COLS, *DELTA_COLS)
        self.written = state
        live = live_rows(state, ms_tables)
        # a keyed table's live rows are a filter of the files just written: read again, they
        # cost less than a disk copy of them; a keyless table's are an aggregate, kept
        self.live = live.persist(CACHE) if ms_tables else live
        checks = self.value_checks()
        keyed = {n: self.buckets_of(n) for n in self.names if self.schemas[n].primary_key}
        self.bstats = bucket_stats(state, self.live, self.to_count(checks), keyed, ms_tables)

    def to_count(
        self, checks: dict[str, list[tuple[str, str]]]
    ) -> dict[str, list[tuple[str, str]]]:
        """The tables of `checks` whose written rows `bucket_stats` counts for values that do
        not fit (`checks_needed`: not those whose every value is known to fit). A schema change
        rewrites the rows a table's state held before the hour, unchecked; a table's first hour
        (its schema learned, no state before) holds none: its rows are the hour's changes, each
        checked or vouched for by the decode's classes on its way in, with the same checks."""
        return {
            n: c
            for n, c in checks.items()
            if c
            and checks_needed(
                self.man["tables"].get(n),
                self.touched[n],
                self.checks_digest[n],
                (self.schema_changed[n] and n in self.man["tables"]) or n in self.snapshot_for,
            )
        }

    def update_entry(self, n: str, entry: TableEntry) -> None:
        """Point the table's touched buckets at the folders this run wrote (merge-on-read: add
        them to the buckets' deltas)."""
        base = self.cfg.layout.merge
        run_dir = self.cfg.layout.merge_run(self.run_id, self.hour, self.attempt)
        for b in sorted(self.touched[n]):
            st = self.bstats.get((n, b))
            prev = entry["files"].get(str(b))
            path = str((run_dir / partition_folder("_t", n) / f"_b={b}").relative_to(base))
            if n in self.mor and prev is not None:
                if st is not None:  # else nothing changed: every change stale or already in
                    entry["files"][str(b)] = self.with_delta(prev, path, st)
                continue
            if st is None or not st["state_rows"]:
                entry["files"].pop(str(b), None)
                continue
            entry["files"][str(b)] = {
                "path": path,
                "rows": st["rows"],
                "state_rows": st["state_rows"],
                "checksum": str(st["checksum"] % U64),
                "run_id": self.run_id,
                "hour": self.H,
                "unfit_checks": self.checks_digest[n],
                "unfit_values": sum(st["unfit"].values()),
            }
        entry["schema"] = self.schemas[n].to_json()
        entry["checksum_terms"] = CHECKSUM_TERMS
        if n in self.snapshot_for:
            entry["snapshot_loaded"] = True

    def with_delta(self, prev: BucketFile, path: str, st: BucketStats) -> BucketFile:
        """A bucket's record once the delta at `path` (its statistics `st`) joins it."""
        delta: DeltaFile = {
            "path": path, "state_rows": st["state_rows"], "run_id": self.run_id, "hour": self.H,
        }  # fmt: skip
        checksum = int(prev["checksum"]) + st["checksum"] - st["lost_checksum"]
        return {
            **prev,
            "deltas": [*prev.get("deltas", []), delta],
            "rows": int(prev["rows"]) + st["rows"] - st["lost_rows"],
            "state_rows": int(prev["state_rows"]) + st["state_rows"],
            "checksum": str(checksum % U64),
            "run_id": self.run_id,
            "hour": self.H,
            "unfit_values": int(prev.get("unfit_values", 0)) + sum(st["unfit"].values()),
        }

    def snapshot_props(self, n: str) -> dict[str, str]:
        """What the Iceberg snapshots this hour commits for table `n` say of it (a version
        holding corrections from the source says so: `recon.correction`)."""
        props = {
            "recon.pipeline": self.cfg.name,
            "recon.hour": self.H,
            "recon.run-id": self.run_id,
            "recon.schema-version": str(self.schemas[n].version),
        }
        if self.entered["repaired"].get(n):
            props["recon.correction"] = "true"
        return props

    def publish(self, n: str) -> PublishResult:
        return publish_table(
            self.spark,
            self.cfg,
            n,
            self.schemas[n],
            self.live.where(F.col("table") == n),
            sorted(self.touched[n]),
            self.snapshot_props(n),
            (self.run_id, self.H, self.attempt),
            self.written_checks(n),
            replace_all=n not in self.man["tables"] or self.unpublished(n),
            # every changed key, not only those the state held live: an attempt stopped after
            # its commit may have published keys the state does not hold yet
            replaced=self.written.where(F.col("table") == n) if n in self.mor else None,
            # what this version holds is the newest merged hour's: hour H's tag stays on H's
            tag=max(self.H, newest_hour_of(self.man, n) or self.H),
        )

    def publish_history(self, n: str) -> HistoryResult:
        """The hour's versions of table `n` into its history (`recon.publish.history`): every
        change, in a rebuild's hours too (the history is built from the decoded hours)."""
        s = self.schemas[n]
        props = self.snapshot_props(n)
        changes = versions(self.to_fold.where(F.col("table") == n), s.primary_key)
        ddl = []
        if self.schema_changed[n]:  # the hour's DDL dates the columns it adds (a few rows)
            of_table = (F.col("table") == n) & (F.col("op") == "ddl")
            rows = self.events.where(of_table).select("event_time_ms", "ddl").collect()
            ddl = [(int(r[0]), r[1] or "") for r in rows if r[0] is not None]  # else: undated
        return publish_history(
            self.spark, self.cfg, n, s, changes, sorted(self.touched[n]), props,
            (self.run_id, self.H, self.attempt), ddl,
        )  # fmt: skip

    @property
    def histories(self) -> list[str]:
        """The tables merged this hour that keep a history (`history: true`)."""
        return [n for n in self.names if keeps_history(self.cfg, n)]

    def written_checks(self, n: str) -> tuple[dict[str, int], int]:
        """Over the rows written for table `n` (its touched buckets): values published as NULL
        per column, and duplicate keys (`bucket_stats`)."""
        unfit: dict[str, int] = {}
        dup = 0
        for (t, _), st in self.bstats.items():
            if t == n:
                for c, k in st["unfit"].items():
                    unfit[c] = unfit.get(c, 0) + k
                dup += st["dup_keys"]
        return dict(sorted(unfit.items())), dup

    def finish_table(self, n: str, new_man: Manifest, publish: bool) -> TableMerge:
        entry = new_man["tables"].setdefault(
            n, {"buckets": self.buckets_of(n), "files": {}, "schema": {}}
        )
        rows_before = sum(int(f["rows"]) for f in entry["files"].values())
        self.update_entry(n, entry)
        pub: PublishResult = (
            self.publish(n) if publish else {"committed": False, "snapshot_id": None}
        )
        if publish:
            entry["snapshot_id"] = pub["snapshot_id"]
        else:  # the version published last no longer holds this state (`unpublished`)
            entry.pop("snapshot_id", None)
        s = self.schemas[n]
        prev = self.man["tables"].get(n)
        before = prev["schema"].get("history", []) if prev else []
        changes = [f"v{h['version']}: {h['change']} ({h['why']})" for h in s.history[len(before) :]]
        entered = self.entered["by_op"].get(n, {})
        stale, again = self.skips.get(n, (0, 0))
        unfit = self.unfit.get(n, {})
        ops = self.by_table_op.get(n, {})
        files = entry["files"].values()
        return {
            "rows_before": rows_before,
            "rows_after": sum(int(f["rows"]) for f in files),
            "checksum": str(sum(int(f["checksum"]) for f in files) % U64),
            "changes_by_op": dict(sorted((k, v) for k, v in ops.items() if k != "ddl")),
            "entered_by_op": dict(sorted(entered.items())),
            "applied": sum(entered.values()) - stale - again,
            "pk_changes": self.entered["pk_changes"].get(n, 0),
            "snapshot_rows_loaded": self.entered["snapshot_rows"].get(n, 0),
            "repaired": self.entered["repaired"].get(n, 0),
            "skipped": {
                "below_snapshot_watermark": self.skipped_wm.get(n, 0),
                "stale": stale,
                "already_applied": again,
                "uncastable": unfit.get("changes", 0),
            },
            "uncastable_columns": {c: k for c, k in sorted(unfit.items()) if c != "changes"},
            "not_comparable_to_watermark": self.not_comparable.get(n, 0),
            "ddl_seen": int(ops.get("ddl", 0)),
            "schema_version": s.version,
            "schema_changed": bool(self.schema_changed[n]),
            "schema_changes": changes,
            "buckets_touched": len(self.touched[n]),
            "buckets": self.buckets_of(n),
            "primary_key": s.primary_key,
            "published": pub,
            "folded_in_decode": (
                sum(self.superseded.get(n, {}).values()) if n in self.prefolded else 0
            ),
            "checked_in_decode": n in self.checked_in_decode,
        }

    def commit_manifest(self, new_man: Manifest) -> None:
        new_man["version"] = self.man["version"] + 1
        new_man["hours"], new_man["partial_hours"] = merged_hours(
            self.man, self.H, self.names, list(self.cfg.tables)
        )
        new_man["snapshot"] = self.snapshot_info
        new_man["last_run"] = {"run_id": self.run_id, "hour": self.H}
        # kept as the state at the end of the newest merged hour: an earlier hour merged again
        # (late data, a cleared run) leaves a state through the newest hour, and the state
        # saved for the earlier hour stays what that hour left (what rollback restores)
        # (a state merged without publishing is not kept for an hour: no version shows it, and
        # a state saved earlier for the hour, with the version that showed it, stays in force)
        newest = new_man["hours"][-1] if self.publishing else None
        save_manifest(self.cfg, new_man, newest, expected=self.man["version"])

    def result(self, tables_out: dict[str, TableMerge], limited: bool) -> MergeResult:
        out_file = self.cfg.layout.merge_result(self.hour)
        if limited and out_file.is_file():  # keep what earlier merges of this hour did
            earlier: MergeResult = read_json(out_file)
            kept = {t: v for t, v in earlier["tables"].items() if t not in self.names}
            tables_out = {**kept, **tables_out}
        configured = self.cfg.tables
        not_merged = {
            t: ops for t, ops in self.by_table_op.items() if t in configured and t not in tables_out
        }
        others = {t: ops for t, ops in self.by_table_op.items() if t not in configured}
        return {
            "pipeline": self.cfg.name,
            "hour": self.H,
            "run_id": self.run_id,
            "tables": dict(sorted(tables_out.items())),
            "merged_tables": self.names,
            "not_merged": {t: _changes(ops) for t, ops in sorted(not_merged.items())},
            "ddl_not_merged": sum(ops.get("ddl", 0) for ops in not_merged.values()),
            "not_configured": {t: _changes(ops) for t, ops in sorted(others.items())},
            "ddl_not_configured": sum(ops.get("ddl", 0) for ops in others.values()),
            "snapshot": self.snapshot_info,
            "hours_missing_before": self.missing[:24],
            "hours_missing_count": len(self.missing),
        }


def _with_rows(contrib: DataFrame, rows: DataFrame) -> DataFrame:
    """The events' contributions and rows from elsewhere (an out-of-band snapshot's, repairs):
    none set aside, none superseding a change; they have no source position."""
    out_of_band = rows.withColumn(UNFIT, F.array().cast("array<string>")).withColumn(SUP, no_sup())
    return contrib.unionByName(out_of_band, allowMissingColumns=True)


def _small_merge(cfg: PipelineConfig, hour: datetime) -> bool:
    """Whether the merge of `hour` reads little: the hour's records and the state's rows, and
    the snapshot files of tables whose state has not started (their first merge loads them)."""
    counters = read_json(cfg.layout.decode_counters(hour))
    records = int(counters.get("totals", {}).get("records", 0))  # tools write bare counters
    man = load_manifest(cfg, allow_missing=True)
    if records + state_rows(man) >= SMALL_HOUR_ROWS:
        return False
    return unloaded_snapshot_bytes(cfg, man) < SMALL_HOUR_BYTES


def hours_missing(
    start: datetime,
    hour: datetime,
    merged: list[str],
    partial: dict[str, list[str]] | None = None,
    names: list[str] | None = None,
) -> list[str]:
    """The hours from `start` up to `hour` (excluded) not among the `merged` ones, or merged
    (`partial`: hour -> tables) for only some tables and not for one of `names`."""
    done, partial = set(merged), partial or {}
    out, h = [], start
    while h < hour:
        H = hour_text(h)
        if H not in done or (H in partial and not set(names or []) <= set(partial[H])):
            out.append(H)
        h += timedelta(hours=1)
    return out


def check_state_matches_tables(
    cfg: PipelineConfig, man: Manifest, names: list[str], hour: str
) -> None:
    """No manifest at all (never merged, or lost) while a table has versions of other hours
    than this one: merging would replace the table by one hour's rows. The fix is to rebuild
    the state. (Versions of this very hour are a killed first merge being run again.)"""
    if man["version"] != 0:
        return
    published = [n for n in names if published_hours(cfg, n) - {hour}]
    if published:
        raise ManifestError(
            f"table {published[0]} is published but {cfg.layout.manifest} is missing; merging "
            "now would replace it by one hour's rows: rebuild the state from the decoded hours "
            f"with `recon rebuild --pipeline {cfg.source_file}`"
        )


def _changes(ops: dict[str, int]) -> int:
    return sum(n for op, n in ops.items() if op != "ddl")

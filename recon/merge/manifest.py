"""The merge state's manifest (`_state/<p>/merge/manifest.json`): which bucket folders hold each
table's state, its schema, the hours applied, the snapshot bootstrap.

The manifest is the commit point of a merge: it is replaced atomically after the publish, so a
run killed at any point leaves the previous one (and the previous published version) in force.
The state at the end of each merged hour is also kept (`manifests/hour=H.json`) for `recon
rollback`; an earlier hour merged again updates the newest hour's (the state then reflects every
hour through it), never the earlier hour's.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from recon.config import PipelineConfig
from recon.errors import ManifestError, NoSavedStateError, ReconError
from recon.layout import folder_files, hour_text, read_json, write_json_atomic
from recon.objstore import list_files


class DeltaFile(TypedDict):
    """A folder of state rows a merge-on-read hour added to a bucket (`fold_delta`)."""

    path: str
    """Relative to `_state/<p>/merge/`."""
    state_rows: int
    run_id: str
    hour: str


class BucketFile(TypedDict):
    """One key-hash bucket of a table's state: the folder written by the run that last
    rewrote it, and the deltas merge-on-read hours added since (a key's newest row among them
    is its state row)."""

    path: str
    """Relative to `_state/<p>/merge/`."""
    deltas: NotRequired[list[DeltaFile]]
    """Oldest first; absent or empty: the folder holds the bucket's whole state."""
    rows: int
    """Live rows it publishes."""
    state_rows: int
    """Rows of its folder and deltas (a key changed since the bucket was rewritten has more
    than one)."""
    checksum: str
    run_id: str
    hour: str
    unfit_checks: NotRequired[str]
    """`checks_digest` of the checks its live rows were counted with when it was written (the
    values that do not fit their published type: `unfit_value_checks`); absent in states
    written before it was kept, and where they were not counted (`checks_needed`)."""
    unfit_values: NotRequired[int]
    """What those checks found among its live rows (0: every value fits)."""


class TableEntry(TypedDict):
    buckets: int
    files: dict[str, BucketFile]
    """Bucket number (as text) -> its folder."""
    schema: dict[str, Any]
    """`TableSchema.to_json()`."""
    snapshot_loaded: NotRequired[bool]
    checksum_terms: NotRequired[int]
    """The form of its state rows' checksum terms (`recon.merge.contributions.CHECKSUM_TERMS`);
    absent in states written before session 49 (form 1)."""
    snapshot_id: NotRequired[int | None]
    """The Iceberg snapshot that publishes this state (what `recon rollback` restores; what
    `recon expire` keeps while the state is kept). Absent in states written before it was kept."""


class SnapshotInfo(TypedDict):
    watermark: dict[str, Any]
    loaded_in_hour: str
    run_id: str


class Manifest(TypedDict):
    version: int
    hours: list[str]
    """Every hour a merge applied to the state (for rollback and expiry)."""
    partial_hours: NotRequired[dict[str, list[str]]]
    """Hours of `hours` merged for some tables only (a run limited by `--tables`): hour -> the
    tables merged. An hour leaves it once every configured table has been merged."""
    snapshot: SnapshotInfo | None
    tables: dict[str, TableEntry]
    last_run: NotRequired[dict[str, str]]
    reset: NotRequired[dict[str, Any]]
    rolled_back: NotRequired[dict[str, Any]]


def bucket_dirs(f: BucketFile) -> list[str]:
    """The folders of a bucket's state (relative to `_state/<p>/merge/`): its base, then its
    deltas."""
    return [f["path"], *[d["path"] for d in f.get("deltas", [])]]


COMPACT_SHARE = 0.5
"""A bucket whose deltas hold more rows than this share of its base's is rewritten whole by
its next hour (its deltas folded in: a compaction), so that an hour's scan of the state
(`old_winners`), and the table's reads, stay near the size of the state's live rows."""
MAX_DELTAS = 24
"""A bucket with this many deltas is rewritten whole by its next hour (one folder per hour
read by every later hour's scan of the bucket)."""


def delta_rows(f: BucketFile) -> int:
    """The rows of a bucket's deltas."""
    return sum(int(d["state_rows"]) for d in f.get("deltas", []))


def due_for_compaction(f: BucketFile) -> bool:
    """Whether a bucket's next hour rewrites it (`COMPACT_SHARE`, `MAX_DELTAS`)."""
    added = delta_rows(f)
    base = int(f["state_rows"]) - added
    return len(f.get("deltas", [])) >= MAX_DELTAS or added > COMPACT_SHARE * base


def cheaper_rewritten(files: list[BucketFile], changed_keys: int) -> bool:
    """Whether an hour changing about `changed_keys` keys of buckets `files` rewrites them
    rather than adding deltas: with the deltas it would add they pass `COMPACT_SHARE` of the
    buckets' base, so the next hour would rewrite them anyway, and a rewrite costs about what
    the buckets hold while a delta costs about twice its rows (their old rows found in the
    state, then in the table). The 1M-update hour of a 1M-row table (`benchmarks.merge_cost`):
    43 s merged on read, 23 s rewritten (session 57, one run each)."""
    added = sum(delta_rows(f) for f in files)
    base = sum(int(f["state_rows"]) for f in files) - added
    return added + changed_keys > COMPACT_SHARE * base


def empty_manifest() -> Manifest:
    return {"version": 0, "hours": [], "snapshot": None, "tables": {}}


def load_manifest(cfg: PipelineConfig, allow_missing: bool = False) -> Manifest:
    """The merge state in force. A missing manifest while merged state exists, or one that
    cannot be read, is an error naming the fix: merging over it would start the tables again
    from one hour's changes. `allow_missing`: for the commands that start the state anew."""
    p = cfg.layout.manifest
    fix = f"rebuild the state from the decoded hours: `recon rebuild --pipeline {cfg.source_file}`"
    if p.is_file():
        try:
            man: Manifest = read_json(p)
        except ValueError as err:
            if allow_missing:
                return empty_manifest()
            raise ManifestError(f"{p} cannot be read ({err}); {fix}") from None
        return man
    layout = cfg.layout
    saved = (
        sorted(layout.saved_manifests.glob("hour=*.json"))
        if layout.saved_manifests.is_dir()
        else []
    )
    if saved and not allow_missing:
        raise ManifestError(
            f"{p} is missing, but the merge state of {len(saved)} hour(s) exists (last "
            f"{saved[-1].stem.removeprefix('hour=')}); {fix}"
        )
    return empty_manifest()


def snapshot_pending(man: Manifest, name: str) -> bool:
    """Whether table `name`'s state has not loaded the snapshot: it loads it when its state
    starts (first merge, or the first after a rebuild); states from before per-table tracking
    count as loaded."""
    tables = man["tables"]
    return not (name in tables and tables[name].get("snapshot_loaded")) and not (
        man.get("snapshot") is not None and name in tables
    )


def unloaded_snapshot_bytes(cfg: PipelineConfig, man: Manifest) -> int:
    """The bytes of the snapshot folders of the configured tables that have not loaded it:
    their next merge reads them, so a big snapshot makes a big run (`recon.ops.sizing`) and a
    big hour (`recon.merge.stage`) however few changes the hour has. A snapshot on S3 is
    sized on the bucket (its copies are made by the merge that loads it)."""
    if cfg.snapshot_path is None:
        return 0
    pending = [n for n in cfg.tables if snapshot_pending(man, n)]
    if cfg.snapshot_uri is not None:
        return sum(snapshot_objects(cfg.snapshot_uri, pending).values()) if pending else 0
    return sum(
        size
        for name in cfg.tables
        if snapshot_pending(man, name)
        for _, size, _ in folder_files(cfg.snapshot_path / name)
    )


def snapshot_objects(uri: str, names: list[str], watermark: bool = False) -> dict[str, int]:
    """URI -> size of a snapshot on S3's objects: the folders of tables `names`, and its
    `_watermark.json` when `watermark`."""
    base = uri.rstrip("/")
    folders = tuple(f"{base}/{n}/" for n in names)
    return {
        u: size
        for u, size in list_files(base).items()
        if u.startswith(folders) or (watermark and u == f"{base}/_watermark.json")
    }


def state_rows(man: Manifest) -> int:
    """The rows of the merge state (what a merge may read and rewrite)."""
    return sum(
        int(f.get("state_rows", f["rows"]))
        for t in man["tables"].values()
        for f in t["files"].values()
    )


def save_manifest(
    cfg: PipelineConfig,
    man: Manifest,
    hour: datetime | str | None = None,
    expected: int | None = None,
) -> None:
    """Commit `man` (and, for a merged hour, keep it as that hour's state for rollback).
    `expected`: the version this writer started from; another writer's commit in between makes
    this one fail loudly instead of overwriting it (a compare-and-swap on the version)."""
    layout = cfg.layout
    if expected is not None:
        on_disk = load_manifest(cfg, allow_missing=True)["version"]
        if on_disk != expected:
            raise ManifestError(
                f"{layout.manifest} changed while this command ran (version {expected} -> "
                f"{on_disk}: another writer committed); nothing was committed: run it again"
            )
    write_json_atomic(layout.manifest, man, indent=1, sort_keys=True)
    if hour is not None:
        write_json_atomic(layout.saved_manifest(hour), man, indent=1, sort_keys=True)


def merged_hours(
    man: Manifest, H: str, names: list[str], configured: list[str]
) -> tuple[list[str], dict[str, list[str]]]:
    """(hours, partial hours) of `man` once hour H is merged for `names`: H joins the hours, and
    stays partial (with the tables merged so far) until every configured table has been merged.
    An hour merged for every table before stays so when a run limited to some tables merges it
    again."""
    partial = dict(man.get("partial_hours", {}))
    if H not in man["hours"] or H in partial:
        merged = set(partial.get(H, [])) | set(names)
        if merged >= set(configured):
            partial.pop(H, None)
        else:
            partial[H] = sorted(merged)
    return sorted(set(man["hours"]) | {H}), partial


def newest_hour_of(man: Manifest, table: str) -> str | None:
    """The newest hour merged for `table` (an hour merged for other tables only, by a run
    limited with `--tables` or since the table's state was reset, is not its)."""
    partial = man.get("partial_hours", {})
    mine = [h for h in man["hours"] if h not in partial or table in partial[h]]
    return mine[-1] if mine else None


def copy_manifest(man: Manifest) -> Manifest:
    return copy.deepcopy(man)


def check_tables(cfg: PipelineConfig, tables: list[str] | None) -> list[str]:
    """The tables a merge covers: all configured ones, or the subset asked for (validated)."""
    if not tables:
        return list(cfg.tables)
    unknown = [t for t in tables if t not in cfg.tables]
    if unknown:
        raise ReconError(
            f"table {unknown[0]} is not in pipeline {cfg.name}; choose from {', '.join(cfg.tables)}"
        )
    return [t for t in cfg.tables if t in tables]  # config order


def reset_state(cfg: PipelineConfig, tables: list[str] | None = None) -> Manifest:
    """Forget the merge state of every table (or of `tables`): the next merge of each starts it
    again from the snapshot and replaces the whole published table (a new Iceberg snapshot; the
    earlier versions stay readable by time travel). Decoded hours are kept. Atomic, like a merge:
    a run killed after this just rebuilds again."""
    names = check_tables(cfg, tables)
    man = load_manifest(cfg, allow_missing=True)
    new = copy_manifest(man)
    for n in names:
        new["tables"].pop(n, None)
    if not new["tables"]:
        new["hours"], new["snapshot"] = [], None
        new.pop("partial_hours", None)
    else:
        # the hours merged stay merged for the other tables only: until the reset tables are
        # merged again, a merge of a later hour finds them missing (an hour_order finding),
        # not merged (a rebuild that stopped half-way would leave their gap unseen)
        before = man.get("partial_hours", {})
        new["partial_hours"] = {
            H: sorted(set(before.get(H, cfg.tables)) - set(names)) for H in new["hours"]
        }
    new["version"] = man["version"] + 1
    new["reset"] = {"tables": names, "version_before": man["version"]}
    save_manifest(cfg, new, expected=man["version"])
    return new


def saved_state(cfg: PipelineConfig, hour: datetime) -> Manifest:
    """The merge state as it was at the end of `hour` (checked complete), for rollback."""
    H = hour_text(hour)
    layout = cfg.layout
    saved = layout.saved_manifest(hour)
    if not saved.is_file():
        raise NoSavedStateError(
            f"no saved merge state for hour {H} of pipeline {cfg.name} (not merged, or merged "
            f"before states were kept per hour); `recon rebuild --to {H}` gives the same tables"
        )
    old: Manifest = read_json(saved)
    for t in old["tables"].values():
        for f in t["files"].values():
            for d in bucket_dirs(f):
                if not (layout.merge / d).is_dir():
                    raise NoSavedStateError(
                        f"the merge state of hour {H} lost {layout.merge / d}; "
                        f"`recon rebuild --to {H}` gives the same tables"
                    )
    return old


def rollback_state(
    cfg: PipelineConfig, hour: datetime, snapshot_ids: dict[str, int | None] | None = None
) -> Manifest:
    """Make the merge state what it was at the end of `hour` (its saved manifest; the bucket
    folders it names are never rewritten). Later hours leave the state: merging them again
    brings them back. `snapshot_ids`: the table versions that publish it now (the rollback's
    own commits). Atomic like a merge."""
    H = hour_text(hour)
    old = saved_state(cfg, hour)
    for name, sid in (snapshot_ids or {}).items():
        if name in old["tables"]:
            old["tables"][name]["snapshot_id"] = sid
    cur = load_manifest(cfg, allow_missing=True)
    new: Manifest = {
        **old,
        "version": cur["version"] + 1,
        "hours": [h for h in old["hours"] if h <= H],
        "partial_hours": {h: t for h, t in old.get("partial_hours", {}).items() if h <= H},
        "rolled_back": {"to_hour": H, "version_before": cur["version"]},
    }
    save_manifest(cfg, new, expected=cur["version"])
    return new


def checks_digest(checks: list[tuple[str, str]]) -> str:
    """A table's value checks (`unfit_value_checks`: column, SQL), as a short text a bucket's
    record keeps (`BucketFile.unfit_checks`): the schema's types and the published ones both
    change it."""
    return hashlib.sha256(json.dumps(checks).encode()).hexdigest()[:16]


def checks_needed(
    prev: TableEntry | None, touched: set[int], digest: str, rows_come_otherwise: bool
) -> bool:
    """Whether a table's live rows in the buckets an hour writes must be counted for values
    that do not fit (`recon.merge.state.bucket_stats`), a pass over every live row of those
    buckets (per state row: the cost would follow the state, not the hour's changes). Not when
    every one is known to fit: the hour's new images passed the same checks on their way in
    (`recon.merge.unfit.flag_unfit` sets aside the changes that fail), and every touched bucket
    already in the state was counted with the same checks (`digest`) when last written and
    held no value that does not fit. `rows_come_otherwise`: rows enter by another way this hour
    (a schema change rewrites them, a snapshot loads them): always counted."""
    if rows_come_otherwise:
        return True
    files = prev["files"] if prev else {}
    for b in touched:
        f = files.get(str(b))
        if f is not None and (f.get("unfit_checks") != digest or f.get("unfit_values") != 0):
            return True
    return False

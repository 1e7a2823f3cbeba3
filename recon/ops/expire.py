"""`recon expire`: keep a window of history, free the rest.

Every merged hour writes new bucket folders under `_state/<p>/merge/data/` and new Parquet
files under each published table; nothing is rewritten in place, which is what makes a killed
run harmless and `recon rollback` possible. Without expiry both grow for ever. This keeps the
last N hours (counted back from the newest merged hour):
- merge state: the states saved at the end of hours older than the window are dropped
  (rollback reaches back N hours), then every bucket folder no kept state names is deleted;
- published tables: age is judged by commit time, not by the hour a version is labelled with
  (an earlier hour merged again, a rollback, are recent commits with old labels). Every version
  a kept state names is kept (that is what rollback restores), and so is everything committed
  after the oldest of them; older versions are expired (the current one never), then data
  files no remaining version references are deleted.
Files are only deleted under folders of hours older than the window and only when no version
references them; expire holds the pipeline's writer lock, so no merge or publish is running
(a file a concurrent run could still commit does not exist while it runs). Each table's
metadata files no kept version reads are deleted too (`prune_metadata`), and the audit table
is kept to a few files (`expire_audit_table`).
What hours before the window's previous hour decoded, quarantined, merged and reported is
deleted (`expire_hour_outputs`); their offset intervals are folded into one file
(`recon.decode.input.offset_index.expire_intervals`). A rebuild from the snapshot is refused after
that (`recon.ops.rebuild`). The merge forgets old tombstones itself (`recon.merge.state.fold`).
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table, TableProperties

from recon.audit.table import load_audit_table
from recon.config import PipelineConfig
from recon.decode.input.offset_index import expire_intervals
from recon.errors import ReconError
from recon.hours import format_hour, parse_hour, retention_cutoff
from recon.layout import read_json, write_json_atomic
from recon.merge.manifest import Manifest, bucket_dirs, load_manifest
from recon.objstore import is_s3, list_files, remove
from recon.ops.lock import pipeline_lock
from recon.publish.iceberg import is_published, load_table, local_path, untag_versions
from recon.rawdumps import hour_folder, scan_topic

_HOUR_DIR = re.compile(r"^hour=(\d{4}-\d{2}-\d{2}T\d{2})$")


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def _old_hour_dirs(root: Path, cutoff: str) -> list[Path]:
    """`<root>/run=*/hour=H/` folders with H before the cutoff."""
    if not root.is_dir():
        return []
    out = []
    for run in root.iterdir():
        if run.is_dir() and run.name.startswith("run="):
            for h in run.iterdir():
                m = _HOUR_DIR.match(h.name)
                if m and m.group(1) < cutoff:
                    out.append(h)
    return sorted(out)


def _drop_empty_parents(dirs: list[Path], stop: Path) -> None:
    for d in dirs:
        p = d.parent
        while p != stop and p.is_dir() and not any(p.iterdir()):
            p.rmdir()
            p = p.parent


def kept_states(cfg: PipelineConfig, cutoff: str) -> list[Manifest]:
    """The state in force and the states saved at the end of hours in the window."""
    saved_dir = cfg.layout.saved_manifests
    kept: list[Manifest] = [load_manifest(cfg)]
    for f in sorted(saved_dir.glob("hour=*.json")) if saved_dir.is_dir() else []:
        if f.stem.removeprefix("hour=") >= cutoff:
            kept.append(read_json(f))
    return kept


def expire_state(cfg: PipelineConfig, cutoff: str, kept: list[Manifest]) -> dict[str, Any]:
    base = cfg.layout.merge
    saved_dir = cfg.layout.saved_manifests
    dropped_states = 0
    for f in sorted(saved_dir.glob("hour=*.json")) if saved_dir.is_dir() else []:
        if f.stem.removeprefix("hour=") < cutoff:
            f.unlink()
            dropped_states += 1
    referenced = {
        (base / d).resolve()
        for m in kept
        for t in m["tables"].values()
        for f in t["files"].values()
        for d in bucket_dirs(f)
    }
    removed, freed = [], 0
    for hour_dir in _old_hour_dirs(base / "data", cutoff):
        # bucket folders of each attempt (`try=*/`), and of states from before attempts
        for bucket in sorted([*hour_dir.glob("_t=*/_b=*"), *hour_dir.glob("try=*/_t=*/_b=*")]):
            if bucket.resolve() not in referenced:
                freed += _size(bucket)
                shutil.rmtree(bucket)
                removed.append(bucket)
        for written in [hour_dir, *hour_dir.glob("try=*")]:
            for t in sorted(written.glob("_t=*")):
                if t.is_dir() and not any(p.name.startswith("_b=") for p in t.iterdir()):
                    shutil.rmtree(t)  # only Spark's markers were left
            if written != hour_dir and not any(written.glob("_t=*")):
                shutil.rmtree(written)
        if hour_dir.is_dir() and not any(
            p.name.startswith(("_t=", "try=")) for p in hour_dir.iterdir()
        ):
            shutil.rmtree(hour_dir)
            removed.append(hour_dir)
    _drop_empty_parents(removed, base / "data")
    return {"saved_states_dropped": dropped_states, "folders_removed": len(removed), "bytes": freed}


_UNRECORDED = object()


def expire_table(
    cfg: PipelineConfig, name: str, cutoff: str, kept: list[Manifest], keep_versions: int
) -> dict[str, Any]:
    table = load_table(cfg, name)
    old, note = _expired_versions(table, name, kept)
    yours = protected_versions(table)
    if yours.keys() & set(old):
        kept_refs = sorted(n for i in set(old) & yours.keys() for n in yours[i])
        old = [i for i in old if i not in yours]
        note = "; ".join(
            filter(None, [note, f"kept the versions your refs {', '.join(kept_refs)} hold"])
        )
    if old:
        for attempt in range(3):  # a commit may land in between: reload and try again
            try:
                untag_versions(table, set(old))  # a tag would keep its version (and files)
                table.maintenance.expire_snapshots().by_ids(old).commit()
                break
            except CommitFailedException:
                if attempt == 2:
                    raise
                table = load_table(cfg, name)
                old = [s.snapshot_id for s in table.snapshots() if s.snapshot_id in set(old)]
        table = load_table(cfg, name)
    mirror = cfg.layout.object_mirror
    live = _live_files(table, mirror)
    files = _table_files(table, "data", mirror)
    gone = {f: n for f, n in files.items() if f not in live and _hour_of(f, cutoff)}
    _remove(list(gone), mirror)
    _drop_empty_hour_dirs(local_path(table.location(), mirror) / "data", cutoff)
    emptied = {_hour_folder(f) for f in gone} - {_hour_folder(f) for f in files if f not in gone}
    out: dict[str, Any] = {
        "snapshots_expired": len(old),
        "metadata_files_removed": prune_metadata(table, keep_versions, mirror),
        "folders_removed": len(emptied),
        "bytes": sum(gone.values()),
    }
    if note:
        out["note"] = note
    return out


def _live_files(table: Table, mirror: Path) -> set[str]:
    """The data files and position-delete files the table's kept versions read (`_file_id`)."""
    return {
        _file_id(f.file_path, mirror)
        for s in table.snapshots()
        for t in table.scan(snapshot_id=s.snapshot_id).plan_files()
        for f in (t.file, *t.delete_files)
    }


def _file_id(uri: str, mirror: Path) -> str:
    """A table file as `_table_files` names it: an object's URI, a local file's path."""
    return uri if is_s3(uri) else str(local_path(uri, mirror))


def _table_files(table: Table, sub: str, mirror: Path) -> dict[str, int]:
    """`_file_id` -> size of the files under the table's folder `sub` (`data`, `metadata`): its
    objects, for a table on S3; Spark's hidden checksum files left out (`_remove` takes them)."""
    location = table.location().rstrip("/")
    if is_s3(location):
        return list_files(f"{location}/{sub}")
    root = local_path(location, mirror) / sub
    found = root.rglob("*") if root.is_dir() else []
    return {str(f): f.stat().st_size for f in found if f.is_file() and f.name[0] != "."}


def _remove(files: list[str], mirror: Path) -> None:
    """Delete table files (`_file_id`s): objects with their copies, local files with Spark's
    checksum beside them."""
    remove([f for f in files if is_s3(f)], mirror)
    for f in (Path(f) for f in files if not is_s3(f)):
        f.unlink(missing_ok=True)
        f.with_name(f".{f.name}.crc").unlink(missing_ok=True)


def _hour_folder(file: str) -> str:
    """The `.../run=R/hour=H` folder a data file was written under ('' for none)."""
    m = re.search(r"^(.*/run=[^/]+/hour=[^/]+)/", file)
    return m.group(1) if m else ""


def _hour_of(file: str, cutoff: str) -> bool:
    """Whether a data file was written under an hour's folder (`table_data_run`) before the
    cutoff: only those are expired."""
    m = _HOUR_DIR.match(_hour_folder(file).rsplit("/", 1)[-1])
    return m is not None and m.group(1) < cutoff


def _drop_empty_hour_dirs(data: Path, cutoff: str) -> None:
    """Delete the local (or mirrored) hour folders before the cutoff that hold no Parquet file
    left, and the run folders they emptied."""
    removed = [d for d in _old_hour_dirs(data, cutoff) if not any(d.rglob("*.parquet"))]
    for d in removed:
        shutil.rmtree(d)
    _drop_empty_parents(removed, data)


def protected_versions(table: Any) -> dict[int, list[str]]:
    """The versions a tag or branch of someone else's names (not `main`, not the `hour-*`
    tags this project keeps): Iceberg refuses to expire them, and they are not ours to drop."""
    out: dict[int, list[str]] = {}
    for ref_name, ref in table.metadata.refs.items():
        if ref_name != "main" and not ref_name.startswith("hour-"):
            out.setdefault(ref.snapshot_id, []).append(ref_name)
    return out


def _expired_versions(table: Any, name: str, kept: list[Manifest]) -> tuple[list[int], str]:
    """The snapshots to expire: committed before the oldest version a kept state names, neither
    named by one nor current. States from before versions were recorded name none: then
    nothing is expired (a later expire, once the window holds only newer states, does it)."""
    recorded = [
        m["tables"][name].get("snapshot_id", _UNRECORDED) for m in kept if name in m["tables"]
    ]
    if any(r is _UNRECORDED for r in recorded):
        return [], "kept every version: the window has states from before versions were recorded"
    current = table.current_snapshot()
    named = {int(r) for r in recorded if r is not None}  # type: ignore[call-overload]
    if current is not None:
        named.add(current.snapshot_id)
    times = [s.timestamp_ms for s in table.snapshots() if s.snapshot_id in named]
    if not times:
        return [], ""
    boundary = min(times)
    return [
        s.snapshot_id
        for s in table.snapshots()
        if s.timestamp_ms < boundary and s.snapshot_id not in named
    ], ""


def expire(cfg: PipelineConfig, keep_hours: int, lock_wait: float = 0) -> dict[str, Any]:
    """Keep `keep_hours` of history (see the module docstring), as the pipeline's one writer."""
    if keep_hours < 1:
        raise ReconError("--keep-hours must be at least 1 (the newest hour is always kept)")
    with pipeline_lock(cfg, "recon expire", lock_wait):
        return _expire(cfg, keep_hours)


def _expire(cfg: PipelineConfig, keep_hours: int) -> dict[str, Any]:
    hours = load_manifest(cfg)["hours"]
    if not hours:
        raise ReconError(f"pipeline {cfg.name} has no merged hour yet; nothing to expire")
    cutoff = format_hour(retention_cutoff(parse_hour(hours[-1]), keep_hours))
    kept = kept_states(cfg, cutoff)  # read once: the state and the tables keep the same ones
    out: dict[str, Any] = {"cutoff": cutoff, "state": expire_state(cfg, cutoff, kept), "tables": {}}
    for name in cfg.tables:
        if is_published(cfg, name):
            out["tables"][name] = expire_table(cfg, name, cutoff, kept, keep_hours)
    out["audit_table"] = expire_audit_table(cfg, keep_hours)
    before = format_hour(parse_hour(cutoff) - timedelta(hours=1))
    out["hour_outputs"] = expire_hour_outputs(cfg, before)
    return out


_HOUR_NAMED = re.compile(r"^(?:hour=)?(\d{4}-\d{2}-\d{2}T\d{2})(?:\.json)?$")


def hour_output_roots(cfg: PipelineConfig) -> list[Path]:
    """The folders whose entries are named by an hour (`hour=H/`, `hour=H.json`, `H/`): the
    decode's outputs, the Kafka Connect copies, quarantine, merge results and audit reports."""
    lay, h = cfg.layout, cfg.start
    return [
        lay.events(h).parent,
        lay.winners(h).parent,
        lay.carry(h).parent,
        lay.offset_hashes(h).parent,
        lay.schema(h).parent,
        lay.decode_counters(h).parent,
        lay.timings(h).parent,
        lay.connect_root,
        lay.quarantine(h).parent,
        lay.merge_quarantine(h).parent,
        lay.merge_result(h).parent,
        lay.audit_root,
    ]


def expire_hour_outputs(cfg: PipelineConfig, before: str) -> dict[str, int]:
    """Delete what hours before `before` left (`hour_output_roots`); their offset intervals
    are folded into one file (`recon.decode.input.offset_index.expire_intervals`). `before` is the
    hour before the window: the window's first hour reads that hour's carry, table definitions,
    counters and report when it is decoded or audited again."""
    removed, freed = 0, 0
    for root in hour_output_roots(cfg):
        for p in sorted(root.iterdir()) if root.is_dir() else []:
            m = _HOUR_NAMED.match(p.name)
            if m is None or m.group(1) >= before:
                continue
            if p.is_dir():
                freed += _size(p)
                shutil.rmtree(p)
            else:
                freed += p.stat().st_size
                p.unlink()
            removed += 1
    for folder in _dump_copies(cfg, before):
        freed += _size(folder)
        shutil.rmtree(folder)
        removed += 1
    folded = expire_intervals(cfg.layout, before)
    marker = cfg.layout.expired_marker
    prior = read_json(marker)["hours_before"] if marker.is_file() else ""
    write_json_atomic(marker, {"hours_before": max(prior, before)})
    return {"removed": removed, "bytes": freed, "offset_hours_folded": folded}


def _dump_copies(cfg: PipelineConfig, before: str) -> list[Path]:
    """The hour folders of the dumps' copies of a pipeline reading them from S3
    (`recon.objstore`) for hours before `before` (fetched again should one be read)."""
    if cfg.raw_uri is None:
        return []
    out = []
    for topic in cfg.topics:
        for h in scan_topic(cfg.raw_path, topic, cfg.dump):
            folder = hour_folder(cfg.raw_path, topic, h, cfg.dump)
            if format_hour(h) < before and isinstance(folder, Path):
                out.append(folder)
    return out


def prune_metadata(table: Table, keep_versions: int, mirror: Path) -> int:
    """Delete the files under the table's `metadata/` that neither its current metadata, the
    metadata files its log keeps, nor a version it keeps reads (Iceberg leaves them: every
    commit writes a metadata file, a manifest list and manifests). The log is bounded by the
    table property `write.metadata.previous-versions-max`, set to `keep_versions` (once)."""
    prop = TableProperties.METADATA_PREVIOUS_VERSIONS_MAX
    if table.properties.get(prop) != str(keep_versions):
        with table.transaction() as tx:
            tx.set_properties({prop: str(keep_versions)})
    md = table.metadata
    reached = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    for snap in md.snapshots:
        reached.add(snap.manifest_list)
        reached.update(m.manifest_path for m in snap.manifests(table.io))
    reached.update(st.statistics_path for st in md.statistics)
    reached_ids = {_file_id(u, mirror) for u in reached}
    gone = [f for f in _table_files(table, "metadata", mirror) if f not in reached_ids]
    _remove(gone, mirror)
    return len(gone)


def expire_audit_table(cfg: PipelineConfig, keep_hours: int) -> dict[str, int]:
    """The audit table keeps a row per hour for good (trends); what expire bounds is its files:
    the rows are written again as one file once there are more than `keep_hours` of them, the
    versions but the newest `keep_hours` are expired, and the files none of the rest reads
    are deleted."""
    table = load_audit_table(cfg)
    if table is None:
        return {"snapshots_expired": 0, "files_removed": 0}
    if len(table.inspect.data_files()) > keep_hours:
        table.overwrite(table.scan().to_arrow())  # a row per hour: small
    mine = protected_versions(table)
    current = table.current_snapshot()
    newest = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)[-keep_hours:]
    keep = {s.snapshot_id for s in newest} | mine.keys()
    if current is not None:
        keep.add(current.snapshot_id)
    old = [s.snapshot_id for s in table.snapshots() if s.snapshot_id not in keep]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    mirror = cfg.layout.object_mirror
    live = _live_files(table, mirror)
    data = _table_files(table, "data", mirror)
    files = [f for f in data if f.endswith(".parquet") and f not in live]
    _remove(files, mirror)
    return {
        "snapshots_expired": len(old),
        "files_removed": len(files) + prune_metadata(table, keep_hours, mirror),
    }

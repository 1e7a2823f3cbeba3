"""`recon reconcile --jdbc URL --repair [--dry-run]`: drift corrected from the live source.

Under the pipeline's writer lock: the source's rows are read once at a consistent point and
compared with the table's current version (`recon.audit.reconcile`). Nothing is repaired while
the source is past the stream decoded so far (a difference may be a change on its way), nor
keys in flight (the stream changes them in hours not merged yet). Each other difference becomes
a contribution of the version's hour (`recon.merge.repairs`), that hour is merged again for the
table (one correction commit, `recon.correction=true`, with a history version `repair` where
the table keeps one), the table is compared again with the same source rows, and the hour's
report is written again: a `repaired` finding, each key's row before and after, and the new
comparison. `--dry-run` lists what would change and changes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from recon.audit.reconcile import Comparison, compare_table, read_source
from recon.audit.stage import audit_hour
from recon.config import PipelineConfig
from recon.errors import ReconError
from recon.hours import parse_hour
from recon.layout import new_attempt, read_json, write_json_atomic
from recon.merge.manifest import load_manifest, newest_hour_of
from recon.merge.repairs import planned_repairs
from recon.merge.stage import merge_hour
from recon.ops.lock import pipeline_lock

LISTED = 1000
"""At most this many repaired keys are listed with their rows in the hour's report (all of
them are in the repair's Parquet files, named there)."""


def repair_table(
    spark: SparkSession,
    cfg: PipelineConfig,
    name: str,
    source: tuple[str, str | None, str | None],
    buckets: int = 64,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Repair table `name` from the live source (`source`: JDBC URL, user, password); returns
    what was (with `dry_run`: would be) repaired, and the comparisons before and after."""
    with pipeline_lock(cfg, "recon reconcile --repair"):
        rows = read_source(spark, cfg, name, *source)
        read_ms = int(time.time() * 1000)
        cmp = compare_table(spark, cfg, name, rows, None, buckets)
        res = cmp.result
        man = load_manifest(cfg)
        hour = newest_hour_of(man, name)
        _check_repairable(cfg, name, cmp, hour)
        out: dict[str, Any] = {"table": name, "before": res, "dry_run": dry_run, "repaired": 0}
        if not res["mismatches"] or cmp.diffs is None or hour is None:
            return out
        plan = planned_repairs(spark, man, cfg, name, cmp.diffs, cmp.logical, cmp.pk, read_ms)
        listed = plan.select("kind", "key", "before", "after").orderBy("key").limit(LISTED)
        keys = [r.asDict() for r in listed.collect()]
        out.update(hour=hour, repaired=res["mismatches"], keys=keys)
        if dry_run:
            return out
        repair_id = new_attempt()
        doc = {
            "repair_id": repair_id,
            "source": res["source"],
            "read_at_ms": read_ms,
            "counts": {k: res[k] for k in ("missing", "extra", "different")},
            "in_flight_not_repaired": res["in_flight"],
            "snapshot_before": res["published_snapshot_id"],
            "files": str(_write_plan(plan, cfg, hour, repair_id)),
            "keys": keys,
            "keys_listed": len(keys),
        }
        _record(cfg, hour, name, doc)  # first: a repair stopped after its merge is still listed
        merged = merge_hour(
            spark, cfg, parse_hour(hour, "hour"), buckets=cfg.buckets, tables=[name]
        )
        after = compare_table(spark, cfg, name, rows, None, buckets).result
        doc["snapshot_after"] = merged["tables"][name]["published"].get("snapshot_id")
        doc["mismatches_after"] = after["mismatches"]
        _record(cfg, hour, name, doc, after)
        audit_hour(spark, cfg, parse_hour(hour, "hour"))
        out.update(after=after, repair=doc)
        return out


def _check_repairable(cfg: PipelineConfig, name: str, cmp: Comparison, hour: str | None) -> None:
    res = cmp.result
    if res.get("pending"):
        raise ReconError(
            f"the source was read at {res['source_ahead']['source']}, past the stream decoded so "
            f"far: {res['pending']} differing rows of {name} may be changes on their way, so "
            "nothing was repaired; decode and merge the hours through that position, then "
            "repair again"
        )
    if res["mismatches"] and not cmp.pk:
        raise ReconError(
            f"table {name} has no primary key: a repair corrects rows by key; declare one with "
            f"`primary_key: [col, ...]` in its options in {cfg.source_file}"
        )
    if res["mismatches"] and hour is None:
        raise ReconError(
            f"table {name} has no merged hour in {cfg.layout.manifest}: its state does not "
            f"hold what it publishes; rebuild it (`recon rebuild --pipeline {cfg.source_file}`), "
            "then repair"
        )


def _write_plan(plan: Any, cfg: PipelineConfig, hour: str, repair_id: str) -> Path:
    """The repair's rows in `repairs/hour=H/repair=<id>/`, whole or not at all (written beside
    it, then renamed: a merge never reads half a repair)."""
    root = cfg.layout.repairs_root / f"hour={hour}"
    final = root / f"repair={repair_id}"
    tmp = root / f".tmp-{repair_id}"
    plan.coalesce(1).write.mode("overwrite").parquet(str(tmp))
    tmp.rename(final)
    return final


def _record(
    cfg: PipelineConfig,
    hour: str,
    name: str,
    doc: dict[str, Any],
    after: dict[str, Any] | None = None,
) -> None:
    """The repair beside the hour's report (`repair-<table>.json`: every repair of the hour's
    version, oldest first; this one replaced by `doc`) and the comparison after it
    (`reconcile-<table>.json`): the hour's audit reads both into its report."""
    folder = cfg.layout.audit(parse_hour(hour, "hour"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"repair-{name}.json"
    runs = read_json(path)["repairs"] if path.is_file() else []
    runs = [r for r in runs if r["repair_id"] != doc["repair_id"]] + [doc]
    write_json_atomic(path, {"table": name, "hour": hour, "repairs": runs})
    if after is not None:
        write_json_atomic(folder / f"reconcile-{name}.json", after)

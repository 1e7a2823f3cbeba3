"""`recon rollback`: the pipeline back to the end of an hour (merge state and tables)."""

from __future__ import annotations

from typing import Any

from recon.config import load_config
from recon.hours import format_hour, parse_hour
from recon.merge.manifest import load_manifest, rollback_state, saved_state
from recon.merge.repairs import drop_repairs_after
from recon.ops.lock import pipeline_lock
from recon.ops.run import QUIET, Progress
from recon.publish.history import keeps_history, trim_history
from recon.publish.iceberg import is_published, restore_version, version_at_hour
from recon.spark.session import get_spark


def rollback(
    pipeline: str, to_hour: str, progress: Progress = QUIET, lock_wait: float = 0
) -> dict[str, Any]:
    """Roll the pipeline back to the end of `to_hour`: its merge state as that hour left it, and
    every published table's version that published that state (the snapshot the hour's saved
    state names), restored as a new commit (the undone versions stay in the history). Every
    table's version is checked first: when one is gone (expired), nothing changes and the error
    says so. A table that had no version then is emptied, and the note says why. Later hours
    are no longer in the tables; merge them again (`recon run --from` the next hour, or clear
    their DAG runs) to bring them back. Decoding is kept."""
    cfg = load_config(pipeline)
    H = format_hour(parse_hour(to_hour, "--to-hour"))
    with pipeline_lock(cfg, "recon rollback", lock_wait):
        later = [h for h in load_manifest(cfg, allow_missing=True)["hours"] if h > H]
        saved = saved_state(cfg, parse_hour(H))
        targets = {
            t: version_at_hour(
                cfg,
                t,
                H,
                saved["tables"][t].get("snapshot_id", False) if t in saved["tables"] else None,
            )
            for t in cfg.tables
            if is_published(cfg, t)
        }
        restored = [restore_version(cfg, t, H, target) for t, target in targets.items()]
        histories = [t for t in cfg.tables if keeps_history(cfg, t)]
        if histories:  # the versions later hours published out, what they ended open again
            spark = get_spark(f"recon-rollback-{cfg.name}")
            for t in histories:
                trim_history(cfg, spark, t, H)
        rollback_state(cfg, parse_hour(H), {r["table"]: r["snapshot_id"] for r in restored})
        undone_repairs = drop_repairs_after(cfg, H)
    for r in restored:
        if r["restored_from"] is None:
            what = f"emptied (it was not merged yet at the end of {H})"
        else:
            done = "restored" if r["committed"] else "already current"
            what = f"version of {H} (snapshot {r['restored_from']}) {done}"
        progress.note(f"{cfg.name}: {r['table']}: {what}")
    if undone_repairs:
        progress.note(
            f"{cfg.name}: the repairs of the versions of {', '.join(undone_repairs)} are undone "
            "with them; once those hours are merged again, `recon reconcile --repair` again"
        )
    if later:
        progress.note(
            f"{cfg.name}: hours {later[0]} .. {later[-1]} are no longer in the tables; merge "
            f"them again with `recon run --pipeline {pipeline} --from {later[0]}` (or clear "
            "their DAG runs)"
        )
    return {"hour": H, "tables": restored, "hours_undone": later}

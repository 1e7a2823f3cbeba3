"""`recon rollback`: the pipeline back to the end of an hour (merge state and tables)."""

from __future__ import annotations

from typing import Any

from recon.config import load_config
from recon.hours import format_hour, parse_hour
from recon.merge.manifest import load_manifest, rollback_state
from recon.ops.lock import pipeline_lock
from recon.ops.run import QUIET, Progress
from recon.publish.iceberg import is_published, restore_version


def rollback(
    pipeline: str, to_hour: str, progress: Progress = QUIET, lock_wait: float = 0
) -> dict[str, Any]:
    """Roll the pipeline back to the end of `to_hour`: its merge state as that hour left it, and
    every published table's version of that hour, restored as a new commit (the undone versions
    stay in the history). Later hours are no longer in the tables; merge them again (`recon run
    --from` the next hour, or clear their DAG runs) to bring them back. Decoding is kept."""
    cfg = load_config(pipeline)
    H = format_hour(parse_hour(to_hour, "--to-hour"))
    with pipeline_lock(cfg, "recon rollback", lock_wait):
        later = [h for h in load_manifest(cfg, allow_missing=True)["hours"] if h > H]
        rollback_state(cfg, parse_hour(H))
        restored = [restore_version(cfg, t, H) for t in cfg.tables if is_published(cfg, t)]
    for r in restored:
        what = "restored" if r["committed"] else "already current"
        progress.note(
            f"{cfg.name}: {r['table']}: version of {H} (snapshot {r['restored_from']}) {what}"
        )
    if later:
        progress.note(
            f"{cfg.name}: hours {later[0]} .. {later[-1]} are no longer in the tables; merge "
            f"them again with `recon run --pipeline {pipeline} --from {later[0]}` (or clear "
            "their DAG runs)"
        )
    return {"hour": H, "tables": restored, "hours_undone": later}

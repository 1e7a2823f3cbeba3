"""A day of one pipeline's hours through Airflow against the same hours through `recon run`.

Writes 24 small hours of DataWorks JSON (`recon.demo.sample`'s workload: inserts, updates,
deletes and primary-key changes, ~`--txns` transactions an hour), starts Airflow's services as
a deployment runs them (scheduler with the LocalExecutor, dag-processor, api-server, triggerer;
SQLite), backfills the 24 hours with `airflow backfill create`, and reads each run's and each
task's times from Airflow's REST API. Then `recon run --from H0 --to H23` merges the same hours
into a warehouse of its own, one process. Both warehouses must end with the same rows.

Prints per task (the DAG run's Spark application's start, the dump sensor, decode, merge and
publish, audit, the application's stop) its median and total seconds and the share of the
day, the runs' median wall time (queued to finished) and the day's wall time, against `recon
run`'s; writes `benchmarks/results/backfill-latest.json`.

`--shared-apps`: the workers keep each run's Spark application for the next run
(`RECON_SPARK_APP_SHARED`, docs/operations.md), as `recon demo` does.

Run: .venv/bin/python -m benchmarks.backfill [--hours 24] [--txns 400] [--shared-apps]
     [--work var/backfill]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recon.appsocket import stop_shared_apps
from recon.config import load_config
from recon.demo import sample
from recon.demo.demo import write_dump
from recon.hours import format_hour
from recon.publish.export import export_rows
from tests.support import builders
from tests.support.airflow_services import AirflowServices

ROOT = Path(__file__).resolve().parent.parent
NAME = "day"
DAG = f"recon_{NAME}"


def write_day(work: Path, start: datetime, hours: int, txns: int) -> int:
    """The day's dumps under `work/raw`; the records written."""
    changes = sample.workload(start, hours, txns_per_hour=txns, seed=11)
    records = sample.to_records(sample.encode_dataworks(changes), NAME)
    hour_list = [start + timedelta(hours=i) for i in range(hours)]
    write_dump(work / "raw", NAME, records, "jsonl", hour_list, in_order=True)
    return len(records)


def write_pipeline(folder: Path, work: Path, wh: str, start: datetime, hours: int) -> Path:
    last = start + timedelta(hours=hours - 1)
    return builders.write_pipeline(
        folder / f"{NAME}.yaml",
        name=NAME,
        format="dataworks_json",
        raw=work / "raw",
        warehouse=work / wh,
        start=start,
        # the scheduler runs no hour past the day: the backfill's are all there is
        airflow={"end_date": last.isoformat()},
        tables={"shop.orders": {"ddl": sample.CREATE_SQL}},
    )


def _seconds(a: str | None, b: str | None) -> float | None:
    if not a or not b:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def backfill(work: Path, start: datetime, hours: int, shared: bool) -> dict[str, Any]:
    """The day through the DAG: Airflow's services, `airflow backfill create`, every run and
    task instance as the REST API reports them."""
    pipelines = work / "pipelines"
    write_pipeline(pipelines, work, "wh_dag", start, hours)
    env = {"RECON_SPARK_APP_SHARED": str(work / "apps")} if shared else {}
    af = AirflowServices(work / "airflow", pipelines, **env)
    try:
        af.start()
        af.wait(lambda: af._get(f"/api/v2/dags/{DAG}"), 300, f"{DAG} parsed")
        t0 = time.time()
        last = start + timedelta(hours=hours - 1)
        r = af.airflow(
            "backfill", "create", "--dag-id", DAG,
            "--from-date", start.isoformat(), "--to-date", last.isoformat(),
            "--reprocess-behavior", "failed",
        )  # fmt: skip
        if r.returncode != 0:
            sys.exit(f"backfill: airflow backfill create failed: {(r.stderr or r.stdout)[-500:]}")
        af.api("PATCH", f"/api/v2/dags/{DAG}", {"is_paused": False})

        def finished() -> list[dict[str, Any]] | None:
            got = af.api("GET", f"/api/v2/dags/{DAG}/dagRuns?order_by=logical_date&limit=100")
            runs = [x for x in got["dag_runs"] if x["run_type"] == "backfill"]
            done = [x for x in runs if x["state"] in ("success", "failed")]
            return runs if len(runs) >= hours and len(done) == len(runs) else None

        runs = af.wait(finished, 60 * hours * 5, f"{hours} backfill runs finished")
        wall = time.time() - t0
        tasks = []
        for run in runs:
            path = f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances"
            for ti in af.api("GET", path)["task_instances"]:
                tasks.append(
                    {
                        "run": run["dag_run_id"],
                        "task": ti["task_id"],
                        "state": ti["state"],
                        "seconds": ti["duration"],
                        "queued_to_start": _seconds(ti.get("queued_when"), ti.get("start_date")),
                    }
                )
        return {
            "wall_seconds": round(wall, 1),
            "states": [x["state"] for x in runs],
            "run_seconds": [_seconds(x.get("queued_at"), x.get("end_date")) for x in runs],
            "tasks": tasks,
        }
    finally:
        af.stop()
        if shared:
            stop_shared_apps(str(work / "apps"))


def direct(work: Path, start: datetime, hours: int) -> dict[str, Any]:
    """The same hours through one `recon run`."""
    path = write_pipeline(work / "direct", work, "wh_run", start, hours)
    last = format_hour(start + timedelta(hours=hours - 1))
    cmd = [sys.executable, "-m", "recon.cli", "run", "--pipeline", str(path)]
    cmd += ["--from", format_hour(start), "--to", last]
    t0 = time.time()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        sys.exit(f"backfill: recon run failed: {(r.stderr or r.stdout)[-500:]}")
    return {"wall_seconds": round(wall, 1)}


def rows(work: Path, folder: str) -> list[tuple[Any, ...]]:
    cfg = load_config(work / folder / f"{NAME}.yaml")
    return sorted(tuple(sorted(r.items())) for r in export_rows(cfg, "shop.orders"))


def by_task(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task id: instances, median and total seconds, median wait from queued to started."""
    out = []
    for task in dict.fromkeys(t["task"] for t in tasks):
        mine = [t for t in tasks if t["task"] == task and t["seconds"] is not None]
        waits = [t["queued_to_start"] for t in mine if t["queued_to_start"] is not None]
        out.append(
            {
                "task": task,
                "instances": len(mine),
                "median_seconds": round(statistics.median(t["seconds"] for t in mine), 2),
                "total_seconds": round(sum(t["seconds"] for t in mine), 1),
                "median_queued_seconds": round(statistics.median(waits), 2) if waits else None,
            }
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    dag, run = result["airflow"], result["recon_run"]
    total = sum(t["total_seconds"] for t in result["by_task"])
    lines = [
        f"{result['hours']} hours, {result['records']:,} records "
        f"({result['records'] // result['hours']:,} an hour), one pipeline",
        "",
        "| task | instances | median s | total s | share of task time | median queued s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for t in result["by_task"]:
        q = "" if t["median_queued_seconds"] is None else f"{t['median_queued_seconds']:.1f}"
        lines.append(
            f"| {t['task']} | {t['instances']} | {t['median_seconds']:.1f} | "
            f"{t['total_seconds']:.1f} | {t['total_seconds'] / total:.0%} | {q} |"
        )
    runs = [s for s in dag["run_seconds"] if s is not None]
    lines += [
        "",
        f"Airflow backfill: {dag['wall_seconds']:.0f} s for the day "
        f"(a run's median {statistics.median(runs):.1f} s, queued to finished); "
        f"`recon run` of the same hours: {run['wall_seconds']:.0f} s "
        f"({dag['wall_seconds'] / run['wall_seconds']:.2f}x); rows equal: "
        f"{'yes' if result['rows_equal'] else 'NO'}.",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description="a day's backfill through Airflow against recon run")
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--txns", type=int, default=400, help="transactions an hour (1-3 changes each)")
    ap.add_argument("--shared-apps", action="store_true", help="keep applications for the next run")
    ap.add_argument("--work", default=str(ROOT / "var" / "backfill"))
    args = ap.parse_args()
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=args.hours + 1)  # every hour of the day is over
    records = write_day(work, start, args.hours, args.txns)
    print(
        f"backfill: {args.hours} hours from {format_hour(start)}, {records:,} records", flush=True
    )
    dag = backfill(work, start, args.hours, args.shared_apps)
    print(f"backfill: Airflow {dag['wall_seconds']} s, runs {set(dag['states'])}", flush=True)
    run = direct(work, start, args.hours)
    print(f"backfill: recon run {run['wall_seconds']} s", flush=True)
    result = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "hours": args.hours,
        "records": records,
        "shared_apps": args.shared_apps,
        "airflow": dag,
        "recon_run": run,
        "by_task": by_task(dag["tasks"]),
        "rows_equal": rows(work, "pipelines") == rows(work, "direct"),
    }
    out = (
        ROOT
        / "benchmarks"
        / "results"
        / f"backfill{'-shared' if args.shared_apps else ''}-latest.json"
    )
    out.write_text(json.dumps(result, indent=1))
    print(markdown(result))
    print(f"\nbackfill: {out}")
    if set(dag["states"]) != {"success"} or not result["rows_equal"]:
        sys.exit("backfill: a run failed or the two warehouses differ (see above)")


if __name__ == "__main__":
    main()

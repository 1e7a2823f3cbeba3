"""The audit reports inside the Airflow UI: a FastAPI app the plugin in `plugins/` mounts at
`/recon` on Airflow's api-server.

Pages (HTML, no scripts: Airflow shows them in a sandboxed iframe):
- `/recon/`: every pipeline with its latest hour and verdict counts (the nav entry);
- `/recon/dags/<dag_id>`: the hours of one pipeline, newest first, verdict and counts each;
- `/recon/dags/<dag_id>/runs/<run_id>`: the report of every hour the DAG run merged, inline;
- `/recon/files/<pipeline>/<path>`: a file under the pipeline's audit root (report.html,
  report.json, reconcile-*.json) and nothing else: `..`, absolute paths and links that lead out
  of the root are refused.

Every route needs a logged-in Airflow user (`GetUserDep`: the UI's `_token` cookie or a bearer
token) who may read the pipeline's DAG runs (`recon_<pipeline>`), asked of Airflow's auth
manager as Airflow's own DAG run pages ask it (FAB roles with DAG-level permissions, teams of the
simple auth manager, any other manager's policy): a user who may not gets 403 for the pipeline's
pages and files, and the index lists only the pipelines the user may read. The pipelines come
from the same folder the DAGs are built from.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations (GetUserDep)
# when they are defined, inside create_app
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from markupsafe import Markup

from recon.audit.render import COLORS, environment, render_body
from recon.audit.table import audit_rows, day_comparison
from recon.config import PipelineConfig, load_folder
from recon.hours import parse_hour
from recon.layout import pipelines_dir

MAX_HOURS_LISTED = 500
_HOUR_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}$")
_ENV = environment("recon.airflow")
UNREADABLE = Markup("<p>This hour's report.json could not be read; run `recon audit` again.</p>")


class PathRefused(ValueError):
    """A requested path that is not a file under the audit root."""


def pipelines() -> dict[str, PipelineConfig]:
    good, _ = load_folder(pipelines_dir())
    return {c.name: c for c in good}


def safe_path(root: Path, rel: str) -> Path:
    """`rel` inside `root`, or PathRefused: no `..`, no absolute path, no link leading out."""
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    bad = not parts or rel.startswith("/") or "\0" in rel  # a NUL (`%00`) no path holds
    if bad or any(p in ("..", "") for p in parts):
        raise PathRefused(f"path {rel!r} is refused: only files under the audit root are served")
    base = root.resolve()
    target = (base / Path(*parts)).resolve()
    if not target.is_relative_to(base):
        raise PathRefused(f"path {rel!r} is refused: it leads out of the audit root")
    if not target.is_file():
        raise FileNotFoundError(f"no file {rel!r} under the audit root of this pipeline")
    return target


def read_report(cfg: PipelineConfig, hour: str) -> Any:
    """The hour's report.json (an `AuditReport` when it has its `identity`); a torn,
    hand-edited or missing one is shown as unreadable, never a page error."""
    try:
        rep = json.loads((cfg.layout.audit_root / hour / "report.json").read_text())
    except (OSError, ValueError):
        rep = None
    if not isinstance(rep, dict) or not {"hour", "verdict"} <= rep.keys():
        return {"hour": hour, "verdict": "unreadable", "findings": [], "run_id": None}
    return rep


def run_prefix(run_id: str) -> str:
    """The run id the DAG passes to the stages (recon/jobs/stage.py appends `_<hour>`)."""
    return run_id.replace(":", "_").replace("+", "_") + "_"


def index_page(cfgs: dict[str, PipelineConfig]) -> str:
    rows = []
    for _, cfg in sorted(cfgs.items()):
        reps = listed_hours(cfg, audit_rows(cfg))
        counts = {
            v: sum(1 for r in reps if r.get("verdict") == v) for v in ("pass", "warn", "fail")
        }
        rows.append(
            {
                "dag_id": cfg.dag_id,
                "format": cfg.format,
                "last": reps[0] if reps else None,
                "counts": counts,
            }
        )
    return _ENV.get_template("index.html").render(title="recon audit", pipelines=rows)


TRENDS = (
    ("records", "records read"),
    ("quarantined", "quarantined"),
    ("lag_seconds", "lag of the newest change (s)"),
    ("seconds", "decode + merge (s)"),
)
TREND_HOURS = 168
"""The hours the DAG page charts (a week)."""
BAR_W, CHART_H = 4, 48


def failed_hours(cfg: PipelineConfig) -> dict[str, str]:
    """Hour -> the stage whose failure its last run ended with (`failed.json`: no verdict
    stands for it until a run of it succeeds)."""
    root = cfg.layout.audit_root
    out = {}
    for f in root.glob("*/failed.json") if root.is_dir() else []:
        if _HOUR_DIR.match(f.parent.name):
            try:
                out[f.parent.name] = str(json.loads(f.read_text()).get("stage"))
            except ValueError:
                out[f.parent.name] = "a stage"
    return out


def trend_charts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Column charts of the last `TREND_HOURS` rows of the audit table, one per measure, and
    the verdicts as a strip of colours; every column carries its hour and value as a tooltip."""
    rows = rows[-TREND_HOURS:]
    charts = []
    for key, label in TRENDS:
        values = [r.get(key) for r in rows]
        top = max((float(v) for v in values if v is not None), default=0.0)
        bars = [
            {
                "x": i * BAR_W,
                "h": max(1, round(CHART_H * float(v) / top)) if top and v else 0,
                "title": f"{r['hour']}: {v if v is not None else '-'}",
            }
            for i, (r, v) in enumerate(zip(rows, values, strict=True))
        ]
        charts.append({"label": label, "top": top, "bars": bars})
    strip = [
        {"x": i * BAR_W, "color": COLORS.get(str(r["verdict"]), "#8c959f"),
         "title": f"{r['hour']}: {r['verdict']}"}
        for i, r in enumerate(rows)
    ]  # fmt: skip
    return {
        "charts": charts,
        "verdicts": strip,
        "width": max(BAR_W * len(rows), 1),
        "height": CHART_H,
        "first": rows[0]["hour"] if rows else None,
        "last": rows[-1]["hour"] if rows else None,
    }


def listed_hours(cfg: PipelineConfig, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hours of the audit table's `rows`, newest first (at most `MAX_HOURS_LISTED`), with
    the hours whose last run failed before its audit (their `failed.json`) over them."""
    listed: dict[str, dict[str, Any]] = {
        str(r["hour"]): {
            "hour": r["hour"],
            "verdict": str(r["verdict"]),
            "kinds": sorted(set(json.loads(r["findings"] or "[]"))),
            "records": r["records"],
            "quarantined": r["quarantined"],
            "rows": r["rows_after"],
            "run_id": r["run_id"],
        }
        for r in rows
    }
    for h, stage in failed_hours(cfg).items():
        listed[h] = {"hour": h, "verdict": "fail", "kinds": [f"did not run: {stage} failed"],
                     "records": "-", "quarantined": "-", "rows": "-", "run_id": None}  # fmt: skip
    return [listed[h] for h in sorted(listed, reverse=True)[:MAX_HOURS_LISTED]]


def dag_page(cfg: PipelineConfig) -> str:
    """The pipeline's hours, newest first, and their trends: read from its audit table (one
    scan), not from each hour's report file."""
    rows = audit_rows(cfg)
    hours = listed_hours(cfg, rows)
    return _ENV.get_template("dag.html").render(
        title=cfg.dag_id,
        dag_id=cfg.dag_id,
        pipeline=cfg.name,
        format=cfg.format,
        root=str(cfg.layout.audit_root),
        limit=MAX_HOURS_LISTED,
        hours=hours,
        trends=trend_charts(rows),
        trend_hours=TREND_HOURS,
    )


def run_page(cfg: PipelineConfig, run_id: str) -> str:
    """The report of every hour the DAG run merged (or re-audited), oldest hour first: the
    hours from the audit table, then only their reports read."""
    prefix = run_prefix(run_id)
    hours = [
        str(r["hour"])
        for r in audit_rows(cfg)
        if any(str(r.get(k) or "").startswith(prefix) for k in ("run_id", "audited_by"))
    ]
    reps = [read_report(cfg, h) for h in hours]
    return _ENV.get_template("run.html").render(
        title=run_id,
        dag_id=cfg.dag_id,
        run_id=run_id,
        reports=reps,
        bodies=[
            render_body(r, day_comparison(cfg, parse_hour(r["hour"]), r))
            if "identity" in r
            else UNREADABLE
            for r in reps
        ],
    )


def may_read(user: Any, dag_id: str) -> bool:
    """Whether Airflow's auth manager lets `user` read the runs of `dag_id` (the check Airflow's
    own DAG run endpoints make, with the DAG's team where teams are on)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )
    from airflow.models.dag import DagModel

    team = DagModel.get_team_name(dag_id)  # None: teams off, or a DAG not parsed yet
    return bool(
        get_auth_manager().is_authorized_dag(
            method="GET",
            access_entity=DagAccessEntity.RUN,
            details=DagDetails(id=dag_id, team_name=team),
            user=user,
        )
    )


def create_app() -> Any:
    """The FastAPI app (Airflow imports fastapi; this module does not need it otherwise)."""
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, HTMLResponse

    try:
        from airflow.api_fastapi.core_api.security import GetUserDep
    except ImportError as err:  # pragma: no cover - the plugin only loads inside Airflow
        raise RuntimeError(
            "recon.airflow.ui needs Airflow 3's api-server (airflow.api_fastapi)"
        ) from err

    app = FastAPI(title="recon audit reports", docs_url=None, redoc_url=None, openapi_url=None)

    def _cfg(dag_id: str, user: Any) -> PipelineConfig:
        name = dag_id.removeprefix("recon_")
        cfg = pipelines().get(name)
        if cfg is None or not dag_id.startswith("recon_"):
            raise HTTPException(404, f"{dag_id} is not a recon pipeline DAG")
        if not may_read(user, cfg.dag_id):
            raise HTTPException(403, f"you may not read the runs of DAG {cfg.dag_id}")
        return cfg

    @app.get("/", response_class=HTMLResponse)
    def index(user: GetUserDep) -> str:
        mine = {n: c for n, c in pipelines().items() if may_read(user, c.dag_id)}
        return index_page(mine)

    @app.get("/dags/{dag_id}", response_class=HTMLResponse)
    def dag(dag_id: str, user: GetUserDep) -> str:
        return dag_page(_cfg(dag_id, user))

    @app.get("/dags/{dag_id}/runs/{run_id}", response_class=HTMLResponse)
    def run(dag_id: str, run_id: str, user: GetUserDep) -> str:
        return run_page(_cfg(dag_id, user), run_id)

    @app.get("/files/{pipeline}/{rel:path}")
    def files(pipeline: str, rel: str, user: GetUserDep) -> FileResponse:
        cfg = pipelines().get(pipeline)
        if cfg is None:
            raise HTTPException(404, f"no pipeline {pipeline!r}")
        if not may_read(user, cfg.dag_id):
            raise HTTPException(403, f"you may not read the runs of DAG {cfg.dag_id}")
        try:
            target = safe_path(cfg.layout.audit_root, rel)
        except PathRefused as err:
            raise HTTPException(403, str(err)) from err
        except FileNotFoundError as err:
            raise HTTPException(404, str(err)) from err
        return FileResponse(target)

    return app

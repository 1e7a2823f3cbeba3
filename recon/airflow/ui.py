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
token); the pipelines come from the same folder the DAGs are built from.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations (GetUserDep)
# when they are defined, inside create_app
import html
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from recon.config import PipelineConfig, load_folder
from recon.layout import pipelines_dir

MAX_HOURS_LISTED = 500
_HOUR_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}$")
_COLORS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e"}
_STYLE = (
    "<style>body{font:14px system-ui,sans-serif;margin:16px}table{border-collapse:collapse}"
    "td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}th{background:#f6f8fa}"
    ".pass{color:#1a7f37}.warn{color:#9a6700}.fail{color:#cf222e}.muted{color:#57606a}"
    "section.report{border-top:2px solid #d0d7de;margin-top:16px}</style>"
)


class PathRefused(ValueError):
    """A requested path that is not a file under the audit root."""


def pipelines() -> dict[str, PipelineConfig]:
    good, _ = load_folder(pipelines_dir())
    return {c.name: c for c in good}


def audit_root(cfg: PipelineConfig) -> Path:
    return cfg.warehouse / "audit" / cfg.name


def safe_path(root: Path, rel: str) -> Path:
    """`rel` inside `root`, or PathRefused: no `..`, no absolute path, no link leading out."""
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if not parts or rel.startswith("/") or any(p in ("..", "") for p in parts):
        raise PathRefused(f"path {rel!r} is refused: only files under the audit root are served")
    base = root.resolve()
    target = (base / Path(*parts)).resolve()
    if not target.is_relative_to(base):
        raise PathRefused(f"path {rel!r} is refused: it leads out of the audit root")
    if not target.is_file():
        raise FileNotFoundError(f"no file {rel!r} under the audit root of this pipeline")
    return target


def hour_reports(cfg: PipelineConfig, limit: int = MAX_HOURS_LISTED) -> list[dict[str, Any]]:
    """The newest `limit` hours' reports (report.json) of a pipeline, newest first."""
    root = audit_root(cfg)
    if not root.is_dir():
        return []
    hours = sorted((d.name for d in root.iterdir() if _HOUR_DIR.match(d.name)), reverse=True)
    out = []
    for h in hours[:limit]:
        f = root / h / "report.json"
        if f.is_file():
            try:
                out.append(json.loads(f.read_text()))
            except ValueError:
                out.append({"hour": h, "verdict": "unreadable", "findings": [], "run_id": None})
    return out


def run_prefix(run_id: str) -> str:
    """The run id the DAG passes to the stages (jobs/stage.py appends `_<hour>`)."""
    return run_id.replace(":", "_").replace("+", "_") + "_"


def _page(title: str, body: list[str]) -> str:
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"{_STYLE}</head><body>{''.join(body)}</body></html>"
    )


def _verdict(v: str) -> str:
    return f"<b class='{html.escape(v)}'>{html.escape(v.upper())}</b>"


def index_page(cfgs: dict[str, PipelineConfig]) -> str:
    body = [
        "<h1>recon: audit verdicts</h1><table><tr><th>DAG</th><th>format</th>"
        "<th>latest hour</th><th>verdict</th><th>hours pass / warn / fail</th></tr>"
    ]
    for _, cfg in sorted(cfgs.items()):
        reps = hour_reports(cfg)
        n = {v: sum(1 for r in reps if r.get("verdict") == v) for v in ("pass", "warn", "fail")}
        last = reps[0] if reps else None
        body.append(
            f"<tr><td><a href='dags/{cfg.dag_id}'>{cfg.dag_id}</a></td><td>{cfg.format}</td>"
            f"<td>{html.escape(last['hour']) if last else '-'}</td>"
            f"<td>{_verdict(last['verdict']) if last else 'no report yet'}</td>"
            f"<td>{n['pass']} / {n['warn']} / {n['fail']}</td></tr>"
        )
    body.append("</table>")
    return _page("recon audit", body)


def dag_page(cfg: PipelineConfig) -> str:
    reps = hour_reports(cfg)
    body = [
        f"<h1>{cfg.dag_id}: audit per hour</h1>",
        f"<p class=muted>{cfg.format}; reports under {html.escape(str(audit_root(cfg)))}; "
        f"newest {MAX_HOURS_LISTED} hours</p>",
    ]
    if not reps:
        body.append("<p>No hour has been audited yet.</p>")
        return _page(cfg.dag_id, body)
    body.append(
        "<table><tr><th>hour</th><th>verdict</th><th>findings</th><th>records</th>"
        "<th>quarantined</th><th>rows after</th><th>run</th><th>report</th></tr>"
    )
    for r in reps:
        h = html.escape(str(r["hour"]))
        kinds = sorted({f["kind"] for f in r.get("findings", [])})
        rows = sum(int(t.get("rows_after") or 0) for t in r.get("tables", {}).values())
        body.append(
            f"<tr><td>{h}</td><td>{_verdict(str(r['verdict']))}</td>"
            f"<td>{html.escape(', '.join(kinds)) or '-'}</td>"
            f"<td>{r.get('input', {}).get('records', '-')}</td>"
            f"<td>{r.get('decoding', {}).get('quarantined', '-')}</td><td>{rows}</td>"
            f"<td><code>{html.escape(str(r.get('run_id')))}</code></td>"
            f"<td><a href='../files/{cfg.name}/{h}/report.html'>report.html</a> "
            f"<a href='../files/{cfg.name}/{h}/report.json'>json</a></td></tr>"
        )
    body.append("</table>")
    return _page(cfg.dag_id, body)


def _report_body(cfg: PipelineConfig, hour: str) -> str:
    """The body of an hour's report.html, to show inline (its own <style> kept, scoped by the
    section: the report's rules only style plain elements)."""
    text = safe_path(audit_root(cfg), f"{hour}/report.html").read_text()
    start, end = text.find("<body>"), text.rfind("</body>")
    style = re.search(r"<style>.*?</style>", text, re.S)
    inner = text[start + len("<body>") : end] if start >= 0 and end > start else text
    return (style.group(0) if style else "") + inner


def run_page(cfg: PipelineConfig, run_id: str) -> str:
    prefix = run_prefix(run_id)
    reps = [
        r
        for r in hour_reports(cfg)
        if any(str(r.get(k) or "").startswith(prefix) for k in ("run_id", "audited_by"))
    ]
    body = [f"<h1>{cfg.dag_id}: run {html.escape(run_id)}</h1>"]
    if not reps:
        body.append(
            "<p>No audit report was written by this run (it may still be running, or have "
            "failed before the audit; a later run may have rewritten its reports). "
            f"<a href='../../{cfg.dag_id}'>All hours of this pipeline</a>.</p>"
        )
        return _page(run_id, body)
    body.append(
        "<p>"
        + ", ".join(f"{html.escape(r['hour'])}: {_verdict(r['verdict'])}" for r in reversed(reps))
        + "</p>"
    )
    for r in reversed(reps):  # oldest hour first, as the run processed them
        body.append(f"<section class=report>{_report_body(cfg, r['hour'])}</section>")
    return _page(run_id, body)


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

    def _cfg(dag_id: str) -> PipelineConfig:
        name = dag_id.removeprefix("recon_")
        cfg = pipelines().get(name)
        if cfg is None or not dag_id.startswith("recon_"):
            raise HTTPException(404, f"{dag_id} is not a recon pipeline DAG")
        return cfg

    @app.get("/", response_class=HTMLResponse)
    def index(user: GetUserDep) -> str:
        return index_page(pipelines())

    @app.get("/dags/{dag_id}", response_class=HTMLResponse)
    def dag(dag_id: str, user: GetUserDep) -> str:
        return dag_page(_cfg(dag_id))

    @app.get("/dags/{dag_id}/runs/{run_id}", response_class=HTMLResponse)
    def run(dag_id: str, run_id: str, user: GetUserDep) -> str:
        return run_page(_cfg(dag_id), run_id)

    @app.get("/files/{pipeline}/{rel:path}")
    def files(pipeline: str, rel: str, user: GetUserDep) -> FileResponse:
        cfg = pipelines().get(pipeline)
        if cfg is None:
            raise HTTPException(404, f"no pipeline {pipeline!r}")
        try:
            target = safe_path(audit_root(cfg), rel)
        except PathRefused as err:
            raise HTTPException(403, str(err)) from err
        except FileNotFoundError as err:
            raise HTTPException(404, str(err)) from err
        return FileResponse(target)

    return app

"""`report.html`: one self-contained page per pipeline-hour, verdict first, rendered from the
report by a Jinja2 template with autoescape (every value from a producer is escaped)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from recon.audit.flow import flow
from recon.audit.rules import where

if TYPE_CHECKING:  # render only reads a report; report.py imports this module
    from recon.audit.report import AuditReport

COLORS = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e"}


def environment(package: str) -> Environment:
    """A Jinja2 environment over a package's `templates/` folder, HTML escaped."""
    env = Environment(
        loader=PackageLoader(package, "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["colors"] = COLORS
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2)
    env.filters["tojson"] = json.dumps
    return env


_ENV = environment("recon.audit")


def bars(items: list[tuple[str, float]]) -> list[dict[str, Any]]:
    """Rows of a small horizontal bar chart (label, value, bar width in px, y)."""
    top = max((v for _, v in items), default=0) or 1
    return [
        {"label": label, "value": v, "width": max(2, int(300 * v / top)), "y": 4 + 22 * i}
        for i, (label, v) in enumerate(items)
    ]


def _context(r: AuditReport, compared: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    parts = r["input"]["partitions"]
    fresh = [(n, t["freshness_seconds"]) for n, t in r["tables"].items()]
    return {
        "r": r,
        "where": where,
        "records_chart": bars([(f"{p['topic']}/{p['partition']}", p["records"]) for p in parts]),
        "freshness_chart": bars([(n, v) for n, v in fresh if v is not None]),
        "flow": flow(r["identity"], r["tables"]),
        "compared": compared or [],
    }


def render_html(r: AuditReport, compared: list[dict[str, Any]] | None = None) -> str:
    """The whole self-contained page (`report.html`); `compared`: the hour beside the day
    before it (`recon.audit.table.day_comparison`)."""
    return _ENV.get_template("report.html").render(_context(r, compared))


def render_body(r: AuditReport, compared: list[dict[str, Any]] | None = None) -> Markup:
    """The report without its page around it, to show inside another page (the UI's run tab)."""
    return Markup(_ENV.get_template("report_body.html").render(_context(r, compared)))

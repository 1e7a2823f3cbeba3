"""Who hears of trouble, per pipeline (the YAML's `notify:` block), through Airflow's own
notifiers:

- a failed task (a `fail` verdict fails the audit task; a stage's last error; the sensor's
  timeout): an email through the SMTP notifier (`email`, `from`, `smtp_conn_id`) and a message
  through Slack's incoming-webhook notifier (`slack_conn_id`; any Slack-compatible webhook);
- an hour not published `deadline_minutes` after its end: Airflow 3's deadline alert (the
  scheduler notices, the triggerer runs `hour_late`), to the same people.

Backfills and manual runs of past hours are late by construction: their deadline is logged by
`hour_late`, not sent.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from recon.config import NotifyConfig, PipelineConfig

log = logging.getLogger(__name__)

FAILURE_SUBJECT = "[recon] {{ dag.dag_id }}: {{ ti.task_id }} failed (run {{ run_id }})"
FAILURE_BODY = (
    "<p>{{ dag.dag_id }}: task {{ ti.task_id }} failed, try {{ ti.try_number }}.</p>"
    "<p>{{ exception }}</p>"
    "<p>Its log: {{ ti.log_url }}</p>"
)
"""A failed task's email (a `fail` verdict fails the audit task: its line says so and where the
report is; a stage's error, the sensor's timeout)."""
FAILURE_TEXT = (
    ":red_circle: [recon] {{ dag.dag_id }}: task {{ ti.task_id }} failed (run {{ run_id }}, "
    "try {{ ti.try_number }}): {{ exception }}\nIts log: {{ ti.log_url }}"
)
"""The same, as a Slack message."""
NOT_SENT_RUN_TYPES = ("backfill", "manual")


def failure_notifiers(n: NotifyConfig) -> list[Any]:
    """The on-failure callbacks of every task of a pipeline whose `notify:` names someone."""
    out: list[Any] = []
    if n.email:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        out.append(
            SmtpNotifier(
                to=list(n.email),
                from_email=n.sender,
                subject=FAILURE_SUBJECT,
                html_content=FAILURE_BODY,
                smtp_conn_id=n.smtp_conn_id,
            )
        )
    if n.slack_conn_id:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        out.append(SlackWebhookNotifier(slack_webhook_conn_id=n.slack_conn_id, text=FAILURE_TEXT))
    return out


def deadline_alert(cfg: PipelineConfig) -> Any:
    """The DAG's deadline: each run's hour published by its end + `deadline_minutes` (the
    logical date of the hourly data-interval timetable is the hour's start), else `hour_late`."""
    n = cfg.notify
    if n.deadline_minutes is None:
        return None
    from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert, DeadlineReference

    kwargs = {
        "minutes": n.deadline_minutes,
        "email": list(n.email),
        "sender": n.sender,
        "smtp_conn_id": n.smtp_conn_id,
        "slack_conn_id": n.slack_conn_id,
    }
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=timedelta(hours=1, minutes=n.deadline_minutes),
        callback=AsyncCallback(hour_late, kwargs=kwargs),
        name="hour published late",
    )


def late_text(run: dict[str, Any], deadline: object, minutes: int) -> str:
    hour = str(run.get("data_interval_start") or run.get("logical_date") or "?")[:13]
    return (
        f"[recon] {run.get('dag_id')}: hour {hour} is not published {minutes} min after its "
        f"end (deadline {deadline}); run {run.get('dag_run_id')} is {run.get('state')}"
    )


async def hour_late(
    context: dict[str, Any],
    minutes: int,
    email: list[str],
    sender: str | None,
    smtp_conn_id: str,
    slack_conn_id: str | None,
) -> str:
    """Run by Airflow's triggerer when a run missed its deadline: the same message to the
    pipeline's email and Slack webhook. Returns what it did (the triggerer logs it)."""
    ctx: Any = context  # the triggerer's simple context: the run as the REST API gives it
    run = dict(context.get("dag_run") or {})
    text = late_text(run, (context.get("deadline") or {}).get("deadline_time"), minutes)
    if run.get("run_type") in NOT_SENT_RUN_TYPES:
        log.info("not sent (a %s run of a past hour): %s", run.get("run_type"), text)
        return f"not sent: {text}"
    if slack_conn_id:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        await SlackWebhookNotifier(slack_webhook_conn_id=slack_conn_id, text=text).async_notify(ctx)
    if email:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        subject = text.split(";")[0]
        await SmtpNotifier(
            to=email,
            from_email=sender,
            subject=subject,
            html_content=f"<p>{text}</p>",
            smtp_conn_id=smtp_conn_id,
        ).async_notify(ctx)
    return f"sent: {text}"

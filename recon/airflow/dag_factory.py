"""One Airflow DAG per pipeline YAML: `recon_<name>`, built from the validated config.

Per hour a run waits for the dump to be complete (every topic's, by its layout's rule, in reschedule mode
with a timeout), then runs decode, merge + publish and the audit (`recon/jobs/stage.py`) against the
`spark_default` connection (local[*] with this venv's interpreter unless the connection says
otherwise): in one Spark application the run's setup task starts and its teardown stops
(`recon.airflow.spark_app`), or a spark-submit each when a task cannot reach it. Then it
announces each published table as an Asset event carrying the audit's verdict and counts.

Hours: a scheduled or backfilled run processes its data interval (a real one-hour interval: the
timetable is CronDataIntervalTimetable on purpose; Airflow 3's cron presets give none). A manual
run takes the hour (or range) from its params; without one it takes the last complete hour.

A YAML that does not validate becomes a DAG of its own that fails validation with the config's
one-line message: Airflow lists it as an import error and the other pipelines' DAGs are intact.
Nothing heavy is imported here at parse time: the tasks import what they run when they run.
"""

from __future__ import annotations

import functools
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

from airflow.providers.standard.sensors.python import PythonSensor
from airflow.sdk import DAG, Asset, Param, get_parsing_context, task
from airflow.timetables.interval import CronDataIntervalTimetable

from recon.airflow.alerts import deadline_alert, failure_notifiers
from recon.airflow.lineage import StageOperator, stage_datasets, table_location
from recon.airflow.spark_app import APP_TASK, SparkAppStart, SparkAppStop
from recon.config import PipelineConfig, catalog_identifier, load_config, load_folder
from recon.errors import ConfigError
from recon.hours import HOUR_INPUT_PATTERN, hour_range, parse_hour
from recon.layout import APP_JOB, STAGE_JOB, hour_text, pipelines_dir, read_json
from recon.rawdumps import list_hour
from recon.sparkconf import submit_conf

HOUR_PATTERN = HOUR_INPUT_PATTERN
RETRY = {
    # a stage that hangs (a stuck executor, a record that never ends) fails and is retried
    # instead of holding the pipeline for ever
    "execution_timeout": timedelta(hours=3),
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
}


# What the `hours` task hands the stages (XCom); "from" is a keyword, hence this spelling.
HourRange = TypedDict(
    "HourRange",
    {
        "from": str,
        "to": str,
        "audit_only": bool,
        "tables": str,
        "rebuild": str,
        "allow_incomplete": str,
    },
)


def resolve_hours(
    params: dict[str, Any], interval_start: datetime | None, now: datetime
) -> HourRange:
    """The hour range a run processes: the `hour`/`hour_to` params, else the data interval,
    else (a manual run without a logical date) the last complete hour before `now`."""
    first = _hour_param(params.get("hour"), "hour")
    if not first:
        start = interval_start if interval_start is not None else now - timedelta(hours=1)
        first = hour_text(start.astimezone(UTC))
    last = _hour_param(params.get("hour_to"), "hour_to") or first
    if last < first:
        raise ValueError(f"hour_to {last} is before hour {first}; give a range forwards")
    if params.get("audit_only") and params.get("rebuild_from_snapshot"):
        raise ValueError("audit_only and rebuild_from_snapshot exclude each other; choose one")
    return {
        "from": first,
        "to": last,
        "audit_only": bool(params.get("audit_only")),
        "tables": ",".join(params.get("tables") or []),
        "rebuild": "true" if params.get("rebuild_from_snapshot") else "false",
        "allow_incomplete": "true" if params.get("allow_incomplete") else "false",
    }


def _hour_param(value: Any, name: str) -> str | None:
    """A form's hour (`YYYY-MM-DDTHH` or an ISO datetime) as `YYYY-MM-DDTHH`, logged."""
    if not value:
        return None
    try:
        return hour_text(parse_hour(str(value), name))
    except ConfigError as err:
        raise ValueError(str(err)) from None


def dump_complete(pipeline_file: str, h: dict[str, object]) -> bool:
    """Every topic's dump of every hour in the range is complete, by the rule of its layout
    (`recon.rawdumps.list_hour`, the one the decode checks); or the run accepts incomplete
    hours (its `allow_incomplete` param)."""
    if h.get("allow_incomplete") == "true":
        print("allow_incomplete: the dumps are read as they are")
        return True
    cfg = load_config(pipeline_file)
    for hr in hour_range(parse_hour(str(h["from"])), parse_hour(str(h["to"]))):
        for topic in cfg.topics:
            listed = list_hour(cfg.raw_root, topic, hr, cfg.dump)
            if not listed.complete:
                print(f"waiting for {listed.waiting_for}")
                return False
    return True


def asset_extras(
    report: dict[str, Any], tables: list[str], chosen: list[str], report_html: str
) -> dict[str, dict[str, object]]:
    """The extra of each table's Asset event: the hour's verdict and the table's counts."""
    out: dict[str, dict[str, object]] = {}
    for t in tables:
        tr = report["tables"].get(t, {})
        out[t] = {
            "hour": report["hour"],
            "merged": t in chosen,  # false: the run was limited to other tables
            "verdict": report["verdict"],
            "rows": tr.get("rows_after"),
            "applied": tr.get("applied"),
            "snapshot_id": tr.get("published_snapshot_id"),
            "report": report_html,
        }
    return out


def announce_assets(pipeline_file: str, h: dict[str, Any], outlet_events: Any) -> dict[str, str]:
    """Set each table's Asset event extra from the last hour's report; the verdict."""
    c = load_config(pipeline_file)
    report_file = c.layout.report(parse_hour(str(h["to"])))
    if not report_file.is_file():
        raise RuntimeError(f"no audit report at {report_file}: the hour was not merged")
    report = read_json(report_file)
    html = str(report_file.parent / "report.html")
    chosen = str(h["tables"]).split(",") if h["tables"] else list(c.tables)
    for t, extra in asset_extras(report, list(c.tables), chosen, html).items():
        outlet_events[table_asset(c, t)].extra = extra
    return {"verdict": report["verdict"], "report": html}


def table_asset(cfg: PipelineConfig, table: str) -> Asset:
    """A published table as an Asset: named as the catalog and the lineage name it
    (`<pipeline>__<db>.<table>`), at the table's location."""
    return Asset(
        name=".".join(catalog_identifier(cfg.name, table)),
        uri=table_location(cfg, table),
        group="recon",
    )


def dag_params(cfg: PipelineConfig) -> dict[str, Param]:
    return {
        "hour": Param(
            None,
            type=["null", "string"],
            pattern=HOUR_PATTERN,
            description="Manual runs: the hour to process (UTC, YYYY-MM-DDTHH, or an ISO "
            "datetime such as a logical date: it is taken down to its hour). Empty: the run's "
            "data interval, or the last complete hour.",
        ),
        "hour_to": Param(
            None,
            type=["null", "string"],
            pattern=HOUR_PATTERN,
            description="Manual runs: last hour of a range starting at `hour` (inclusive).",
        ),
        "tables": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(cfg.tables)},
            uniqueItems=True,
            examples=list(cfg.tables),
            description="Manual runs: merge and publish only these tables (empty: all). "
            "The other tables' changes of the hour are reported as not merged.",
        ),
        "rebuild_from_snapshot": Param(
            False,
            type="boolean",
            description="Drop the merge state of the tables (all, or those chosen) and "
            "merge again from the snapshot every decoded hour since the start; the published "
            "tables are replaced (earlier versions stay in their history).",
        ),
        "audit_only": Param(
            False,
            type="boolean",
            description="Only re-write the audit reports of hours already merged.",
        ),
        "allow_incomplete": Param(
            False,
            type="boolean",
            description="Decode the hours' dumps as they are, without waiting for them to be "
            "complete (`_SUCCESS`, or Kafka Connect's later files): an hour whose dumper is "
            "lost. Records that arrive later are read by a later hour (offset gaps are found).",
        ),
    }


RUN_JVM_TEMPLATE = "{{ recon_run_jvm(ti.xcom_pull(task_ids='hours')) }}"
"""Appended to our driver JVM options: rendered when a stage starts, so a stage's JVM gets the
options for the size of its hours (`recon.ops.sizing`: their dumps, and the state it merges
into)."""


def run_jvm(pipeline_file: str, h: dict[str, Any]) -> str:
    """The macro behind `RUN_JVM_TEMPLATE`: " <options>" for the hours' size, or ""."""
    from recon.ops.sizing import run_jvm_options  # run time only

    cfg = load_config(pipeline_file)
    hours = hour_range(parse_hour(h["from"], "hour"), parse_hour(h["to"], "hour_to"))
    options = run_jvm_options(cfg, hours)
    return f" {options}" if options else ""


def _xcom(key: str) -> str:
    return "{{ ti.xcom_pull(task_ids='hours')['" + key + "'] }}"


def _stage_operators(cfg: PipelineConfig, spark_conf: dict[str, str]) -> tuple[Any, ...]:
    """The run's Spark application (setup), decode, merge_publish, audit (`recon/jobs/stage.py`, in
    that application or under spark-submit) and the application's teardown."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    args = ["--pipeline", str(cfg.source_file), "--from", _xcom("from"), "--to", _xcom("to")]
    args += ["--run-id", "{{ run_id | replace(':', '_') | replace('+', '_') }}"]
    common: dict[str, Any] = {
        "application": str(STAGE_JOB),
        "conn_id": "spark_default",
        "conf": spark_conf
        or {"spark.pyspark.python": python, "spark.pyspark.driver.python": python},
        "env_vars": {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
        "name": f"recon-{cfg.name}",
        "pool": cfg.airflow.pool,
    }
    lineage = stage_datasets(cfg)
    decode = StageOperator(
        task_id="decode",
        pipeline_file=str(cfg.source_file),
        lineage=lineage["decode"],
        application_args=["decode", *args, "--allow-incomplete", _xcom("allow_incomplete")],
        depends_on_past=True,  # hour H+1 starts with what hour H carried out
        **common,
    )
    merge_args = ["--tables", _xcom("tables"), "--rebuild", _xcom("rebuild")]
    merge = StageOperator(
        task_id="merge_publish",
        pipeline_file=str(cfg.source_file),
        lineage=lineage["merge_publish"],
        application_args=["merge", *args, *merge_args],
        depends_on_past=True,  # the state of hour H is the input of H+1
        # and hour H's audit must have passed (or been settled by an operator): a `fail` verdict
        # holds the later hours' merges until someone decides (README: runbook)
        wait_for_downstream=True,
        **common,
    )
    audit = StageOperator(
        task_id="audit",
        pipeline_file=str(cfg.source_file),
        lineage=lineage["audit"],
        application_args=["audit", *args],
        trigger_rule="none_failed",  # runs after a skipped decode/merge (audit_only)
        # retried like the other stages; a `fail` verdict fails it without a retry (`settled`)
        **common,
    )
    app = SparkAppStart(
        task_id=APP_TASK,
        **{**common, "application": str(APP_JOB)},
        retries=0,  # it does not fail: a failed start is a spark-submit per stage
        trigger_rule="none_failed",  # an audit_only run's audit runs in it too
    )
    stop = SparkAppStop(task_id="spark_app_stop", retries=0)  # it never fails (no pool: it
    # frees what the stages hold)
    return app, decode, merge, audit, stop


def _airflow_options(cfg: PipelineConfig) -> dict[str, Any]:
    """The DAG's arguments the pipeline's `airflow:` block and `description` set."""
    af = cfg.airflow
    queue = {"queue": af.queue} if af.queue else {}
    alerts = {"on_failure_callback": failure_notifiers(cfg.notify)} if cfg.notify.any else {}
    return {
        "end_date": af.end_date,
        "default_args": {
            **RETRY,
            "owner": af.owner,
            "retries": af.retries,
            **queue,
            **alerts,
        },  # fmt: skip
        "tags": list(dict.fromkeys(["recon", cfg.format, *af.tags])),
        "doc_md": cfg.description or __doc__,
        "deadline": deadline_alert(cfg),
    }


def build_dag(cfg: PipelineConfig, spark_conf: dict[str, str] | None = None) -> DAG:
    pipeline_file = str(cfg.source_file)
    assets = [table_asset(cfg, t) for t in cfg.tables]
    with DAG(
        dag_id=cfg.dag_id,
        description=f"recon {cfg.format} pipeline {cfg.name} ({cfg.source_file})",
        schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
        start_date=cfg.start,
        catchup=True,
        max_active_runs=1,  # hour H+1's merge never commits before hour H's
        params=dag_params(cfg),
        user_defined_macros={"recon_run_jvm": functools.partial(run_jvm, pipeline_file)},
        **_airflow_options(cfg),
    ) as dag:

        @task
        def hours(**context: Any) -> HourRange:
            """The hour range this run processes."""
            start = context.get("data_interval_start")
            return resolve_hours(
                context["params"],
                start if isinstance(start, datetime) else None,
                datetime.now(UTC),
            )

        @task.short_circuit(ignore_downstream_trigger_rules=False)
        def needs_stages(h: Any) -> bool:
            """False for audit_only runs: decode and merge are skipped, the audit still runs."""
            return not h["audit_only"]

        # Assets only for hours whose audit did not fail: a `fail` verdict fails the audit task,
        # leaves announce upstream_failed and the DAG run red
        @task(outlets=assets, trigger_rule="none_failed")
        def announce(h: Any, **context: Any) -> dict[str, str]:
            """Asset events for the published tables, with the audit's verdict and counts."""
            return announce_assets(pipeline_file, h, context["outlet_events"])

        rng = hours()
        wait = _dump_sensor(pipeline_file, rng)
        app, decode, merge, audit, stop = _stage_operators(cfg, spark_conf or {})
        needs_stages(rng) >> wait >> app >> decode >> merge >> audit
        wait >> decode  # skipped with the wait (audit_only), while the audit needs the app
        rng >> audit >> stop.as_teardown(setups=app)
        announced = announce(rng)
        audit >> announced
        if cfg.retention_hours:
            _expire_task(pipeline_file, cfg.retention_hours, announced)
    return dag


def _dump_sensor(pipeline_file: str, hours: Any) -> PythonSensor:
    """The run's wait for its hours' dumps to be complete (`dump_complete`)."""
    return PythonSensor(
        task_id="wait_for_dump",
        python_callable=dump_complete,
        op_args=[pipeline_file, hours],
        mode="reschedule",
        poke_interval=120,
        timeout=6 * 3600,
        retries=0,
        # hour H's wait (and so its Spark application) starts once hour H-1 has decoded: a
        # backfill runs up to ten runs at once, whose decodes go one after the other
        # (`depends_on_past`), and each opened its application at once, to sit idle
        depends_on_past=True,
        wait_for_downstream=True,
    )


def _expire_task(pipeline_file: str, keep_hours: int, after: Any) -> None:
    @task
    def expire() -> dict[str, object]:
        """Keep `retention_hours` of versions and merge states; free older files.
        (Retried: during a backfill it can meet a later hour's publish commit.)"""
        from recon.ops.expire import expire as expire_pipeline  # run time only
        from recon.ops.lock import DAG_WAIT_S

        return expire_pipeline(load_config(pipeline_file), keep_hours, lock_wait=DAG_WAIT_S)

    after >> expire()


class ConfigErrorDag(DAG):
    """Stands in for a pipeline whose YAML does not validate: bagging it fails with the message."""

    config_error: str = ""

    def validate(self) -> None:
        raise ValueError(self.config_error)


def _broken(path: Path, message: str) -> DAG:
    dag = ConfigErrorDag(dag_id=f"recon_{path.stem}", schedule=None, tags=["recon", "broken"])
    dag.config_error = message
    return dag


def load_dags(namespace: dict[str, Any], folder: Path | None = None) -> None:
    """Put one DAG per pipeline YAML of `folder` (default `RECON_PIPELINES_DIR`, else the
    project's `pipelines/`) into `namespace` (a DAG file's globals).

    A process that runs one DAG's task (or `airflow dags test`) parses this file with that
    DAG's id in Airflow's parsing context: then only that pipeline's DAG is built, not every
    pipeline's (Airflow's "optimizing DAG parsing delays during execution"). The DAG processor
    parses without one and gets them all; an id no good pipeline has (a broken YAML's
    stand-in) builds them all too."""
    good, errors = load_folder(folder or pipelines_dir())
    dag_id = get_parsing_context().dag_id
    wanted = [c for c in good if c.dag_id == dag_id]
    if wanted:
        good, errors = wanted, {}
    try:
        spark_conf = submit_conf(
            os.environ.get("PYSPARK_PYTHON", sys.executable), run_jvm=RUN_JVM_TEMPLATE
        )
    except ValueError as err:  # every pipeline's DAG says what is wrong with the variable
        errors.update({Path(str(c.source_file)): str(err) for c in good})
        good = []
    for cfg in good:
        namespace[cfg.dag_id] = build_dag(cfg, spark_conf)
    for path, msg in errors.items():
        namespace[f"recon_{Path(path).stem}"] = _broken(Path(path), msg)

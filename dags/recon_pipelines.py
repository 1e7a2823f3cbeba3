"""One Airflow DAG per pipeline YAML: `recon_<name>`, built from the validated config.

Nothing heavy happens at parse time (no Spark, no pyarrow: tests/test_dags.py enforces it): the
file reads the YAMLs and wires tasks. Per hour a run waits for the dump to be complete (every
topic's `_SUCCESS`, in reschedule mode with a timeout), then runs decode, merge + publish and the
audit as spark-submit jobs against the `spark_default` connection (local[*] with this venv's
interpreter unless the connection says otherwise), then announces each published table as an
Asset event carrying the audit's verdict and counts.

Hours: a scheduled or backfilled run processes its data interval (a real one-hour interval: the
timetable is CronDataIntervalTimetable on purpose; Airflow 3's cron presets give none). A manual
run takes the hour (or range) from its params; without one it takes the last complete hour.

A YAML that does not validate becomes a DAG of its own that fails validation with the config's
one-line message: Airflow lists it as an import error and the other pipelines' DAGs are intact.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, Param, task
from airflow.timetables.interval import CronDataIntervalTimetable

from recon.config import PipelineConfig, load_folder

PROJECT = Path(__file__).resolve().parent.parent
PIPELINES = Path(os.environ.get("RECON_PIPELINES_DIR", PROJECT / "pipelines"))
STAGE_JOB = str(PROJECT / "jobs" / "stage.py")
PYTHON = os.environ.get("PYSPARK_PYTHON", sys.executable)
_SPARK_CONF_HELP = 'set it to a JSON object of Spark properties, e.g. {"spark.archives": "..."}'


def extra_spark_conf() -> dict[str, str]:
    """Spark properties added to every stage, from `RECON_SPARK_CONF` (a JSON object): what a
    YARN or Kubernetes master needs besides the connection (README)."""
    import json

    text = os.environ.get("RECON_SPARK_CONF", "").strip()
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except ValueError as err:
        raise ValueError(f"RECON_SPARK_CONF is not JSON ({err}); {_SPARK_CONF_HELP}") from None
    if not isinstance(conf, dict):
        raise ValueError(f"RECON_SPARK_CONF is not a JSON object; {_SPARK_CONF_HELP}")
    return {str(k): str(v) for k, v in conf.items()}


HOUR_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}$"

_RETRY = {
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
}


class ConfigErrorDag(DAG):
    """Stands in for a pipeline whose YAML does not validate: bagging it fails with the message."""

    config_error: str = ""

    def validate(self) -> None:
        raise ValueError(self.config_error)


def table_asset(cfg: PipelineConfig, table: str) -> Asset:
    return Asset(
        name=f"recon.{cfg.name}.{table}",
        uri=f"file://{cfg.warehouse}/iceberg/{cfg.name}.db/{table}",
        group="recon",
    )


def build_dag(cfg: PipelineConfig, spark_conf: dict[str, str] | None = None) -> DAG:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.standard.sensors.python import PythonSensor

    pipeline_file = str(cfg.source_file)
    assets = [table_asset(cfg, t) for t in cfg.tables]
    with DAG(
        dag_id=f"recon_{cfg.name}",
        description=f"recon {cfg.format} pipeline {cfg.name} ({cfg.source_file})",
        schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
        start_date=cfg.start,
        catchup=True,
        max_active_runs=1,  # hour H+1's merge never commits before hour H's
        default_args={"owner": "recon", **_RETRY},
        tags=["recon", cfg.format],
        doc_md=__doc__,
        params={
            "hour": Param(
                None,
                type=["null", "string"],
                pattern=HOUR_PATTERN,
                description="Manual runs: the hour to process (UTC, YYYY-MM-DDTHH). Empty: the "
                "run's data interval, or the last complete hour.",
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
        },
    ) as dag:

        @task
        def hours(**context: object) -> dict[str, object]:
            """The hour range this run processes."""
            from datetime import UTC, datetime

            params = context["params"]
            assert isinstance(params, dict)
            start = context.get("data_interval_start")
            first = params.get("hour")
            if not first:
                if isinstance(start, datetime):
                    first = start.astimezone(UTC).strftime("%Y-%m-%dT%H")
                else:  # a manual run without a logical date: the last complete hour
                    last_full = datetime.now(UTC) - timedelta(hours=1)
                    first = last_full.strftime("%Y-%m-%dT%H")
            last = params.get("hour_to") or first
            if last < first:
                raise ValueError(f"hour_to {last} is before hour {first}; give a range forwards")
            if params.get("audit_only") and params.get("rebuild_from_snapshot"):
                raise ValueError(
                    "audit_only and rebuild_from_snapshot exclude each other; choose one"
                )
            return {
                "from": first,
                "to": last,
                "audit_only": bool(params.get("audit_only")),
                "tables": ",".join(params.get("tables") or []),
                "rebuild": "true" if params.get("rebuild_from_snapshot") else "false",
            }

        @task.short_circuit(ignore_downstream_trigger_rules=False)
        def needs_stages(h: dict[str, object]) -> bool:
            """False for audit_only runs: decode and merge are skipped, the audit still runs."""
            return not h["audit_only"]

        def dump_complete(h: dict[str, object]) -> bool:
            from recon.config import load_config
            from recon.hours import dump_partition, hour_range, parse_hour

            c = load_config(pipeline_file)
            for hr in hour_range(parse_hour(str(h["from"])), parse_hour(str(h["to"]))):
                dt, hh = dump_partition(hr)
                for topic in c.topics:
                    if not (c.raw_path / topic / f"dt={dt}" / f"hour={hh}" / "_SUCCESS").is_file():
                        print(
                            f"waiting for {c.raw_path / topic / f'dt={dt}' / f'hour={hh}'}/_SUCCESS"
                        )
                        return False
            return True

        rng = hours()
        gate = needs_stages(rng)
        wait = PythonSensor(
            task_id="wait_for_dump",
            python_callable=dump_complete,
            op_args=[rng],
            mode="reschedule",
            poke_interval=120,
            timeout=6 * 3600,
            retries=0,
        )
        args_tpl = [
            "--pipeline",
            pipeline_file,
            "--from",
            "{{ ti.xcom_pull(task_ids='hours')['from'] }}",
            "--to",
            "{{ ti.xcom_pull(task_ids='hours')['to'] }}",
            "--run-id",
            "{{ run_id | replace(':', '_') | replace('+', '_') }}",
        ]
        common = {
            "application": STAGE_JOB,
            "conn_id": "spark_default",
            "conf": {
                "spark.pyspark.python": PYTHON,
                "spark.pyspark.driver.python": PYTHON,
                **(spark_conf or {}),
            },
            "env_vars": {"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON},
            "name": f"recon-{cfg.name}",
        }
        decode = SparkSubmitOperator(
            task_id="decode",
            application_args=["decode", *args_tpl],
            depends_on_past=True,  # hour H+1 starts with what hour H carried out
            **common,
        )
        merge = SparkSubmitOperator(
            task_id="merge_publish",
            application_args=[
                "merge",
                *args_tpl,
                "--tables",
                "{{ ti.xcom_pull(task_ids='hours')['tables'] }}",
                "--rebuild",
                "{{ ti.xcom_pull(task_ids='hours')['rebuild'] }}",
            ],
            depends_on_past=True,  # the state of hour H is the input of H+1
            **common,
        )
        audit = SparkSubmitOperator(
            task_id="audit",
            application_args=["audit", *args_tpl],
            trigger_rule="none_failed",  # runs after a skipped decode/merge (audit_only)
            retries=0,  # a failing verdict is an answer, not a transient error
            **common,
        )

        @task(outlets=assets, trigger_rule="all_done")
        def announce(h: dict[str, object], **context: object) -> dict[str, str]:
            """Asset events for the published tables, with the audit's verdict and counts."""
            import json

            from recon.audit.report import audit_dir
            from recon.config import load_config
            from recon.hours import parse_hour

            c = load_config(pipeline_file)
            last = parse_hour(str(h["to"]))
            report_file = audit_dir(c, last) / "report.json"
            if not report_file.is_file():
                raise RuntimeError(f"no audit report at {report_file}: the hour was not merged")
            report = json.loads(report_file.read_text())
            events = context["outlet_events"]
            chosen = str(h["tables"]).split(",") if h["tables"] else list(c.tables)
            for t in c.tables:
                tr = report["tables"].get(t, {})
                events[table_asset(c, t)].extra = {  # type: ignore[index]
                    "hour": report["hour"],
                    "merged": t in chosen,  # false: the run was limited to other tables
                    "verdict": report["verdict"],
                    "rows": tr.get("rows_after"),
                    "applied": tr.get("applied"),
                    "snapshot_id": tr.get("published_snapshot_id"),
                    "report": str(report_file.parent / "report.html"),
                }
            return {"verdict": report["verdict"], "report": str(report_file.parent / "report.html")}

        gate >> wait >> decode >> merge >> audit
        rng >> audit
        announced = announce(rng)
        audit >> announced
        if cfg.retention_hours:

            @task
            def expire() -> dict[str, object]:
                """Keep `retention_hours` of versions and merge states; free older files.
                (Retried: during a backfill it can meet a later hour's publish commit.)"""
                from recon.config import load_config
                from recon.ops.expire import expire as expire_pipeline

                return expire_pipeline(load_config(pipeline_file), cfg.retention_hours or 0)

            announced >> expire()
    return dag


def _broken(path: Path, message: str) -> DAG:
    dag = ConfigErrorDag(dag_id=f"recon_{path.stem}", schedule=None, tags=["recon", "broken"])
    dag.config_error = message
    return dag


_good, _errors = load_folder(PIPELINES)
try:
    _spark_conf = extra_spark_conf()
except ValueError as _err:  # every pipeline's DAG says what is wrong with the variable
    _errors.update({Path(str(c.source_file)): str(_err) for c in _good})
    _good = []
for _cfg in _good:
    globals()[f"recon_{_cfg.name}"] = build_dag(_cfg, _spark_conf)
for _path, _msg in _errors.items():
    globals()[f"recon_{Path(_path).stem}"] = _broken(Path(_path), _msg)

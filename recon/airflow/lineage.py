"""OpenLineage for the Spark stages (issue 13 item 6), through Airflow's OpenLineage provider:
each stage's task reports what it read and wrote when it completes, and the provider sends the
run's events through the transport its configuration names (`[openlineage] transport`: HTTP to
Marquez, Kafka, a file, the console).

Datasets (OpenLineage naming: namespace + name):
- raw topics: namespace `file`, name the topic's folder under `raw_path` (on S3: namespace
  `s3://<bucket>`, name the folder's key);
- the decoded events: namespace `file`, name `<warehouse>/_state/<pipeline>/events`;
- published tables: namespace the Iceberg warehouse location, name `<pipeline>__<db>.<table>`;
- audit reports: namespace `file`, name `<warehouse>/audit/<pipeline>`.
Light at parse time: the OpenLineage classes are imported when a task completes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from recon.airflow.spark_app import app_info, stop_app
from recon.appsocket import AppGone, request
from recon.config import PipelineConfig, catalog_identifier, load_config
from recon.hours import parse_hour
from recon.layout import read_json
from recon.objstore import S3Folder, split

Dataset = tuple[str, str]  # (namespace, name)


def _place(folder: Path | S3Folder) -> Dataset:
    """OpenLineage's naming of a folder: (`file`, its path), or (`s3://<bucket>`, its key)."""
    if isinstance(folder, S3Folder):
        bucket, key = split(folder.uri)
        return f"s3://{bucket}", key
    return "file", str(folder)


def iceberg_warehouse(cfg: PipelineConfig) -> str:
    """The URI the pipeline's Iceberg tables are under (its catalog's `warehouse`)."""
    return (cfg.catalog.get("warehouse") or f"file://{cfg.warehouse}/iceberg").rstrip("/")


def table_location(cfg: PipelineConfig, table: str) -> str:
    """Where a published table's files are: the catalog's default location of its identifier
    (`<warehouse>/<namespace>/<table>`, pyiceberg's SQL catalog; a Hive or Glue catalog's
    `<namespace>.db`), as pyiceberg creates it (light: no catalog is opened)."""
    ns, name = catalog_identifier(cfg.name, table)
    hive = cfg.catalog.get("type") in ("hive", "glue")
    return f"{iceberg_warehouse(cfg)}/{ns}{'.db' if hive else ''}/{name}"


def stage_datasets(cfg: PipelineConfig) -> dict[str, tuple[list[Dataset], list[Dataset]]]:
    """Per stage task: (inputs, outputs)."""
    topics = [_place(cfg.raw_root / t) for t in cfg.topics]
    events = [("file", str(cfg.layout.state / "events"))]
    tables = [
        (iceberg_warehouse(cfg), ".".join(catalog_identifier(cfg.name, t))) for t in cfg.tables
    ]
    audit = [("file", str(cfg.warehouse / "audit" / cfg.name))]
    return {
        "decode": (topics, events),
        "merge_publish": (events, tables),
        "audit": (topics + tables, audit),
    }


class StageOperator(SparkSubmitOperator):
    """A stage under spark-submit that tells OpenLineage its inputs and outputs."""

    def __init__(
        self,
        *,
        lineage: tuple[list[Dataset], list[Dataset]] = ([], []),
        pipeline_file: str = "",
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.lineage_inputs, self.lineage_outputs = lineage
        self.pipeline_file = pipeline_file

    def execute(self, context: Any) -> Any:
        """The stage in the run's Spark application when this task can reach it (see
        `recon.airflow.spark_app`), else spark-submit as usual; its output folded into a log
        group; then the stage's structured summary (`recon/jobs/stage.py --summary-file`), which the
        task log shows right after the folded group and which is the task's XCom."""
        fd, path = tempfile.mkstemp(prefix="recon-summary-", suffix=".json")
        os.close(fd)
        self.application_args = [*(self.application_args or []), "--summary-file", path]
        app = app_info(context)
        summary = None
        try:
            if app is None or not self._in_app(app):
                self.log.info("::group::spark-submit %s (Spark's own output)", self.task_id)
                try:
                    super().execute(context)
                finally:
                    self.log.info("::endgroup::")
        except AirflowException as err:
            raise settled(err, _read_summary(path)) from err
        finally:
            summary = _read_summary(path)
            if summary is not None:
                self.log.info("recon-summary %s", json.dumps(summary, sort_keys=True))
                self._send_metrics(summary)
        return summary

    def _send_metrics(self, summary: dict[str, Any]) -> None:
        """The stage's metrics (`recon.airflow.metrics`); a failure to send is logged, never
        the task's."""
        from recon.airflow.metrics import send, stage_metrics

        try:
            reports = []
            if summary.get("stage") == "audit":
                cfg = load_config(self.pipeline_file)
                hours = summary.get("verdicts") or {}
                reports = [read_json(cfg.layout.report(parse_hour(h))) for h in hours]
            send(*stage_metrics(str(summary["pipeline"]), str(summary["stage"]), summary, reports))
        except Exception as err:  # noqa: BLE001 - metrics never fail a stage that ran
            self.log.warning("recon metrics not sent: %s", err)

    _app: dict[str, Any] | None = None

    def _in_app(self, app: dict[str, Any]) -> bool:
        """The stage in the run's application; False when it cannot be reached."""
        self._app = app
        self.log.info(
            "::group::%s in the run's Spark application (its output, log %s)",
            self.task_id, app["log"],
        )  # fmt: skip
        try:
            rc = request(
                str(app["socket"]),
                {"argv": [str(a) for a in self.application_args or []]},
                str(app["log"]),
                lambda line: self.log.info("%s", line),
            )
        except AppGone as err:
            raise AirflowException(f"{err}; a retry runs the stage under spark-submit") from None
        finally:
            self.log.info("::endgroup::")
        if rc is None:
            self.log.info("the run's Spark application is gone: spark-submit instead")
            self._app = None
            return False
        if rc != 0:
            # whatever failed may have left the application broken (a stopped Spark context, a
            # driver out of memory): the retry and the rest of the run get a fresh spark-submit
            stop_app(app)
            self.log.info("stopped the run's Spark application after the failed stage")
            raise AirflowException(f"{self.task_id} exited {rc} in the run's Spark application")
        return True

    def on_kill(self) -> None:
        """A killed stage (timeout, marked failed) stops the application it runs in: the rest
        of the run, its retry included, runs spark-submit."""
        app = getattr(self, "_app", None)
        if app is None:
            super().on_kill()
            return
        stop_app(app, timeout_s=0)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset as OLDataset

        return OperatorLineage(
            inputs=[OLDataset(namespace=ns, name=n) for ns, n in self.lineage_inputs],
            outputs=[OLDataset(namespace=ns, name=n) for ns, n in self.lineage_outputs],
        )


def settled(err: AirflowException, summary: dict[str, Any] | None) -> AirflowException:
    """What a failed stage task raises: an audit whose summary names hours with a `fail`
    verdict has answered, and retrying would answer the same (AirflowFailException: failed
    without a retry); any other failure is an error the task's retries are for."""
    failed = (summary or {}).get("failed_hours") or []
    if (summary or {}).get("stage") == "audit" and failed:
        return AirflowFailException(
            f"audit verdict fail for hour(s) {', '.join(failed)}: read the report, fix the "
            "cause and clear the run, or mark this task success to go on (docs/operations.md)"
        )
    return err


def _read_summary(path: str) -> dict[str, Any] | None:
    """The job's summary (none when the driver ran elsewhere: cluster deploy mode)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)

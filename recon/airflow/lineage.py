"""OpenLineage for the Spark stages (issue 13 item 6), through Airflow's OpenLineage provider:
each stage's task reports what it read and wrote when it completes, and the provider sends the
run's events through the transport its configuration names (`[openlineage] transport`: HTTP to
Marquez, Kafka, a file, the console).

Datasets (OpenLineage naming: namespace + name):
- raw topics: namespace `file`, name the topic's folder under `raw_path`;
- the decoded events: namespace `file`, name `<warehouse>/_state/<pipeline>/events`;
- published tables: namespace the Iceberg warehouse location, name `<pipeline>__<db>.<table>`;
- audit reports: namespace `file`, name `<warehouse>/audit/<pipeline>`.
Light at parse time: the OpenLineage classes are imported when a task completes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from recon.config import PipelineConfig, catalog_identifier

Dataset = tuple[str, str]  # (namespace, name)


def stage_datasets(cfg: PipelineConfig) -> dict[str, tuple[list[Dataset], list[Dataset]]]:
    """Per stage task: (inputs, outputs)."""
    topics = [("file", str(cfg.raw_path / t)) for t in cfg.topics]
    events = [("file", str(cfg.layout.state / "events"))]
    iceberg = cfg.catalog.get("warehouse") or f"file://{cfg.warehouse}/iceberg"
    tables = [(iceberg, ".".join(catalog_identifier(cfg.name, t))) for t in cfg.tables]
    audit = [("file", str(cfg.warehouse / "audit" / cfg.name))]
    return {
        "decode": (topics, events),
        "merge_publish": (events, tables),
        "audit": (topics + tables, audit),
    }


class StageOperator(SparkSubmitOperator):
    """A stage under spark-submit that tells OpenLineage its inputs and outputs."""

    def __init__(
        self, *, lineage: tuple[list[Dataset], list[Dataset]] = ([], []), **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.lineage_inputs, self.lineage_outputs = lineage

    def execute(self, context: Any) -> Any:
        """spark-submit as usual, its output folded into a log group; then the stage's
        structured summary (`jobs/stage.py --summary-file`), which the task log shows right
        after the folded group and which is the task's XCom."""
        fd, path = tempfile.mkstemp(prefix="recon-summary-", suffix=".json")
        os.close(fd)
        self.application_args = [*(self.application_args or []), "--summary-file", path]
        self.log.info("::group::spark-submit %s (Spark's own output)", self.task_id)
        try:
            super().execute(context)
        finally:
            self.log.info("::endgroup::")
            summary = _read_summary(path)
            if summary is not None:
                self.log.info("recon-summary %s", json.dumps(summary, sort_keys=True))
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset as OLDataset

        return OperatorLineage(
            inputs=[OLDataset(namespace=ns, name=n) for ns, n in self.lineage_inputs],
            outputs=[OLDataset(namespace=ns, name=n) for ns, n in self.lineage_outputs],
        )


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

"""The DAG factory (issue 5): every pipeline YAML becomes a DAG with the expected tasks,
dependencies, schedule, retries and tags; a broken YAML breaks only its own DAG; nothing heavy
is imported at parse time. DagBags are built in a fresh interpreter so sys.modules is honest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROBE = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: v for k, v in bag.import_errors.items()}, "dags": {},
       "heavy": [m for m in ("pyspark", "pyarrow", "pandas", "pyiceberg", "recon.spark",
                             "recon.decode.stage", "recon.decode.formats", "recon.merge",
                             "recon.publish", "recon.ops", "recon.audit.facts")
                 if m in sys.modules]}
for dag_id, d in bag.dags.items():
    out["dags"][dag_id] = {
        "tasks": {t.task_id: sorted(t.downstream_task_ids) for t in d.tasks},
        "timetable": type(d.timetable).__name__,
        "summary": d.timetable.summary,
        "catchup": d.catchup,
        "max_active_runs": d.max_active_runs,
        "tags": sorted(d.tags),
        "retries": {t.task_id: t.retries for t in d.tasks},
        "timeouts": {t.task_id: t.execution_timeout and t.execution_timeout.total_seconds()
                     for t in d.tasks},
        "depends_on_past": {t.task_id: t.depends_on_past for t in d.tasks},
        "wait_for_downstream": {t.task_id: t.wait_for_downstream for t in d.tasks},
        "trigger_rules": {t.task_id: getattr(t.trigger_rule, "value", t.trigger_rule) for t in d.tasks},
        "conn": {t.task_id: getattr(t, "_conn_id", None) for t in d.tasks},
        "start": d.start_date.isoformat() if d.start_date else None,
        "params": sorted(d.params.keys()),
        "outlets": {t.task_id: [a.name for a in t.outlets] for t in d.tasks},
        "outlet_uris": {t.task_id: [a.uri for a in t.outlets] for t in d.tasks},
        "owners": sorted({t.owner for t in d.tasks}),
        "pools": {t.task_id: t.pool for t in d.tasks},
        "queues": sorted({t.queue for t in d.tasks}),
        "end": d.end_date.isoformat() if d.end_date else None,
        "doc_md": d.doc_md,
        "spark_conf": getattr(d.get_task("decode"), "conf", None),
        "same_conf": len({json.dumps(getattr(d.get_task(t), "conf", None), sort_keys=True)
                          for t in ("spark_app", "decode", "merge_publish", "audit")}) == 1,
        "setup_teardown": {t.task_id: "setup" if t.is_setup else "teardown"
                           for t in d.tasks if t.is_setup or t.is_teardown},
        "tables_param": d.params.get_param("tables").schema,
    }
print("PROBE" + json.dumps(out))
"""


def _bag(tmp: Path, pipelines: Path, **env_extra: str) -> dict:
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(tmp / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        RECON_PIPELINES_DIR=str(pipelines),
        **env_extra,
    )
    r = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "dags")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    line = next(x for x in r.stdout.splitlines() if x.startswith("PROBE"))
    return dict(json.loads(line[len("PROBE") :]))


def test_every_pipeline_is_a_dag_with_the_expected_shape(tmp_path: Path) -> None:
    got = _bag(tmp_path, ROOT / "pipelines")
    assert got["errors"] == {}
    assert got["heavy"] == [], "DAG parsing must not import Spark, pyarrow, pandas or pyiceberg"
    names = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))
    assert sorted(got["dags"]) == [f"recon_{n}" for n in names]
    d = got["dags"]["recon_demo_canal_pb"]
    assert d["tasks"] == {
        "hours": ["announce", "audit", "needs_stages", "wait_for_dump"],
        "needs_stages": ["wait_for_dump"],
        "wait_for_dump": ["decode", "spark_app"],
        # the run's Spark application (setup) and its teardown, around the three stages
        "spark_app": ["decode", "spark_app_stop"],
        "decode": ["merge_publish"],
        "merge_publish": ["audit"],
        "audit": ["announce", "spark_app_stop"],
        "announce": [],
        "spark_app_stop": [],
    }
    assert d["setup_teardown"] == {"spark_app": "setup", "spark_app_stop": "teardown"}
    assert d["timetable"] == "CronDataIntervalTimetable" and d["summary"] == "0 * * * *"
    assert d["catchup"] is True and d["max_active_runs"] == 1
    assert d["start"].startswith("2026-11-20T00:00:00")
    assert d["tags"] == ["canal_pb", "recon"]
    assert d["retries"]["decode"] == 2 and d["retries"]["merge_publish"] == 2
    assert d["retries"]["audit"] == 2  # an error is retried; a `fail` verdict is not (`settled`)
    assert all(d["timeouts"].values()), d["timeouts"]  # no task can hang for ever
    # a failed audit holds the next hour's merge and fails the run (no Assets for it)
    assert d["wait_for_downstream"]["merge_publish"] is True
    assert d["trigger_rules"]["announce"] == "none_failed"
    assert d["depends_on_past"]["merge_publish"] is True
    assert d["depends_on_past"]["decode"] is True  # hour H+1 needs what H carried out
    # hour H+1's Spark application opens once hour H has decoded (a backfill's runs at once)
    assert d["depends_on_past"]["wait_for_dump"] is True
    assert d["wait_for_downstream"]["wait_for_dump"] is True
    stages = ("spark_app", "decode", "merge_publish", "audit")
    assert {d["conn"][t] for t in stages} == {"spark_default"}
    assert d["params"] == [
        "allow_incomplete", "audit_only", "hour", "hour_to", "rebuild_from_snapshot", "tables",
    ]  # fmt: skip
    # the published table's Asset: named as the catalog and the lineage name it, at its location
    assert d["outlets"]["announce"] == ["demo_canal_pb__shop.orders"]
    wh = (ROOT / "demo-data" / "warehouse").resolve()
    assert d["outlet_uris"]["announce"] == [f"file://{wh}/iceberg/demo_canal_pb__shop/orders"]
    assert d["owners"] == ["recon"]
    # the Spark stages share the recon_spark pool (`python -m recon.airflow.pool` creates it)
    assert {t for t, p in d["pools"].items() if p == "recon_spark"} == set(stages)
    assert d["tables_param"]["items"] == {"type": "string", "enum": ["shop.orders"]}
    assert d["spark_conf"]["spark.pyspark.python"] == sys.executable


def test_the_airflow_block_and_description_reach_the_dag(tmp_path: Path) -> None:
    """`airflow:` (owner, pool, queue, retries, end date, tags) and `description` (the DAG's
    page) as the YAML sets them; the pool is the Spark stages'."""
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    text = (ROOT / "pipelines" / "demo_canal_json.yaml").read_text()
    demo_day = "airflow: {end_date: 2026-11-20T23:00:00Z}\n"
    assert demo_day in text
    text = text.replace(
        demo_day,
        'description: "# Shop orders\\n\\nOwned by the data team."\n'
        "airflow: {owner: data-eng, pool: spark_small, queue: spark, retries: 4, "
        "end_date: '2026-12-01T00:00:00Z', tags: [shop, tier1]}\n",
    )
    (pipelines / "demo_canal_json.yaml").write_text(
        text.replace("../demo-data", str(ROOT / "demo-data"))
    )
    got = _bag(tmp_path, pipelines)
    assert got["errors"] == {}
    d = got["dags"]["recon_demo_canal_json"]
    assert d["owners"] == ["data-eng"] and d["queues"] == ["spark"]
    assert d["tags"] == ["canal_json", "recon", "shop", "tier1"]
    assert d["end"].startswith("2026-12-01T00:00:00")
    assert d["doc_md"] == "# Shop orders\n\nOwned by the data team."
    stages = {"spark_app", "decode", "merge_publish", "audit"}
    assert {t for t, p in d["pools"].items() if p == "spark_small"} == stages
    assert set(d["retries"].values()) - {0} == {4}  # the app's start and stop are never retried


def test_retention_adds_an_expire_task_after_announce(tmp_path: Path) -> None:
    pipelines = tmp_path / "pipelines"
    shutil.copytree(ROOT / "pipelines", pipelines)
    p = pipelines / "demo_canal_pb.yaml"
    p.write_text(p.read_text() + "retention_hours: 168\n")
    got = _bag(tmp_path, pipelines)
    assert got["dags"]["recon_demo_canal_pb"]["tasks"]["announce"] == ["expire"]
    assert got["dags"]["recon_demo_canal_pb"]["retries"]["expire"] == 2
    assert "expire" not in got["dags"]["recon_demo_canal_json"]["tasks"]


def test_extra_spark_conf_reaches_every_stage_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    conf = '{"spark.archives": "hdfs:///envs/recon.tar.gz#env"}'
    got = _bag(tmp_path, ROOT / "pipelines", RECON_SPARK_CONF=conf)
    d = got["dags"]["recon_demo_canal_pb"]
    assert d["spark_conf"]["spark.archives"] == "hdfs:///envs/recon.tar.gz#env"
    assert d["same_conf"]  # the run's Spark application starts with the stages' settings
    # the machine-sized defaults ride along, and the variable overrides them
    assert d["spark_conf"]["spark.sql.files.maxPartitionBytes"] == "64m"
    memory = '{"spark.driver.memory": "3g"}'
    got = _bag(tmp_path, ROOT / "pipelines", RECON_SPARK_CONF=memory)
    assert got["dags"]["recon_demo_canal_pb"]["spark_conf"]["spark.driver.memory"] == "3g"
    got = _bag(tmp_path, ROOT / "pipelines", RECON_SPARK_CONF='["not", "an object"]')
    assert "recon_demo_canal_pb" not in got["dags"]  # no DAG runs with a conf it cannot honour
    msgs = list(got["errors"].values())  # keyed by the DAG file: one line for all pipelines
    assert msgs and all(
        "RECON_SPARK_CONF is not a JSON object" in m and "Traceback" not in m for m in msgs
    )


def test_a_broken_yaml_breaks_only_its_own_dag(tmp_path: Path) -> None:
    pipelines = tmp_path / "pipelines"
    shutil.copytree(ROOT / "pipelines", pipelines)
    text = (pipelines / "demo_canal_pb.yaml").read_text()
    (pipelines / "broken_one.yaml").write_text(text.replace("format: canal_pb", "format: avro"))
    # an impossible date (YAML's own date type fails) and bytes that are not UTF-8
    (pipelines / "broken_two.yaml").write_text(re.sub(r"start: .*", "start: 2026-11-31", text))
    (pipelines / "broken_three.yaml").write_bytes(text.encode().replace(b"canal", b"\xff\xfe", 1))
    # nested past Python's recursion limit, and a start out of range once taken to UTC
    (pipelines / "broken_four.yaml").write_text(text + "description: " + "[" * 3000 + "]" * 3000)
    (pipelines / "broken_five.yaml").write_text(
        re.sub(r"start: .*", "start: 0001-01-01T00:00:00+01:00", text)
    )
    got = _bag(tmp_path, pipelines)
    assert "recon_demo_canal_pb" in got["dags"] and len(got["dags"]) == len(
        list((ROOT / "pipelines").glob("*.yaml"))
    )
    broken = {f"recon_broken_{n}" for n in ("one", "two", "three", "four", "five")}
    assert not broken & set(got["dags"])
    # Airflow keeps one import error per DAG file: the first broken DAG's one line
    (msg,) = got["errors"].values()
    assert "Traceback" not in msg and "broken_" in msg
    for name, what in (("one", "is not a format"), ("two", "out of range"), ("three", "UTF-8")):
        alone = tmp_path / f"only_{name}"
        shutil.copytree(ROOT / "pipelines", alone)
        shutil.copy(pipelines / f"broken_{name}.yaml", alone)
        (m,) = _bag(tmp_path, alone)["errors"].values()
        assert f"broken_{name}.yaml" in m and what in m and "Traceback" not in m


def test_a_task_process_builds_only_its_own_dag(tmp_path: Path) -> None:
    """A process that runs one DAG's task (or `airflow dags test`) parses the DAG file with that
    DAG's id in Airflow's parsing context: it builds that DAG alone, not every pipeline's, and
    another pipeline's broken YAML does not stop it. An id no good pipeline has (a broken
    YAML's stand-in) builds them all, as the DAG processor does."""
    pipelines = tmp_path / "pipelines"
    shutil.copytree(ROOT / "pipelines", pipelines)
    text = (pipelines / "demo_canal_pb.yaml").read_text()
    (pipelines / "broken_one.yaml").write_text(text.replace("format: canal_pb", "format: avro"))
    ctx = "_AIRFLOW_PARSING_CONTEXT_DAG_ID"
    got = _bag(tmp_path, pipelines, **{ctx: "recon_demo_canal_pb"})
    assert list(got["dags"]) == ["recon_demo_canal_pb"] and got["errors"] == {}
    assert got["dags"]["recon_demo_canal_pb"]["tasks"]["decode"] == ["merge_publish"]
    every = _bag(tmp_path, pipelines, **{ctx: "recon_broken_one"})
    assert len(every["dags"]) == len(list((ROOT / "pipelines").glob("*.yaml")))
    ((_, msg),) = every["errors"].items()
    assert "broken_one" in msg and "Traceback" not in msg

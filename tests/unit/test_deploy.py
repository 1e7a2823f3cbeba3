"""The production path's files, checked offline (issue 13 item 1): no Docker engine runs here,
so `docker-compose.yaml` is interpolated from `.env` the way Compose does it and validated
against the Compose Specification's JSON schema (`tests/data/compose-spec.json`, from
compose-spec/compose-spec), and what the services need from the image is checked against this
project: the commands they run exist and parse, the shared volume is at one path everywhere, the
Airflow services and the catalog are on the PostgreSQL service, `spark_default` names the master.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from deploy.podman_smoke import LONG_RUNNING, compose_file, dotenv, run_args
from recon.config import load_config
from recon.publish.iceberg import SHARED_CATALOG_URI, catalog_properties
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    unset: set[str] = set()
    doc = compose_file(dotenv(), unset)  # as the podman smoke check reads it
    assert not unset, f"variables with neither a value in .env nor a default: {unset}"
    return doc  # type: ignore[no-any-return]


def test_the_compose_file_is_valid_by_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(compose)
    broken = dict(compose, services={"x": {"image": "a", "restart": 3}})
    with pytest.raises(jsonschema.ValidationError):  # the schema does reject a bad file
        jsonschema.Draft7Validator(schema).validate(broken)


def test_the_services_airflow_3_and_a_spark_cluster_need(compose: dict[str, Any]) -> None:
    svc = compose["services"]
    always = {
        "postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler",
        "airflow-dag-processor", "airflow-triggerer", "spark-master", "spark-worker-1",
        "spark-worker-2", "recon-demo",
    }  # fmt: skip
    assert always <= set(svc)
    assert {n for n, s in svc.items() if "celery" in s.get("profiles", [])} == {
        "redis",
        "airflow-worker",
    }
    for name, s in svc.items():
        if name not in ("airflow-init", "recon-demo"):
            assert "healthcheck" in s, f"{name} has no health check"
    # the S3-compatible store is an option (docs/deployment.md "Object stores")
    assert {n for n, s in svc.items() if "s3" in s.get("profiles", [])} == {"minio"}
    ours = {n: s for n, s in svc.items() if s.get("build") == "."}
    assert set(ours) == set(svc) - {"postgres", "redis", "minio"}  # one image for Airflow and Spark
    for name, s in ours.items():
        assert "recon-data:/opt/recon/demo-data" in s["volumes"], name  # same path everywhere
        env = s["environment"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        assert env[SHARED_CATALOG_URI].endswith("@postgres/iceberg")
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert (spark["host"], spark["port"]) == ("spark://spark-master", 7077)
        json.loads(env["RECON_SPARK_CONF"])  # the knob in .env is valid JSON
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"):
            assert k in env, (name, k)  # a pipeline's s3:// places are reached from every one
    assert "--port 7077" in svc["spark-master"]["command"]
    for w in ("spark-worker-1", "spark-worker-2"):
        assert "spark://spark-master:7077" in svc[w]["command"]
    init = (ROOT / "deploy" / "postgres-init.sql").read_text()
    assert "CREATE DATABASE iceberg" in init
    assert "./deploy/postgres-init.sql:" in " ".join(svc["postgres"]["volumes"])


def test_what_the_image_runs_exists_in_this_project(compose: dict[str, Any]) -> None:
    docker = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11" in docker and "openjdk-17" in docker
    assert "RECON_SKIP_SYSTEM_PACKAGES=1 bash scripts/setup.sh" in docker
    assert "RECON_SKIP_SYSTEM_PACKAGES" in (ROOT / "scripts" / "setup.sh").read_text()
    # SPARK_HOME in the image is pyspark's folder in the venv: spark-class is there (the master
    # and workers run it), and the pipelines the DAGs are made from load
    spark_home = re.search(r"SPARK_HOME=/opt/recon/(\S+)", docker)
    assert spark_home is not None
    assert (ROOT / spark_home.group(1) / "bin" / "spark-class").is_file()
    for p in sorted((ROOT / "pipelines").glob("*.yaml")):
        load_config(p)
    demo = compose["services"]["recon-demo"]["command"].split()
    assert demo[:2] == ["recon", "demo"]
    r = subprocess.run(
        [sys.executable, "-m", "recon.cli", *demo[1:], "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "--airflow-from-environment" in r.stdout, r.stderr


def test_pipelines_without_catalog_use_the_shared_catalog_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = load_config(ROOT / "pipelines" / "demo_canal_json.yaml")
    monkeypatch.delenv(SHARED_CATALOG_URI, raising=False)
    assert catalog_properties(cfg)["uri"].startswith("sqlite:///")
    monkeypatch.setenv(SHARED_CATALOG_URI, "postgresql+psycopg2://u:p@postgres/iceberg")
    props = catalog_properties(cfg)
    assert props["uri"] == "postgresql+psycopg2://u:p@postgres/iceberg" and props["type"] == "sql"


def test_a_demo_run_again_forgets_its_tables_in_a_shared_catalog(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compose demo's catalog (PostgreSQL) outlives the warehouse the demo deletes: the
    tables of the earlier demo are dropped from it, or the next demo would load tables whose
    files are gone. (SQLite stands in for the catalog database: same pyiceberg SQL catalog.)"""
    import pyarrow as pa

    from recon.demo.demo import forget_demo_tables
    from recon.publish.iceberg import get_catalog

    monkeypatch.setenv(SHARED_CATALOG_URI, f"sqlite:///{tmp_path}/shared.db")
    cfg = load_config(ROOT / "pipelines" / "demo_canal_json.yaml")
    cat = get_catalog(cfg)
    idents = [(f"{cfg.name}__shop", "orders"), (f"{cfg.name}__recon_audit", "hours")]
    idents.append((cfg.name, "shop", "orders"))  # and one of the older three-level naming
    schema = pa.schema([pa.field("id", pa.int32())])
    for i, ident in enumerate(idents):
        cat.create_namespace_if_not_exists(ident[:-1])
        cat.create_table(ident, schema, location=f"file://{tmp_path}/t{i}")
    forget_demo_tables()
    assert not any(cat.table_exists(ident) for ident in idents)


def test_tables_have_two_level_names_and_older_three_level_ones_stay_readable(
    tmp_path,
) -> None:
    """Issue 13 item 3: Hive and Glue refuse `<pipeline>.<db>.<table>`; new tables are
    `<pipeline>__<db>.<table>`, and a table published under the older name is still found."""
    import pyarrow as pa

    from recon.config import catalog_identifier
    from recon.errors import ConfigError
    from recon.publish.iceberg import get_catalog, identifier, load_table
    from tests.support.builders import pipeline

    assert catalog_identifier("p", "Shop.Order-Items") == ("p__shop", "order_items")
    cfg = pipeline(tmp_path, {"s.old": {}, "s.new": {}})
    cat = get_catalog(cfg)
    cat.create_namespace_if_not_exists((cfg.name, "s"))
    schema = pa.schema([pa.field("id", pa.int32())])
    cat.create_table((cfg.name, "s", "old"), schema, location=f"file://{tmp_path}/old")
    assert load_table(cfg, "s.old").name() == (cfg.name, "s", "old")
    assert identifier(cat, cfg, "s.new") == (f"{cfg.name}__s", "new")
    with pytest.raises(ConfigError, match="the same catalog name as s.Orders"):
        pipeline(tmp_path / "x", {"s.Orders": {}, "s.orders": {}})


def test_the_services_volumes_and_processes_are_set_up_to_start(compose: dict[str, Any]) -> None:
    """Read as the services would start: each named volume is mounted on a folder the image
    makes (owned by the service user, group-writable: else Docker creates it root-owned and the
    services, uid 50000, cannot write their logs), an init process reaps the Spark JVMs, and an
    unpaused demo DAG schedules the demo's day, not every hour since it started."""
    docker = (ROOT / "Dockerfile").read_text()
    made = re.search(r"mkdir -p ([^\\&]+)", docker)
    assert made is not None
    folders = set(made.group(1).split())
    assert "chmod -R g=u" in docker and "chown -R 50000:0" in docker
    ours = {n: s for n, s in compose["services"].items() if s.get("build") == "."}
    for name, s in ours.items():
        assert s.get("init") is True, name
        for v in s["volumes"]:
            src, dst = v.split(":")[:2]
            if src in compose["volumes"]:  # a named volume
                assert dst in folders, (name, dst)
    for p in sorted((ROOT / "pipelines").glob("demo_*.yaml")):
        cfg = load_config(p)
        assert cfg.airflow.end_date is not None, p
        assert (cfg.airflow.end_date - cfg.start).total_seconds() <= 23 * 3600, p


def test_the_podman_smoke_check_runs_every_service_of_the_image() -> None:
    """deploy/podman_smoke.py (the manual check where podman is) runs each service of the
    project image a plain `up` starts, as the compose file gives it; a service added to the file
    is run by it too, or this fails."""
    services = compose_file(dotenv(), set())["services"]
    ours = {n for n, s in services.items() if "build" in s and not s.get("profiles")}
    assert ours == {*LONG_RUNNING, "airflow-init", "recon-demo"}
    args = run_args("airflow-scheduler", services["airflow-scheduler"], "img", "10.0.0.1")
    assert args[args.index("img") + 1 :] == ["airflow", "scheduler"]
    assert "--init" in args and args[args.index("--user") + 1] == "50000:0"
    assert "recon-smoke-recon-data:/opt/recon/demo-data" in args
    assert f"{(ROOT / 'pipelines').resolve()}:/opt/recon/pipelines:ro" in args

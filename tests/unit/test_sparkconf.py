"""Spark settings: machine-sized defaults for local Spark, `RECON_SPARK_CONF` over them for
`recon run`, the demo and the DAGs' spark-submit tasks alike."""

from __future__ import annotations

import pytest

from recon.sparkconf import GIB, driver_memory, machine_memory_bytes, session_conf, submit_conf


def test_the_heap_is_sized_from_the_machine() -> None:
    assert driver_memory(2 * GIB) == "1g"
    assert driver_memory(24 * GIB) == "8g"  # a 2-core, 24 GiB machine: not Spark's 1g
    assert driver_memory(12 * GIB) == "4g"
    local = session_conf(local=True)
    assert local["spark.driver.memory"] == driver_memory(machine_memory_bytes())


def test_the_users_conf_wins_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECON_SPARK_CONF", '{"spark.driver.memory": "3g", "spark.x": 1}')
    assert session_conf(local=True)["spark.driver.memory"] == "3g"
    assert submit_conf()["spark.driver.memory"] == "3g" and submit_conf()["spark.x"] == "1"
    assert session_conf(local=False) == {"spark.driver.memory": "3g", "spark.x": "1"}
    monkeypatch.setenv("RECON_SPARK_CONF", "[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        session_conf(local=True)


def test_the_dags_pass_no_default_the_clusters_spark_defaults_conf_sets(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 item 4: a `--conf` overrides spark-defaults.conf, so the DAGs leave out every
    default the cluster's file sets; RECON_SPARK_CONF still wins over both."""
    monkeypatch.delenv("RECON_SPARK_CONF", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "spark-defaults.conf").write_text(
        "# cluster\nspark.driver.memory   6g\nspark.pyspark.python=./env/bin/python\n"
        "spark.sql.shuffle.partitions 400\n"
    )
    conf = submit_conf("/venv/bin/python")
    assert "spark.driver.memory" not in conf and "spark.sql.shuffle.partitions" not in conf
    assert "spark.pyspark.python" not in conf
    assert conf["spark.pyspark.driver.python"] == "/venv/bin/python"
    assert conf["spark.executor.extraJavaOptions"] == "-Duser.timezone=UTC"
    monkeypatch.setenv("RECON_SPARK_CONF", '{"spark.driver.memory": "3g"}')
    assert submit_conf()["spark.driver.memory"] == "3g"
    monkeypatch.delenv("RECON_SPARK_CONF")
    assert "spark.driver.memory" not in session_conf(local=True)


def test_the_conf_names_which_properties_are_our_defaults(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`DEFAULTED` lists what a small hour may tune: our defaults, not what the user or the
    cluster's spark-defaults.conf set."""
    from recon.sparkconf import DEFAULTED

    monkeypatch.delenv("RECON_SPARK_CONF", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    for conf in (session_conf(local=True), submit_conf("/py")):
        ours = conf[DEFAULTED].split(",")
        assert "spark.sql.shuffle.partitions" in ours and "spark.driver.memory" in ours
    monkeypatch.setenv("RECON_SPARK_CONF", '{"spark.sql.shuffle.partitions": 8}')
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.memory 6g\n")
    for conf in (session_conf(local=True), submit_conf("/py")):
        ours = conf[DEFAULTED].split(",")
        assert "spark.sql.shuffle.partitions" not in ours and "spark.driver.memory" not in ours
        assert "spark.sql.files.maxPartitionBytes" in ours
    assert DEFAULTED not in session_conf(local=False)  # no default of ours: no list


def test_the_heap_is_sized_from_the_containers_limit(tmp_path) -> None:
    """A container's memory limit (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), when
    below the machine's memory, is what the heap is sized from."""
    host = machine_memory_bytes(())
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    v1.write_text(f"{3 * GIB}\n")
    assert machine_memory_bytes((v2, v1)) == min(host, 3 * GIB)
    v2.write_text(f"{6 * GIB}\n")
    assert machine_memory_bytes((v2, v1)) == min(host, 6 * GIB)
    assert driver_memory(machine_memory_bytes((v2,))) == driver_memory(min(host, 6 * GIB))
    v1.write_text("9223372036854771712\n")  # v1's "no limit"
    assert machine_memory_bytes((v1,)) == host


def test_a_standalone_clusters_application_takes_a_few_cores(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECON_SPARK_CONF", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert submit_conf()["spark.cores.max"] == "2"
    (tmp_path / "spark-defaults.conf").write_text("spark.cores.max 8\n")
    assert "spark.cores.max" not in submit_conf()  # the cluster's own setting is kept
    monkeypatch.setenv("RECON_SPARK_CONF", '{"spark.cores.max": "6"}')
    assert submit_conf()["spark.cores.max"] == "6"

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

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "data" / "cdc-vectors"  # copied in, with its README and sources
pytest_plugins = [
    "tests.support.position_deletes"
]  # its `table` fixture, for the unit and Spark tests

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ runs spark-submit or Airflow end to end: marked `slow`."""
    for item in items:
        if "/tests/e2e/" in str(item.path):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """py4j logs at INFO as Python exits and collects its connections, after pytest closed the
    streams a CLI test's log handler writes to: a `--- Logging error ---` traceback under every
    run's summary. Its INFO lines are not wanted by then."""
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from recon.spark.session import get_spark

    s = get_spark("recon-tests", master="local[2]")
    yield s
    s.stop()

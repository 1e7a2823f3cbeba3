"""A stage that fails leaves a note for the hour's audit, and running out of memory reads as one
line naming what ran out, the setting to raise and the hour's size (the error text is the one a
PySpark action raises when the JVM runs out of heap)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from recon.audit.report import load_report
from recon.config import load_config
from recon.demo import sample
from recon.demo.demo import write_dump
from recon.errors import OutOfMemory, ReconError
from recon.ops.guard import guarded
from tests.support.builders import write_pipeline

H0 = datetime(2026, 3, 2, 0, tzinfo=UTC)
JVM_OOM = (
    "An error occurred while calling o123.parquet.\n: org.apache.spark.SparkException: Job "
    "aborted due to stage failure: java.lang.OutOfMemoryError: Java heap space\n\tat ..."
)


class _Spark:
    """A session whose JVM is gone (as after an OutOfMemoryError): its conf cannot be read."""


def _cfg(tmp: Path):  # type: ignore[no-untyped-def]
    recs = sample.to_records(sample.encode_debezium(sample.workload(H0, 1, 40)), "t")
    write_dump(tmp / "raw", "t", recs, "parquet", [H0], files_per_hour=3)
    return load_config(write_pipeline(tmp / "p.yaml", name="t", format="debezium_json", start=H0))


def test_out_of_memory_is_one_line_with_the_setting_and_the_size(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    with pytest.raises(OutOfMemory) as got, guarded("decode", _Spark(), cfg, H0):  # type: ignore[arg-type]
        raise RuntimeError(JVM_OOM)
    msg = str(got.value)
    assert "\n" not in msg and "decode stage of hour 2026-03-02T00 of pipeline t" in msg
    assert "(3 dump files," in msg and " MB)" in msg
    assert 'RECON_SPARK_CONF=\'{"spark.driver.memory": "8g"}\'' in msg
    with pytest.raises(ReconError, match="did not run to the end: its decode stage failed"):
        load_report(cfg, H0)


def test_a_jvm_that_exited_reads_as_running_out_of_memory(tmp_path: Path) -> None:
    """Spark ends the JVM when a thread runs out of heap; Python then sees the gateway gone."""
    cfg = _cfg(tmp_path)
    with pytest.raises(OutOfMemory) as got, guarded("merge", _Spark(), cfg, H0):  # type: ignore[arg-type]
        raise ConnectionRefusedError(111, "Connection refused")
    assert "the Spark JVM exited (most likely its heap ran out) in the merge stage" in str(
        got.value
    )


def test_any_failure_is_recorded_for_the_hour_and_raised_as_it_was(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    with pytest.raises(KeyError), guarded("merge", _Spark(), cfg, H0):  # type: ignore[arg-type]
        raise KeyError("boom")
    with pytest.raises(ReconError, match="merge stage failed .*KeyError: 'boom'"):
        load_report(cfg, H0)

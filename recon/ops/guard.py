"""What a stage that fails leaves behind, and how an out-of-memory failure reads.

`guarded(stage, spark, cfg, hour)` wraps one stage of one hour: an error whose text shows the
JVM ran out of memory becomes `OutOfMemory`, one line naming what ran out, the setting to raise
and the hour's size; any failure is recorded in the hour's audit folder (`failed.json`), so
`recon report` (and the audit of a later run) says the hour did not run to the end instead of
showing an older report as if it were current. The next successful audit of the hour clears it.
The stages write nothing in place, so the hour's outputs are the ones from before.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from recon.config import PipelineConfig
from recon.errors import OutOfMemory, ReconError
from recon.layout import hour_text, read_json, write_json_atomic
from recon.rawdumps import dump_files

OOM_MARKERS = ("OutOfMemoryError", "Java heap space", "GC overhead limit exceeded")
# Spark ends its JVM when a thread runs out of memory: the Python side then only sees the
# gateway gone. Treated as running out of memory, and said so.
JVM_GONE = ("ConnectionRefusedError", "Py4JNetworkError", "Java gateway process exited")


def hour_size(cfg: PipelineConfig, hour: datetime) -> tuple[int, int]:
    """(dump files, bytes) of one pipeline-hour."""
    files = dump_files(cfg.raw_root, cfg.topics, [hour], cfg.dump)
    return len(files), sum(size for _, size in files)


def out_of_memory_message(
    stage: str, cfg: PipelineConfig, hour: datetime, heap: str | None, jvm_gone: bool = False
) -> str:
    n, size = hour_size(cfg, hour)
    heap_text = f"the Spark heap ({heap})" if heap else "the Spark heap"
    bigger = _double(heap) if heap else "8g"
    what = (
        "the Spark JVM exited (most likely its heap ran out)"
        if jvm_gone
        else f"{heap_text} ran out"
    )
    return (
        f"out of memory: {what} in the {stage} stage of hour {hour_text(hour)} of "
        f"pipeline {cfg.name} ({n} dump files, {size / 1e6:.0f} MB); raise it with "
        f'RECON_SPARK_CONF=\'{{"spark.driver.memory": "{bigger}"}}\' (on a cluster: '
        "spark.executor.memory); nothing of the hour was changed"
    )


def _double(heap: str) -> str:
    num, unit = heap[:-1], heap[-1:].lower()
    if num.isdigit() and unit in "kmg":
        return f"{int(num) * 2}{unit}"
    return "8g"


def _heap(spark: SparkSession) -> str | None:
    try:
        return str(spark.sparkContext.getConf().get("spark.driver.memory", "1g"))
    except Exception:  # noqa: BLE001 - the JVM may be gone after running out of memory
        return None


@contextmanager
def guarded(stage: str, spark: SparkSession, cfg: PipelineConfig, hour: datetime) -> Iterator[None]:
    """A stage of one hour: its failure recorded (`failed.json`) and named in one line; its
    duration, when it succeeds, kept with the hour (`Layout.timings`: the audit table's and the
    UI's `seconds`)."""
    t0 = time.monotonic()
    try:
        yield
    except ReconError as err:
        _record(cfg, hour, stage, str(err))
        raise
    except Exception as err:
        text = f"{type(err).__name__}: {err}"
        gone = any(m in text for m in JVM_GONE)
        if gone or any(m in text for m in OOM_MARKERS):
            message = out_of_memory_message(stage, cfg, hour, _heap(spark), jvm_gone=gone)
            _record(cfg, hour, stage, message)
            raise OutOfMemory(message) from None
        _record(cfg, hour, stage, _summary(text))
        raise
    timings = cfg.layout.timings(hour)
    done = read_json(timings) if timings.is_file() else {}
    write_json_atomic(timings, {**done, stage: round(time.monotonic() - t0, 3)})


def _summary(text: str) -> str:
    """The first line, and the first Java exception named below it (the cause of a
    Py4JJavaError is on a later line)."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    cause = next(
        (x for x in lines[1:] if re.match(r"^[\w.$]+(Exception|Error)\b", x) and " at " not in x),
        "",
    )
    return (lines[0] + (f" ... {cause}" if cause else ""))[:800] if lines else ""


def _record(cfg: PipelineConfig, hour: datetime, stage: str, error: str) -> None:
    doc: dict[str, Any] = {
        "hour": hour_text(hour),
        "stage": stage,
        "error": error,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_json_atomic(cfg.layout.audit(hour) / "failed.json", doc)

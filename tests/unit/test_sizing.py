"""Small runs (a quiet hour, the demo) are run with cheaper compilation: the JVM's quick JIT
compiler only (decided before the JVM starts, from the dumps and the state) and no whole-stage
code generation (decided per stage). Runs up to about a million records keep the quick
compiler; big runs get the optimising one and code generation."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recon.airflow.dag_factory import RUN_JVM_TEMPLATE, run_jvm
from recon.config import load_config
from recon.layout import raw_hour_folder
from recon.ops import sizing
from recon.ops.sizing import (
    QUICK_JIT_BYTES,
    QUICK_JIT_RECORDS,
    QUICK_JIT_STATE_ROWS,
    SMALL_RUN_BYTES,
    SMALL_RUN_RECORDS,
    SMALL_RUN_STATE_ROWS,
    dump_records,
    run_jvm_options,
    small_run,
)
from recon.sparkconf import (
    QUICK_JIT_JVM_OPTIONS,
    SMALL_RUN_JVM_OPTIONS,
    cds_jvm_options,
    local_defaults,
    session_conf,
    submit_conf,
)

H = datetime(2026, 11, 20, 2, tzinfo=UTC)
DRIVER, EXECUTOR = "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    doc = {
        "name": "p",
        "format": "dataworks_json",
        "raw_path": "raw",
        "topics": ["t1", "t2"],
        "warehouse": "wh",
        "start": "2026-11-20T00:00:00Z",
        "tables": {"shop.orders": {}},
    }
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(doc))
    return path


def _folder(pipeline: Path, topic: str, hour: datetime) -> Path:
    folder = raw_hour_folder(pipeline.parent / "raw", topic, hour)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_SUCCESS").write_bytes(b"x\n" * SMALL_RUN_RECORDS)  # not a dump file
    return folder


def _dump(pipeline: Path, topic: str, hour: datetime, size: int) -> None:
    """A dump of `size` bytes and one record (a JSON Lines file of one line)."""
    (_folder(pipeline, topic, hour) / f"part-{size}.jsonl").write_bytes(b"x" * size)


def _parquet(pipeline: Path, topic: str, hour: datetime, rows: int) -> Path:
    path = _folder(pipeline, topic, hour) / f"part-{rows}.parquet"
    pq.write_table(pa.table({"value": pa.array([b"v"] * rows, pa.binary())}), path)
    return path


def _jsonl(pipeline: Path, topic: str, hour: datetime, lines: int, gz: bool = False) -> None:
    body = b"\n".join(b'{"v":1}' for _ in range(lines))  # the last line with no newline
    name = f"part-{lines}.jsonl" + (".gz" if gz else "")
    (_folder(pipeline, topic, hour) / name).write_bytes(gzip.compress(body) if gz else body)


def _state(pipeline: Path, rows: int | None) -> None:
    man = pipeline.parent / "wh" / "_state" / "p" / "merge" / "manifest.json"
    man.parent.mkdir(parents=True, exist_ok=True)
    files = {"0": {"rows": 1, "state_rows": rows}}
    man.write_text("{broken" if rows is None else json.dumps({"tables": {"t": {"files": files}}}))


def test_a_run_is_small_while_its_dumps_over_every_topic_and_hour_and_its_state_are(
    pipeline: Path,
) -> None:
    cfg = load_config(pipeline)
    assert small_run(cfg, [H])  # nothing yet
    half = SMALL_RUN_BYTES // 2
    _dump(pipeline, "t1", H, SMALL_RUN_BYTES - 10)
    assert small_run(cfg, [H])
    _dump(pipeline, "t2", H, 20)  # the topics add up
    assert not small_run(cfg, [H])
    h2 = H.replace(hour=3)
    _dump(pipeline, "t1", h2, half)
    _dump(pipeline, "t2", H.replace(hour=4), half)
    assert small_run(cfg, [h2]) and not small_run(cfg, [h2, H.replace(hour=4)])  # and hours
    _state(pipeline, SMALL_RUN_STATE_ROWS - 1)
    assert small_run(cfg, [h2])
    _state(pipeline, SMALL_RUN_STATE_ROWS)
    assert not small_run(cfg, [h2])  # a big state to rewrite keeps the optimising compiler
    _state(pipeline, None)
    assert small_run(cfg, [h2])  # unreadable: the dumps decide (the merge refuses it anyway)


def test_a_run_is_small_while_its_dumps_hold_few_records_whatever_their_bytes(
    pipeline: Path,
) -> None:
    """Session 18: the quick compiler pays up to ~250k records an hour, whatever the format's
    bytes per message; Parquet footers and JSON Lines lines count, over topics and hours."""
    cfg = load_config(pipeline)
    n = SMALL_RUN_RECORDS
    _parquet(pipeline, "t1", H, n // 2)
    _jsonl(pipeline, "t2", H, n // 4)
    assert dump_records(cfg, [H], n) == n // 2 + n // 4 and small_run(cfg, [H])
    _jsonl(pipeline, "t2", H, n // 4, gz=True)
    assert dump_records(cfg, [H], n) == n and not small_run(cfg, [H])  # gzipped lines count
    h2 = H.replace(hour=3)
    _parquet(pipeline, "t1", h2, n - 1)
    assert small_run(cfg, [h2])
    _jsonl(pipeline, "t1", H.replace(hour=4), 1)
    assert not small_run(cfg, [h2, H.replace(hour=4)])  # the hours add up
    assert dump_records(cfg, [H, h2], 10) == 10  # counted until the limit only
    (_parquet(pipeline, "t2", H.replace(hour=5), 3)).write_bytes(b"not parquet")
    assert not small_run(cfg, [H.replace(hour=5)])  # unreadable: not decided small
    (_folder(pipeline, "t1", H.replace(hour=6)) / "part-0.crc").write_bytes(b"\n" * n)
    assert small_run(cfg, [H.replace(hour=6)])  # not a dump the decode reads


def test_a_run_under_a_million_records_compiles_quickly_without_the_small_runs_collector(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 31: the optimising compiler cost 15-20% of a 500k-message hour and saved 15% of
    a 2M-message one; the records, the dump bytes and the state each can make a run big."""
    assert QUICK_JIT_RECORDS > SMALL_RUN_RECORDS and QUICK_JIT_BYTES > SMALL_RUN_BYTES
    assert QUICK_JIT_STATE_ROWS > SMALL_RUN_STATE_ROWS
    assert "-XX:TieredStopAtLevel=1" in QUICK_JIT_JVM_OPTIONS
    assert "UseSerialGC" not in QUICK_JIT_JVM_OPTIONS and "UseSerialGC" in SMALL_RUN_JVM_OPTIONS
    # the limits scaled down, so that a test writes kilobytes (the functions read them when
    # called)
    records, size, rows = 4 * SMALL_RUN_RECORDS, 4 * SMALL_RUN_BYTES, 4 * SMALL_RUN_STATE_ROWS
    monkeypatch.setattr(sizing, "QUICK_JIT_RECORDS", records)
    monkeypatch.setattr(sizing, "QUICK_JIT_BYTES", size)
    monkeypatch.setattr(sizing, "QUICK_JIT_STATE_ROWS", rows)
    cfg = load_config(pipeline)
    assert run_jvm_options(cfg, [H]) == SMALL_RUN_JVM_OPTIONS  # nothing yet
    _parquet(pipeline, "t1", H, SMALL_RUN_RECORDS)
    assert run_jvm_options(cfg, [H]) == QUICK_JIT_JVM_OPTIONS
    _parquet(pipeline, "t2", H, records - SMALL_RUN_RECORDS - 1)
    assert run_jvm_options(cfg, [H]) == QUICK_JIT_JVM_OPTIONS
    _parquet(pipeline, "t2", H.replace(hour=3), 1)  # the hours add up
    assert run_jvm_options(cfg, [H, H.replace(hour=3)]) == ""
    h4 = H.replace(hour=4)
    _dump(pipeline, "t1", h4, size - 1)
    assert run_jvm_options(cfg, [h4]) == QUICK_JIT_JVM_OPTIONS
    _dump(pipeline, "t2", h4, 1)
    assert run_jvm_options(cfg, [h4]) == ""  # bytes alone
    h5 = H.replace(hour=5)
    _state(pipeline, rows - 1)
    assert run_jvm_options(cfg, [h5]) == QUICK_JIT_JVM_OPTIONS
    _state(pipeline, rows)
    assert run_jvm_options(cfg, [h5]) == ""  # a state that big keeps the optimising compiler


@pytest.mark.parametrize("options", [SMALL_RUN_JVM_OPTIONS, QUICK_JIT_JVM_OPTIONS])
def test_the_jvm_starts_with_each_sizes_options(options: str) -> None:
    """A flag the JVM refuses would fail every run of that size before Spark starts."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    assert java, "no java: Spark needs one (JAVA_HOME or PATH)"
    proc = subprocess.run(
        [java, *options.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [x for x in proc.stdout.splitlines() if " TieredStopAtLevel " in x][0].split()[3] == "1"


def test_the_run_sizes_driver_jvm_options_reach_the_session_and_the_users_options_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RECON_SPARK_CONF", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert "-XX:TieredStopAtLevel" not in local_defaults()[DRIVER]
    for options in (SMALL_RUN_JVM_OPTIONS, QUICK_JIT_JVM_OPTIONS):
        conf = session_conf(local=True, jvm=options)
        assert conf[DRIVER].endswith(f" {options}") and "-Duser.timezone=UTC" in conf[DRIVER]
        assert "-XX:TieredStopAtLevel" not in conf[EXECUTOR]
    conf = submit_conf("/py", run_jvm=" {{ x }}")
    # the class archive (when setup built it) is the driver's: executors may be elsewhere
    cds = cds_jvm_options()
    assert conf[DRIVER] == f"-Duser.timezone=UTC{cds} {{{{ x }}}}"
    assert conf[EXECUTOR] == "-Duser.timezone=UTC"
    monkeypatch.setenv("RECON_SPARK_CONF", json.dumps({DRIVER: "-Dmine=1"}))
    assert session_conf(local=True, jvm=SMALL_RUN_JVM_OPTIONS)[DRIVER] == "-Dmine=1"
    assert submit_conf("/py", run_jvm=" {{ x }}")[DRIVER] == "-Dmine=1"


def test_the_dags_decide_when_a_stage_starts_from_its_hours(pipeline: Path) -> None:
    """The template is rendered when the stage's task starts (its dump complete by then)."""
    assert RUN_JVM_TEMPLATE.startswith("{{ recon_run_jvm(")
    h = {"from": "2026-11-20T02", "to": "2026-11-20T03"}
    assert run_jvm(str(pipeline), h) == f" {SMALL_RUN_JVM_OPTIONS}"
    _parquet(pipeline, "t1", H.replace(hour=3), SMALL_RUN_RECORDS)
    assert run_jvm(str(pipeline), h) == f" {QUICK_JIT_JVM_OPTIONS}"
    _parquet(pipeline, "t2", H.replace(hour=3), QUICK_JIT_RECORDS - SMALL_RUN_RECORDS)
    assert run_jvm(str(pipeline), h) == ""
    assert run_jvm(str(pipeline), {"from": "2026-11-20T02", "to": "2026-11-20T02"}) != ""


def test_the_size_of_an_hour_does_not_need_more_of_its_counters_than_the_merge_did(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counters written by a tool (the merge benchmark) carry no totals: the hour counts as
    its state alone, and the merge still runs (it crashed on a KeyError)."""
    from recon.audit.stage import _hour_records
    from recon.merge import stage as merge_stage
    from recon.merge.stage import _small_merge

    cfg = load_config(pipeline)
    bare = cfg.layout.decode_counters(H)
    bare.parent.mkdir(parents=True, exist_ok=True)
    bare.write_text(json.dumps({"pipeline": "p", "hour": "2026-11-20T02"}))
    _state(pipeline, 7)
    monkeypatch.setattr(merge_stage, "SMALL_HOUR_ROWS", 8)
    assert _small_merge(cfg, H) and _hour_records(cfg, H) == 0
    bare.write_text(json.dumps({"totals": {"records": 5}}))
    assert not _small_merge(cfg, H) and _hour_records(cfg, H) == 5  # 7 rows + 5 records
    monkeypatch.setattr(merge_stage, "SMALL_HOUR_ROWS", 13)
    assert _small_merge(cfg, H)


def test_a_snapshot_still_to_load_makes_the_run_and_its_merge_big(tmp_path: Path) -> None:
    """A table's first merge loads the snapshot: a big snapshot folder makes that run (the
    JVM's compiler) and that hour's merge (code generation, shuffle slices) big however few
    changes the hour has; once the table's state has loaded it, the snapshot no longer counts
    (a small first hour had loaded a 10M-row snapshot interpreted, on one slice per core)."""
    from recon.merge.stage import _small_merge
    from recon.spark.session import SMALL_HOUR_BYTES

    doc = {
        "name": "p",
        "format": "dataworks_json",
        "raw_path": "raw",
        "topics": ["t1"],
        "warehouse": "wh",
        "start": "2026-11-20T00:00:00Z",
        "snapshot": {"path": "snap"},
        "tables": {"shop.orders": {}, "shop.items": {}},
    }
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(doc))
    cfg = load_config(path)
    counters = cfg.layout.decode_counters(H)
    counters.parent.mkdir(parents=True, exist_ok=True)
    counters.write_text(json.dumps({"totals": {"records": 3}}))
    assert small_run(cfg, [H]) and _small_merge(cfg, H)  # no snapshot folders yet
    big = tmp_path / "snap" / "shop.orders"
    big.mkdir(parents=True)
    (big / "part-0.parquet").write_bytes(b"x" * (SMALL_HOUR_BYTES // 2))
    (big / "part-1.parquet").write_bytes(b"x" * (SMALL_HOUR_BYTES // 2))  # the files add up
    assert not _small_merge(cfg, H)
    assert small_run(cfg, [H])  # under the run's limit
    (big / "part-2.parquet").write_bytes(b"x" * SMALL_RUN_BYTES)
    assert not small_run(cfg, [H])
    man = cfg.layout.manifest
    man.parent.mkdir(parents=True, exist_ok=True)
    entry = {"files": {}, "snapshot_loaded": True}
    man.write_text(json.dumps({"snapshot": None, "tables": {"shop.orders": entry}}))
    assert small_run(cfg, [H]) and _small_merge(cfg, H)  # loaded: its folder is not read again
    man.write_text(json.dumps({"snapshot": None, "tables": {"shop.items": entry}}))
    assert not small_run(cfg, [H]) and not _small_merge(cfg, H)  # shop.orders still to load
    started = {"shop.orders": {"files": {}}}  # its state began without a snapshot configured
    man.write_text(json.dumps({"snapshot": None, "tables": started}))
    assert not small_run(cfg, [H]) and not _small_merge(cfg, H)  # it loads it next
    man.write_text(json.dumps({"snapshot": {"loaded_in_hour": "x"}, "tables": started}))
    assert small_run(cfg, [H]) and _small_merge(cfg, H)  # a state from before per-table marks


def test_a_small_runs_jvm_keeps_room_for_what_it_compiles() -> None:
    """The quick compiler alone gets a 48 MB code cache; a shared application serving the
    demo's pipelines filled most of it, and its sweeper threw methods out to compile them again.
    A small run's JVM has the cache tiered compilation has, compiles a method after three times
    the calls, and still stops at the quick compiler (this JDK takes the options as given)."""
    import re
    import subprocess

    out = subprocess.run(
        ["java", *SMALL_RUN_JVM_OPTIONS.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout

    def flag(name: str) -> str:
        m = re.search(rf"\b{name}\s+=\s+(\S+)", out)
        assert m, name
        return m.group(1)

    assert int(flag("ReservedCodeCacheSize")) == 240 * 1024 * 1024
    assert float(flag("CompileThresholdScaling")) == 3.0
    assert flag("TieredStopAtLevel") == "1" and flag("UseSerialGC") == "true"

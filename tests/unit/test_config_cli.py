"""Config validation and the CLI: one line naming file, key and fix; no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recon.config import AirflowConfig, NotifyConfig, load_config, load_folder
from recon.errors import ConfigError
from tests.conftest import ROOT

GOOD = """
name: shop
format: dataworks_json
raw_path: /data/raw
topics: [shop_cdc]
warehouse: wh
start: 2026-11-20T00:00:00Z
snapshot: {path: snap}
tables:
  shop.orders: {}
  shop.events: {primary_key: [id]}
  shop.legacy: {columns: [id, name, amount]}
  shop.other: {ddl: "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(20))"}
audit:
  fail_on: [offset_gap, quarantined, reconcile_mismatch]
"""


def _write(tmp: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_the_contract_example_loads(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, GOOD))
    assert cfg.dag_id == "recon_shop" and cfg.format == "dataworks_json"
    assert cfg.warehouse == (tmp_path / "wh").resolve() and cfg.raw_path == Path("/data/raw")
    assert cfg.tables["shop.events"].primary_key == ("id",)
    other = cfg.tables["shop.other"].table_def()
    assert other is not None and other.columns == ["id", "v"] and other.primary_key == ["id"]
    with pytest.raises(AttributeError):
        cfg.name = "x"  # type: ignore[misc]
    assert cfg.write_mode == "merge-on-read"
    cow = load_config(_write(tmp_path, GOOD + "write_mode: copy-on-write\n", "m.yaml"))
    assert cow.write_mode == "copy-on-write"


@pytest.mark.parametrize(
    "change,needle",
    [
        (
            ("format: dataworks_json", "format: avro"),
            "`format`: 'avro' is not a format; use one of",
        ),
        (("name: shop", "name: Shop-1"), "`name`"),
        (("start: 2026-11-20T00:00:00Z", "start: 2026-11-20T00:30:00Z"), "`start`"),
        (("topics: [shop_cdc]", "topics: shop_cdc"), "`topics`: must list at least one topic"),
        (
            ("topics: [shop_cdc]", "topics: [shop_cdc, {name: x, exactly: true}]"),
            "topics[1] must be",
        ),
        (("topics: [shop_cdc]", "topics: [a, a]"), "listed twice"),
        (("shop.orders: {}", "orders: {}"), "`tables.orders`: table names are written db.table"),
        (
            ("{primary_key: [id]}", "{primary_kee: [id]}"),
            "`tables.shop.events.primary_kee`: unknown option",
        ),
        (
            ("reconcile_mismatch]", "reconcile_mismatch, typo]"),
            "`audit.fail_on`: 'typo' is not a finding",
        ),
        (("CREATE TABLE other", "CREATE TABEL other"), "`tables.shop.other.ddl`"),
        (
            ("{primary_key: [id]}", "{primary_key: [id], from: [shop_1]}"),
            "`tables.shop.events.from`: 'shop_1' is not db.table (with * or ? as wildcards)",
        ),
        (
            ("{primary_key: [id]}", "{primary_key: [id], history: yes please}"),
            "`tables.shop.events.history`: must be true or false",
        ),
        (
            ("snapshot: {path: snap}", "snapshot: {path: snap}\nretention_hours: 0"),
            "`retention_hours`: must be a whole number of hours >= 1",
        ),
        (
            ("warehouse: wh", "warehouse: wh\nwrite_mode: merge_on_read"),
            "`write_mode`: 'merge_on_read' is not a mode; use one of copy-on-write, merge-on-read",
        ),
        (
            ("warehouse: wh", "warehouse: wh\nairflow: {owner: a b}"),
            "`airflow.owner`: must be a name",
        ),
        (("warehouse: wh", "warehouse: wh\nairflow: {retries: -1}"), "`airflow.retries`: must be"),
        (
            ("warehouse: wh", "warehouse: wh\nairflow: {end_date: 2020-01-01T00:00:00Z}"),
            "`airflow.end_date`: 2020-01-01T00:00Z is before `start`",
        ),
        (
            ("warehouse: wh", "warehouse: wh\nairflow: {pools: x}"),
            "`airflow.pools`: unknown option",
        ),
        (
            ("warehouse: wh", "warehouse: wh\nairflow: {tags: shop}"),
            "`airflow.tags`: must be a list",
        ),
        (("warehouse: wh", "warehouse: wh\ndescription: [x]"), "`description`: must be text"),
        (("warehouse: wh", "warehouse: wh\nnotify: {email: [oncall]}"), "`notify.email`: must be"),
        (("warehouse: wh", "warehouse: wh\nnotify: {slack: x}"), "`notify.slack`: unknown option"),
        (("warehouse: wh", "warehouse: wh\nnotify: {from: a@b.c}"), "`notify`: names no one"),
        (
            ("warehouse: wh", "warehouse: wh\nnotify: {slack_conn_id: a, deadline_minutes: 0}"),
            "`notify.deadline_minutes`: must be whole minutes",
        ),
        (
            ("warehouse: wh", "warehouse: wh\nnotify: {slack_conn_id: 'a b'}"),
            "`notify.slack_conn_id`: must be an Airflow connection id",
        ),
        # issue 13 item 5: an object store used to become a local folder named "s3:" silently
        (("warehouse: wh", "warehouse: s3://bucket/wh"), "`warehouse`: s3:// is not supported"),
        (("raw_path: /data/raw", "raw_path: gs://b/raw"), "`raw_path`: gs:// is not supported"),
        (
            ("warehouse: wh", "warehouse: wh\ncatalog: {type: sql, warehouse: 'gs://b/ice'}"),
            "`catalog.warehouse`: gs:// is not supported",
        ),
        # issue 13 item 3: catalog secrets come from the environment, never the YAML
        (
            ("warehouse: wh", "warehouse: wh\ncatalog: {uri: 'postgresql://u:pw@db/ice'}"),
            "`catalog.uri`: holds a secret in plain text; write ${AN_ENV_VAR}",
        ),
        (
            ("warehouse: wh", "warehouse: wh\ncatalog: {s3.secret-access-key: abc}"),
            "PYICEBERG_CATALOG__RECON__S3__SECRET_ACCESS_KEY",
        ),
    ],
)
def test_bad_configs_give_one_line_with_key_and_fix(
    tmp_path: Path, change: tuple[str, str], needle: str
) -> None:
    p = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "\n" not in msg and str(p) in msg and needle in msg


def test_the_airflow_block_is_read_with_its_defaults(tmp_path: Path) -> None:
    plain = load_config(_write(tmp_path, GOOD))
    assert plain.airflow == AirflowConfig() and plain.airflow.pool == "recon_spark"
    block = "airflow: {owner: data-eng, pool: p1, retries: 0, end_date: 2026-12-01T00:00:00Z}\n"
    cfg = load_config(_write(tmp_path, GOOD + block + "description: Orders.\n"))
    assert cfg.airflow == AirflowConfig(
        owner="data-eng", pool="p1", retries=0, end_date=datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert cfg.description == "Orders."
    alerts = "notify: {slack_conn_id: oncall_slack, deadline_minutes: 30}\n"
    n = load_config(_write(tmp_path, GOOD + alerts)).notify
    assert n == NotifyConfig(slack_conn_id="oncall_slack", deadline_minutes=30) and n.any
    assert not load_config(_write(tmp_path, GOOD)).notify.any


def test_broken_yaml_and_missing_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d+"):
        load_config(_write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(ConfigError, match="`warehouse`: missing"):
        load_config(_write(tmp_path, GOOD.replace("warehouse: wh\n", "")))


def test_a_bad_file_does_not_break_the_others(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "a.yaml")
    _write(tmp_path, GOOD.replace("format: dataworks_json", "format: nope"), "b.yaml")
    good, bad = load_folder(tmp_path)
    assert [c.name for c in good] == ["shop"] and list(bad) == [tmp_path / "b.yaml"]


def test_an_impossible_date_or_non_utf8_bytes_break_only_their_file(tmp_path: Path) -> None:
    """Issue 12 item 13: YAML reads `2026-11-31` as a date and fails outside its own errors;
    bytes that are not UTF-8 fail before YAML: both were uncaught and took every DAG along."""
    _write(tmp_path, GOOD, "a.yaml")
    _write(tmp_path, re.sub(r"start: .*", "start: 2026-11-31T00:00:00Z", GOOD), "b.yaml")
    (tmp_path / "c.yaml").write_bytes(GOOD.encode().replace(b"shop_cdc", b"shop_\xe9\xff"))
    good, bad = load_folder(tmp_path)
    assert [c.name for c in good] == ["shop"]
    assert "day is out of range for month" in bad[tmp_path / "b.yaml"]
    assert "not UTF-8 text" in bad[tmp_path / "c.yaml"]
    assert all("\n" not in m for m in bad.values())


def _recon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recon.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    bad = _write(tmp_path, GOOD.replace("format: dataworks_json", "format: nope"))
    for args in (
        ["decode", "--pipeline", str(bad), "--hour", "2026-11-20T00"],
        ["decode", "--pipeline", str(tmp_path / "missing.yaml"), "--hour", "2026-11-20T00"],
        ["run", "--pipeline", str(_write(tmp_path, GOOD, "g.yaml")), "--from", "2026-11-20 00"],
        ["demo", "--parallel", "0"],
    ):
        proc = _recon(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (
            proc.stderr
        )


def test_cli_validate_and_help(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "a.yaml")
    proc = _recon("validate", str(tmp_path))
    assert proc.returncode == 0 and "ok" in proc.stdout
    _write(tmp_path, "name: x\n", "b.yaml")
    proc = _recon("validate", str(tmp_path))
    assert proc.returncode == 1 and "bad" in proc.stdout
    for cmd in ("validate", "decode", "run", "demo"):
        assert _recon(cmd, "--help").returncode == 0


def test_project_pipelines_are_valid() -> None:
    good, bad = load_folder(ROOT / "pipelines")
    assert not bad and len(good) == 6


@pytest.mark.parametrize(
    ("text", "hour"),
    [
        ("2026-11-20T05", "2026-11-20T05"),
        ("2026-11-20T05:00:00+00:00", "2026-11-20T05"),  # a logical date as Airflow shows it
        ("2026-11-20T05:59:59Z", "2026-11-20T05"),
        ("2026-11-20 07:30:00+02:00", "2026-11-20T05"),
        ("2026-11-20T05:00", "2026-11-20T05"),
        ("2026-11-20T05:00:00.123456", "2026-11-20T05"),
    ],
)
def test_hours_accept_iso_datetimes_and_say_which_hour(
    text: str, hour: str, caplog: pytest.LogCaptureFixture
) -> None:
    from recon.hours import format_hour, parse_hour

    with caplog.at_level("INFO", logger="recon"):
        assert format_hour(parse_hour(text, "--hour")) == hour
    assert (f"taken as hour {hour}" in caplog.text) is (text != hour)


def test_a_bad_hour_names_both_notations() -> None:
    from recon.errors import ConfigError
    from recon.hours import parse_hour

    for text in ("2026-11-20 05", "2026-13-01T00", "yesterday", "2026-11-20T05:00:00+25:00"):
        with pytest.raises(ConfigError, match="hour|time"):
            parse_hour(text)


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2026-11-20T10:42:00", "2026-11-20T10:42:00+00:00"),
        ("2026-11-20T10:42:00.250000", "2026-11-20T10:42:00.250000+00:00"),
        ("2026-11-20 12:42:00+02:00", "2026-11-20T10:42:00+00:00"),
        ("2026-11-20T10:42:00Z", "2026-11-20T10:42:00+00:00"),
    ],
)
def test_an_as_of_time_is_a_utc_time_to_the_microsecond(text: str, iso: str) -> None:
    from recon.hours import parse_time

    assert parse_time(text, "--as-of-time").isoformat() == iso


def test_a_bad_as_of_time_says_how_to_write_one() -> None:
    from recon.hours import parse_time

    for text in ("2026-11-20T10", "2026-11-20T10:42", "10:42:00", "2026-02-30T10:42:00"):
        with pytest.raises(ConfigError, match="--as-of-time .* time"):
            parse_time(text, "--as-of-time")


def test_a_trace_key_is_the_value_of_a_one_column_key_or_every_column_named() -> None:
    from recon.errors import ReconError
    from recon.ops.trace import key_text

    assert key_text("42", ["id"]) == '["42"]'
    assert key_text("id=42", ["id"]) == '["42"]'
    assert key_text("a=1,b=x é", ["a", "b"]) == '["1","x é"]'
    assert key_text("b=x,a=1", ["a", "b"]) == '["1","x"]'
    with pytest.raises(ReconError, match="write it as a=VALUE,b=VALUE"):
        key_text("1", ["a", "b"])


def test_the_cli_says_which_hour_an_iso_datetime_was_taken_as(tmp_path: Path) -> None:
    proc = _recon(
        "report", "--pipeline", str(_write(tmp_path, GOOD)), "--hour", "2026-11-20T07:00:00+02:00"
    )
    assert (
        "recon: --hour 2026-11-20T07:00:00+02:00 taken as hour 2026-11-20T05 (UTC)" in proc.stderr
    )
    assert proc.returncode == 2 and "no report for 2026-11-20T05" in proc.stderr


def test_file_uris_are_paths_and_catalog_secrets_are_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recon.publish.iceberg import catalog_properties

    text = GOOD.replace("warehouse: wh", f"warehouse: file://{tmp_path}/wh").replace(
        "raw_path: /data/raw",
        "raw_path: file:///data/raw\ncatalog: {type: sql, uri: 'postgresql://u:${CAT_PW}@db/i'}",
    )
    cfg = load_config(_write(tmp_path, text))
    assert (cfg.warehouse, cfg.raw_path) == (tmp_path / "wh", Path("/data/raw"))
    monkeypatch.delenv("CAT_PW", raising=False)
    with pytest.raises(ConfigError, match=r"`catalog.uri` reads \$\{CAT_PW\}, which is not set"):
        catalog_properties(cfg)
    monkeypatch.setenv("CAT_PW", "s3cret")
    assert catalog_properties(cfg)["uri"] == "postgresql://u:s3cret@db/i"


def test_the_stages_log_through_logging_and_the_cli_stays_concise(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13 item 7: per-package loggers; the CLI shows the stages' own lines only when
    RECON_LOG_LEVEL asks, and a bad level is one line."""
    import logging

    from recon.cli import main

    monkeypatch.setenv("RECON_LOG_LEVEL", "loud")
    assert main(["validate", str(ROOT / "pipelines")]) == 2
    assert "RECON_LOG_LEVEL='LOUD' is not a log level" in capsys.readouterr().err
    monkeypatch.delenv("RECON_LOG_LEVEL")
    assert main(["validate", str(ROOT / "pipelines")]) == 0
    assert logging.getLogger("recon.merge.stage").getEffectiveLevel() == logging.WARNING
    monkeypatch.setenv("RECON_LOG_LEVEL", "debug")
    assert main(["validate", str(ROOT / "pipelines")]) == 0
    assert logging.getLogger("recon.merge.stage").getEffectiveLevel() == logging.DEBUG


def test_a_loader_failure_of_any_kind_breaks_only_its_file(tmp_path: Path) -> None:
    """Issue 79 item 2: deep nesting (RecursionError) and a start out of range in UTC
    (OverflowError) escaped the loader and took every DAG along; a NUL byte, a one-slash URI
    and a key given twice are refused with their line."""
    _write(tmp_path, GOOD, "a.yaml")
    _write(tmp_path, GOOD + "description: " + "[" * 3000 + "]" * 3000 + "\n", "deep.yaml")
    _write(tmp_path, re.sub(r"start: .*", "start: 0001-01-01T00:00:00+01:00", GOOD), "old.yaml")
    _write(tmp_path, GOOD.replace("raw_path: /data/raw", 'raw_path: "/data\\0raw"'), "nul.yaml")
    _write(tmp_path, GOOD.replace("raw_path: /data/raw", "raw_path: s3a:/x"), "s3a.yaml")
    _write(tmp_path, GOOD.replace("warehouse: wh", "warehouse: wh\nwarehouse: wh2"), "twice.yaml")
    good, bad = load_folder(tmp_path)
    assert [c.name for c in good] == ["shop"]
    msgs = {p.name: m for p, m in bad.items()}
    assert "nested too deeply" in msgs["deep.yaml"]
    assert ":7: `start`: " in msgs["old.yaml"] and "out of range" in msgs["old.yaml"]
    assert ":4: `raw_path`: holds a NUL character" in msgs["nul.yaml"]
    assert "neither a path nor a URI" in msgs["s3a.yaml"]
    assert ":7: `warehouse` is given twice (first at line 6)" in msgs["twice.yaml"]
    assert all("\n" not in m for m in msgs.values())


def test_acknowledge_reset_records_once_and_refuses_a_topic_not_in_the_pipeline(
    tmp_path: Path,
) -> None:
    p = _write(tmp_path, GOOD)
    args = ["acknowledge-reset", "--pipeline", str(p), "--topic", "shop_cdc", "--partition", "2"]
    proc = _recon(*args, "--hour", "2026-11-20T05", "--note", "topic re-created")
    assert proc.returncode == 0 and "acknowledged from hour 2026-11-20T05 on" in proc.stdout
    assert "already acknowledged" in _recon(*args, "--hour", "2026-11-20T05:00:00Z").stdout
    doc = json.loads((tmp_path / "wh" / "_state" / "shop" / "acknowledged_resets.json").read_text())
    assert [(a["topic"], a["partition"], a["hour"], a["note"]) for a in doc["resets"]] == [
        ("shop_cdc", 2, "2026-11-20T05", "topic re-created")
    ]
    bad = _recon(
        "acknowledge-reset",
        "--pipeline",
        str(p),
        "--topic",
        "nope",
        "--partition",
        "0",
        "--hour",
        "2026-11-20T05",
    )
    assert bad.returncode == 2 and "is not one of pipeline shop's" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

"""The dump layouts (`recon.rawdumps`) and Kafka Connect's files (`recon.decode.input.connect_input`):
names, completeness (the decode's and the sensor's one rule), conversion, and bad input."""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest

from recon.airflow.dag_factory import dump_complete
from recon.cli import main
from recon.config import load_config
from recon.decode.input.connect_input import ConnectFileError, convert, file_values
from recon.errors import ConfigError
from recon.rawdumps import (
    KAFKA_CONNECT_S3,
    DumpConfig,
    connect_name,
    list_hour,
    path_format_strftime,
    scan_topic,
)
from tests.support.connect import encode

H = datetime(2026, 11, 20, 5, tzinfo=UTC)
CONNECT = DumpConfig(KAFKA_CONNECT_S3, grace_minutes=30)


def test_path_format_reads_the_connectors_joda_pattern() -> None:
    assert path_format_strftime("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH") == (
        "year=%Y/month=%m/day=%d/hour=%H"
    )
    assert path_format_strftime("yyyy/MM/dd/HH") == "%Y/%m/%d/%H"
    assert path_format_strftime("'it''s'-YYYY-MM-dd-HH") == "it's-%Y-%m-%d-%H"
    with pytest.raises(ValueError, match="no the hour"):
        path_format_strftime("'date'=YYYY-MM-dd")
    with pytest.raises(ValueError, match="'mm' is not read"):
        path_format_strftime("YYYY/MM/dd/HH/mm")
    with pytest.raises(ValueError, match="not closed"):
        path_format_strftime("'year=YYYY/MM/dd/HH")


def test_connector_file_names() -> None:
    assert connect_name("shop.cdc", "shop.cdc+3+0000001200.avro") == (3, 1200, ".avro")
    assert connect_name("shop.cdc", "shop.cdc+0+0000000000.bin.gz") == (0, 0, ".bin.gz")
    assert connect_name("shop.cdc", "other+0+0000000000.avro") is None
    assert connect_name("shop.cdc", "shop.cdc+0+0000000000.parquet") is None
    assert connect_name("shop.cdc", "shop.cdc+x+0.avro") is None


def _touch(folder: Path, name: str, data: bytes = b"") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def _hour_dir(raw: Path, h: datetime) -> Path:
    return raw / "t" / f"year={h:%Y}/month={h:%m}/day={h:%d}/hour={h:%H}"


def test_a_connect_hour_is_complete_when_every_partition_moved_on_or_after_the_grace(
    tmp_path: Path,
) -> None:
    raw = tmp_path
    _touch(_hour_dir(raw, H), "t+0+0000000000.avro")
    _touch(_hour_dir(raw, H), "t+1+0000000000.avro")
    _touch(_hour_dir(raw, H), ".t+1+0000000000.avro.crc")
    _touch(_hour_dir(raw, H), "notes.txt")
    just_after = H + timedelta(hours=1, minutes=5)
    hf = list_hour(raw, "t", H, CONNECT, now=just_after)
    assert not hf.complete and "grace_minutes 30" in hf.waiting_for
    assert [Path(f).name for f in hf.connect] == ["t+0+0000000000.avro", "t+1+0000000000.avro"]
    assert [Path(f).name for f in hf.unread] == ["notes.txt"]  # the hidden .crc is not a finding
    _touch(_hour_dir(raw, H + timedelta(hours=1)), "t+0+0000000100.avro")
    assert not list_hour(raw, "t", H, CONNECT, now=just_after).complete  # partition 1 not yet
    _touch(_hour_dir(raw, H + timedelta(hours=3)), "t+1+0000000100.avro")
    assert list_hour(raw, "t", H, CONNECT, now=just_after).complete
    # an hour with no file at all waits for the grace only
    empty = H - timedelta(hours=30)
    assert list_hour(raw, "t", empty, CONNECT).complete
    late = H + timedelta(hours=10)
    assert not list_hour(raw, "t", late, CONNECT, now=late + timedelta(minutes=70)).complete
    assert list_hour(raw, "t", late, CONNECT, now=late + timedelta(minutes=90)).complete
    assert sorted(scan_topic(raw, "t", CONNECT)) == [
        H,
        H + timedelta(hours=1),
        H + timedelta(hours=3),
    ]


def test_the_dag_sensor_uses_the_same_rule(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    pipeline = tmp_path / "p.yaml"
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    pipeline.write_text(
        "name: p\nformat: debezium_json\nraw_path: raw\ntopics: [t]\nwarehouse: wh\n"
        "start: 2026-11-20T00:00:00Z\ntables: {shop.orders: {}}\n"
        "dump: {layout: kafka-connect-s3, grace_minutes: 600}\n"
    )
    h = {"from": hour.strftime("%Y-%m-%dT%H"), "to": hour.strftime("%Y-%m-%dT%H")}
    _touch(_hour_dir(raw, hour), "t+0+0000000000.avro")
    assert not dump_complete(str(pipeline), h)
    _touch(_hour_dir(raw, hour + timedelta(hours=1)), "t+0+0000000009.avro")
    assert dump_complete(str(pipeline), h)


def test_avro_bin_and_json_files_become_kafka_source_records(tmp_path: Path) -> None:
    values = [b'{"a":1}', None, b"\x00\x01binary\n"]
    avro = _touch(tmp_path, "t+2+0000000040.avro", encode(values, ".avro"))
    assert list(file_values(avro, CONNECT)) == values
    dst = tmp_path / "out.parquet"
    convert(avro, dst, "t", H, CONNECT)
    rows = pq.read_table(dst).to_pylist()
    assert [(r["partition"], r["offset"], r["value"]) for r in rows] == [
        (2, 40, values[0]),
        (2, 41, None),
        (2, 42, values[2]),
    ]
    assert {r["timestamp"] for r in rows} == {H} and {r["topic"] for r in rows} == {"t"}
    binf = _touch(tmp_path, "t+0+0000000007.bin.gz", encode([b"x", b"y"], ".bin.gz"))
    assert list(file_values(binf, CONNECT)) == [b"x", b"y"]
    piped = _touch(tmp_path, "t+0+0000000001.bin", b"a|b||c|")
    assert list(file_values(piped, DumpConfig(KAFKA_CONNECT_S3, separator=b"|"))) == [
        b"a",
        b"b",
        None,
        b"c",
    ]
    js = _touch(tmp_path, "t+0+0000000003.json", b'{"x": 1}\n{"x": 2}\n')
    assert list(file_values(js, CONNECT)) == [b'{"x": 1}', b'{"x": 2}']


def test_an_avro_file_of_another_value_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    buf = io.BytesIO()
    schema = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "long"}]}
    fastavro.writer(buf, schema, [{"id": 1}])
    f = _touch(tmp_path, "t+0+0000000000.avro", buf.getvalue())
    with pytest.raises(ConnectFileError) as err:
        list(file_values(f, CONNECT))
    msg = str(err.value)
    assert "\n" not in msg and str(f) in msg and "'long'" in msg and "ByteArrayConverter" in msg
    broken = _touch(tmp_path, "t+0+0000000009.avro", b"not avro at all")
    with pytest.raises(ConnectFileError, match="not an Avro file"):
        list(file_values(broken, CONNECT))


BASE = (
    "name: p\nformat: {fmt}\nraw_path: raw\ntopics: [t]\nwarehouse: wh\n"
    "start: 2026-11-20T00:00:00Z\ntables:\n  shop.orders: {{}}\n"
)


def test_the_dump_block_is_checked_with_the_line_of_the_key(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(BASE.format(fmt="debezium_json") + "dump:\n  layout: kafka-connect-s3\n")
    cfg = load_config(p)
    assert cfg.dump.layout == KAFKA_CONNECT_S3 and cfg.dump.grace_minutes == 30
    for extra, needle in [
        ("dump:\n  layout: s3\n", ":10: `dump.layout`: 's3' is not a layout"),
        (
            "dump:\n  layout: kafka-connect-s3\n  path_format: YYYY-MM-dd\n",
            ":11: `dump.path_format`",
        ),
        ("dump:\n  path_format: HH\n", ":10: `dump.path_format`: is read only with layout"),
        ("dump:\n  layout: kafka-connect-s3\n  grace_minutes: -1\n", ":11: `dump.grace_minutes`"),
        ("dump:\n  layout: kafka-connect-s3\n  bogus: 1\n", ":11: `dump.bogus`: unknown option"),
    ]:
        p.write_text(BASE.format(fmt="debezium_json") + extra)
        with pytest.raises(ConfigError) as err:
            load_config(p)
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_validate_names_file_and_line_and_refuses_duplicate_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(BASE.format(fmt="debezium_json").replace("tables:", "buckets: 0\ntables:"))
    assert main(["validate", str(p)]) == 1
    assert f"{p}:7: `buckets`" in capsys.readouterr().out
    p.write_text(BASE.format(fmt="debezium_json") + "topics: [u]\n")
    assert main(["validate", str(p)]) == 1
    assert f"{p}:9: `topics` is given twice (first at line 4)" in capsys.readouterr().out
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["validate", str(deep)]) == 1
    assert "nested too deeply" in capsys.readouterr().out


def test_validate_refuses_bin_files_of_a_binary_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(BASE.format(fmt="canal_pb") + "dump: {layout: kafka-connect-s3}\n")
    _touch(_hour_dir(tmp_path / "raw", H), "t+0+0000000000.avro")
    assert main(["validate", str(p)]) == 0
    _touch(_hour_dir(tmp_path / "raw", H), "t+1+0000000000.bin")
    assert main(["validate", str(p)]) == 1
    out = capsys.readouterr().out
    assert "t+1+0000000000.bin is a ByteArrayFormat (.bin) file" in out and "AvroFormat" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("recon 0.")


def test_hidden_and_partial_files_are_not_dumps(tmp_path: Path) -> None:
    """The connector's temporary uploads never show under a dump name on a filesystem; what a
    copy tool leaves hidden (`.name.tmp`) is passed over, anything else named in a finding."""
    folder = _hour_dir(tmp_path, H)
    _touch(folder, ".t+0+0000000000.avro.tmp")
    _touch(folder, "_SUCCESS")
    _touch(folder, "t+0+0000000000.avro.partial")
    hf = list_hour(tmp_path, "t", H, CONNECT, now=H + timedelta(days=1))
    assert hf.connect == () and [os.path.basename(f) for f in hf.unread] == [
        "t+0+0000000000.avro.partial"
    ]


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard", "bzip2", "xz"])
def test_avro_files_of_every_codec_the_connector_writes_are_read(
    tmp_path: Path, codec: str
) -> None:
    """The connector's `avro.codec`: null, deflate, snappy, bzip2, xz, zstandard."""
    values = [b'{"a":1}', None, bytes(range(256)) * 50]
    buf = io.BytesIO()
    fastavro.writer(buf, ["null", "bytes"], values, codec=codec)
    f = _touch(tmp_path, "t+0+0000000000.avro", buf.getvalue())
    assert list(file_values(f, CONNECT)) == values

"""`recon inspect` and `recon init` on the demo's sample of every format, in both dump layouts:
the layout, topics, hours, partitions, format and tables found from samples; a YAML that
`recon validate` accepts; one line for a folder that holds no dumps."""

from __future__ import annotations

from pathlib import Path

import pytest

from recon.cli import main
from recon.config import load_config
from recon.demo.demo import make_demo_data
from recon.formats import FORMATS
from recon.ops.inspect import find_layout, inspect_raw, path_format_of
from recon.rawdumps import KAFKA_CONNECT_S3, SPARK_KAFKA, path_format_strftime
from tests.support.connect import to_connect

BINARY = {"tencent_dts_pb", "canal_pb"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    make_demo_data(root, 2)
    for fmt in FORMATS:
        ext = ".avro" if fmt in BINARY else ".bin"
        to_connect(root / "raw", root / "connect", f"demo_{fmt}", ext)
    return root


@pytest.mark.parametrize("layout", ["raw", "connect"])
def test_inspect_finds_the_layout_format_and_tables_of_every_sample(
    demo: Path, layout: str
) -> None:
    info = inspect_raw(demo / layout)
    assert info.dump.layout == (SPARK_KAFKA if layout == "raw" else KAFKA_CONNECT_S3)
    assert [t.topic for t in info.topics] == [f"demo_{f}" for f in sorted(FORMATS)]
    for t in info.topics:
        assert t.format == t.topic.removeprefix("demo_"), (t.topic, t.tried)
        assert len(t.hours) == 2 and t.partitions and all(p.records for p in t.partitions.values())
        if t.format == "tdsql_json":  # positional rows: the table is named, its columns are not
            assert t.unnamed == ["shop.orders"]
        else:
            # Debezium states the key in the Kafka key, which Kafka Connect's files leave out
            keyless = layout == "connect" and t.format == "debezium_json"
            key = () if keyless else ("id",)
            assert set(t.tables) == {"shop.orders"} and t.tables["shop.orders"].key == key
            assert t.events


def test_the_connectors_path_format_is_read_back_from_its_folders(demo: Path) -> None:
    raw, dump, _ = find_layout(demo / "connect")
    assert raw == demo / "connect"
    assert path_format_strftime(dump.path_format) == "year=%Y/month=%m/day=%d/hour=%H"
    assert path_format_of("dt=2026-11-20/05") == "'dt'=YYYY-MM-dd/HH"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_init_writes_a_pipeline_validate_accepts(
    demo: Path, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pipelines" / f"{fmt}.yaml"
    args = ["init", "--raw", str(demo / "connect" / f"demo_{fmt}"), "--out", str(out)]
    assert main([*args, "--snapshot", str(demo / "snapshot")]) == 0
    text = out.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert main(["validate", str(out)]) == 0, capsys.readouterr().out
    cfg = load_config(out)
    assert cfg.format == fmt and cfg.topics == (f"demo_{fmt}",)
    assert cfg.dump.layout == KAFKA_CONNECT_S3 and cfg.snapshot_path == demo / "snapshot"
    assert "shop.orders" in cfg.tables
    assert main(args) == 2  # exists: not replaced without --force
    assert "pass --force" in capsys.readouterr().err


def test_a_folder_without_dumps_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "other" / "x").mkdir(parents=True)
    for args in (
        ["init", "--raw", str(tmp_path / "empty"), "--out", str(tmp_path / "p.yaml")],
        ["inspect", str(tmp_path / "other")],
        ["inspect", str(tmp_path / "missing")],
    ):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "p.yaml").exists()


def test_inspect_prints_a_file_and_a_snapshot(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = next((demo / "connect" / "demo_canal_pb").rglob("*.avro"))
    assert main(["inspect", str(f)]) == 0
    out = capsys.readouterr().out
    assert "format: canal_pb" in out and "table shop.orders" in out
    assert main(["inspect", str(demo / "snapshot")]) == 0
    out = capsys.readouterr().out
    rows = (demo / "snapshot" / "shop.orders" / "part-00000.jsonl").read_text().count("\n")
    assert f"table shop.orders: {rows} rows" in out and "gtid_set" in out


def test_inspect_names_a_file_it_cannot_read(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import shutil

    import fastavro

    raw = tmp_path / "raw"
    shutil.copytree(demo / "connect" / "demo_canal_json", raw / "demo_canal_json")
    hour = sorted((raw / "demo_canal_json").rglob("hour=*"))[-1]
    buf = io.BytesIO()
    fastavro.writer(
        buf, {"type": "record", "name": "V", "fields": [{"name": "a", "type": "int"}]}, [{"a": 1}]
    )
    (hour / "demo_canal_json+0+0000099999.avro").write_bytes(buf.getvalue())
    assert main(["inspect", str(raw)]) == 0
    out = capsys.readouterr().out
    assert "unreadable file:" in out and "0000099999.avro: its value schema is" in out
    assert "format: canal_json" in out  # the other files still tell the format

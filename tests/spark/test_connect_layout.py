"""Kafka Connect's S3 sink layout end to end: the demo's sample of every format, written as the
connector writes it (Avro for every format, `.bin` for the JSON ones; files of a partition
written out of order, a task's re-delivered offsets in a file of their own, a Tencent envelope
split across an hour), through `recon run`, publishes the source's final state, with the
re-deliveries counted as duplicates and no offset gap; a file of no connector name in an hour's
folder fails that hour with an `unread_file` finding naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recon.config import load_config
from recon.decode.stats import Stat
from recon.demo import sample
from recon.demo.demo import DEMO_START, _comparable, _expected_rows, make_demo_data
from recon.formats import FORMATS
from recon.hours import format_hour
from recon.ops.run import run_hours
from recon.publish.export import export_rows
from tests.support.connect import to_connect

HOURS = 2
BINARY = {"tencent_dts_pb", "canal_pb"}
CASES = [(f, ".avro") for f in FORMATS] + [
    (f, ".bin.gz" if f == "dataworks_json" else ".bin") for f in FORMATS if f not in BINARY
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("connect")
    make_demo_data(root, HOURS)
    return root


def _pipeline(root: Path, fmt: str, ext: str) -> Path:
    demo_yaml = yaml.safe_load((Path("pipelines") / f"demo_{fmt}.yaml").read_text())
    name = f"kc_{fmt}_{ext.strip('.').replace('.', '_')}"
    raw = root / name / "raw"
    again = to_connect(root / "raw", raw, f"demo_{fmt}", ext, path_format="'dt'=YYYY-MM-dd/HH")
    doc = {
        **demo_yaml,
        "name": name,
        "raw_path": str(raw),
        "warehouse": str(root / name / "warehouse"),
        "snapshot": {"path": str(root / "snapshot")},
        "dump": {"layout": "kafka-connect-s3", "path_format": "'dt'=YYYY-MM-dd/HH"},
    }
    if fmt == "debezium_json":  # its key is the Kafka key, which the connector's files lack
        doc["tables"] = {"shop.orders": {"primary_key": ["id"]}}
    if fmt == "debezium_json" and ext == ".avro":  # a file of no connector name: a finding
        hour1 = next(raw.glob("*/dt=*/01"))
        (hour1 / "demo_debezium_json+0+0000000009.avro.partial").write_bytes(b"half a file")
        doc["audit"] = {"fail_on": [*doc["audit"]["fail_on"], "unread_file"]}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert again > 0
    return path


@pytest.mark.parametrize(("fmt", "ext"), CASES)
def test_connect_dumps_publish_the_source_state(demo: Path, spark, fmt: str, ext: str) -> None:
    path = _pipeline(demo, fmt, ext)
    first = format_hour(DEMO_START)
    last = format_hour(DEMO_START.replace(hour=HOURS - 1))
    results = run_hours(str(path), first, last)
    cfg = load_config(path)
    expected = _expected_rows(sample.final_state(sample.workload(DEMO_START, HOURS)))
    got = [_comparable(r) for r in export_rows(cfg, "shop.orders")]
    assert got == expected
    kinds = {f["kind"] for r in results for f in r["audit"]["findings"]}
    assert "offset_gap" not in kinds and "balance" not in kinds
    dups = sum(
        r["decode"]["totals"].get(Stat.DUPLICATES_IN_HOUR, 0)
        + r["decode"]["totals"].get(Stat.DUPLICATES_CROSS_HOUR, 0)
        for r in results
    )
    assert dups > 0
    failing = [
        {f["kind"] for f in r["audit"]["findings"] if f["severity"] == "fail"} for r in results
    ]
    if fmt == "debezium_json" and ext == ".avro":
        assert failing == [set(), {"unread_file"}]
        (unread,) = [f for f in results[1]["audit"]["findings"] if f["kind"] == "unread_file"]
        assert "demo_debezium_json+0+0000000009.avro.partial" in unread["message"]
    else:
        assert failing == [set()] * HOURS


def test_a_pipeline_recon_init_writes_runs(demo: Path, spark) -> None:
    """A newcomer's path: `recon init` on a Kafka Connect folder, then `recon run` as it is."""
    from recon.cli import main

    raw = demo / "init" / "raw"
    to_connect(demo / "raw", raw, "demo_canal_json", ".json.gz")
    out = demo / "init" / "pipelines" / "shop.yaml"
    assert (
        main(["init", "--raw", str(raw), "--snapshot", str(demo / "snapshot"), "--out", str(out)])
        == 0
    )
    first = format_hour(DEMO_START)
    last = format_hour(DEMO_START.replace(hour=HOURS - 1))
    results = run_hours(str(out), first, last)
    expected = _expected_rows(sample.final_state(sample.workload(DEMO_START, HOURS)))
    assert [_comparable(r) for r in export_rows(load_config(out), "shop.orders")] == expected
    assert "fail" not in [r["audit"]["verdict"] for r in results]

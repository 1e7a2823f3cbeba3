"""The decode tasks' pre-fold, end to end (`recon.decode.premerge.prefold`, `recon.merge.winners`): a
busy hour of each format the benchmark generates (a few hundred keys changed again and again:
inserts, updates, deletes), decoded by the real decode stage, leaves its winners beside its
events, and merging it from them publishes the table that merging every event publishes (the
same hour, its winners taken away), with the same counts and a passing audit."""

from __future__ import annotations

import argparse
import logging
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from benchmarks.run import HOUR, make_hour
from recon.audit.stage import audit_hour
from recon.config import load_config
from recon.decode.stage import decode_hour
from recon.hours import parse_hour
from recon.layout import has_parquet, read_json
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from tests.support.merge import said


@pytest.mark.parametrize(
    ("fmt", "shuffled"),
    [
        ("dataworks_json", False),
        ("debezium_json", False),
        ("tencent_dts_pb", False),
        ("debezium_json", True),  # out of Kafka's order: decoded from the hour's staging copy
    ],
)
def test_a_busy_hour_merged_from_its_winners_publishes_what_every_event_does(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, fmt: str, shuffled: bool
) -> None:
    ns = argparse.Namespace(
        keys=300, delete_share=0.1, partitions=2, seed=3, file_per_partition=False
    )
    make_hour(tmp_path / "won", fmt, 6000, ns)
    if shuffled:
        for f in (tmp_path / "won" / "raw").rglob("*.parquet"):
            t = pq.read_table(f)
            pq.write_table(t.take(np.random.default_rng(5).permutation(t.num_rows)), f)
    shutil.copytree(tmp_path / "won", tmp_path / "every")
    hour: datetime = parse_hour(HOUR)
    results = {}
    for name in ("won", "every"):
        cfg = load_config(tmp_path / name / "pipeline.yaml")
        with caplog.at_level(logging.INFO, logger="recon.decode.stage"):
            decode_hour(spark, cfg, hour)
        assert ("a staging copy" if shuffled else "the dumps in place") in caplog.text
        assert has_parquet(cfg.layout.winners(hour)), "the busy hour's tasks wrote winners"
        if name == "every":  # the decode's record no longer matches: the merge reads events
            shutil.rmtree(cfg.layout.winners(hour))
        merged = merge_hour(spark, cfg, hour, buckets=cfg.buckets)
        report = audit_hour(spark, cfg, hour)
        assert report["verdict"] == "pass", (name, report["findings"])
        decoded = read_json(cfg.layout.decode_counters(hour))["event_shapes"]
        results[name] = (merged, list(export_rows(cfg, "shop.orders", with_metadata=True)))
        if name == "won":
            folded = merged["tables"]["shop.orders"]["folded_in_decode"]
            assert folded == sum(c["n"] for c in decoded["superseded"]) > 0
            # the tasks' value classes reached the decode's record, and vouched for every value
            classes = {(c["column"], c["cls"]) for c in decoded["value_classes"]}
            assert ("id", "*") in classes and any(c == "id" for c, k in classes if k != "*")
            assert merged["tables"]["shop.orders"]["checked_in_decode"] is True
    (won, won_rows), (every, every_rows) = results["won"], results["every"]
    assert every["tables"]["shop.orders"]["folded_in_decode"] == 0
    # the decode's record of the events still holds: their values' classes vouch for them
    assert every["tables"]["shop.orders"]["checked_in_decode"] is True
    assert said(won) == said(every)
    assert won_rows == every_rows and len(won_rows) > 100

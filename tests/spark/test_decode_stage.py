"""The decode stage on real dump files through Spark: demo dumps of every format, a Tencent
envelope split across two hours, duplicates within and across hours, a garbage record, re-runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from recon.config import load_config
from recon.core.model import RawRecord
from recon.decode import stage
from recon.decode.input.copy_input import TMP_PREFIX
from recon.decode.input.offset_index import hour_intervals
from recon.decode.stage import decode_hour
from recon.demo import sample
from recon.demo.demo import _straddle_last_envelope, write_dump
from recon.faults import TASK_POINTS
from recon.layout import Layout, has_parquet, hour_text
from tests.support.builders import write_pipeline
from tests.support.hourly import event_key

H0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
HOURS = [H0, H0 + timedelta(hours=1)]
TXNS = sample.workload(H0, 2, txns_per_hour=8, seed=11)


def _pipeline(
    tmp: Path, fmt: str, records: list[RawRecord], kind: str, in_order: bool = False
) -> Path:
    write_dump(tmp / "raw", f"t_{fmt}", records, kind, HOURS, in_order=in_order)
    tables = {"shop.orders": {"ddl": sample.CREATE_SQL} if fmt == "tdsql_json" else {}}
    return write_pipeline(
        tmp / f"{fmt}.yaml", name=f"p_{fmt}", format=fmt, topics=[f"t_{fmt}"], tables=tables
    )


def _events(wh: Path, name: str) -> list[dict]:
    rows = []
    for h in HOURS:
        d = Layout(wh, name).events(h)
        files = sorted(d.glob("*.parquet"))
        for f in files:
            rows += pq.read_table(f).to_pylist()
    for r in rows:
        r.pop("kind", None)
        for k in ("before", "after", "types"):
            if r[k] is not None:
                r[k] = list(r[k])
    return rows


def _reference(fmt: str) -> list[dict]:
    from recon.config import TableConfig
    from recon.decode.base import DecodeContext
    from recon.decode.stream import decode_records

    ctx = DecodeContext(
        tables={"shop.orders": TableConfig("shop.orders", ddl=sample.CREATE_SQL).table_def()}
    )  # type: ignore[dict-item]
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    return [r for r in decode_records(recs, fmt, ctx).to_pylist() if r["kind"] == "event"]


@pytest.mark.parametrize(
    "fmt,kind",
    [
        ("tencent_dts_pb", "parquet"),
        ("tdsql_json", "jsonl.gz"),
        ("canal_pb", "parquet"),
        ("canal_json", "jsonl"),
        ("debezium_json", "parquet"),
        ("dataworks_json", "jsonl"),
    ],
)
def test_two_hours_of_dumps_decode_like_the_clean_stream(
    spark, tmp_path: Path, fmt: str, kind: str
) -> None:
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    if fmt == "tencent_dts_pb":
        _straddle_last_envelope(recs, H0)
    dups = [RawRecord(r.topic, r.partition, r.offset, r.key, r.value, r.ts_ms) for r in recs[2:4]]
    late = [
        RawRecord(r.topic, r.partition, r.offset, r.key, r.value, (r.ts_ms or 0) + 3600_000)
        for r in recs[6:7]
    ]
    cfg = load_config(_pipeline(tmp_path, fmt, recs + dups + late, kind))
    c0 = decode_hour(spark, cfg, HOURS[0], run_id="r0")
    c1 = decode_hour(spark, cfg, HOURS[1], run_id="r1")
    assert c0["totals"]["duplicates_in_hour"] == 2
    assert c1["totals"]["duplicates_cross_hour"] == 1
    end0 = (H0 + timedelta(hours=1)).timestamp() * 1000
    in0 = [r for r in recs + dups + late if (r.ts_ms or 0) < end0]
    assert c0["totals"]["bytes"] == sum(len(r.value or b"") for r in in0)  # every copy
    if fmt == "tencent_dts_pb":
        assert c0["totals"]["records_carried_out"] > 0  # the split envelope's first segments
        assert c1["totals"]["records_carried_in"] == c0["totals"]["records_carried_out"]
    assert sorted(map(event_key, _events(cfg.warehouse, cfg.name))) == sorted(
        map(event_key, _reference(fmt))
    )
    # re-running an hour converges to the same outputs
    decode_hour(spark, cfg, HOURS[1], run_id="r1-again")
    assert sorted(map(event_key, _events(cfg.warehouse, cfg.name))) == sorted(
        map(event_key, _reference(fmt))
    )


def _same_counters(c: dict) -> dict:
    return {k: c[k] for k in ("totals", "events_by_op", "quarantine_reasons", "partitions")}


def _decoded_both_ways(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, recs: list[RawRecord]
) -> dict[bool, tuple[list, list[dict]]]:
    """Both hours decoded with the decoders reading the staging copy (True) and with Spark
    shuffling the records to them (False): (events, counters) of each. Every hour read the copy
    when it was on, and left no staging folder behind."""
    calls: list[str] = []
    real = stage._decode_copy
    monkeypatch.setattr(stage, "_decode_copy", lambda *a: calls.append("copy") or real(*a))
    got = {}
    for copy_input in (True, False):
        monkeypatch.setattr(stage, "COPY_INPUT", copy_input)
        cfg = load_config(_pipeline(tmp_path / f"copy_{copy_input}", fmt, recs, "parquet"))
        counters = [decode_hour(spark, cfg, h, run_id=f"r{i}") for i, h in enumerate(HOURS)]
        events = sorted(map(event_key, _events(cfg.warehouse, cfg.name)))
        got[copy_input] = (events, [_same_counters(c) for c in counters])
        assert not list(cfg.layout.staging("r0").parent.glob("r*"))  # staging cleaned up
    assert calls == ["copy"] * len(HOURS)
    return got


@pytest.mark.parametrize("partition_ends", [False, True])
def test_carried_records_decode_the_same_from_the_copy_or_shuffled(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partition_ends: bool
) -> None:
    """The decoders read the hour's staging copy themselves (`recon.decode.input.copy_input`) unless
    the tests turn that off; then Spark shuffles the records to them, as every hour did before.
    Both give the same events and counters, with the records carried in
    merged into their partition by offset. `partition_ends`: the partition of the split
    envelope has no records in the next hour, only the carried ones (a task of their own)."""
    fmt = "tencent_dts_pb"
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    _straddle_last_envelope(recs, H0)
    end0 = int(HOURS[1].timestamp() * 1000)
    moved = {r.partition for r in recs if r.ts_ms == end0 + 500}
    assert len(moved) == 1
    if partition_ends:
        recs = [r for r in recs if not (r.partition in moved and (r.ts_ms or 0) >= end0)]
    got = _decoded_both_ways(spark, tmp_path, monkeypatch, fmt, recs)
    assert got[True] == got[False]
    c0, c1 = got[True][1]
    carried = c0["totals"]["records_carried_out"]
    assert carried > 0 and c1["totals"]["records_carried_in"] == carried
    if partition_ends:  # the envelope's rest never came: its segments are carried on
        assert c1["totals"]["records_carried_out"] == carried
        assert len(got[True][0]) < len(_reference(fmt))
    else:
        assert got[True][0] == sorted(map(event_key, _reference(fmt)))


@pytest.mark.parametrize("fmt", ["tencent_dts_pb", "debezium_json"])
def test_redelivered_records_are_left_out_of_the_copy_the_decoders_read(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """An hour some of whose records an earlier hour read (re-delivered: same offset, same
    content) reads its staging copy too, leaving those records out (the skip list,
    `recon.decode.input.copy_input`), where Spark used to shuffle the hour's fresh records to the
    decoders again. Both ways give the same events and counters. With Tencent the re-delivered
    records are the first segments of an envelope split across the hours, carried in: decoded
    again, they would double it. An hour-0 offset with other content is an offset reset: kept."""
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    if fmt == "tencent_dts_pb":
        _straddle_last_envelope(recs, H0)
    again = _redelivered(recs)  # and an offset reset, last
    got = _decoded_both_ways(spark, tmp_path, monkeypatch, fmt, [*recs, *again])
    assert got[True] == got[False]
    c1 = got[True][1][1]["totals"]
    assert c1["duplicates_cross_hour"] == len(again) - 1 and c1["offset_resets"] == 1
    assert c1["records_quarantined"] == 1  # the reset's value is not a change of this format
    assert got[True][0] == sorted(map(event_key, _reference(fmt)))


def _redelivered(recs: list[RawRecord]) -> list[RawRecord]:
    """Hour 1 also holds the last two records of each partition of hour 0 (re-delivered: same
    offset, same content) and hour 0's first offset with other content (an offset reset)."""
    end0 = int(HOURS[1].timestamp() * 1000)
    h0 = [r for r in recs if (r.ts_ms or 0) < end0]
    tails: dict[int, list[RawRecord]] = {}
    for r in sorted(h0, key=lambda r: r.offset):
        tails.setdefault(r.partition, []).append(r)
    again = [
        RawRecord(r.topic, r.partition, r.offset, r.key, r.value, end0 + 100)
        for rs in tails.values()
        for r in rs[-2:]
    ]
    first = h0[0]
    reset = RawRecord(first.topic, first.partition, first.offset, first.key, b"{}", end0 + 200)
    return [*again, reset]


def _decoded_outputs(cfg: Any) -> dict[str, Any]:
    """Everything the decode stage keeps of its hours, in an order of its own."""
    lay = cfg.layout

    def rows(folder: Path) -> list[dict[str, Any]]:
        return pq.read_table(folder).to_pylist() if has_parquet(folder) else []

    quarantine = [
        {k: v for k, v in r.items() if k != "reason"} | {"reason": str(r["reason"])}
        for h in HOURS
        for r in rows(lay.quarantine(h))
    ]
    hashes = [rows(lay.offset_hashes(h)) for h in HOURS]
    intervals = [hour_intervals(lay.offsets(h), hour_text(h)).to_pylist() for h in HOURS]
    return {
        "events": sorted(map(event_key, _events(cfg.warehouse, cfg.name))),
        "quarantine": sorted(quarantine, key=lambda r: (r["topic"], r["partition"], r["offset"])),
        "hashes": [sorted(h, key=lambda r: tuple(r.values())) for h in hashes],
        "intervals": [sorted(i, key=lambda r: tuple(map(str, r.values()))) for i in intervals],
    }


@pytest.mark.parametrize(
    ("fmt", "twice"),
    [("tencent_dts_pb", False), ("debezium_json", False), ("dataworks_json", True)],
)
def test_dumps_in_offset_order_are_read_in_place_and_decode_as_the_copy_does(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, twice: bool
) -> None:
    """Dumps written as Spark's Kafka source writes them (each partition's offsets rising in each
    file, the partitions interleaved) are read in place by the decoders, with no staging copy
    (`recon.decode.input.dump_input`); the same records shuffled over the files go through the copy.
    Both give the same events, quarantine (with each record's Kafka timestamp), counters, and
    offsets and content hashes kept for later hours. Tencent's last envelope of hour 0 is split
    across the hours (carried); hour 1 holds records hour 0 read (re-delivered: skipped) and
    one of its offsets with other content (a reset); `twice`: hour 1 holds a record twice,
    which only the copy sorts out (that hour takes it)."""
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    if fmt == "tencent_dts_pb":
        _straddle_last_envelope(recs, H0)
    # the same changes in a second partition: the files of a partition hold the other's too
    recs += [RawRecord(r.topic, 1, r.offset, r.key, r.value, r.ts_ms) for r in recs]
    recs += _redelivered(recs)
    if twice:
        r = recs[-2]
        recs.append(RawRecord(r.topic, r.partition, r.offset, r.key, r.value, (r.ts_ms or 0) + 1))
    copies: list[str] = []
    real = stage._staging_copy
    monkeypatch.setattr(stage, "_staging_copy", lambda *a: copies.append("copy") or real(*a))
    got, counters = {}, {}
    for in_order in (False, True):
        copies.clear()
        write_dump(
            tmp_path / f"raw{in_order}", f"t_{fmt}", recs, "parquet", HOURS, in_order=in_order
        )
        path = write_pipeline(
            tmp_path / f"{in_order}.yaml", name=f"p_{int(in_order)}", format=fmt, topics=[f"t_{fmt}"],
            raw=f"raw{in_order}", warehouse=f"wh{in_order}",
        )  # fmt: skip
        cfg = load_config(path)
        counters[in_order] = [_same_counters(decode_hour(spark, cfg, h)) for h in HOURS]
        got[in_order] = _decoded_outputs(cfg)
        assert copies == ["copy"] * (2 if not in_order else int(twice))
    assert got[True] == got[False] and counters[True] == counters[False]
    c1 = counters[True][1]["totals"]
    assert c1["duplicates_cross_hour"] == 4  # two records of each partition
    assert c1["offset_resets"] == 1 and c1["duplicates_in_hour"] == int(twice)
    events = got[True]["events"]
    assert [e for e in events if ("partition", "0") in e] == sorted(map(event_key, _reference(fmt)))
    assert len(events) == 2 * len(_reference(fmt))


def test_an_hour_of_more_partitions_than_cores_is_read_in_place_a_task_per_core(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dumps of a file per partition and hour (Kafka Connect's S3 sink), more partitions than
    cores: read in place, the partitions packed into a decode task per core (a task each cost
    a 200-partition hour 5x the decoding), and decoded as the staging copy of the same records
    shuffled over two files decodes them."""
    fmt, topic, parts = "dataworks_json", "t_many", 5
    one = sample.to_records(sample.ENCODERS[fmt](TXNS), topic)
    recs = [
        RawRecord(topic, p, r.offset, r.key, r.value, r.ts_ms) for p in range(parts) for r in one
    ]
    sink = tmp_path / "raw_sink"
    for p in range(parts):
        write_dump(tmp_path / f"p{p}", topic, [r for r in recs if r.partition == p], "parquet",
                   HOURS, files_per_hour=1, in_order=True)  # fmt: skip
        for f in (tmp_path / f"p{p}").rglob("*.parquet"):
            dest = sink / f.parent.relative_to(tmp_path / f"p{p}") / f"part-p{p}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            f.rename(dest)
            (dest.parent / "_SUCCESS").touch()
    write_dump(tmp_path / "raw_shuffled", topic, recs, "parquet", HOURS)
    tasks: list[list[Any]] = []
    real = stage.packed
    monkeypatch.setattr(stage, "packed", lambda *a: tasks.append(real(*a)) or tasks[-1])
    got, counters = {}, {}
    for raw in ("raw_sink", "raw_shuffled"):
        path = write_pipeline(tmp_path / f"{raw}.yaml", name=raw, format=fmt, topics=[topic],
                              raw=raw, warehouse=f"wh_{raw}")  # fmt: skip
        cfg = load_config(path)
        counters[raw] = [_same_counters(decode_hour(spark, cfg, h)) for h in HOURS]
        got[raw] = _decoded_outputs(cfg)
    assert (
        got["raw_sink"] == got["raw_shuffled"] and counters["raw_sink"] == counters["raw_shuffled"]
    )
    in_place = tasks[: len(HOURS)]  # the sink's hours; the shuffled ones' are copy files
    cores = spark.sparkContext.defaultParallelism
    for groups in in_place:
        assert all(isinstance(item, tuple) for g in groups for item in g)  # read in place
        assert len(groups) == min(cores, parts)
        assert sorted(item[2] for g in groups for item in g) == list(range(parts))
    assert len(got["raw_sink"]["events"]) == parts * len(_reference(fmt))


def test_garbage_and_unreadable_lines_are_quarantined_with_bytes(spark, tmp_path: Path) -> None:
    fmt = "dataworks_json"
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS[:3]), f"t_{fmt}")
    recs.append(RawRecord(f"t_{fmt}", 0, 99, None, b"\x00garbage", recs[0].ts_ms))
    cfg = load_config(_pipeline(tmp_path, fmt, recs, "jsonl"))
    folder = tmp_path / "raw" / f"t_{fmt}" / "dt=2026-11-20" / "hour=00"
    # the same bad line twice (each counts), a blank line (not a record), JSON without a
    # partition, a value that is not base64
    bad_b64 = '{"partition": 0, "offset": 500, "value": "not base64!!"}'
    (folder / "part-00009.jsonl").write_text(
        f'{{this is not json\n\n{{this is not json\n{{"a": 1}}\n{bad_b64}\n'
    )
    c = decode_hour(spark, cfg, H0)
    assert c["totals"]["records_quarantined"] == 1 and c["totals"]["unreadable_lines"] == 4
    assert c["totals"]["records"] == len(recs)  # the unreadable lines are not records
    q = pq.read_table(cfg.layout.quarantine(H0)).to_pylist()
    by_value: dict[bytes, list[dict[str, object]]] = {}
    for r in q:
        by_value.setdefault(r["raw_value"], []).append(r)
    (garbage,) = by_value[b"\x00garbage"]
    assert garbage["offset"] == 99 and "not JSON" in str(garbage["reason"])
    bad = by_value[b"{this is not json"] + by_value[b'{"a": 1}']  # the line's own text
    bad += by_value[bad_b64.encode()]  # a value that is not base64 fails no job
    assert len(bad) == 4 and len(q) == 5
    assert all(str(r["reason"]).endswith("part-00009.jsonl") for r in bad), bad
    assert all(str(r["reason"]).startswith("unreadable dump line in ") for r in bad), bad
    # a Parquet hour has no unreadable lines: no quarantine job for them, nothing written
    recs2 = sample.to_records(sample.ENCODERS[fmt](TXNS[:3]), f"t_{fmt}")
    cfg2 = load_config(_pipeline(tmp_path / "pq", fmt, recs2, "parquet"))
    c2 = decode_hour(spark, cfg2, H0)
    assert c2["totals"]["unreadable_lines"] == 0 and c2["quarantine_reasons"] == {}


def test_an_incomplete_hour_is_refused_with_the_fix(spark, tmp_path: Path) -> None:
    from recon.errors import ReconError

    fmt = "canal_json"
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS[:2]), f"t_{fmt}")
    cfg = load_config(_pipeline(tmp_path, fmt, recs, "jsonl"))
    (tmp_path / "raw" / f"t_{fmt}" / "dt=2026-11-20" / "hour=00" / "_SUCCESS").unlink()
    with pytest.raises(ReconError, match="not complete.*--allow-incomplete"):
        decode_hour(spark, cfg, H0)
    c = decode_hour(spark, cfg, H0, allow_incomplete=True)
    assert c["totals"]["records"] == len(recs)
    assert json.loads(cfg.layout.decode_counters(H0).read_text())["hour"] == "2026-11-20T00"


def test_one_hour_of_two_topics_with_headers(spark, tmp_path: Path) -> None:
    fmt = "canal_json"
    a = sample.to_records(sample.ENCODERS[fmt](TXNS[:3]), "topic_a")
    b = sample.to_records(sample.ENCODERS[fmt](TXNS[3:6]), "topic_b")
    hdrs = [{"key": "ps", "value": b"42"}]
    b.append(RawRecord("topic_b", 0, 500, b"k", b"junk", b[0].ts_ms, hdrs))
    write_dump(tmp_path / "raw", "topic_a", a, "parquet", HOURS[:1])
    write_dump(tmp_path / "raw", "topic_b", b, "parquet", HOURS[:1])
    path = write_pipeline(
        tmp_path / "two.yaml", name="two", format=fmt, topics=["topic_a", "topic_b"]
    )
    cfg = load_config(path)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    c = decode_hour(spark, cfg, H0)
    # a shuffle of the hour runs as many tasks as it has data for, not one per shuffle
    # partition: an empty task of the staging copy's write cost ~45 ms, 62 of them every hour
    stages = [
        tracker.getStageInfo(s)
        for j in set(tracker.getJobIdsForGroup()) - jobs_before
        for s in tracker.getJobInfo(j).stageIds  # type: ignore[union-attr]
    ]
    shuffle_parts = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    assert shuffle_parts > 8 and stages
    assert max(s.numTasks for s in stages if s is not None) <= 4  # the dump files, 2 a topic
    assert {(p["topic"], p["records"]) for p in c["partitions"]} == {
        ("topic_a", len(a)),
        ("topic_b", len(b)),
    }
    n_changes = sum(len(t.changes) for t in TXNS[:6])
    assert sum(c["events_by_op"].values()) == n_changes
    # the offsets kept for later hours: topic_a's partition has no gap (one interval, from the
    # input counters), topic_b's has one (its intervals found by Spark)
    islands = set()
    for topic, recs in (("topic_a", a), ("topic_b", b)):
        for part in {r.partition for r in recs}:
            offs = sorted(r.offset for r in recs if r.partition == part)
            lo = offs[0]
            for x, y in zip(offs, [*offs[1:], None], strict=True):
                if y != x + 1:
                    islands.add((topic, part, lo, x))
                    lo = y
    t = hour_intervals(cfg.layout.offsets(H0), hour_text(H0))
    got = set(zip(*(t[k].to_pylist() for k in ("topic", "partition", "lo", "hi")), strict=True))
    assert got == islands and ("topic_b", 0, 500, 500) in got
    (q,) = pq.read_table(cfg.layout.quarantine(H0)).to_pylist()
    assert (q["topic"], q["offset"], q["raw_key"], q["raw_value"], q["raw_headers"]) == (
        "topic_b",
        500,
        b"k",
        b"junk",
        hdrs,
    )


def test_offsets_read_again_with_other_content_are_an_offset_reset_not_duplicates(
    spark, tmp_path: Path
) -> None:
    """The topic is re-created between the hours: hour 1's offsets start at 0 again, with new
    content. They used to be dropped as duplicates of hour 0 (changes lost, nothing said); now
    same offset + same content is a duplicate and other content an offset reset, decoded."""
    fmt = "debezium_json"
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    end0 = (H0 + timedelta(hours=1)).timestamp() * 1000
    h0 = [r for r in recs if (r.ts_ms or 0) < end0]
    h1 = [r for r in recs if (r.ts_ms or 0) >= end0]
    first = {p: min(r.offset for r in h1 if r.partition == p) for p in {r.partition for r in h1}}
    renumbered = [
        RawRecord(r.topic, r.partition, r.offset - first[r.partition], r.key, r.value, r.ts_ms)
        for r in h1
    ]
    last0 = {p: max(r.offset for r in h0 if r.partition == p) for p in {r.partition for r in h0}}
    collide = sum(1 for r in renumbered if r.offset <= last0.get(r.partition, -1))
    assert collide > 0
    replay = h0[0]
    again = RawRecord(replay.topic, replay.partition, replay.offset, replay.key, replay.value, end0)
    # within hour 1 as well: one offset delivered twice with different content
    twin = renumbered[-1]
    other = RawRecord(twin.topic, twin.partition, twin.offset, twin.key, h0[1].value, twin.ts_ms)
    cfg = load_config(_pipeline(tmp_path, fmt, h0 + renumbered + [again, other], "parquet"))
    decode_hour(spark, cfg, HOURS[0], run_id="r0")
    c1 = decode_hour(spark, cfg, HOURS[1], run_id="r1")
    t = c1["totals"]
    assert t["duplicates_cross_hour"] == 1
    # the rule, in Python: same offset + same content = duplicate; an offset an earlier hour
    # read with other content = reset; one offset twice in the hour = one reset per extra copy
    seen0: dict[tuple, set] = {}
    for r in h0:
        seen0.setdefault((r.topic, r.partition, r.offset), set()).add((r.key, r.value))
    fresh: dict[tuple, set] = {}
    for r in [*renumbered, again, other]:
        at = (r.topic, r.partition, r.offset)
        if (r.key, r.value) not in seen0.get(at, set()):
            fresh.setdefault(at, set()).add((r.key, r.value))
    resets = sum(len(v) if at in seen0 else len(v) - 1 for at, v in fresh.items())
    assert resets >= collide
    assert t["offset_resets"] == resets
    assert t["records"] == len(renumbered) + 2
    assert t["bytes"] == sum(len(r.value or b"") for r in [*renumbered, again, other])
    # every change of the stream is decoded (the twin's copy of an hour-0 change comes once
    # more: a replay with a new offset is not the dedupe's to judge)
    change = lambda e: repr([e[k] for k in ("db", "tbl", "op", "before", "after", "binlog_pos")])  # noqa: E731
    got = sorted(change(e) for e in _events(cfg.warehouse, cfg.name))
    want = sorted(change(e) for e in _reference(fmt))
    assert set(want) <= set(got) and len(got) == len(want) + 1


def _dw(op: str, seq: int, before: int | None = None, after: int | None = None) -> bytes:
    def image(k: int | None) -> dict | None:
        return None if k is None else {"dataColumn": {"id": k, "v": f"v{k}"}}

    return json.dumps(
        {
            "schema": {
                "dataColumn": [{"name": "id", "type": "LONG"}, {"name": "v", "type": "STRING"}],
                "primaryKey": ["id"],
                "source": {"dbName": "s", "tableName": "t"},
            },
            "payload": {
                "op": op,
                "sequenceId": str(seq),
                "timestamp": {"eventTime": 1},
                "before": image(before),
                "after": image(after),
            },
        }
    ).encode()


def test_a_dataworks_topic_partitioned_by_key_splits_key_changing_updates(
    spark, tmp_path: Path
) -> None:
    """A key-changing update's UPDATE_BEFOR (old key) and UPDATE_AFTER (new key) land in
    different partitions. The BEFOR used to wait for ever in its partition: the old key was
    never removed and nothing said so. Now a BEFOR its partition went past is applied alone
    (the removal of its key, ordered just before its AFTER), and one that is its partition's
    last record of the hour pairs with the AFTER of the same sequenceId in another partition;
    the tables equal the source at the end of every hour."""
    from recon.cli import main
    from recon.publish.export import export_rows

    t0, t1 = int(H0.timestamp() * 1000) + 1000, int(HOURS[1].timestamp() * 1000) + 1000
    p0 = [  # keys 1, 3 and 5 hash here
        (t0, _dw("INSERT", 100, after=1)),
        (t0, _dw("INSERT", 101, after=3)),
        (t0, _dw("UPDATE_BEFOR", 150, before=3)),  # 3 -> 4: not the last: applied alone
        (t0, _dw("UPDATE_BEFOR", 200, before=1)),  # 1 -> 2: the last: carried, and paired
        (t1, _dw("INSERT", 400, after=5)),
    ]
    p1 = [  # keys 2 and 4 hash here
        (t0, _dw("UPDATE_AFTER", 150, after=4)),
        (t0, _dw("UPDATE_AFTER", 200, after=2)),
    ]
    recs = [
        RawRecord("t_dw", p, i, None, value, ts)
        for p, part in enumerate([p0, p1])
        for i, (ts, value) in enumerate(part)
    ]
    write_dump(tmp_path / "raw", "t_dw", recs, "jsonl", HOURS)
    cfg_file = write_pipeline(
        tmp_path / "dw.yaml",
        name="dw",
        format="dataworks_json",
        topics=["t_dw"],
        raw=tmp_path / "raw",
        warehouse=tmp_path / "wh",
        start=H0,
        tables={"s.t": {}},
    )
    cfg = load_config(cfg_file)
    h = [f"{x:%Y-%m-%dT%H}" for x in HOURS]
    main(["run", "--pipeline", str(cfg_file), "--from", h[0], "--to", h[0]])
    assert sorted(r["id"] for r in export_rows(cfg, "s.t")) == [2, 4]  # both, in the hour
    c0 = json.loads(cfg.layout.decode_counters(H0).read_text())
    assert c0["totals"]["update_befor_paired_across_partitions"] == 1
    assert c0["totals"]["update_befor_applied_alone"] == 1
    assert c0["totals"].get("records_carried_out", 0) == 0
    main(["run", "--pipeline", str(cfg_file), "--from", h[1], "--to", h[1]])
    assert sorted(r["id"] for r in export_rows(cfg, "s.t")) == [2, 4, 5]
    for x in HOURS:
        report = json.loads(cfg.layout.report(x).read_text())
        assert report["identity"]["balanced"] is True, report["identity"]


@pytest.mark.parametrize("point", TASK_POINTS)
@pytest.mark.parametrize("dumps", ["jsonl", "parquet in order"])
def test_a_decode_task_that_fails_after_writing_its_files_is_retried_without_duplicates(
    tmp_path: Path, point: str, dumps: str
) -> None:
    """The decode tasks write their own files (`recon.decode.tasks.task_files`), and the input
    counters' tasks the offsets and hashes for later hours (`count_copy_files`, or
    `count_dump_files` where the dumps are read in place): an attempt that failed after
    writing them counts for nothing, the retry Spark ran is the one committed (a real
    `recon decode` with one task retry allowed, `local[2,2]`)."""
    fmt = "canal_json"
    recs = sample.to_records(sample.ENCODERS[fmt](TXNS), f"t_{fmt}")
    cfg_file = _pipeline(tmp_path, fmt, recs, dumps.split()[0], in_order=dumps != "jsonl")
    marker = tmp_path / "failed-once"
    env = {
        **os.environ,
        "RECON_FAIL_ONCE": point,
        "RECON_FAIL_FILE": str(marker),
        "RECON_SPARK_MASTER": "local[2,2]",
        "RECON_SHUFFLE_PARTITIONS": "2",
        "RECON_LOG_LEVEL": "INFO",  # the stage's line of how the decoders read the hour
    }
    for h in HOURS:
        run = subprocess.run(
            [sys.executable, "-m", "recon.cli", "decode", "--pipeline", str(cfg_file), "--hour", hour_text(h)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        assert marker.is_file()  # the first hour's task failed once, after writing its files
        in_place = "the decoders read the dumps in place" in run.stderr + run.stdout
        assert in_place is (dumps != "jsonl"), run.stderr[-3000:]
    cfg = load_config(cfg_file)
    assert sorted(map(event_key, _events(cfg.warehouse, cfg.name))) == sorted(
        map(event_key, _reference(fmt))
    )
    counters = json.loads(cfg.layout.decode_counters(HOURS[0]).read_text())
    totals = counters["totals"]  # the decoders' counters of one attempt, not of two
    assert totals["records_consumed"] == totals["records_in"] == totals["records"] > 0
    assert counters["quarantine_reasons"] == {}
    assert not list(cfg.warehouse.rglob("_tasks"))  # no attempt's folder is left behind
    hashes = cfg.layout.offset_hashes(HOURS[0])
    assert [p.name for p in hashes.iterdir()] and not list(hashes.glob(f"{TMP_PREFIX}*"))


def test_an_acknowledged_offset_reset_stops_failing_the_hours_after_it(
    spark, tmp_path: Path
) -> None:
    """Issue 79 item 4: after a topic is re-created, every later hour read offsets below the
    old incarnation's and counted them as resets again, failing hour after hour. Acknowledged
    once (`recon acknowledge-reset`), the hours from it on compare the partition's offsets with
    the new incarnation's only: no reset, no duplicate against the old one, and the hour's own
    finding warns."""
    from recon.audit.rules import NO_GAPS, judge, partition_report
    from recon.decode.input.offset_index import acknowledged_at
    from recon.ops.acknowledge import acknowledge_reset

    fmt, topic = "debezium_json", "t_debezium_json"
    hours = [*HOURS, HOURS[1] + timedelta(hours=1)]

    def at(h: datetime) -> int:
        return int(h.timestamp() * 1000)

    old = [r.value for r in sample.to_records(sample.ENCODERS[fmt](TXNS), topic)]
    new = [r.value for r in sample.to_records(sample.ENCODERS[fmt](TXNS[::-1]), topic)][:-2]
    cut = len(new) // 2  # the re-created topic's first half in hour 1, the rest in hour 2
    recs = [RawRecord(topic, 0, i, None, v, at(hours[0]) + i) for i, v in enumerate(old)] + [
        RawRecord(topic, 0, i, None, v, at(hours[1] if i < cut else hours[2]) + i)
        for i, v in enumerate(new)
    ]
    write_dump(tmp_path / "raw", topic, recs, "parquet", hours, in_order=True)
    cfg = load_config(write_pipeline(tmp_path / "p.yaml", name="p", format=fmt, topics=[topic]))
    counters = [decode_hour(spark, cfg, h, run_id=f"r{i}") for i, h in enumerate(hours)]
    resets = [c["totals"].get("offset_resets", 0) for c in counters]
    assert resets[0] == 0 and resets[1] > 0 and resets[2] > 0  # hour 2 fails again: the bug
    entry, first = acknowledge_reset(cfg, topic, 0, hour_text(hours[1]), "re-created")
    assert first and entry["hour"] == hour_text(hours[1])
    assert acknowledge_reset(cfg, topic, 0, hour_text(hours[1]))[1] is False  # recorded once
    again = decode_hour(spark, cfg, hours[2], run_id="r2b")["totals"]
    assert again.get("offset_resets", 0) == 0 and again.get("duplicates_cross_hour", 0) == 0
    assert again["records"] == len(new) - cut
    # hour 1, decoded before the acknowledgement: its finding now warns
    (p,) = counters[1]["partitions"]
    ack = acknowledged_at(cfg.layout, hours[1]).get((topic, 0))
    assert ack == hour_text(hours[1]) and acknowledged_at(cfg.layout, hours[0]) == {}
    (f,) = [f for f in partition_report(p, NO_GAPS, ack)[1] if f["kind"] == "offset_reset"]
    assert judge([f], ["offset_reset"])[0] == "warn" and f["acknowledged"] == ack
    (f,) = [f for f in partition_report(p, NO_GAPS)[1] if f["kind"] == "offset_reset"]
    assert judge([f], ["offset_reset"])[0] == "fail" and "recon acknowledge-reset" in f["message"]

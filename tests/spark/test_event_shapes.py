"""The merge's summary of an hour (counts per table and op, DDL statements, image shapes) from
what the decode counted, against the merge's own count over the same events; and the Python
routing of source tables to published ones against the Spark expression the merge routes by."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from recon.config import load_config
from recon.core.model import RawRecord
from recon.decode.stage import decode_hour
from recon.decode.summary import shape_texts
from recon.demo.demo import write_dump
from recon.layout import read_json
from recon.merge import stage as merge_stage
from recon.merge.contributions import route_expr, route_table
from recon.merge.schemas import HourSummary, summarize_hour, summary_of_shapes
from recon.merge.stage import merge_hour
from tests.support.builders import write_pipeline

H = datetime(2026, 11, 20, 5, tzinfo=UTC)
MS = int(H.timestamp() * 1000)


def _field(name: str, typ: str, **more: Any) -> dict[str, Any]:
    return {"field": name, "type": typ, "optional": True, **more}


def _dbz(db: str, tbl: str, op: str, after: dict | None, before: dict | None, i: int,
         fields: list[dict] | None = None) -> bytes:  # fmt: skip
    source = {"db": db, "table": tbl, "file": "mysql-bin.000001", "pos": 100 + i, "row": 0,
              "ts_ms": MS + i}  # fmt: skip
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": MS + i}
    if fields is None:  # schemas disabled: the payload alone, types inferred from the values
        return json.dumps(payload).encode()
    image = {"type": "struct", "optional": True, "fields": fields}
    schema = {
        "type": "struct",
        "fields": [{**image, "field": "before"}, {**image, "field": "after"}],
    }
    return json.dumps({"schema": schema, "payload": payload}).encode()


def _hour_records() -> list[RawRecord]:
    orders = [_field("id", "int32"), _field("v", "string"),
              _field("n", "int32", default=7)]  # fmt: skip
    wider = [*orders, _field("w", "string")]
    values = [
        _dbz("shop", "orders", "c", {"id": 1, "v": "a", "n": 1}, None, 1, orders),
        _dbz("shop", "orders", "u", {"id": 1, "v": "b", "n": 2}, {"id": 1, "v": "a", "n": 1}, 2, orders),
        _dbz("shop", "orders", "c", {"id": 2, "v": "c", "n": 3, "w": "x"}, None, 3, wider),
        _dbz("shop", "orders", "d", None, {"id": 2, "v": "c", "n": 3, "w": "x"}, 4, wider),
        _dbz("shop", "items", "c", {"sku": "k1", "qty": 3}, None, 5),
        _dbz("shop", "items", "c", {"sku": "k2", "qty": 4.5, "tag": None}, None, 6),
        _dbz("legacy", "t1", "c", {"id": 1}, None, 7),
        _dbz("legacy", "t2", "c", {"id": 1}, None, 8),
        _dbz("other", "z", "r", {"k": True}, None, 9),
        json.dumps({"databaseName": "shop", "ddl": "ALTER TABLE orders ADD COLUMN x INT DEFAULT 4",
                    "source": {"file": "mysql-bin.000001", "pos": 200}}).encode(),  # fmt: skip
        json.dumps({"databaseName": "shop", "ddl": "ALTER TABLE items DROP COLUMN tag",
                    "source": {"file": "mysql-bin.000001", "pos": 201}}).encode(),  # fmt: skip
    ]  # fmt: skip
    return [RawRecord("cdc.shop", i % 2, i, None, v, MS + i) for i, v in enumerate(values)]


def _decoded(tmp: Path, garbage: bool = False) -> Any:
    records = _hour_records()
    if garbage:  # a record that is not JSON in each partition, an insert's shape in both
        records += [RawRecord("cdc.shop", p, 100 + p, None, b"\x00no", MS) for p in (0, 1)]
        fields = [_field("id", "int32"), _field("v", "string"), _field("n", "int32", default=7)]
        insert = _dbz("shop", "orders", "c", {"id": 5, "v": "e", "n": 5}, None, 20, fields)
        records.append(RawRecord("cdc.shop", 1, 50, None, insert, MS + 20))
    write_dump(tmp / "raw", "cdc.shop", records, "parquet", [H])
    tables = {
        "shop.orders": {"primary_key": ["id"]},
        "shop.items": {},
        "legacy.all": {"from": ["legacy.*"]},
    }
    path = write_pipeline(tmp / "p.yaml", name="p", format="debezium_json", topics=["cdc.shop"],
                          start=H.isoformat(), tables=tables)  # fmt: skip
    return load_config(path)


def test_the_decode_counters_add_up_what_its_outputs_hold(spark, tmp_path: Path) -> None:
    """The decode tasks count their output as they write it (`TaskSummary`); the driver adds
    up their summaries: events per op, quarantine reasons, the newest source time per table
    and the shapes equal Spark's count of the outputs the hour published (two partitions,
    so two tasks: the same shape and the same reason in both)."""
    from pyspark.sql import functions as F

    cfg = _decoded(tmp_path, garbage=True)
    c = decode_hour(spark, cfg, H)
    events = spark.read.parquet(str(cfg.layout.events(H)))
    by_op = {r["op"]: r["count"] for r in events.groupBy("op").count().collect()}
    assert c["events_by_op"] == by_op and by_op["insert"] == 7
    quarantine = spark.read.parquet(str(cfg.layout.quarantine(H)))
    reasons = {r["reason"]: r["count"] for r in quarantine.groupBy("reason").count().collect()}
    assert c["quarantine_reasons"] == reasons and sum(reasons.values()) == 2
    table = F.concat_ws(".", "db", "tbl").alias("t")
    newest = events.groupBy(table).agg(F.max("event_time_ms").alias("ms")).collect()
    assert c["newest_event_ms"] == {r["t"]: r["ms"] for r in newest if r["ms"] is not None}
    shapes = c["event_shapes"]["shapes"]
    assert sum(s["n"] for s in shapes) == events.count()
    keys = [tuple(v for k, v in s.items() if k != "n") for s in shapes]
    assert len(keys) == len(set(keys))  # each shape once, whichever tasks counted it
    assert c["totals"]["records_in"] == len(_hour_records()) + 3


def _comparable(s: HourSummary) -> tuple[Any, ...]:
    """Equal summaries as the merge reads them: the shapes as a set (they are observed each once,
    `_observe_images`), the DDL in source order."""
    return s.by_table_op, sorted(s.ddl, key=lambda d: d[2]), set(s.shapes)


def test_the_decode_counts_the_summary_the_merge_would_count(spark, tmp_path: Path) -> None:
    cfg = _decoded(tmp_path)
    decode_hour(spark, cfg, H)
    decoded = read_json(cfg.layout.decode_counters(H))["event_shapes"]
    events = spark.read.parquet(str(cfg.layout.events(H))).withColumn("table", route_expr(cfg))
    want = summarize_hour(events)
    got = summary_of_shapes(cfg, decoded["shapes"])
    assert got is not None and _comparable(got) == _comparable(want)
    # what the hour holds, so that an empty or one-table hour cannot pass for the comparison
    assert want.by_table_op == {
        "shop.orders": {"insert": 2, "update": 1, "delete": 1, "ddl": 1},
        "shop.items": {"insert": 2, "ddl": 1},
        "legacy.all": {"insert": 2},
        "other.z": {"snapshot": 1},
    }
    assert len({s for s in want.shapes if s[0] == "shop.orders"}) == 2  # a column added
    assert any('"n":"7"' in (s[4] or "") for s in want.shapes)  # a stated default


def test_the_merge_takes_the_decoded_summary_unless_the_events_changed(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge of a decoded hour counts nothing itself; once the events folder is not the one
    the decode counted (a file rewritten), it counts the summary from the events again, and the
    tables are the same either way."""
    cfg = _decoded(tmp_path)
    decode_hour(spark, cfg, H)
    counted: list[int] = []

    def counting(events: Any) -> HourSummary:
        counted.append(1)
        return summarize_hour(events)

    monkeypatch.setattr(merge_stage, "summarize_hour", counting)
    first = merge_hour(spark, cfg, H)
    assert counted == []
    some = next(cfg.layout.events(H).glob("*.parquet"))
    os.utime(some, ns=(0, 0))  # same bytes, another file by its listing
    again = merge_hour(spark, cfg, H)
    assert counted == [1]
    rows = {n: t["rows_after"] for n, t in first["tables"].items()}
    assert rows == {n: t["rows_after"] for n, t in again["tables"].items()}
    assert rows == {"shop.orders": 1, "shop.items": 2, "legacy.all": 2}


@pytest.mark.parametrize(
    "sources,names",
    [
        ({"a.all": ["shop.*"], "b.one": ["s?op.items", "x.y"]},
         [("shop", "items"), ("sxop", "items"), ("shopx", "t"), ("x", "y"), ("x", "yy")]),
        ({"c.t": ["we+ird.(t)*", "d.[a]"]},
         [("we+ird", "(t)1"), ("weeird", "t"), ("d", "[a]"), ("d", "a"), ("e", None)]),
        ({"u.t": ["ünï.*", "a\\b.c"]}, [("ünï", "köln"), ("a\\b", "c"), ("ab", "c"), (None, "t")]),
        ({"n.t": ["*.*"]}, [("a", "b\n"), ("a", "b\u2028c"), ("a\r", "b"), ("a", "b")]),
    ],
)  # fmt: skip
def test_python_routing_equals_the_spark_routing(
    spark, tmp_path: Path, sources: dict[str, list[str]], names: list[tuple[Any, Any]]
) -> None:
    tables = {n: {"from": s} for n, s in sources.items()}
    cfg = load_config(write_pipeline(tmp_path / "r.yaml", name="r", format="debezium_json",
                                     tables=tables))  # fmt: skip
    df = spark.createDataFrame(names, "db string, tbl string")
    spark_routes = [r["t"] for r in df.select(route_expr(cfg).alias("t")).collect()]
    for (db, tbl), want in zip(names, spark_routes, strict=True):
        got = route_table(cfg, db, tbl)
        if got is None:  # refused: only for a name with a line break
            assert any(ch in f"{db}{tbl}" for ch in "\n\r\u0085\u2028\u2029")
        else:
            assert got == want, (db, tbl)


def test_bucket_stats_count_what_publish_would_write_as_null_and_keys_out_of_their_bucket(
    spark,
) -> None:
    """The checks publish reports over the rows it writes (values published as NULL, live rows
    of a key outside its bucket, which could duplicate it) are counted in the bucket
    statistics' one job, per table and bucket, with the checksum: the sum of the live rows'
    terms, exact where it passes 2^63 either way."""
    from pyspark.sql import functions as F

    from recon.merge.contributions import STATE_DDL
    from recon.merge.state import U64, bucket_stats, live_rows

    keys = ['["1"]', '["2"]', '["3"]', '["5"]']
    home = dict(
        spark.createDataFrame([(k,) for k in keys], "key string")
        .select("key", F.pmod(F.xxhash64("key"), F.lit(2)).cast("int"))
        .collect()
    )
    big = (1 << 63) - 5  # two of them pass 2^63: a long's sum would overflow

    def row(table: str, bucket: int, key: str, sign: int, values: dict[str, str], ck: int) -> tuple:
        return (table, bucket, key, b"i", b"k", sign, values, 1, "insert", ck)

    a0, a1 = [k for k in keys if home[k] == 0], [k for k in keys if home[k] == 1]
    assert a0 and a1, home  # both buckets have a key at home (else pick other keys)
    state = spark.createDataFrame(
        [
            row("a", 0, a0[0], 1, {"n": "1"}, big),
            row("a", 0, a1[0], 1, {"n": "two"}, big),  # not an int; not its key's bucket
            row("a", 1, a1[-1], 1, {"n": "x"}, -big),  # not an int
            row("a", 1, a0[-1], 0, {}, 99),  # a tombstone: not written, not counted
            row("b", 0, '[["n","y"]]', 1, {"n": "y"}, 7),  # no key: copies, anywhere
            row("b", 0, '[["n","y"]]', 1, {"n": "y"}, 7),
        ],
        STATE_DDL,
    )
    checks = {"a": [("n", "(row['n'] is not null and try_cast(row['n'] as int) is null)")],
              "b": [("n", "(row['n'] is not null and try_cast(row['n'] as int) is null)")]}  # fmt: skip
    got = bucket_stats(state, live_rows(state, ["b"]), checks, keyed={"a": 2}, ms_tables=["b"])
    assert {
        k: (v["rows"], v["state_rows"], v["unfit"], v["dup_keys"], v["checksum"] % U64)
        for k, v in got.items()
    } == {
        ("a", 0): (2, 2, {"n": 1}, 1, (2 * big) % U64),
        ("a", 1): (1, 2, {"n": 1}, 0, -big % U64),
        ("b", 0): (2, 2, {"n": 2}, 0, 14),  # two copies of a row, both published
    }


def test_shape_texts_written_per_group_are_the_texts_written_per_event(spark) -> None:
    """The shapes are grouped by their parts' values (arrays, map entries) and written as JSON
    once per group: the texts equal Spark's JSON of each event's parts, which the decodes
    before this change kept with their counters (names with quotes, backslashes and
    non-ASCII, NULL values and images, empty maps, a DDL row, rows outside `among`)."""
    from pyspark.sql import functions as F

    from recon.decode.summary import SHAPE_FIELDS, shape_keys, with_shape_texts

    ddl = (
        "kind string, op string, ddl string, order_key binary, before map<string,string>, "
        "after map<string,string>, types map<string,string>, pk array<string>, "
        "defaults map<string,string>"
    )
    odd = 'a"b\\c é\n'
    rows = [
        ("event", "insert", None, b"\x01", None, {"id": "1", odd: None}, {"id": "int64", odd: "string"}, ["id"], None),
        ("event", "insert", None, b"\x02", None, {"id": "2", odd: "x"}, {"id": "int64", odd: "string"}, ["id"], None),
        ("event", "update", None, b"\x03", {"id": "1"}, {"id": "1"}, {"id": "int64"}, [], {}),
        ("event", "delete", None, b"\x04", {"v": None, "id": "3"}, None, {"v": "string", "id": "int64"}, None, {"v": None, "id": "0"}),
        ("event", "ddl", "ALTER TABLE t ADD c INT", b"\x00\xff", None, None, {}, None, None),
        ("stat", None, None, None, None, None, None, None, None),
    ]  # fmt: skip
    events = spark.createDataFrame(rows, ddl)
    among = F.col("kind") == "event"
    is_ddl, not_ddl = among & (F.col("op") == "ddl"), among & (F.col("op") != "ddl")
    per_event = [  # the texts as the decode wrote them for each event before
        F.when(is_ddl, F.col("ddl")).alias("ddl"),
        F.when(is_ddl, F.hex("order_key")).alias("at"),
        F.when(not_ddl, F.to_json(F.map_keys(F.coalesce("after", "before")))).alias("cols"),
        F.when(not_ddl, F.to_json("types")).alias("types"),
        F.when(not_ddl, F.to_json("pk")).alias("pk"),
        F.when(not_ddl, F.to_json("defaults")).alias("defaults"),
    ]
    cols = ["kind", "op", *SHAPE_FIELDS, "n"]
    want = events.groupBy("kind", "op", *per_event).agg(F.count("*").alias("n")).select(cols)
    got = with_shape_texts(
        events.groupBy("kind", "op", *shape_keys(among)).agg(F.count("*").alias("n"))
    ).select(cols)
    key = lambda r: tuple(str(v) for v in r)  # noqa: E731
    assert sorted(got.collect(), key=key) == sorted(want.collect(), key=key)
    assert want.count() == 5  # the two inserts have one shape
    # a decode task writes the same texts from each event's values (`TaskSummary`)
    texts = events.where(among).select(*per_event).collect()
    in_python = [shape_texts(r) for r in events.where(among).toArrow().to_pylist()]
    assert in_python == [tuple(r) for r in texts]

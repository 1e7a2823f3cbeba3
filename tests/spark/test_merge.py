"""The merge stage on Spark: merge rules (contract 5.1), properties (idempotent, independent of
hour order and hour split), schema handling, snapshot bootstrap, publish to Iceberg, export."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from recon.core.model import EVENT_SCHEMA
from recon.core.schema import TableSchema
from recon.errors import ReconError
from recon.merge import stage as merge_stage
from recon.merge.manifest import load_manifest
from recon.merge.schemas import _in_columns, normalized_columns
from recon.merge.snapshot import load_watermark
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from recon.publish.iceberg import load_table
from tests.support.builders import pipeline
from tests.support.changes import change_streams, oracle, split_hours
from tests.support.merge import UUID, T, event, hour, state_tables, write_hour


def test_tombstones_pk_changes_and_multisets(spark, tmp_path: Path) -> None:
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    write_hour(
        cfg,
        hour(0),
        [
            event(1, "s.a", "insert", None, {"id": 1, "v": "x"}, T),
            event(2, "s.a", "insert", None, {"id": 5, "v": "five"}, T),
            event(3, "s.a", "update", {"id": 5, "v": "five"}, {"id": 6, "v": "six"}, T),  # key 5->6
            event(4, "s.b", "insert", None, {"id": 1, "v": "x"}, T),
            event(5, "s.b", "insert", None, {"id": 1, "v": "x"}, T),
            event(6, "s.b", "insert", None, {"id": 2, "v": "y"}, T),
        ],
    )
    write_hour(
        cfg,
        hour(1),
        [
            event(10, "s.a", "delete", {"id": 1, "v": "x"}, None, T),
            event(11, "s.b", "delete", {"id": 1, "v": "x"}, None, T),  # one copy of two
            event(12, "s.b", "update", {"id": 2, "v": "y"}, {"id": 2, "v": "z"}, T),
        ],
    )
    # hour 2 holds an older change to the deleted key 1 (a late arrival): it must not resurrect it
    write_hour(
        cfg, hour(2), [event(9, "s.a", "update", {"id": 1, "v": "x"}, {"id": 1, "v": "old"}, T)]
    )
    merge_hour(spark, cfg, hour(0), buckets=4)
    merge_hour(spark, cfg, hour(1), buckets=4)
    r2 = merge_hour(spark, cfg, hour(2), buckets=4)
    assert r2["tables"]["s.a"]["skipped"]["stale"] == 1
    assert list(export_rows(cfg, "s.a")) == [{"id": 6, "v": "six"}]
    assert list(export_rows(cfg, "s.b")) == [{"id": 1, "v": "x"}, {"id": 2, "v": "z"}]
    # the state keeps the tombstones of keys 1 and 5
    man = load_manifest(cfg)
    assert sum(f["state_rows"] for f in man["tables"]["s.a"]["files"].values()) == 3
    assert man["tables"]["s.a"]["schema"]["primary_key"] == ["id"]
    assert man["hours"] == ["2026-01-01T00", "2026-01-01T01", "2026-01-01T02"]


def test_a_merge_frees_what_it_kept_for_its_jobs_failed_or_not(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge keeps the hour's contributions (as rows, `kept_as_rows`) and a keyless table's
    live rows on local disk for its jobs, and frees them when it ends, failed or not: one Spark
    application runs the stages of many runs, where kept copies would pile up on its disk."""
    jsc = spark.sparkContext._jsc.sc()
    cache = spark._jsparkSession.sharedState().cacheManager()
    kept_before, cached_before = jsc.getPersistentRDDs().size(), cache.isEmpty()
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    for i in (0, 1):
        rows = [(t, j) for t in ("s.a", "s.b") for j in range(3)]
        write_hour(
            cfg,
            hour(i),
            [event(10 * i + j, t, "insert", None, {"id": j, "v": "x"}, T) for t, j in rows],
        )
    merge_hour(spark, cfg, hour(0), buckets=4)
    assert jsc.getPersistentRDDs().size() == kept_before and cache.isEmpty() == cached_before

    def fail(name: str) -> None:
        if name == "merge:state-written":
            raise RuntimeError("injected")

    monkeypatch.setattr("recon.merge.stage.checkpoint", fail)
    with pytest.raises(RuntimeError, match="injected"):
        merge_hour(spark, cfg, hour(1), buckets=4)
    assert jsc.getPersistentRDDs().size() == kept_before and cache.isEmpty() == cached_before


# -- properties over random change streams ------------------------------------------------------
def _apply(spark: Any, cfg: Any, hours: list[list[dict[str, Any]]], order: list[int]) -> None:
    for i, evs in enumerate(hours):
        write_hour(cfg, hour(i), evs)
    for i in order:
        merge_hour(spark, cfg, hour(i), buckets=4, publish=False)


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(
    events=change_streams(),
    cuts_a=st.lists(st.integers(0, 100), min_size=1, max_size=2),
    cuts_b=st.lists(st.integers(0, 100), min_size=1, max_size=2),
    seed=st.integers(0, 1000),
)
def test_merge_is_idempotent_and_independent_of_hour_order_andsplit_hours(
    spark,
    tmp_path: Path,
    events: list[dict[str, Any]],
    cuts_a: list[int],
    cuts_b: list[int],
    seed: int,
) -> None:
    expected = oracle(events)
    for sub in ("a", "b"):
        shutil.rmtree(tmp_path / sub, ignore_errors=True)
    # split A, in order, then every hour again in reverse order (re-runs and backfills)
    cfg_a = pipeline(tmp_path / "a", {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    hours_a = split_hours(events, cuts_a)
    _apply(spark, cfg_a, hours_a, list(range(len(hours_a))))
    got_a = state_tables(spark, cfg_a)
    assert got_a == expected
    _apply(spark, cfg_a, hours_a, list(reversed(range(len(hours_a)))))
    assert state_tables(spark, cfg_a) == expected
    # split B, hours applied in a shuffled order, in a fresh warehouse
    cfg_b = pipeline(tmp_path / "b", {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    hours_b = split_hours(events, cuts_b)
    order = list(range(len(hours_b)))
    random.Random(seed).shuffle(order)
    _apply(spark, cfg_b, hours_b, order)
    assert state_tables(spark, cfg_b) == expected


# -- types, schema changes, publish -------------------------------------------------------------
TYPES = {
    "id": "uint64",
    "amount": "decimal(10,2)",
    "at": "datetime",
    "ts": "timestamp",
    "d": "date",
    "blob": "binary",
    "f": "float64",
    "doc": "json",
}


def test_types_are_published_faithfully_and_add_column_extends_the_table(
    spark, tmp_path: Path
) -> None:
    cfg = pipeline(tmp_path, {"s.typed": {}})
    big = "18446744073709551615"  # BIGINT UNSIGNED max: not a long, and beyond 2^53
    row = {
        "id": big,
        "amount": "1.50",
        "at": "2026-01-01 10:00:00.250000",
        "ts": "2026-01-01T10:00:00Z",
        "d": "2026-01-02",
        "blob": "AAH/",
        "f": "0.1",
        "doc": '{"a": 1}',
    }
    # 0x1A: its order key's hex has a letter (`_cdc_order_key` below)
    write_hour(cfg, hour(0), [event(0x1A, "s.typed", "insert", None, row, TYPES, ["id"])])
    icu = "spark.sql.icu.caseMappings.enabled"
    case_mappings = spark.conf.get(icu)
    r0 = merge_hour(spark, cfg, hour(0), buckets=4)
    assert r0["tables"]["s.typed"]["schema_version"] == 1
    table = load_table(cfg, "s.typed")
    types = {f.name: str(f.field_type) for f in table.schema().fields}
    assert types["id"] == "decimal(20, 0)"
    assert types["amount"] == "decimal(10, 2)"
    assert types["at"] == "timestamp"  # Iceberg: without zone
    assert types["ts"] == "timestamptz"
    assert types["blob"] == "binary"
    assert types["d"] == "date"
    assert types["f"] == "double"
    assert {"_cdc_order_key", "_cdc_source_ts"} <= set(types)
    assert list(export_rows(cfg, "s.typed")) == [
        {
            "id": 18446744073709551615,
            "amount": "1.50",
            "at": "2026-01-01 10:00:00.250000",
            "ts": "2026-01-01T10:00:00Z",
            "d": "2026-01-02",
            "blob": "AAH/",
            "f": 0.1,
            "doc": '{"a": 1}',
        }
    ]
    # the row's order key, as lower-case hex (the same text a `lower(hex(...))` gave)
    sent = pq.read_table(cfg.layout.events(hour(0)), columns=["order_key"]).column(0)
    published = table.scan(selected_fields=("_cdc_order_key",)).to_arrow().column(0)
    assert published.to_pylist() == [k.hex() for k in sent.to_pylist()]
    assert "a" in published[0].as_py()
    # by the JVM's case mappings inside publish only: the session's own setting is as it was
    assert spark.conf.get(icu) == case_mappings
    # hour 1: ALTER TABLE ... ADD COLUMN seen as DDL, then a row that carries the new column
    t2 = {**TYPES, "note": "string"}
    row2 = {**row, "id": "7", "note": "hello"}
    write_hour(
        cfg,
        hour(1),
        [
            event(
                2,
                "s.typed",
                "ddl",
                None,
                None,
                {},
                ddl="ALTER TABLE typed ADD COLUMN note VARCHAR(20)",
            ),
            event(3, "s.typed", "insert", None, row2, t2, ["id"]),
        ],
    )
    r1 = merge_hour(spark, cfg, hour(1), buckets=4)
    assert r1["tables"]["s.typed"]["schema_version"] == 2
    assert r1["tables"]["s.typed"]["ddl_seen"] == 1
    rows = list(export_rows(cfg, "s.typed"))
    assert [(r["id"], r["note"]) for r in rows] == [(7, "hello"), (int(big), None)]
    # time travel: the version published for hour 0 is still readable
    old = list(export_rows(cfg, "s.typed", hour="2026-01-01T00"))
    assert [r["id"] for r in old] == [int(big)]
    props = [s.summary.additional_properties for s in load_table(cfg, "s.typed").snapshots()]
    assert [p.get("recon.hour") for p in props if "recon.hour" in p] == [
        "2026-01-01T00",
        "2026-01-01T01",
    ]
    assert props[-1]["recon.schema-version"] == "2"
    _read_by_hour_tag_as_the_readme_shows(cfg, int(big))


def _read_by_hour_tag_as_the_readme_shows(cfg: Any, big: int) -> None:
    """Issue 13 item 8: each hour's version is the Iceberg tag `hour-<hour>`, readable by
    pyiceberg and DuckDB (README "Reading the tables")."""
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "recon", uri=f"sqlite:///{cfg.warehouse}/catalog.db", warehouse=f"file://{cfg.warehouse}"
    )
    table = catalog.load_table((f"{cfg.name}__s", "typed"))  # README: `<pipeline>__<db>`
    assert {"hour-2026-01-01T00", "hour-2026-01-01T01"} <= set(table.refs())
    at0 = table.snapshot_by_name("hour-2026-01-01T00")
    assert at0 is not None
    assert [r["id"] for r in table.scan(snapshot_id=at0.snapshot_id).to_arrow().to_pylist()] == [
        big
    ]
    con = duckdb.connect()
    table.scan().to_duckdb("typed", connection=con)
    assert con.sql("SELECT id, note FROM typed ORDER BY note NULLS LAST").fetchall() == [
        (7, "hello"),
        (big, None),
    ]


def test_a_column_widened_in_a_later_hour_is_promoted_and_a_conflict_keeps_its_type(
    spark, tmp_path: Path
) -> None:
    """int -> bigint, float -> double and a wider decimal in the hour after the first publish
    evolve the Iceberg table (the publish used to crash: pyiceberg refused the files); a type
    Iceberg cannot promote to keeps the published type, and the change is reported."""
    cfg = pipeline(tmp_path, {"s.w": {"primary_key": ["id"]}})
    t0 = {"id": "int32", "n": "int32", "f": "float32", "amt": "decimal(5,2)", "k": "int32"}
    r0 = {"id": "1", "n": "7", "f": "0.5", "amt": "123.45", "k": "3"}
    write_hour(cfg, hour(0), [event(1, "s.w", "insert", None, r0, t0, ["id"])])
    merge_hour(spark, cfg, hour(0), buckets=4)
    t1 = {**t0, "n": "int64", "f": "float64", "amt": "decimal(12,2)", "k": "json"}
    r1 = {"id": "2", "n": str(2**40), "f": "0.1", "amt": "1234567890.12", "k": "4"}
    write_hour(cfg, hour(1), [event(2, "s.w", "insert", None, r1, t1, ["id"])])
    res = merge_hour(spark, cfg, hour(1), buckets=4)["tables"]["s.w"]
    types = {f.name: str(f.field_type) for f in load_table(cfg, "s.w").schema().fields}
    assert (types["n"], types["f"], types["amt"], types["k"]) == (
        "long",
        "double",
        "decimal(12, 2)",
        "int",
    )
    assert [(r["id"], r["n"], r["amt"], r["k"]) for r in export_rows(cfg, "s.w")] == [
        (1, 7, "123.45", 3),
        (2, 2**40, "1234567890.12", 4),
    ]
    changes = " | ".join(res["schema_changes"])
    assert "type n int32 -> int64" in changes and "type conflict k: int32 vs json" in changes
    # hour 0's version is still readable with its own files
    assert [r["n"] for r in export_rows(cfg, "s.w", hour="2026-01-01T00")] == [7]


def test_an_hour_rewrites_only_the_buckets_it_touches(spark, tmp_path: Path) -> None:
    """Copy-on-write: the touched bucket's state and published file are replaced, the others
    kept (merge-on-read adds a delta instead: `tests/spark/test_merge_on_read.py`)."""
    cfg = pipeline(
        tmp_path, {"s.a": {"primary_key": ["id"]}}, buckets=8, write_mode="copy-on-write"
    )
    write_hour(
        cfg,
        hour(0),
        [event(i, "s.a", "insert", None, {"id": i, "v": "x"}, T) for i in range(1, 60)],
    )
    merge_hour(spark, cfg, hour(0), buckets=8)
    before = load_manifest(cfg)["tables"]["s.a"]["files"]
    assert len(before) == 8
    write_hour(
        cfg, hour(1), [event(100, "s.a", "update", {"id": 3, "v": "x"}, {"id": 3, "v": "y"}, T)]
    )
    r1 = merge_hour(spark, cfg, hour(1), buckets=8)
    after = load_manifest(cfg)["tables"]["s.a"]["files"]
    changed = [b for b in after if after[b]["path"] != before[b]["path"]]
    assert len(changed) == 1 and r1["tables"]["s.a"]["buckets_touched"] == 1
    pub = r1["tables"]["s.a"]["published"]
    assert (pub["files_removed"], pub["files_added"]) == (1, 1)
    assert len(list(export_rows(cfg, "s.a"))) == 59


# -- out-of-band snapshot -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_snapshot_bootstrap_skips_changes_at_or_before_the_watermark(
    spark, tmp_path: Path, kind: str
) -> None:
    snap = tmp_path / "snap"
    (snap / "s.a").mkdir(parents=True)
    rows = [{"id": 1, "v": "snap1"}, {"id": 2, "v": "snap2"}]
    if kind == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), snap / "s.a" / "part-0.parquet")
    elif kind == "csv":
        (snap / "s.a" / "rows.csv").write_text("id,v\n1,snap1\n2,snap2\n")
    else:
        (snap / "s.a" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (snap / "_watermark.json").write_text(json.dumps({"gtid_set": f"{UUID}:1-3"}))
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}}, snapshot={"path": str(snap)})
    g = lambda n: {"gtid": f"{UUID}:{n}"}  # noqa: E731
    write_hour(
        cfg,
        hour(0),
        [
            event(1, "s.a", "insert", None, {"id": 1, "v": "snap1"}, T, **g(1)),
            event(2, "s.a", "insert", None, {"id": 2, "v": "old"}, T, **g(2)),
            event(3, "s.a", "update", {"id": 2, "v": "old"}, {"id": 2, "v": "snap2"}, T, **g(3)),
            event(4, "s.a", "insert", None, {"id": 3, "v": "new"}, T, **g(4)),
            event(5, "s.a", "delete", {"id": 1, "v": "snap1"}, None, T, **g(5)),
        ],
    )
    r = merge_hour(spark, cfg, hour(0), buckets=4)
    t = r["tables"]["s.a"]
    assert t["skipped"]["below_snapshot_watermark"] == 3
    assert t["entered_by_op"] == {"delete": 1, "insert": 1} and t["applied"] == 2
    assert t["snapshot_rows_loaded"] == 2
    assert r["snapshot"]["loaded_in_hour"] == "2026-01-01T00"
    assert list(export_rows(cfg, "s.a")) == [{"id": 2, "v": "snap2"}, {"id": 3, "v": "new"}]
    # the snapshot is loaded once: re-running the hour changes nothing, and says so
    again = merge_hour(spark, cfg, hour(0), buckets=4)["tables"]["s.a"]
    assert (again["applied"], again["skipped"]["already_applied"]) == (0, 2)
    assert list(export_rows(cfg, "s.a")) == [{"id": 2, "v": "snap2"}, {"id": 3, "v": "new"}]


WATERMARK_CASES = [
    ({"gtid_set": f"{UUID}:1-100:105"}, {"gtid": f"{UUID}:100"}, True),
    ({"gtid_set": f"{UUID}:1-100:105"}, {"gtid": f"{UUID}:101"}, False),
    ({"gtid_set": f"{UUID}:1-100:105"}, {"gtid": f"{UUID}:105"}, True),
    ({"gtid_set": f"{UUID}:1-100"}, {"gtid": "aaaaaaaa-71ca-11e1-9e33-c80aa9429562:5"}, False),
    ({"gtid_set": "0-1-100,1-1-7"}, {"gtid": "0-2-100"}, True),
    ({"gtid_set": "0-1-100,1-1-7"}, {"gtid": "1-1-8"}, False),
    ({"gtid_set": "0-1-100,1-1-7"}, {"gtid": "2-1-1"}, False),
    (
        {"binlog": {"file": "mysql-bin.000003", "pos": 154}},
        {"binlog_file": "mysql-bin.000003", "binlog_pos": 153},
        True,
    ),
    (
        {"binlog": {"file": "mysql-bin.000003", "pos": 154}},
        {"binlog_file": "mysql-bin.000003", "binlog_pos": 154},
        False,
    ),
    (
        {"binlog": {"file": "mysql-bin.000003", "pos": 154}},
        {"binlog_file": "mysql-bin.000002", "binlog_pos": 9999},
        True,
    ),
    (
        {"binlog": {"file": "mysql-bin.000003", "pos": 154}},
        {"binlog_file": "mysql-bin.000010", "binlog_pos": 4},
        False,
    ),
    ({"sequence_id": "1620457642589000000"}, {"seq": "1620457642589000000"}, True),
    ({"sequence_id": "1620457642589000000"}, {"seq": "1620457642589000001"}, False),
    ({"seq_id": 123456}, {"seq": "99999"}, True),
    ({"seq_id": 123456}, {}, None),
    # MySQL 8.4 tagged GTIDs: a tag numbers its own transactions of the same server
    ({"gtid_set": f"{UUID}:1-5:big_load:1-3"}, {"gtid": f"{UUID}:big_load:3"}, True),
    ({"gtid_set": f"{UUID}:1-5:big_load:1-3"}, {"gtid": f"{UUID}:big_load:4"}, False),
    ({"gtid_set": f"{UUID}:1-5:big_load:1-3"}, {"gtid": f"{UUID}:5"}, True),
    ({"gtid_set": f"{UUID}:1-5:big_load:1-3"}, {"gtid": f"{UUID}:other:1"}, False),
    # sources compare in ASCII lower case, both sides: hex digits and tags as MySQL writes them
    ({"gtid_set": f"{UUID.lower()}:1-5"}, {"gtid": f"{UUID.upper()}:5"}, True),
    ({"gtid_set": f"{UUID}:1-5:Big_Load:1-3"}, {"gtid": f"{UUID.lower()}:BIG_LOAD:3"}, True),
    # ... and only ASCII: the Kelvin sign is no `k` (Unicode's lower case would make it one)
    ({"gtid_set": f"{UUID}:1-5:k1:1-3"}, {"gtid": f"{UUID}:\u212a1:3"}, False),
]


def test_watermark_rules_agree_in_python_and_spark_sql(spark, tmp_path: Path) -> None:
    for i, (wm_doc, ev, want) in enumerate(WATERMARK_CASES):
        d = tmp_path / str(i)
        d.mkdir()
        (d / "_watermark.json").write_text(json.dumps(wm_doc))
        wm = load_watermark(d)
        got = wm.covers(ev.get("gtid"), ev.get("binlog_file"), ev.get("binlog_pos"), ev.get("seq"))
        assert got is want, (wm_doc, ev)
        df = spark.createDataFrame(
            [(ev.get("gtid"), ev.get("binlog_file"), ev.get("binlog_pos"), ev.get("seq"))],
            "gtid string, binlog_file string, binlog_pos bigint, seq string",
        )
        assert df.selectExpr(f"{wm.sql()} as c").collect()[0]["c"] is want, (wm_doc, ev)


def test_image_columns_are_named_alike_in_python_and_spark_sql(spark) -> None:
    """The merge reads the hour's image shapes as they arrived and names their columns after
    the hour's DDL in Python (`normalized_columns`); the images themselves are renamed by a
    Spark expression (`normalize_image`): both must give the same columns in the same order."""
    rng = random.Random(7)
    names = ["a", "b", "c", "d", "e", "f"]
    cases, named = [], []
    for _ in range(80):
        s = TableSchema("s.t", primary_key=["a"])
        s.former = {o: rng.choice(names) for o in rng.sample(names, rng.randint(0, 2))}
        s.dropped = rng.sample(names, rng.randint(0, 2))
        s.defaults = {c: "x" for c in rng.sample(names, rng.randint(0, 2))}
        cols = rng.sample(names, rng.randint(0, 5))
        mine = normalized_columns(cols, s)
        cases.append((s, cols, mine))
        img = F.create_map(*[x for c in cols for x in (F.lit(c), F.lit("1"))])  # in this order
        img = img.cast("map<string,string>")
        named.append(F.to_json(F.map_keys(_in_columns(img, s))).alias(f"c{len(named)}"))
    assert len(cases) == 80
    got = spark.range(1).select(*named).first()
    for i, (s, cols, mine) in enumerate(cases):
        assert json.loads(got[f"c{i}"]) == mine, (s.former, s.dropped, s.defaults, cols)


def test_a_value_that_does_not_fit_its_column_is_set_aside_not_published_as_null(
    spark, tmp_path: Path
) -> None:
    # a producer that states INT for a column whose values are text (seen in Flink's canal data)
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["v"]}})
    write_hour(
        cfg,
        hour(0),
        [
            event(1, "s.a", "insert", None, {"id": "A101", "v": "x"}, T),
            event(2, "s.a", "insert", None, {"id": 7, "v": "y"}, T),
        ],
    )
    r = merge_hour(spark, cfg, hour(0), buckets=4)
    assert r["tables"]["s.a"]["uncastable_columns"] == {"id": 1}
    assert not r["tables"]["s.a"]["published"]["uncastable"]
    rows = {row["v"]: row["id"] for row in export_rows(cfg, "s.a")}
    assert rows == {"y": 7}


def test_dates_are_read_strictly_and_whole_numbers_as_debezium_epoch_values(
    spark, tmp_path: Path
) -> None:
    types = {"id": "int32", "d": "date", "dt": "datetime"}
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    rows = [
        {"id": 1, "d": "2020-07-17", "dt": "2020-07-17 18:00:22.123"},
        {"id": 2, "d": "18460", "dt": "1595008822123"},  # epoch days / epoch ms
        {"id": 3, "d": "-1", "dt": "1595008822123456"},  # the day before the epoch / micros
        {"id": 4, "d": "soon", "dt": "17/07/2020"},  # neither: set aside
        {"id": 5, "d": "0000-00-00", "dt": "2020-00-00 00:00:00"},  # MySQL zero dates: NULL
    ]
    write_hour(
        cfg, hour(0), [event(i, "s.a", "insert", None, r, types) for i, r in enumerate(rows)]
    )
    r = merge_hour(spark, cfg, hour(0), buckets=4)
    assert r["tables"]["s.a"]["uncastable_columns"] == {"d": 1, "dt": 1}
    got = {row["id"]: (row["d"], row["dt"]) for row in export_rows(cfg, "s.a")}
    assert got == {
        1: ("2020-07-17", "2020-07-17 18:00:22.123000"),
        2: ("2020-07-17", "2020-07-17 18:00:22.123000"),
        3: ("1969-12-31", "2020-07-17 18:00:22.123456"),
        5: (None, None),
    }


def test_one_run_id_over_several_hours_publishes_each_hour_once(spark, tmp_path: Path) -> None:
    # a DAG run over an hour range merges every hour under one run id: hour 1's files must not
    # replace (or re-add) what hour 0 published
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    write_hour(
        cfg, hour(0), [event(i, "s.a", "insert", None, {"id": i, "v": "x"}, T) for i in range(8)]
    )
    write_hour(
        cfg, hour(1), [event(20, "s.a", "update", {"id": 1, "v": "x"}, {"id": 1, "v": "y"}, T)]
    )
    merge_hour(spark, cfg, hour(0), run_id="same", buckets=4)
    merge_hour(spark, cfg, hour(1), run_id="same", buckets=4)
    rows = list(export_rows(cfg, "s.a"))
    assert [r["id"] for r in rows] == list(range(8)) and rows[1]["v"] == "y"
    assert len(state_tables(spark, cfg)["s.a"]) == 8


def test_an_hour_decoded_again_while_it_merges_stops_the_merge_before_it_publishes(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge reads the hour's events in several jobs (no copy of them first): a decode of
    the hour by hand while it merges must not leave a state or a version built from a mix."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    first = [event(i, "s.a", "insert", None, {"id": i, "v": "x"}, T) for i in range(8)]
    again = [event(i, "s.a", "insert", None, {"id": i, "v": "y"}, T) for i in range(9)]
    write_hour(cfg, hour(0), first)

    def redecode(name: str) -> None:
        if name == "merge:state-written":
            write_hour(cfg, hour(0), again)

    monkeypatch.setattr("recon.merge.stage.checkpoint", redecode)
    with pytest.raises(ReconError, match="was decoded again while it merged; run the merge"):
        merge_hour(spark, cfg, hour(0), buckets=4)
    assert load_manifest(cfg)["hours"] == []
    assert not load_manifest(cfg)["tables"]
    monkeypatch.undo()
    merge_hour(spark, cfg, hour(0), buckets=4)  # run again: the new decode, whole
    assert [(r["id"], r["v"]) for r in export_rows(cfg, "s.a")] == [(i, "y") for i in range(9)]


def test_years_before_1000_round_trip_through_publish_and_export(spark, tmp_path: Path) -> None:
    """MariaDB allows DATE/DATETIME/TIMESTAMP values in years 1-999: they keep four digits."""
    cfg = pipeline(tmp_path, {"s.old": {}})
    types = {"id": "int32", "d": "date", "at": "datetime", "ts": "timestamp"}
    rows = [
        {"id": "1", "d": "0999-01-02", "at": "0001-01-01 00:00:00.5", "ts": "0500-06-07T08:09:10Z"},
        {"id": "2", "d": "0010-12-31", "at": "0999-12-31 23:59:59", "ts": "0999-01-01T00:00:00Z"},
    ]
    events = [event(i + 1, "s.old", "insert", None, r, types, ["id"]) for i, r in enumerate(rows)]
    write_hour(cfg, hour(0), events)
    r = merge_hour(spark, cfg, hour(0), buckets=4)
    assert r["tables"]["s.old"]["published"].get("uncastable") == {}
    got = list(export_rows(cfg, "s.old"))
    assert got == [
        {
            "id": 1,
            "d": "0999-01-02",
            "at": "0001-01-01 00:00:00.500000",
            "ts": "0500-06-07T08:09:10Z",
        },
        {"id": 2, "d": "0010-12-31", "at": "0999-12-31 23:59:59", "ts": "0999-01-01T00:00:00Z"},
    ]


def test_a_default_stated_by_the_message_schema_is_what_earlier_rows_read(
    spark, tmp_path: Path
) -> None:
    """Issue 16: a Debezium pipeline without schema-change events learns an added column's
    default from the message schema; the rows that predate the column read it (in the merge's
    images of the hour and in the state), a later delete of such a row still meets it, and an
    hour's events written before events carried defaults still merge."""
    cfg = pipeline(tmp_path, {"s.d": {"primary_key": ["id"]}})
    t0 = {"id": "int32", "v": "string"}
    old = [
        event(1, "s.d", "insert", None, {"id": 1, "v": "a"}, t0, ["id"]),
        event(2, "s.d", "insert", None, {"id": 2, "v": "b"}, t0, ["id"]),
        event(3, "s.d", "insert", None, {"id": 3, "v": "c"}, t0, ["id"]),
    ]
    write_hour(cfg, hour(0), old)
    legacy = pa.Table.from_pylist(old, schema=EVENT_SCHEMA).drop_columns(["defaults"])
    pq.write_table(legacy, cfg.layout.events(hour(0)) / "part-00000.parquet")  # an older decode
    merge_hour(spark, cfg, hour(0), buckets=4)
    t1 = {**t0, "n": "int32"}
    stated = {"n": "7"}
    write_hour(
        cfg,
        hour(1),
        [
            # an image from before the ALTER (no n), then ones with n and its stated default
            event(4, "s.d", "update", {"id": 1, "v": "a"}, {"id": 1, "v": "a2"}, t0, ["id"]),
            event(
                5, "s.d", "insert", None, {"id": 4, "v": "d", "n": 1}, t1, ["id"], defaults=stated
            ),
            event(
                6, "s.d", "delete", {"id": 3, "v": "c", "n": 7}, None, t1, ["id"], defaults=stated
            ),
        ],
    )
    merge_hour(spark, cfg, hour(1), buckets=4)
    assert [(r["id"], r["v"], r["n"]) for r in export_rows(cfg, "s.d")] == [
        (1, "a2", 7),
        (2, "b", 7),
        (4, "d", 1),
    ]


def test_each_bucket_is_written_as_one_file_without_shuffling_the_new_state_again(
    spark, tmp_path: Path
) -> None:
    """The fold shuffles by (table, bucket), so the state and the published data files come
    one file per bucket with no further shuffle (keyed and keyless tables alike), even when
    adaptive execution does not merge the shuffle's partitions."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {}})
    events = [event(i, "s.a", "insert", None, {"id": i, "v": "x"}, T) for i in range(1, 41)]
    events += [
        event(100 + i, "s.b", "insert", None, {"id": i % 30, "v": "y"}, T) for i in range(40)
    ]
    write_hour(cfg, hour(0), events)
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        r0 = merge_hour(spark, cfg, hour(0), buckets=4)
    finally:
        spark.conf.set(key, before)
    state = cfg.layout.merge
    for name in ("s.a", "s.b"):
        files = load_manifest(cfg)["tables"][name]["files"]
        assert len(files) == 4
        for f in files.values():
            assert len(list((state / f["path"]).glob("*.parquet"))) == 1, f["path"]
        pub = r0["tables"][name]["published"]
        assert pub["files_added"] == r0["tables"][name]["buckets_touched"] == 4
    assert len(list(export_rows(cfg, "s.b"))) == 40 and len(list(export_rows(cfg, "s.a"))) == 40


def test_the_fold_sorts_narrow_rows_and_the_write_alone_sorts_the_images(
    spark, tmp_path: Path
) -> None:
    """Each key's winner is decided over narrow rows (no images) grouped by a long first
    (`_sort_first`: the table's place, the bucket, 40 bits of the key's hash), so the sort that
    aggregate needs decides by its first 8 bytes; the whole rows are shuffled once, by (table,
    bucket), joined to their winners by a hash table, and sorted once, by the write, by (table,
    bucket) alone; each bucket is still one file. The plan of the state's write shows these
    two sorts and no other."""
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {"primary_key": ["id"]}})
    events = [
        event(i, t, "insert", None, {"id": i % 25, "v": str(i)}, T)
        for t in ("s.a", "s.b")
        for i in range(60)
    ]
    write_hour(cfg, hour(0), events)
    merge_hour(spark, cfg, hour(0), buckets=4)
    # the store keeps the newest executions (a bounded list: count none by position); this
    # merge's write is the one into this test's folder
    ex = spark._jsparkSession.sharedState().statusStore().executionsList()
    plans = [
        plan
        for i in range(ex.size())
        if "the touched buckets' new state" in ex.apply(i).description()
        and str(tmp_path) in (plan := ex.apply(i).physicalPlanDescription())
    ]
    assert plans, "no execution named for the state's write"
    for plan in plans:
        tree = plan.split("== Final Plan ==")[-1].split("== Initial Plan ==")[0]
        nodes = [ln.strip(" +-:*|") for ln in tree.splitlines() if "(" in ln]
        assert sum(n.startswith("ShuffledHashJoin") for n in nodes) == 1, tree
        sorts = [_sort_keys(plan, n) for n in nodes if n.startswith("Sort ")]
        assert len(sorts) == 2, tree  # the write's, then the aggregate's
        assert sorts[0] == ["_t", "_b"], sorts
        assert sorts[1][0] == "_groupingexpression" and sorts[1][1:] == ["table", "bucket", "key"]
        agg = next(n for n in nodes if n.startswith("SortAggregate"))
        agg_input = _node_details(plan, agg).split("Input [", 1)[1].split("]", 2)[1]
        assert "row#" not in agg_input and "key#" in agg_input, agg_input
    state = cfg.layout.merge
    for name in ("s.a", "s.b"):
        for f in load_manifest(cfg)["tables"][name]["files"].values():
            assert len(list((state / f["path"]).glob("*.parquet"))) == 1, f["path"]
        assert len(list(export_rows(cfg, name))) == 25


def _node_details(plan: str, node: str) -> str:
    """The lines a formatted plan gives its node (`Sort (7)`) below the tree."""
    number = node.split("(")[1].split(")")[0]
    name = node.split(" (")[0]
    return plan.split(f"\n({number}) {name}")[-1].split("\n\n")[0]


def _sort_keys(plan: str, node: str) -> list[str]:
    """The columns a plan's sort node (`Sort (7)`) sorts by, without their ids."""
    args = _node_details(plan, node).split("Arguments: [", 1)[1].split("]", 1)[0]
    return [a.split("#")[0].strip() for a in args.split(",")]


def _bucket_checksums(spark: Any, cfg: Any) -> dict[tuple[str, int], tuple[int, str]]:
    """(live rows, checksum) per state bucket, from the rows themselves: the sum of
    `row_checksum(row)` (its general way) over the live rows, as the manifest defines it."""
    from pyspark.sql import functions as F

    from recon.merge.contributions import STATE_DDL, row_checksum
    from recon.merge.state import U64, live_rows

    man = load_manifest(cfg)
    out = {}
    for name, t in man["tables"].items():
        ms = [] if t["schema"]["primary_key"] else [name]
        for b, f in t["files"].items():
            state = spark.read.schema(STATE_DDL).parquet(str(cfg.layout.merge / f["path"]))
            got = (
                live_rows(state, ms)
                .agg(F.count("*"), F.sum(row_checksum(F.col("row")).cast("decimal(38,0)")))
                .first()
            )
            out[(name, int(b))] = (int(got[0]), str(int(got[1] or 0) % U64))
    return out


def _manifest_checksums(cfg: Any) -> dict[tuple[str, int], tuple[int, str]]:
    man = load_manifest(cfg)
    return {
        (name, int(b)): (int(f["rows"]), f["checksum"])
        for name, t in man["tables"].items()
        for b, f in t["files"].items()
    }


def test_a_rows_key_text_and_checksum_term_are_what_earlier_states_hold(spark) -> None:
    """A keyless table's state keys are `row_key` texts and every bucket checksum sums
    `row_checksum` terms, both kept from hour to hour: the expressions may get faster, never
    different. The keys are those earlier states hold; the terms are of form 2
    (`CHECKSUM_TERMS`, session 49): xxhash64 of the non-null (name, value) pairs by name,
    chained (a state of form 1 has its terms computed again: the test after this)."""
    from recon.merge.contributions import CHECKSUM_TERMS, row_checksum, row_key

    assert CHECKSUM_TERMS == 2  # a new form of the terms is a new number, and a test of it

    rows = [
        ({"b": "2", "a": "1", "c": None},),  # names sorted; a NULL column left out
        ({"Z": 'q"uo\\te', "a": "", "é": "ü", "B": "x"},),  # by code point; escaped
        ({"n": None},),
        ({},),
        (None,),
    ]
    df = spark.createDataFrame(rows, "m map<string,string>")
    got = [
        (r["k"], r["h"])
        for r in df.select(
            row_key(F.col("m")).alias("k"), row_checksum(F.col("m")).alias("h")
        ).collect()
    ]
    assert got == [
        ('[["a","1"],["b","2"]]', 4872522888017431362),
        ('[["B","x"],["Z","q\\"uo\\\\te"],["a",""],["é","ü"]]', -4793047147837932450),
        ("[]", 42),  # no pair: the seed
        ("[]", 42),
        (None, 42),
    ]
    pairs = df.select(F.xxhash64(*[F.lit(x) for x in ("a", "1", "b", "2")])).first()
    assert pairs is not None and pairs[0] == got[0][1]


def _as_form_one(spark: Any, cfg: Any) -> None:
    """The state as a merge before session 49 left it: each kept term xxhash64 of the row's
    `row_key` text, each bucket's checksum their sum, no `checksum_terms` in the manifest."""
    from recon.merge.contributions import STATE_DDL, row_key
    from recon.merge.state import U64, live_rows

    man = load_manifest(cfg)
    for name, t in man["tables"].items():
        del t["checksum_terms"]
        ms = [] if t["schema"]["primary_key"] else [name]
        for f in t["files"].values():
            folder = cfg.layout.merge / f["path"]
            state = spark.read.schema(STATE_DDL).parquet(str(folder))
            old = state.withColumn(
                "ck", F.when(F.col("sign") > 0, F.xxhash64(row_key(F.col("row"))))
            )
            table = old.toArrow()
            total = live_rows(old, ms).agg(F.sum(F.col("ck").cast("decimal(38,0)"))).first()
            for p in folder.iterdir():
                p.unlink()
            pq.write_table(table, folder / "part-00000.parquet")
            f["checksum"] = str(int(total[0] or 0) % U64)
    cfg.layout.manifest.write_text(json.dumps(man))


def _published(cfg: Any, name: str) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in export_rows(cfg, name))


def test_a_state_of_form_one_terms_is_summed_again_whole_by_its_next_merge(
    spark, tmp_path: Path
) -> None:
    """A state whose rows hold checksum terms of the earlier form (`CHECKSUM_TERMS`) has
    every bucket of its tables written again by the next merge, each term computed again:
    after it the buckets' checksums are the sums of their rows' own terms, and the tables'
    checksums and rows are those of a state that merged the same hours fresh. The hour after
    writes only what it touches."""
    tables = {"s.a": {"primary_key": ["id"]}, "s.b": {}}
    t0 = {"id": "int32", "v": "string"}
    hours = [
        [event(i, "s.a", "insert", None, {"id": i, "v": f"v{i}"}, t0, ["id"]) for i in range(12)]
        + [event(100 + i, "s.b", "insert", None, {"id": i % 4, "v": "m"}, t0) for i in range(8)],
        [event(20, "s.a", "update", {"id": 1, "v": "v1"}, {"id": 1, "v": "w1"}, t0, ["id"])],
        [event(30, "s.a", "delete", {"id": 2, "v": "v2"}, None, t0, ["id"])],
    ]
    upgraded = pipeline(tmp_path / "upgraded", tables)
    fresh = pipeline(tmp_path / "fresh", tables)
    for cfg in (upgraded, fresh):
        for i, evs in enumerate(hours):
            write_hour(cfg, hour(i), evs)
    merge_hour(spark, upgraded, hour(0))
    _as_form_one(spark, upgraded)
    assert _manifest_checksums(upgraded) != _bucket_checksums(spark, upgraded)  # form 1 now
    r1 = merge_hour(spark, upgraded, hour(1))
    man = load_manifest(upgraded)
    for name, t in r1["tables"].items():
        assert t["buckets_touched"] == len(man["tables"][name]["files"]) > 1, name
        assert man["tables"][name]["checksum_terms"] == 2
    assert _manifest_checksums(upgraded) == _bucket_checksums(spark, upgraded)
    r2 = merge_hour(spark, upgraded, hour(2))
    assert r2["tables"]["s.a"]["buckets_touched"] == 1
    assert r2["tables"]["s.b"]["buckets_touched"] == 0
    for i in range(3):
        want = merge_hour(spark, fresh, hour(i))
    for name in tables:
        assert r2["tables"][name]["checksum"] == want["tables"][name]["checksum"], name
        assert _published(upgraded, name) == _published(fresh, name), name
    assert _manifest_checksums(upgraded) == _manifest_checksums(fresh)


def test_a_rows_checksum_term_is_the_same_whichever_way_it_is_read(spark) -> None:
    """`row_checksum` given the tables' columns reads a row whose names are its table's
    columns in their order by place, one whose names are among them by name, and others
    the general way (lambdas): the three give the same term (summed into checksums kept from
    hour to hour): names in any case, order, script or with quotes, NULL values, an empty row,
    a name the table lacks, a NULL row, another table's rows. Rows of each way are here (else
    this would test nothing)."""
    from recon.merge.contributions import _only_names, row_checksum

    names = ["id", "Zeta", "alpha", "é", "z", 'a"b', "n\\m", "日本", "a b", "A"]
    rnd = random.Random(7)
    rows = []
    for i in range(600):
        cols = names if i % 3 == 0 else rnd.sample(names, rnd.randint(0, len(names)))
        img = {c: rnd.choice([None, "", "x", 'q"1', "é\n", str(i)]) for c in cols}
        if i % 17 == 0:
            img["extra"] = "1"  # a name the table's columns lack
        kv = (None, None) if i % 41 == 0 else (list(img), list(img.values()))
        rows.append(("s.t" if i % 5 else "s.other", *kv))
    # maps from arrays: a map from a Python dict does not keep its order
    df = spark.createDataFrame(rows, "table string, k array<string>, v array<string>").select(
        "table", F.map_from_arrays("k", "v").alias("img")
    )
    columns = {"s.t": names, "s.u": ["id"]}
    img = F.col("img")
    in_order = F.map_keys(img) == F.array(*[F.lit(c) for c in names])
    by_name = ~in_order & _only_names(img, sorted(names))
    got = df.select(
        (row_checksum(img).eqNullSafe(row_checksum(img, columns))).alias("same"),
        ((F.col("table") == "s.t") & in_order).alias("by_place"),
        ((F.col("table") == "s.t") & by_name).alias("by_name"),
    ).collect()
    assert all(r["same"] for r in got)
    assert sum(bool(r["by_place"]) for r in got) > 100
    assert sum(bool(r["by_name"]) for r in got) > 200


def test_a_keyed_tables_contributions_and_their_key_texts_are_what_earlier_states_hold(
    spark,
) -> None:
    """A keyed table's state key is the JSON text of its key columns' values, kept from hour
    to hour; an event makes the new image's key and, for a delete or a key change with a whole
    old key, a tombstone of the old key. The expressions may get faster, never different
    (session 47 wrote them per key without lambdas: a key of two columns, tables of
    different keys and a keyless one here)."""
    from recon.merge.contributions import contributions

    rows = [  # table, op, before, after
        ("s.a", "insert", None, {"id": "1", "k": "x"}),
        ("s.a", "update", {"id": "1", "k": "x"}, {"id": "1", "k": "x", "v": "2"}),
        ("s.a", "update", {"id": "1", "k": "x"}, {"id": "2", "k": "x"}),  # key change
        ("s.a", "update", {"id": None, "k": "x"}, {"id": "null", "k": "x"}),  # NULL vs "null"
        ("s.a", "update", {"k": "x"}, {"id": "3", "k": "x"}),  # old key not whole: no tombstone
        ("s.a", "delete", {"id": 'q"1', "k": "é"}, None),
        ("s.a", "delete", {"k": "x"}, None),  # no whole old key: nothing to remove
        ("s.b", "insert", None, {"c": "1"}),  # keyless: one copy added
        ("s.b", "update", {"c": "1"}, {"c": "2"}),  # one removed, one added
        ("s.c", "update", {"id": "5"}, {"id": "6"}),
    ]
    ev = spark.createDataFrame(
        [(t, op, b, a, bytes([i]), i) for i, (t, op, b, a) in enumerate(rows)],
        "table string, op string, before map<string,string>, after map<string,string>, "
        "order_key binary, event_time_ms bigint",
    )
    pks = {"s.a": ["id", "k"], "s.b": [], "s.c": ["id"]}

    def made(pks: dict[str, list[str]]) -> list[tuple]:
        mine = ev.where(F.col("table").isin(list(pks)))
        return sorted(
            (r["event_time_ms"], r["table"], r["key"], r["sign"], r["op"], r["row"] is not None)
            for r in contributions(mine, pks).collect()
        )

    got = made(pks)
    # keyed tables alone, and a keyless one alone, have only their kinds in the expressions:
    # each makes what it made beside the others
    assert made({"s.a": pks["s.a"], "s.c": pks["s.c"]}) == [g for g in got if g[1] != "s.b"]
    assert made({"s.b": []}) == [g for g in got if g[1] == "s.b"]
    assert got == [
        (0, "s.a", '["1","x"]', 1, "insert", True),
        (1, "s.a", '["1","x"]', 1, "update", True),
        (2, "s.a", '["1","x"]', 0, "pk_change", False),
        (2, "s.a", '["2","x"]', 1, "update", True),
        (3, "s.a", '["null","x"]', 1, "update", True),
        (3, "s.a", '[null,"x"]', 0, "pk_change", False),
        (4, "s.a", '["3","x"]', 1, "update", True),
        (5, "s.a", '["q\\"1","é"]', 0, "delete", False),
        (7, "s.b", '[["c","1"]]', 1, "insert", True),
        (8, "s.b", '[["c","1"]]', -1, "update", True),
        (8, "s.b", '[["c","2"]]', 1, "update", True),
        (9, "s.c", '["5"]', 0, "pk_change", False),
        (9, "s.c", '["6"]', 1, "update", True),
    ]


def test_the_folds_first_grouping_column_changes_no_winner(spark) -> None:
    """`fold` groups by `_sort_first` (the tables' places, the bucket, a key hash) before
    (table, bucket, key) for speed alone: with the tables numbered, some unnumbered (NULL), or
    too many to number, the same winners."""
    from recon.merge.contributions import STATE_DDL
    from recon.merge.state import fold, numbered

    rows = [  # table, bucket, key, order key, sign: per key the highest (order key, sign) wins
        (t, b, f'["{k}"]', None, bytes([o]), s, {"v": f"{t}{k}{o}"}, o, "update", None)
        for t in ("s.a", "s.b", "s.c")
        for b in (0, 3)
        for k in range(5)
        for o, s in ((1, 1), (2, 0), (k, 1))
    ]
    contrib = numbered(spark.createDataFrame(rows, STATE_DDL))
    old = spark.createDataFrame([], STATE_DDL)

    def winners(columns: dict[str, list[str]] | None) -> list[tuple]:
        got = fold(old, contrib, [], columns).collect()
        return sorted((r["table"], r["bucket"], r["key"], r["order_key"], r["sign"]) for r in got)

    numbered = winners({"s.a": ["v"], "s.b": ["v"], "s.c": ["v"]})
    assert len(numbered) == 3 * 2 * 5
    assert numbered[0] == ("s.a", 0, '["0"]', bytes([2]), 0)  # (2, 0) over (1, 1), (0, 1)
    assert ("s.a", 0, '["4"]', bytes([4]), 1) in numbered
    assert winners(None) == numbered
    assert winners({"s.b": ["v"]}) == numbered  # two tables unnumbered
    many = {f"t{i:02d}": ["v"] for i in range(40)}  # past 32 tables: none numbered
    assert winners({**many, "s.a": ["v"], "s.b": ["v"], "s.c": ["v"]}) == numbered


def test_bucket_checksums_kept_with_the_rows_equal_the_rows_own(spark, tmp_path: Path) -> None:
    """Each state row carries its checksum term, computed when it enters: the manifest's
    bucket checksums still equal the sum over the live rows themselves after updates, deletes,
    keyless copies, a state written before rows carried the term, and a schema change that
    rewrites the old rows (a stated default). Copy-on-write: `_bucket_checksums` sums each
    state file's live rows, which a bucket's deltas would repeat (merge-on-read's bucket
    statistics are held to copy-on-write's in `tests/spark/test_merge_on_read.py`); and a
    state without its terms has terms of the old form too, which no merge-on-read hour takes."""
    cfg = pipeline(
        tmp_path, {"s.a": {"primary_key": ["id"]}, "s.b": {}}, write_mode="copy-on-write"
    )
    t0 = {"id": "int32", "v": "string"}
    write_hour(
        cfg,
        hour(0),
        [event(i, "s.a", "insert", None, {"id": i, "v": f"v{i}"}, t0, ["id"]) for i in range(12)]
        + [event(100 + i, "s.b", "insert", None, {"id": i % 4, "v": "m"}, t0) for i in range(8)],
    )
    merge_hour(spark, cfg, hour(0), buckets=4)
    assert _manifest_checksums(cfg) == _bucket_checksums(spark, cfg)
    for f in cfg.layout.merge.rglob("*.parquet"):  # as a state written before `ck` existed
        pq.write_table(pq.read_table(f).drop_columns(["ck"]), f)
        f.with_name(f".{f.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old
    t1 = {**t0, "n": "int32"}
    stated = {"n": "7"}
    write_hour(
        cfg,
        hour(1),
        [
            event(20, "s.a", "update", {"id": 1, "v": "v1"}, {"id": 1, "v": "w1"}, t0, ["id"]),
            event(21, "s.a", "delete", {"id": 2, "v": "v2"}, None, t0, ["id"]),
            event(22, "s.b", "delete", {"id": 1, "v": "m"}, None, t0),
            event(23, "s.b", "insert", None, {"id": 9, "v": "n"}, t0),
        ],
    )
    merge_hour(spark, cfg, hour(1), buckets=4)
    assert _manifest_checksums(cfg) == _bucket_checksums(spark, cfg)
    write_hour(
        cfg,
        hour(2),
        [
            event(
                30, "s.a", "insert", None, {"id": 40, "v": "x", "n": 1}, t1, ["id"], defaults=stated
            )
        ],
    )
    r2 = merge_hour(spark, cfg, hour(2), buckets=4)
    assert r2["tables"]["s.a"]["schema_changed"]
    assert {r["n"] for r in export_rows(cfg, "s.a")} == {1, 7}  # old rows read the default
    assert _manifest_checksums(cfg) == _bucket_checksums(spark, cfg)


@pytest.mark.parametrize("broadcast", [True, False])
def test_stale_and_already_applied_changes_are_counted_with_or_without_a_broadcast(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broadcast: bool
) -> None:
    """The skip counts compare the hour's changes with the state they meet: sent to every task
    for an hour of up to `BROADCAST_CHANGES` changes, else by a shuffle; both count alike."""
    import recon.merge.state

    monkeypatch.setattr(recon.merge.state, "BROADCAST_CHANGES", 10**9 if broadcast else -1)
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}})
    write_hour(
        cfg,
        hour(0),
        [event(10 + i, "s.a", "insert", None, {"id": i, "v": "a"}, T) for i in range(5)],
    )
    ups = [
        event(20 + i, "s.a", "update", {"id": i, "v": "a"}, {"id": i, "v": "b"}, T)
        for i in range(3)
    ]
    write_hour(cfg, hour(1), ups)
    late = [
        event(15 + i, "s.a", "update", {"id": i, "v": "a"}, {"id": i, "v": "late"}, T)
        for i in range(2)
    ]
    write_hour(cfg, hour(2), [*late, event(30, "s.a", "insert", None, {"id": 9, "v": "n"}, T)])
    merge_hour(spark, cfg, hour(0), buckets=4)
    first = merge_hour(spark, cfg, hour(1), buckets=4)["tables"]["s.a"]
    again = merge_hour(spark, cfg, hour(1), buckets=4)["tables"]["s.a"]  # a re-run
    stale = merge_hour(spark, cfg, hour(2), buckets=4)["tables"]["s.a"]
    assert (first["applied"], first["skipped"]["stale"], first["skipped"]["already_applied"]) == (
        3,
        0,
        0,
    )
    assert (again["applied"], again["skipped"]["stale"], again["skipped"]["already_applied"]) == (
        0,
        0,
        3,
    )
    assert (stale["applied"], stale["skipped"]["stale"], stale["skipped"]["already_applied"]) == (
        1,
        2,
        0,
    )
    assert sorted((r["id"], r["v"]) for r in export_rows(cfg, "s.a")) == [
        (0, "b"),
        (1, "b"),
        (2, "b"),
        (3, "a"),
        (4, "a"),
        (9, "n"),
    ]


def test_a_column_renamed_onto_the_name_of_a_dropped_one_keeps_the_renamed_values(
    spark, tmp_path: Path
) -> None:
    """`DROP COLUMN b` then `RENAME COLUMN a TO b`: an image from before both carries `a` and
    the old `b`; its `a` is the new `b`, its old `b` is gone (a map with `b` twice, which Spark
    refuses, was the merge's failure). The same for the state written before, and for a chain
    of renames through a name a dropped column had."""
    cfg = pipeline(tmp_path, {"s.t": {"primary_key": ["id"]}})
    t3 = {"id": "int32", "a": "string", "b": "string"}
    write_hour(
        cfg,
        hour(0),
        [
            event(1, "s.t", "insert", None, {"id": 1, "a": "a1", "b": "b1"}, t3, ["id"]),
            event(2, "s.t", "insert", None, {"id": 2, "a": "a2", "b": "b2"}, t3, ["id"]),
        ],
    )
    merge_hour(spark, cfg, hour(0), buckets=4)
    t2 = {"id": "int32", "b": "string"}
    write_hour(
        cfg,
        hour(1),
        [
            event(
                3,
                "s.t",
                "update",
                {"id": 2, "a": "a2", "b": "b2"},
                {"id": 2, "a": "a2x", "b": "b2x"},
                t3,
                ["id"],
            ),
            event(4, "s.t", "ddl", None, None, {}, ddl="ALTER TABLE t DROP COLUMN b"),
            event(5, "s.t", "ddl", None, None, {}, ddl="ALTER TABLE t RENAME COLUMN a TO b"),
            event(6, "s.t", "insert", None, {"id": 3, "b": "new3"}, t2, ["id"]),
        ],
    )
    merge_hour(spark, cfg, hour(1), buckets=4)
    assert list(export_rows(cfg, "s.t")) == [
        {"id": 1, "b": "a1"},
        {"id": 2, "b": "a2x"},
        {"id": 3, "b": "new3"},
    ]
    # a chain: c dropped, b renamed to c, a renamed to b, b renamed to c... as names come back
    s = TableSchema("s.t", primary_key=["id"])
    s.observe(["id", "a", "b", "c"], {c: "string" for c in ("id", "a", "b", "c")}, "test")
    for ddl in ("drop c", "rename b c", "drop c", "rename a b", "rename b c"):
        verb, *args = ddl.split()
        assert getattr(s, verb)(*args, "test")
    assert [c for c, _ in s.columns] == ["id", "c"]
    cases = [  # an image's columns -> the column whose value is the c of now
        (["id", "a", "b", "c"], "a"),  # from before it all
        (["id", "a", "c"], "a"),  # from between the rename of b and the second drop
        (["id", "b"], "b"),  # from between the renames of a and b
        (["id", "c"], "c"),
    ]
    imgs = [F.create_map(*[F.lit(x) for c in cols for x in (c, c)]) for cols, _ in cases]
    got = spark.range(1).select(*[_in_columns(m, s).alias(f"m{i}") for i, m in enumerate(imgs)])
    row = got.first()
    for i, (cols, was) in enumerate(cases):
        assert normalized_columns(cols, s) == ["id", "c"], cols
        assert row[f"m{i}"] == {"id": "id", "c": was}, cols


def test_written_rows_are_counted_for_values_that_do_not_fit_only_where_one_can_be(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count of values publish writes as NULL is a pass over every live row of the buckets
    an hour writes. It runs where such a value can be: a snapshot's rows (not checked on their
    way in), a bucket that held one, a state written before buckets kept their count; not where
    the hour's checked changes meet buckets known to fit (the cost then follows the changes)."""
    snap = tmp_path / "snap"
    (snap / "s.a").mkdir(parents=True)
    (snap / "s.a" / "rows.csv").write_text("id,n\n1,abc\n2,5\n")  # 'abc' is no INT
    (snap / "_watermark.json").write_text(json.dumps({"gtid_set": f"{UUID}:1-1"}))
    cfg = pipeline(tmp_path, {"s.a": {"primary_key": ["id"]}}, snapshot={"path": str(snap)})
    types = {"id": "int32", "n": "int32"}
    gtid = iter(range(2, 1000))

    def upsert(i: int, n: int) -> dict[str, Any]:
        g = next(gtid)
        return event(g, "s.a", "insert", None, {"id": i, "n": n}, types, gtid=f"{UUID}:{g}")

    counted: list[list[str]] = []
    real = merge_stage.bucket_stats

    def spy(state: Any, live: Any, checks: dict[str, Any], *rest: Any) -> Any:
        counted.append(sorted(checks))
        return real(state, live, checks, *rest)

    monkeypatch.setattr(merge_stage, "bucket_stats", spy)

    def merge(i: int, events: list[dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
        write_hour(cfg, hour(i), events)
        pub = merge_hour(spark, cfg, hour(i), buckets=4)["tables"]["s.a"]["published"]
        return counted.pop(), pub["uncastable"]

    key = F.concat(F.lit('["'), F.col("id").cast("string"), F.lit('"]'))  # `pk_key`'s text
    buckets = spark.range(1, 40).select("id", F.pmod(F.xxhash64(key), F.lit(4)).alias("b"))
    bucket_of = {r["id"]: r["b"] for r in buckets.collect()}  # one job, not one per key
    dirty = bucket_of[1]
    clean = next(i for i in range(3, 40) if bucket_of[i] != dirty)
    beside = next(i for i in range(3, 40) if bucket_of[i] == dirty)
    assert merge(0, [upsert(clean, 1), upsert(beside, 1)]) == (["s.a"], {"n": 1})  # snapshot
    files = load_manifest(cfg)["tables"]["s.a"]["files"]
    assert {b: f["unfit_values"] for b, f in files.items()}[str(dirty)] == 1
    assert sum(f["unfit_values"] for f in files.values()) == 1
    assert merge(1, [upsert(clean, 2)]) == ([], {})  # a bucket known to fit
    assert merge(2, [upsert(beside, 2)]) == (["s.a"], {"n": 1})  # the bucket with 'abc'
    assert merge(3, [upsert(1, 3)]) == (["s.a"], {})  # 'abc' replaced: the bucket fits now
    assert merge(4, [upsert(beside, 3)]) == ([], {})
    man = json.loads(cfg.layout.manifest.read_text())
    for f in man["tables"]["s.a"]["files"].values():
        del f["unfit_checks"]  # as a state written before buckets kept their count
    cfg.layout.manifest.write_text(json.dumps(man))
    assert merge(5, [upsert(clean, 4)]) == (["s.a"], {})
    assert merge(6, [upsert(clean, 5)]) == ([], {})
    got = {r["id"]: r["n"] for r in export_rows(cfg, "s.a")}
    assert got == {1: 3, 2: 5, clean: 5, beside: 3}
    # a table's first hour (its schema learned, no snapshot): its rows are all the hour's
    # checked changes, so none is counted; a value that does not fit is set aside as ever
    first = pipeline(tmp_path / "first", {"s.a": {"primary_key": ["id"]}})
    bad = event(next(gtid), "s.a", "insert", None, {"id": beside, "n": "x"}, types)
    write_hour(first, hour(0), [upsert(clean, 1), bad])
    t = merge_hour(spark, first, hour(0), buckets=4)["tables"]["s.a"]
    assert counted.pop() == [] and t["schema_changed"] and t["uncastable_columns"] == {"n": 1}
    assert [r["id"] for r in export_rows(first, "s.a")] == [clean]

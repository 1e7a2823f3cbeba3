"""Format details the shared vectors do not reach: these bytes become these events.
Tencent messages here are built by this file from the proto (no captured sample is public)."""

from __future__ import annotations

import json

import pytest

from recon._proto import tencent_subscribe_pb2 as pb
from recon.core.ddl import apply_alter_table, parse_create_table
from recon.core.model import RawRecord, i64
from recon.core.sqlddl import TableDef, parse_sql_literal
from recon.core.values import mysql_logical_type
from recon.decode.base import DecodeContext
from recon.decode.stage import fold_ddl
from recon.decode.stream import decode_records
from recon.demo.reference_fold import fold, table_rows
from recon.errors import DecodeError


def _run(values: list[bytes | None], fmt: str, ctx: DecodeContext | None = None, keys=None) -> dict:
    recs = [RawRecord("db1.shop.t", 0, i, (keys or {}).get(i), v, 0) for i, v in enumerate(values)]
    out = decode_records(recs, fmt, ctx).to_pylist()
    return {
        "events": [r for r in out if r["kind"] == "event"],
        "quarantine": [r for r in out if r["kind"] == "quarantine"],
        "carry": [r for r in out if r["kind"] == "carry"],
        "stats": {r["stat"]: r["n"] for r in out if r["kind"] == "stat"},
    }


# -- Tencent DTS ------------------------------------------------------------------------------
def _tencent(entries: list[pb.Entry]) -> bytes:
    data = pb.Entries(items=entries).SerializeToString()
    return pb.Envelope(version=1, total=1, data=data).SerializeToString()


def test_tencent_nil_is_null_na_is_absent_and_charsets_decode() -> None:
    cols = [
        pb.Column(name=n, originalType=t, isKey=n == "id")
        for n, t in [
            ("id", "int(11)"),
            ("a", "varchar(5)"),
            ("b", "varchar(5)"),
            ("c", "varchar(5)"),
            ("d", "varchar(5)"),
            ("e", "blob"),
            ("ts", "timestamp"),
        ]
    ]
    row = pb.RowChange(
        newColumns=[
            pb.Data(dataType=pb.INT32, sv="1"),
            pb.Data(),  # NIL: no dataType on the wire
            pb.Data(dataType=pb.NA),
            pb.Data(dataType=pb.STRING, charset="gbk", bv="中文".encode("gbk")),
            pb.Data(dataType=pb.STRING, charset="latin1", bv=b"caf\xe9"),
            pb.Data(dataType=pb.BYTES, bv=b"\x00\x01"),
            pb.Data(dataType=pb.STRING, charset="utf8", bv=b"2021-05-17 07:22:42 +08:00"),
        ]
    )
    entry = pb.Entry(
        header=pb.Header(messageType=pb.DML, schemaName="s", tableName="t", seqId=5),
        event=pb.Event(dmlEvent=pb.DMLEvent(columns=cols, rows=[row])),
    )  # INSERT = 0: absent
    r = _run([_tencent([entry])], "tencent_dts_pb")
    (ev,) = r["events"]
    assert ev["op"] == "insert" and ev["pk"] == ["id"]
    assert dict(ev["after"]) == {
        "id": "1",
        "a": None,
        "c": "中文",
        "d": "café",
        "e": "AAE=",
        "ts": "2021-05-16T23:22:42Z",
    }


def test_tencent_event_types_are_those_of_the_columns_each_row_holds() -> None:
    """Rows holding every declared column share their table's types; a row leaving a column
    out (NA, or a short row), or a column of no declared type (typed by its value's
    `dataType`), has types of its own: the columns its images hold, the new image's last."""
    cols = [
        pb.Column(name="id", originalType="int(11)", isKey=True),
        pb.Column(name="v", originalType="varchar(5)"),
        pb.Column(name="x", originalType=""),  # no declared type
        pb.Column(name="w", originalType="bigint"),
    ]
    i32, s = pb.Data(dataType=pb.INT32, sv="1"), pb.Data(dataType=pb.STRING, bv=b"a")
    f64, i64 = pb.Data(dataType=pb.FLOAT64, sv="1.5"), pb.Data(dataType=pb.INT64, sv="9")
    na = pb.Data(dataType=pb.NA)
    rows = {  # op, old columns, new columns
        "whole": (pb.UPDATE, [i32, s, f64, i64], [i32, s, i64, i64]),
        "na_old": (pb.UPDATE, [i32, na, f64, na], [i32, s, f64, i64]),
        "na_both": (pb.UPDATE, [i32, na, f64, i64], [i32, na, na, i64]),
        "short": (pb.INSERT, [], [i32, s]),
        "delete": (pb.DELETE, [i32, s, i64, na], []),
    }
    entries = [
        pb.Entry(
            header=pb.Header(messageType=pb.DML, schemaName="s", tableName="t", seqId=n + 1),
            event=pb.Event(
                dmlEvent=pb.DMLEvent(
                    dmlEventType=op,
                    columns=cols,
                    rows=[pb.RowChange(oldColumns=old, newColumns=new)],
                )
            ),
        )
        for n, (op, old, new) in enumerate(rows.values())
    ]
    whole = {"id": "int32", "v": "string", "w": "int64"}
    evs = _run([_tencent(entries)], "tencent_dts_pb")["events"]
    assert [dict(e["types"]) for e in evs] == [
        {**whole, "x": "int64"},  # the new image's value types an undeclared column
        {**whole, "x": "float64"},
        {"id": "int32", "x": "float64", "w": "int64"},  # `v` in neither image
        {"id": "int32", "v": "string"},
        {"id": "int32", "v": "string", "x": "int64"},
    ]
    declared = [pb.Column(name="id", originalType="int", isKey=True), cols[1]]
    both = [
        pb.Entry(
            header=pb.Header(messageType=pb.DML, schemaName="s", tableName="t", seqId=n),
            event=pb.Event(
                dmlEvent=pb.DMLEvent(columns=declared, rows=[pb.RowChange(newColumns=[i32, s])])
            ),
        )
        for n in (1, 2)
    ]
    evs = _run([_tencent(both)], "tencent_dts_pb")["events"]
    assert [dict(e["types"]) for e in evs] == [{"id": "int32", "v": "string"}] * 2
    assert [e["pk"] for e in evs] == [["id"], ["id"]]


def test_tencent_transaction_is_emitted_at_commit_and_carried_when_open() -> None:
    def h(mt: int, seq: int) -> pb.Header:
        return pb.Header(messageType=mt, schemaName="s", tableName="t", seqId=seq, gtid="u:1")

    cols = [pb.Column(name="id", originalType="int", isKey=True)]
    dml = pb.Entry(
        header=h(pb.DML, 2),
        event=pb.Event(
            dmlEvent=pb.DMLEvent(
                columns=cols, rows=[pb.RowChange(newColumns=[pb.Data(dataType=pb.INT32, sv="7")])]
            )
        ),
    )
    begin = pb.Entry(header=h(pb.BEGIN, 1), event=pb.Event(beginEvent=pb.BeginEvent()))
    commit = pb.Entry(header=h(pb.COMMIT, 3), event=pb.Event(commitEvent=pb.CommitEvent()))
    done = _run([_tencent([begin, dml, commit])], "tencent_dts_pb")
    assert [dict(e["after"]) for e in done["events"]] == [{"id": "7"}]
    assert done["stats"]["transactions_committed"] == 1
    open_ = _run([_tencent([begin, dml])], "tencent_dts_pb")
    assert not open_["events"] and [c["offset"] for c in open_["carry"]] == [0]


def test_tencent_broken_column_list_quarantines_its_message_and_spares_the_next() -> None:
    """A column list is read as bytes and parsed once per distinct list: a list that does
    not parse (broken bytes, a name not UTF-8) makes its message's Entries invalid, as a
    parse of the whole message would, and the same table's next message decodes."""
    from recon.decode.formats.tencent_dts_pb import _Entries

    cols = [pb.Column(name="id", originalType="int", isKey=True).SerializeToString()]
    row = pb.RowChange(newColumns=[pb.Data(dataType=pb.INT32, sv="7")]).SerializeToString()

    def message(columns: list[bytes]) -> bytes:
        entries = _Entries()
        item = entries.items.add()
        item.header.MergeFrom(type(item.header)(messageType=pb.DML, schemaName="s", tableName="t"))
        item.event.dmlEvent.columns.extend(columns)
        item.event.dmlEvent.rows.add().MergeFromString(row)
        return pb.Envelope(version=1, total=1, data=entries.SerializeToString()).SerializeToString()

    r = _run(
        [message([b"\x0a\x05id"]), message([b"\x0a\x02\xff\xfe"]), message(cols)],
        "tencent_dts_pb",
    )
    assert [q["offset"] for q in r["quarantine"]] == [0, 1]
    assert all(
        q["reason"].startswith("Envelope.data is not a valid Entries message")
        for q in r["quarantine"]
    )
    assert [(e["offset"], dict(e["after"])) for e in r["events"]] == [(2, {"id": "7"})]


def test_tencent_orphan_segment_and_unknown_version_are_quarantined() -> None:
    seg = pb.Envelope(version=1, total=3, index=1, data=b"xx").SerializeToString()
    v2 = pb.Envelope(version=2, total=1, data=b"").SerializeToString()
    r = _run([seg, v2], "tencent_dts_pb")
    reasons = sorted(q["reason"] for q in r["quarantine"])
    assert (
        reasons[0].startswith("orphan segment: segment 1 of 3")
        and "Envelope.version 2" in reasons[1]
    )


# -- TDSQL ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,value",
    [
        ("NULL", None),
        ("null", None),
        ("'NULL'", "NULL"),
        ("'it''s'", "it's"),
        (r"'a\'b\nc\\'", "a'b\nc\\"),
        ('"dq"', "dq"),
        ("X'0AFF'", "Cv8="),
        ("0x0aff", "Cv8="),
        ("b'101'", "BQ=="),
        ("-1.5e3", "-1.5e3"),
        ("'2020-01-02 03:04:05.5'", "2020-01-02 03:04:05.5"),
    ],
)
def test_sql_literals(text: str, value: str | None) -> None:
    assert parse_sql_literal(text)[0] == value


@pytest.mark.parametrize("text", ["'open", "abc", "'a'b'"])
def test_bad_sql_literals_raise(text: str) -> None:
    with pytest.raises(DecodeError):
        parse_sql_literal(text)


def _tdsql(kind: str, gtid: int, **kw: object) -> bytes:
    d = {
        "logtype": "mysqlbinlog",
        "eventtypestr": kind,
        "db": "s",
        "table": "t",
        "gtid": f"0-1-{gtid}",
        "event_index": "4",
    }
    d.update(kw)
    return json.dumps(d).encode()


CTX = DecodeContext(
    tables={"s.t": TableDef(["id", "name"], {"id": "int", "name": "varchar(9)"}, ["id"])}
)


def test_tdsql_update_delete_and_abandoned_transaction() -> None:
    values = [
        _tdsql("gtid", 1),
        _tdsql("insert", 1, field=["1", "'x'"]),  # never committed
        _tdsql("gtid", 2),
        _tdsql("insert", 2, field=["2", "NULL"]),
        _tdsql("update", 2, where=["2", "NULL"], field=["2", "'it''s'"]),
        _tdsql("xid", 2, xid="9"),
        _tdsql("gtid", 3),
        _tdsql("delete", 3, where=["2", "'it''s'"]),
        _tdsql("xid", 3, xid="10"),
        _tdsql("gtid", 4),
        _tdsql("insert", 4, field=["3", "'open'"]),  # open at the end
    ]
    r = _run(values, "tdsql_json", CTX)
    assert [e["op"] for e in r["events"]] == ["insert", "update", "delete"]
    assert dict(r["events"][1]["before"]) == {"id": "2", "name": None}
    assert dict(r["events"][1]["after"]) == {"id": "2", "name": "it's"}
    assert sorted(q["offset"] for q in r["quarantine"]) == [0, 1]
    assert all(q["reason"].startswith("abandoned transaction") for q in r["quarantine"])
    assert [c["offset"] for c in r["carry"]] == [9, 10]
    assert table_rows(fold(r["events"])) == {"s.t": []}


def test_ddl_parsing_tracks_columns() -> None:
    db, tbl, t = parse_create_table(
        "CREATE TABLE `d`.`t` (`id` bigint(20) unsigned NOT NULL, "
        "v decimal(10,2) DEFAULT '0.00', PRIMARY KEY (`id`)) ENGINE=InnoDB"
    )
    assert (db, tbl, t.columns, t.primary_key, t.types["id"]) == (
        "d",
        "t",
        ["id", "v"],
        ["id"],
        "bigint(20) unsigned",
    )
    res = apply_alter_table("ALTER TABLE d.t ADD COLUMN w int AFTER id, DROP COLUMN v", t)
    assert res is not None and res[2].columns == ["id", "w"]
    # no length: the sign still belongs to the type (BIGINT UNSIGNED must not become BIGINT)
    _, _, t2 = parse_create_table("CREATE TABLE t (a BIGINT UNSIGNED, b INT SIGNED, c TEXT)")
    logical = {c: mysql_logical_type(t) for c, t in t2.types.items()}
    assert logical == {"a": "uint64", "b": "int32", "c": "string"}


def test_tdsql_an_unreadable_ddl_is_quarantined_and_its_table_never_guessed() -> None:
    create = "CREATE TABLE s.t (id INT, name VARCHAR(9), PRIMARY KEY (id))"
    values = [
        _tdsql("gtid", 1),
        _tdsql("query", 1, sql=create),
        _tdsql("gtid", 2),
        _tdsql("insert", 2, field=["1", "'a'"]),
        _tdsql("xid", 2, xid="7"),
        _tdsql("gtid", 3),
        _tdsql("query", 3, sql="ALTER TABLE s.t FROBNICATE name"),  # cannot be read
        _tdsql("gtid", 4),
        _tdsql("insert", 4, field=["2", "'b'"]),  # which column is which? unknown now
        _tdsql("xid", 4, xid="8"),
        _tdsql("gtid", 5),  # the table is defined again, columns in another order
        _tdsql("query", 5, sql="CREATE TABLE s.t (name VARCHAR(9), id INT, PRIMARY KEY (id))"),
        _tdsql("gtid", 6),
        _tdsql("insert", 6, field=["'c'", "3"]),
        _tdsql("xid", 6, xid="9"),
    ]
    r = _run(values, "tdsql_json", DecodeContext())
    rows = [dict(e["after"]) for e in r["events"] if e["op"] == "insert"]
    assert rows == [{"id": "1", "name": "a"}, {"name": "c", "id": "3"}]
    q = sorted(r["quarantine"], key=lambda x: x["offset"])
    assert [x["offset"] for x in q] == [6, 8]
    assert q[0]["reason"].startswith("unreadable DDL of s.t: cannot read `FROBNICATE name`")
    assert q[0]["ddl"] == "ALTER TABLE s.t FROBNICATE name"  # the decode stage folds it
    assert "columns of s.t are unknown" in q[1]["reason"]
    assert r["stats"]["ddl_unreadable"] == 1 and r["carry"] == []
    # the decode stage keeps the table unreadable into the next hour, until it is defined again
    ddls = [("s", "t", create), ("s", "t", "ALTER TABLE s.t FROBNICATE name")]
    assert fold_ddl({}, ddls)["s.t"].unreadable
    assert not fold_ddl({}, [*ddls, ("s", "t", create)])["s.t"].unreadable


# -- Debezium / dtle --------------------------------------------------------------------------
def _dbz(op: str, before: dict | None, after: dict | None, **source: object) -> bytes:
    src = {"db": "s", "table": "t", "file": "bin.000001", "pos": 10, "row": 0}
    src.update(source)
    return json.dumps(
        {"schema": None, "payload": {"op": op, "before": before, "after": after, "source": src}}
    ).encode()


def test_dtle_tombstone_snapshot_flag_and_pk_change() -> None:
    values = [
        _dbz("c", None, {"id": 1, "v": "a"}, snapshot=True, file="", pos=0),
        _dbz("u", {"id": 1, "v": "a"}, {"id": 2, "v": "b"}, pos=20),  # dtle: one u moves the key
        json.dumps({"schema": None, "payload": None}).encode(),
        None,
    ]
    r = _run(values, "debezium_json", DecodeContext(primary_keys={"s.t": ["id"]}))
    assert [e["op"] for e in r["events"]] == ["snapshot", "update"]
    assert r["stats"]["tombstones"] == 2 and not r["quarantine"]
    assert table_rows(fold(r["events"])) == {"s.t": [{"id": "2", "v": "b"}]}


def test_debezium_table_from_topic_when_source_names_none() -> None:
    msg = json.dumps({"op": "c", "after": {"id": 1}, "source": {}}).encode()
    r = _run([msg], "debezium_json")
    assert (r["events"][0]["db"], r["events"][0]["tbl"]) == ("shop", "t")


def test_debezium_source_names_that_are_not_strings_quarantine_their_record() -> None:
    """A `source.db` or `source.table` that is not a string is damage: its record is
    quarantined (before, the event's Arrow column failed the decode task's whole batch)."""
    for source in ({"db": 5, "table": "t"}, {"db": "s", "table": ["t"]}):
        msg = json.dumps({"op": "c", "after": {"id": 1}, "source": source}).encode()
        r = _run([msg], "debezium_json")
        assert not r["events"] and "is not a string" in r["quarantine"][0]["reason"]


# -- DataWorks --------------------------------------------------------------------------------
def _dw(op: str, seq: str | None, before: dict | None = None, after: dict | None = None) -> bytes:
    return json.dumps(
        {
            "schema": {
                "dataColumn": [
                    {"name": "id", "type": "LONG"},
                    {"name": "v", "type": "STRING"},
                    {"name": "d", "type": "DATE"},
                ],
                "primaryKey": ["id"],
                "source": {"dbName": "s", "tableName": "t"},
            },
            "payload": {
                "op": op,
                "sequenceId": seq,
                "timestamp": {"eventTime": 1},
                "before": {"dataColumn": before} if before else None,
                "after": {"dataColumn": after} if after else None,
            },
        }
    ).encode()


def test_dataworks_sequence_id_is_compared_as_a_number_and_pairs_join() -> None:
    values = [
        _dw("UPDATE_BEFOR", "1000", before={"id": 1, "v": "b", "d": 0}),
        _dw("UPDATE_AFTER", "1000", after={"id": 1, "v": "c", "d": 86400000}),
        _dw("INSERT", "999", after={"id": 1, "v": "b", "d": 0}),  # older, though later in Kafka
        _dw("MHEARTBEAT", None),
        _dw("UPDATE_BEFOR", "1001", before={"id": 1, "v": "c", "d": 0}),  # its AFTER is next hour
    ]
    r = _run(values, "dataworks_json")
    upd = [e for e in r["events"] if e["op"] == "update"]
    assert len(upd) == 1 and dict(upd[0]["before"])["v"] == "b"
    assert dict(upd[0]["after"])["d"] == "1970-01-02T00:00:00Z"
    assert r["stats"]["heartbeats"] == 1 and [c["offset"] for c in r["carry"]] == [4]
    assert table_rows(fold(r["events"]))["s.t"] == [
        {"id": "1", "v": "c", "d": "1970-01-02T00:00:00Z"}
    ]


def test_a_dataworks_befor_its_partition_went_past_is_applied_as_the_removal_of_its_key() -> None:
    befor = _dw("UPDATE_BEFOR", "2000", before={"id": 7, "v": "x", "d": 0})
    fresh = _run([befor], "dataworks_json")
    assert [c["offset"] for c in fresh["carry"]] == [0] and not fresh["events"]
    carried = RawRecord("db1.shop.t", 0, 0, None, befor, 0, carried=True)
    assert [r["kind"] for r in decode_records([carried], "dataworks_json").to_pylist()].count(
        "carry"
    ) == 1  # still the partition's last record: its AFTER may come later
    later = _dw("INSERT", "2001", after={"id": 9, "v": "z", "d": 0})
    out = decode_records(
        [carried, RawRecord("db1.shop.t", 0, 1, None, later, 0)], "dataworks_json"
    ).to_pylist()
    (ev,) = [r for r in out if r["kind"] == "event" and r["op"] == "delete"]
    assert dict(ev["before"])["id"] == "7" and ev["after"] is None
    assert not [r for r in out if r["kind"] == "carry"]
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert stats["update_befor_applied_alone"] == 1 and stats["records_consumed"] == 2
    # ordered just before its AFTER: the same sequenceId, flag 0 against the AFTER's 1
    after = _run([_dw("UPDATE_AFTER", "2000", after={"id": 8, "v": "y", "d": 0})], "dataworks_json")
    assert ev["order_key"] < after["events"][0]["order_key"]
    assert ev["order_key"][:16] == after["events"][0]["order_key"][:16]


def test_dataworks_values_keep_their_json_type_and_a_schema_read_once_is_not_shared() -> None:
    """The decoder reads a table's column list once (the messages repeat it): a column one
    message adds without declaring it must not leak into the next message's types, and a
    DATE column's integer is epoch ms, its string, boolean or float is kept as its text."""
    values = [
        _dw("INSERT", "1", after={"id": 1, "v": "a", "d": 1500, "extra": 5}),
        _dw("INSERT", "2", after={"id": 2, "v": "b", "d": "1500"}),
        _dw("INSERT", "3", after={"id": 3, "v": None, "d": True}),
        _dw("INSERT", "4", after={"id": 4, "v": {"x": [1, 2.5]}, "d": 2.5}),
        _dw("INSERT", "5", after={"id": 5, "v": "c", "d": 1500}),
    ]
    events = _run(values, "dataworks_json")["events"]
    types = [dict(e["types"]) for e in events]
    assert types[0] == {"id": "int64", "v": "string", "d": "timestamp", "extra": "int64"}
    assert all("extra" not in t for t in types[1:]), types
    after = [dict(e["after"]) for e in events]
    assert [a["d"] for a in after] == [
        "1970-01-01T00:00:01.500000Z", "1500", "true", "2.5", "1970-01-01T00:00:01.500000Z"
    ]  # fmt: skip
    assert after[2]["v"] is None and after[3]["v"] == '{"x":[1,2.5]}'


def test_a_boolean_event_time_is_no_time() -> None:
    """JSON's `true` is an int to Python but not to the Arrow column: an event time of `true`
    (DataWorks, Canal flat) reads as no time, as a string there does. Before, it failed the
    decode task's whole batch; `i64` now refuses a boolean (its record is quarantined)."""
    dw = json.loads(_dw("INSERT", "1", after={"id": 1, "v": "a", "d": 0}))
    dw["payload"]["timestamp"]["eventTime"] = True
    r = _run([json.dumps(dw).encode()], "dataworks_json")
    assert [e["event_time_ms"] for e in r["events"]] == [None] and not r["quarantine"]
    canal = {"database": "s", "table": "t", "type": "INSERT", "es": True, "pkNames": ["id"],
             "data": [{"id": "1"}], "mysqlType": {"id": "int"}}  # fmt: skip
    r = _run([json.dumps(canal).encode()], "canal_json")
    assert [e["event_time_ms"] for e in r["events"]] == [None] and not r["quarantine"]
    with pytest.raises(DecodeError, match="eventTime true is not a number"):
        i64(True, "eventTime")  # type: ignore[arg-type]


# -- Canal flat -------------------------------------------------------------------------------
def test_canal_flat_update_before_is_data_overlaid_with_old_and_binary_is_latin1() -> None:
    msg = {
        "database": "s",
        "table": "t",
        "type": "UPDATE",
        "isDdl": False,
        "pkNames": ["id"],
        "mysqlType": {"id": "int", "v": "varchar(5)", "b": "blob"},
        "sqlType": {"id": 4, "v": 12, "b": 2004},
        "data": [{"id": "1", "v": "new", "b": "\u00ff\u0000"}],
        "old": [{"v": "old"}],
    }
    r = _run([json.dumps(msg).encode()], "canal_json")
    (ev,) = r["events"]
    assert dict(ev["before"]) == {"id": "1", "v": "old", "b": "/wA="}
    assert dict(ev["after"]) == {"id": "1", "v": "new", "b": "/wA="}


def test_a_quarantined_record_is_never_also_carried() -> None:
    # an open transaction at the end of the hour whose DML cannot be decoded (TDSQL without
    # column names): the bad records are quarantined once, and only the rest is carried
    from recon.demo import sample
    from recon.demo.demo import DEMO_START

    txns = sample.workload(DEMO_START, 1, txns_per_hour=4, seed=5)
    recs = sample.to_records(sample.encode_tdsql(txns), "t")
    last_xid = max(r.offset for r in recs if b'"eventtypestr":"xid"' in (r.value or b""))
    out = decode_records([r for r in recs if r.offset != last_xid], "tdsql_json").to_pylist()
    quarantined = {r["offset"] for r in out if r["kind"] == "quarantine"}
    carried = {r["offset"] for r in out if r["kind"] == "carry"}
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert quarantined and carried and not quarantined & carried
    assert stats["carry_skipped_quarantined"] > 0  # without the guard these were carried too


def test_years_before_1000_keep_four_digits() -> None:
    from datetime import UTC, date, datetime, timedelta

    from recon.core.values import (
        date_from_days,
        datetime_from_epoch_us,
        normalize_datetime_text,
        parse_timestamp_text,
        timestamp_utc,
    )
    from recon.publish.export import render_value

    days = (date(999, 1, 2) - date(1970, 1, 1)).days
    assert date_from_days(days) == "0999-01-02"
    us = (datetime(5, 6, 7, 8, 9, 10, 500) - datetime(1970, 1, 1)) // timedelta(microseconds=1)
    assert datetime_from_epoch_us(us) == "0005-06-07 08:09:10.000500"
    assert timestamp_utc(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00Z"
    assert parse_timestamp_text("0999-01-01 00:00:00 +01:00") == "0998-12-31T23:00:00Z"
    assert normalize_datetime_text("0999-01-01T01:02:03.5") == "0999-01-01 01:02:03.500000"
    assert render_value(date(12, 3, 4)) == "0012-03-04"
    assert render_value(datetime(999, 1, 1, 1, 2, 3)) == "0999-01-01 01:02:03"


def test_an_absurd_decimal_scale_is_quarantined_not_computed() -> None:
    """Issue 12 item 12: scale 10^9 once made one record take hours (a billion-digit string);
    the scale is refused before any digit is written."""
    dec = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "field": "v"}
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "field": "after", "fields": [{"type": "int32", "field": "id"}, dec]}
        ],
    }
    payload = {
        "op": "c",
        "before": None,
        "after": {"id": 1, "v": {"scale": 10**9, "value": "AQ=="}},
        "source": {"db": "s", "table": "t", "file": "bin.000001", "pos": 10, "row": 0},
    }
    r = _run([json.dumps({"schema": schema, "payload": payload}).encode()], "debezium_json")
    (q,) = r["quarantine"]
    assert "decimal scale 1000000000 is out of range" in q["reason"] and not r["events"]


def test_debezium_schema_defaults_are_read_as_values_and_current_timestamp_is_not() -> None:
    """Issue 16: a column's `default` in the message schema is what rows that predate the column
    read; it is decoded like a value (a Decimal default is base64 two's complement). The epoch
    zero the connector writes for DEFAULT CURRENT_TIMESTAMP is not a default."""
    amount = {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2"},
        "default": "AfQ=",  # 5.00
        "field": "amount",
    }
    fields = [
        {"type": "int32", "field": "id"},
        {"type": "int32", "optional": False, "default": 7, "field": "n"},
        {"type": "string", "default": "x", "field": "s"},
        {"type": "string", "field": "plain"},
        amount,
        {
            "type": "string",
            "name": "io.debezium.time.ZonedTimestamp",
            "field": "ts",
            "default": "1970-01-01T00:00:00Z",
        },
    ]
    schema = {"type": "struct", "fields": [{"type": "struct", "field": "after", "fields": fields}]}
    after = {"id": 1, "n": 3, "s": "y", "plain": None, "amount": "AfQ=", "ts": None}
    payload = {"op": "c", "before": None, "after": after, "source": {"db": "s", "table": "t"}}
    r = _run([json.dumps({"schema": schema, "payload": payload}).encode()], "debezium_json")
    (ev,) = r["events"]
    assert dict(ev["defaults"]) == {"n": "7", "s": "x", "amount": "5.00"}
    assert dict(ev["after"])["amount"] == "5.00"


# -- decode speed paths: the same events as the general path ----------------------------------
_DBZ_FIELDS = [
    {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2"},
    },
    {"type": "int32", "name": "io.debezium.time.Date"},
    {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"type": "int64", "name": "io.debezium.time.Timestamp"},
    {"type": "int64", "name": "io.debezium.time.MicroTime"},
    {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
    {"type": "struct", "name": "io.debezium.data.geometry.Point"},
    {"type": "string", "name": "io.debezium.data.Json"},
    {"type": "int64", "parameters": {"__debezium.source.column.type": "BIGINT UNSIGNED"}},
    {"type": "int64"},
    {"type": "int32"},
    {"type": "string"},
    {"type": "double"},
    {"type": "boolean"},
]
_DBZ_VALUES = [None, "abc", "AQI=", "2021-05-17T07:22:42Z", 0, 5, -3, -(2**63), 2**40, 1.5, True,
               {"wkb": "AAE=", "srid": None}, {"scale": 2, "value": "AQ=="}, [1, 2], {"a": 1}]  # fmt: skip


@pytest.mark.parametrize("field", _DBZ_FIELDS, ids=lambda f: f.get("name") or f["type"])
def test_debezium_per_field_converters_equal_the_general_conversion(field: dict) -> None:
    """Each schema field's converter (its short paths for strings and ints) gives what the
    general `_convert` gives, or fails the same way, for every kind of JSON value; a field
    said to keep strings as they are (the decoder then skips its converter) does."""
    from recon.decode.formats.debezium_json import _convert, _converter, _field_type

    lt, f = _field_type(field)
    conv, plain = _converter(lt, f)
    for v in _DBZ_VALUES:
        try:
            want: object = _convert(v, lt, f)
        except Exception as err:  # noqa: BLE001 - the failure must be the same too
            want = type(err)
        if plain and type(v) is str:
            assert want == v, (field, v)
        try:
            got: object = conv(v)
        except Exception as err:  # noqa: BLE001
            got = type(err)
        assert got == want, (field, v)


def test_debezium_messages_with_other_schemas_for_the_same_columns_are_typed_by_their_own() -> None:
    """The field types are read once per schema text: a message whose schema states other types
    for the same columns is typed by its own schema, not the first one's."""

    def msg(amount_field: dict, amount: object) -> bytes:
        fields = [{"field": "id", "type": "int64"}, {"field": "amount", **amount_field}]
        schema = {"type": "struct", "fields": [
            {"field": "before", "type": "struct", "optional": True, "fields": fields},
            {"field": "after", "type": "struct", "optional": True, "fields": fields},
        ]}  # fmt: skip
        payload = {"before": None, "after": {"id": 1, "amount": amount}, "op": "c",
                   "source": {"db": "shop", "table": "t", "ts_ms": 1}, "ts_ms": 1}  # fmt: skip
        return json.dumps({"schema": schema, "payload": payload}).encode()

    dec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
           "parameters": {"scale": "2"}}  # fmt: skip
    out = _run(
        [msg(dec, "AQI="), msg({"type": "string"}, "AQI="), msg(dec, "AQI=")], "debezium_json"
    )
    got = [(dict(e["types"])["amount"], dict(e["after"])["amount"]) for e in out["events"]]
    assert got == [("decimal(65,2)", "2.58"), ("string", "AQI="), ("decimal(65,2)", "2.58")]

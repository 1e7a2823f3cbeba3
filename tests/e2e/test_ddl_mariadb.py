"""The DDL reader against a real MariaDB (issue 15): random CREATE TABLE and ALTER TABLE
sequences run on a throwaway server and through `recon.core.ddl`; after every statement the
server accepted, the reader's columns (in order), their logical types and the primary key equal
what `information_schema` says. A statement the server refuses is never in a binlog, so the
reader does not see it either."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recon.core.ddl import apply_alter_table, parse_create_table
from recon.core.sqlddl import TableDef
from recon.core.values import mysql_logical_type
from tests.support import mariadb_source as mdb

NAMES = ["a", "b", "c", "d", "e", "f", "g h", "select"]
TYPES = [
    "INT",
    "BIGINT UNSIGNED",
    "TINYINT(1)",
    "VARCHAR(10)",
    "DECIMAL(8,2)",
    "DATETIME(3)",
    "DATE",
    "TEXT",
    "DOUBLE",
    "REAL",
    "ENUM('x','y')",
    "POINT",
    "INT ZEROFILL",
]
EXTRAS = ["", " NOT NULL", " DEFAULT NULL", " COMMENT 'it''s, (x'", " /* a, b */", " NULL"]


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = mdb.MariaDB(tmp_path_factory.mktemp("ddl") / "server").start()
    c = server.connect()
    with c.cursor() as cur:
        cur.execute("CREATE DATABASE p")
        cur.execute("USE p")
    yield c
    c.close()
    server.stop()


def q(name: str) -> str:
    return f"`{name}`" if not name.isalnum() or name == "select" else name


def _server(cur: Any) -> tuple[list[str], list[str], list[str]]:
    cur.execute(
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = 'p' AND TABLE_NAME = 't' ORDER BY ORDINAL_POSITION"
    )
    rows = cur.fetchall()
    cur.execute(
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'p' "
        "AND TABLE_NAME = 't' AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION"
    )
    pk = [r[0] for r in cur.fetchall()]
    return [r[0] for r in rows], [mysql_logical_type(r[1]) for r in rows], pk


def _same(cur: Any, tdef: TableDef, statement: str) -> None:
    cols, types, pk = _server(cur)
    ours = [mysql_logical_type(tdef.types[c]) for c in tdef.columns]
    assert (tdef.columns, ours, tdef.primary_key) == (cols, types, pk), statement


@st.composite
def create_table(draw: st.DrawFn) -> str:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    parts = [f"{q(n)} {draw(st.sampled_from(TYPES))}{draw(st.sampled_from(EXTRAS))}" for n in names]
    keyable = [n for n, p in zip(names, parts, strict=True) if "TEXT" not in p and "POINT" not in p]
    if keyable and draw(st.booleans()):
        pk = draw(st.lists(st.sampled_from(keyable), min_size=1, max_size=2, unique=True))
        parts.append(f"PRIMARY KEY ({', '.join(q(n) for n in pk)})")
    return f"CREATE TABLE t ({', '.join(parts)}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


def _position(draw: st.DrawFn, cols: list[str]) -> str:
    choice = draw(st.sampled_from(["", "first", "after"]))
    if choice == "first":
        return " FIRST"
    if choice == "after" and cols:
        return f" AFTER {q(draw(st.sampled_from(cols)))}"
    return ""


def _alter(draw: st.DrawFn, cols: list[str]) -> str:
    col = draw(st.sampled_from(cols)) if cols else "a"
    other = draw(st.sampled_from(NAMES))
    typ = draw(st.sampled_from(TYPES))
    kw = draw(st.sampled_from(["", "COLUMN "]))
    forms = [
        f"ADD {kw}{q(other)} {typ}{_position(draw, cols)}",
        f"ADD COLUMN IF NOT EXISTS {q(other)} {typ}{_position(draw, cols)}",
        f"ADD COLUMN ({q(other)} {typ})",
        f"DROP {kw}{q(col)}",
        f"DROP COLUMN IF EXISTS {q(other)}",
        f"MODIFY {kw}{q(col)} {typ}{_position(draw, [c for c in cols if c != col])}",
        f"MODIFY COLUMN IF EXISTS {q(other)} {typ}",
        f"CHANGE {kw}{q(col)} {q(other)} {typ}{_position(draw, [c for c in cols if c != col])}",
        f"CHANGE COLUMN IF EXISTS {q(other)} {q(other)} {typ}",
        f"RENAME COLUMN {q(col)} TO {q(other)}",
        "DROP PRIMARY KEY",
        f"DROP PRIMARY KEY, ADD PRIMARY KEY ({q(col)})",
        f"ADD PRIMARY KEY ({q(col)})",
        f"ADD INDEX i{draw(st.integers(0, 9))} ({q(col)}), ALGORITHM=COPY",
    ]
    return "ALTER TABLE t " + draw(st.sampled_from(forms))


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same 100 sequences on every run (CI); more were run while writing it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_reader_agrees_with_mariadb(conn: Any, data: st.DataObject) -> None:
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS t")
        create = data.draw(create_table(), label="create")
        cur.execute(create)
        _, _, tdef = parse_create_table(create)
        _same(cur, tdef, create)
        for _ in range(data.draw(st.integers(1, 8), label="n")):
            alter = data.draw(st.composite(lambda d: _alter(d, tdef.columns))(), label="alter")
            try:
                cur.execute(alter)
            except pymysql.MySQLError:
                continue  # refused by the server: never in a binlog
            got = apply_alter_table(alter, tdef)
            assert got is not None
            tdef = got[2]
            _same(cur, tdef, alter)

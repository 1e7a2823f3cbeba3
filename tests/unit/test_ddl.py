"""DDL as typed, read by sqlglot's MySQL dialect into the project's table model (issue 15).

The first six cases are the ones the hand-written parser got wrong (checked against it before
the switch): an escaped quote in a comment, a comment with a comma, RENAME COLUMN, a replaced
primary key, MariaDB's ADD COLUMN IF NOT EXISTS, and MODIFY/CHANGE with a position."""

from __future__ import annotations

import pytest

from recon.core.ddl import DdlError, apply_alter_table, ddl_target, parse_create_table
from recon.core.schema import TableSchema, canonical_default
from recon.core.sqlddl import TableDef


def _def(cols: str, pk: str = "a") -> TableDef:
    names = cols.split()
    return TableDef(names, dict.fromkeys(names, "int"), pk.split())


def _alter(sql: str, tdef: TableDef) -> TableDef:
    got = apply_alter_table(sql, tdef)
    assert got is not None
    return got[2]


def test_an_escaped_quote_in_a_comment_keeps_the_primary_key() -> None:
    db, tbl, t = parse_create_table(
        "CREATE TABLE t (id INT, note VARCHAR(20) COMMENT 'it\\'s, (x', PRIMARY KEY (id))"
    )
    assert (db, tbl, t.columns, t.primary_key) == (None, "t", ["id", "note"], ["id"])
    assert t.types == {"id": "int", "note": "varchar(20)"}


def test_a_comment_with_a_comma_is_not_a_column() -> None:
    _, _, t = parse_create_table("CREATE TABLE s.t (id INT /* key, part */, b INT)")
    assert t.columns == ["id", "b"]


def test_rename_column() -> None:
    t = _alter("ALTER TABLE t RENAME COLUMN b TO bb", _def("a b c", "a b"))
    assert (t.columns, t.primary_key, t.types["bb"]) == (["a", "bb", "c"], ["a", "bb"], "int")


def test_primary_key_replaced() -> None:
    t = _alter("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b)", _def("a b c"))
    assert t.primary_key == ["a", "b"]
    t = _alter("ALTER TABLE t DROP PRIMARY KEY", _def("a b c"))
    assert t.primary_key == []
    t = _alter("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (c)", _def("a b c", ""))
    assert t.primary_key == ["c"]


def test_add_column_if_not_exists() -> None:
    t = _alter("ALTER TABLE t ADD COLUMN IF NOT EXISTS d INT", _def("a b"))
    assert t.columns == ["a", "b", "d"] and "IF" not in t.types
    t = _alter("ALTER TABLE t ADD COLUMN IF NOT EXISTS b TEXT", _def("a b"))
    assert (t.columns, t.types["b"]) == (["a", "b"], "int")


@pytest.mark.parametrize(
    ("sql", "columns", "type_of"),
    [
        (
            "ALTER TABLE t MODIFY b BIGINT UNSIGNED AFTER c",
            ["a", "c", "b"],
            ("b", "bigint unsigned"),
        ),
        ("ALTER TABLE t MODIFY COLUMN c INT FIRST", ["c", "a", "b"], ("c", "int")),
        ("ALTER TABLE t CHANGE b bb BIGINT AFTER c", ["a", "c", "bb"], ("bb", "bigint")),
        ("ALTER TABLE t CHANGE COLUMN a a2 TEXT FIRST", ["a2", "b", "c"], ("a2", "text")),
        ("ALTER TABLE t ADD d INT NOT NULL DEFAULT 0 AFTER a", ["a", "d", "b", "c"], ("d", "int")),
        ("ALTER TABLE t ADD COLUMN d POINT FIRST", ["d", "a", "b", "c"], ("d", "geometry")),
        ("ALTER TABLE t ADD COLUMN (x INT, y TEXT)", ["a", "b", "c", "x", "y"], ("y", "text")),
        ("ALTER TABLE t DROP COLUMN b, ADD e INT AFTER a", ["a", "e", "c"], ("e", "int")),
        ("ALTER TABLE t DROP COLUMN IF EXISTS zz", ["a", "b", "c"], ("a", "int")),
        ("ALTER TABLE t MODIFY COLUMN IF EXISTS zz INT FIRST", ["a", "b", "c"], ("a", "int")),
        ("ALTER TABLE t CHANGE COLUMN IF EXISTS b q INT FIRST", ["q", "a", "c"], ("q", "int")),
        ("ALTER TABLE t RENAME COLUMN IF EXISTS zz TO y", ["a", "b", "c"], ("a", "int")),
    ],
)
def test_column_order_after_every_alter_form(
    sql: str, columns: list[str], type_of: tuple[str, str]
) -> None:
    t = _alter(sql, _def("a b c"))
    assert t.columns == columns and t.types[type_of[0]] == type_of[1]
    assert set(t.types) == set(t.columns)


def test_clauses_that_do_not_touch_columns_change_nothing() -> None:
    before = _def("a b c")
    for sql in (
        "ALTER TABLE t ADD INDEX i (b), ALGORITHM=INPLACE, LOCK=NONE",
        "ALTER TABLE t ENGINE=InnoDB, COMMENT='x, y'",
        "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (x)",
        "ALTER TABLE t DROP FOREIGN KEY fk, DROP INDEX i",
        "ALTER TABLE t ALTER COLUMN a SET DEFAULT 3",
        "ALTER TABLE t RENAME TO u",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
    ):
        t = _alter(sql, before)
        assert (t.columns, t.primary_key) == (before.columns, before.primary_key), sql


def test_create_table_reads_types_keys_and_ignores_table_options() -> None:
    _, _, t = parse_create_table(
        "CREATE TABLE IF NOT EXISTS `s`.`t` (`a b` INT ZEROFILL, b VARCHAR(10) CHARACTER SET "
        "utf8mb4, g POINT, r REAL, s SERIAL, d DECIMAL(12,2) UNSIGNED, e ENUM('x','y'), "
        "PRIMARY KEY (b(5), `a b` DESC), KEY k (b)) ENGINE=InnoDB PARTITION BY HASH(s) PARTITIONS 4"
    )
    assert t.columns == ["a b", "b", "g", "r", "s", "d", "e"]
    assert t.primary_key == ["b", "a b"]
    assert t.types["a b"] == "int unsigned"  # ZEROFILL implies UNSIGNED
    assert (t.types["g"], t.types["r"], t.types["s"]) == ("geometry", "double", "bigint unsigned")
    assert t.types["d"] == "decimal(12, 2) unsigned"
    assert ddl_target("CREATE TABLE `s`.`t` (a INT)") is not None


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t FROBNICATE a",
        "ALTER TABLE t MODIFY zz INT",  # a column the definition in force does not have
        "ALTER TABLE t ADD COLUMN x INT AFTER zz",
        "ALTER TABLE t DROP COLUMN zz",
        "ALTER TABLE t RENAME COLUMN zz TO y",
        "ALTER TABLE t ADD PRIMARY KEY (zz)",
    ],
)
def test_what_cannot_be_read_is_refused_not_guessed(sql: str) -> None:
    with pytest.raises(DdlError):
        apply_alter_table(sql, _def("a b c"))


def test_create_table_like_or_select_is_refused() -> None:
    for sql in ("CREATE TABLE t LIKE u", "CREATE TABLE t AS SELECT * FROM u"):
        with pytest.raises(DdlError, match="`ddl:`"):
            parse_create_table(sql)
    with pytest.raises(ValueError, match="not a CREATE TABLE"):
        parse_create_table("DROP TABLE t")
    assert apply_alter_table("CREATE INDEX i ON t (a)", _def("a")) is None
    assert ddl_target("DROP TABLE t") is None


def test_an_added_column_records_what_existing_rows_read() -> None:
    _, _, t = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    sql = (
        "ALTER TABLE t ADD COLUMN b INT NOT NULL DEFAULT -3, ADD c VARCHAR(4) NOT NULL, "
        "ADD d ENUM('x','y') NOT NULL, ADD e DATE NOT NULL, ADD f INT, ADD g INT DEFAULT NULL, "
        "ADD h DECIMAL(5,2) DEFAULT 1.5, ADD i DATETIME DEFAULT CURRENT_TIMESTAMP, "
        "RENAME COLUMN a TO a2, CHANGE a2 a3 BIGINT"
    )
    got = apply_alter_table(sql, t)
    assert got is not None
    new = got[2]
    assert new.defaults == {"b": "-3", "c": "", "d": "x", "e": "0000-00-00", "h": "1.5"}
    assert new.unknown_defaults == {"i": "CURRENT_TIMESTAMP()"}
    assert new.renames == {"a": "a3"}
    assert new.columns[:2] == ["id", "a3"]


def test_the_schema_follows_renames_and_drops_and_keeps_its_first_logical_type() -> None:
    s = TableSchema("db.t", [("id", "int32"), ("a", "uint64"), ("b", "int32")], ["id"])
    assert not s.observe(["a"], {"a": "decimal(20,0)"}, "images")  # same published type
    assert s.logical("a") == "uint64"
    assert s.retype("b", "int64", "DDL") and s.logical("b") == "int64"
    assert not s.observe(["b"], {"b": "int32"}, "older images")  # fits the wider type
    assert not any("conflict" in h["change"] for h in s.history)
    assert s.rename("a", "a2", "DDL") and s.former == {"a": "a2"}
    assert s.drop("b", "DDL") and s.dropped == ["b"] and s.logical("b") is None
    assert not s.drop("id", "DDL")  # a key column stays
    assert s.observe(["b"], {"b": "int32"}, "DDL") and s.dropped == []  # a new column b
    assert canonical_default("1.5", "decimal(5,2)") == "1.50"
    assert canonical_default("7", "int32") == "7" and canonical_default("x", "int32") is None
    assert canonical_default("2020-01-02", "datetime") == "2020-01-02 00:00:00"

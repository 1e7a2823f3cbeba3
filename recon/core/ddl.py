"""MySQL/MariaDB DDL read through sqlglot's MySQL dialect, into the project's `TableDef`.

Binlog Query events carry DDL exactly as a person typed it (comments, escaped quotes, backticks,
MariaDB's `IF [NOT] EXISTS`), and for positional formats (TDSQL) the column order a DDL implies
decides which value lands in which column. So a statement is either read whole or refused with
`DdlError`: never guessed.

sqlglot's tokenizer splits a statement into its clauses (so table options, partitioning and
index clauses that do not touch columns never need parsing), and its parser reads every clause
that changes columns or the primary key. A few forms MySQL and MariaDB accept and sqlglot 30 does
not are rewritten on the token stream first, without changing their meaning: spatial types
(POINT, ...) read as GEOMETRY, REAL as DOUBLE (MySQL's default), SERIAL as BIGINT UNSIGNED,
key-part prefix lengths and ASC/DESC dropped from key column lists, and MariaDB's
`MODIFY|CHANGE [COLUMN] IF EXISTS` (the flag is kept apart).

Not tracked (readable, but they do not change a table's columns): indexes, foreign keys,
checks, table options, partitioning, `ALTER COLUMN ... SET DEFAULT`, table renames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from recon.core.sqlddl import TableDef
from recon.errors import shortened


class DdlError(ValueError):
    """A CREATE/ALTER TABLE that changes a table's columns but cannot be read: never guessed."""


_DIALECT = MySQL()
_SPATIAL = {
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
    "GEOMCOLLECTION",
}
_TYPE_REWRITES = {**{t: "GEOMETRY" for t in _SPATIAL}, "REAL": "DOUBLE"}
_KEY_WORDS = {
    "PRIMARY KEY",
    "KEY",
    "INDEX",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "FOREIGN",
    "FOREIGN KEY",
}
# ALTER actions that never change columns or the primary key (first words, upper case)
_NO_COLUMN_CHANGE = {
    "ALGORITHM",
    "LOCK",
    "ENGINE",
    "DEFAULT",
    "CHARACTER",
    "CHARSET",
    "CHARACTER SET",
    "COLLATE",
    "CONVERT",
    "COMMENT",
    "AUTO_INCREMENT",
    "ROW_FORMAT",
    "FORCE",
    "ORDER",
    "ORDER BY",
    "ENABLE",
    "DISABLE",
    "DISCARD",
    "IMPORT",
    "KEY_BLOCK_SIZE",
    "STATS_PERSISTENT",
    "PACK_KEYS",
    "CHECKSUM",
    "MAX_ROWS",
    "MIN_ROWS",
    "COALESCE",
    "REORGANIZE",
    "EXCHANGE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "REMOVE",
    "TRUNCATE",
    "PARTITION",
    "PARTITION BY",
    "WITH",
    "WITHOUT",
    "VALIDATION",
}


@dataclass(frozen=True)
class Target:
    """The table a CREATE/ALTER TABLE statement names."""

    db: str | None
    table: str


def _tokens(sql: str) -> list[Token]:
    try:
        return list(_DIALECT.tokenize(sql))
    except SqlglotError as err:
        raise DdlError(f"cannot tokenize the statement: {_first_line(err)}") from None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def _word(t: Token) -> str:
    return t.text.upper()


def _statement(tokens: list[Token]) -> tuple[str, int] | None:
    """("create" | "alter", index of the token after TABLE), or None for other statements."""
    words = [_word(t) for t in tokens[:4]]
    if words[:1] == ["CREATE"]:
        rest = words[1:]
        if rest[:1] == ["TEMPORARY"]:
            rest = rest[1:]
        if rest[:1] == ["TABLE"]:
            return "create", len(words) - len(rest) + 1
        return None
    if words[:1] == ["ALTER"]:
        i = 1
        while i < len(tokens) and _word(tokens[i]) in ("ONLINE", "IGNORE"):
            i += 1
        if i < len(tokens) and _word(tokens[i]) == "TABLE":
            return "alter", i + 1
    return None


def _table_name(tokens: list[Token], i: int) -> tuple[Target, int]:
    """The `[db.]table` at `i` (after an optional IF NOT EXISTS); the index after it."""
    if [_word(t) for t in tokens[i : i + 3]] == ["IF", "NOT", "EXISTS"]:
        i += 3
    if i >= len(tokens):
        raise DdlError("no table name")
    if i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
        return Target(tokens[i].text, tokens[i + 2].text), i + 3
    return Target(None, tokens[i].text), i + 1


def ddl_target(sql: str) -> Target | None:
    """The table a CREATE/ALTER TABLE names; None for any other statement (or one that does
    not tokenize)."""
    try:
        tokens = _tokens(sql)
    except DdlError:
        return None
    kind = _statement(tokens)
    if kind is None:
        return None
    try:
        return _table_name(tokens, kind[1])[0]
    except DdlError:
        return None


def _closing(tokens: list[Token], i: int) -> int:
    """Index of the R_PAREN matching the L_PAREN at `i`."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    raise DdlError("unbalanced parentheses")


def _split_commas(tokens: list[Token], lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi) cut at commas outside parentheses, as (start, end) token ranges."""
    out, depth, start = [], 0, lo
    for j in range(lo, hi):
        tt = tokens[j].token_type
        if tt == TokenType.L_PAREN:
            depth += 1
        elif tt == TokenType.R_PAREN:
            depth -= 1
        elif tt == TokenType.COMMA and depth == 0:
            out.append((start, j))
            start = j + 1
    if start < hi:
        out.append((start, hi))
    return out


def _normalized(sql: str, tokens: list[Token], lo: int, hi: int) -> str:
    """The source text of tokens[lo:hi] with the rewrites of the module docstring applied."""
    drop: set[int] = set()
    replace: dict[int, str] = {}
    for j in range(lo, hi):
        t = tokens[j]
        prev = tokens[j - 1] if j > lo else None
        if _word(t) in _TYPE_REWRITES and prev is not None and _is_name(prev):
            replace[j] = _TYPE_REWRITES[_word(t)]
        elif _word(t) == "SERIAL" and prev is not None and _is_name(prev):
            replace[j] = "BIGINT UNSIGNED"
        elif _word(t) in _KEY_WORDS and j + 1 < hi:
            drop |= _key_part_extras(tokens, j + 1, hi)
    parts: list[str] = []
    end = tokens[lo].start if lo < hi else 0
    for j in range(lo, hi):
        t = tokens[j]
        parts.append(sql[end : t.start])
        if j not in drop:
            parts.append(replace.get(j, sql[t.start : t.end + 1]))
        end = t.end + 1
    return "".join(parts)


def _is_name(t: Token) -> bool:
    return t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or t.text.startswith("`")


def _key_part_extras(tokens: list[Token], j: int, hi: int) -> set[int]:
    """In the key column list after a key word: prefix lengths `(10)` and ASC/DESC."""
    while j < hi and tokens[j].token_type != TokenType.L_PAREN:
        j += 1  # the key's name, USING BTREE
    if j >= hi:
        return set()
    end = _closing(tokens, j)
    out: set[int] = set()
    for k in range(j + 1, end):
        tt = tokens[k].token_type
        if (
            tt == TokenType.L_PAREN
            and k + 2 < end
            and tokens[k + 2].token_type == TokenType.R_PAREN
        ):
            out |= {k, k + 1, k + 2}
        elif _word(tokens[k]) in ("ASC", "DESC"):
            out.add(k)
    return out


def _parse(text: str) -> exp.Expr:
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except SqlglotError as err:
        raise DdlError(f"cannot read `{shortened(text)}`: {_first_line(err)}") from None
    if isinstance(tree, exp.Command):
        raise DdlError(
            f"cannot read `{shortened(text)}`: not a statement sqlglot's MySQL dialect knows"
        )
    return tree


# -- CREATE TABLE --------------------------------------------------------------------------------
def read_create_table(sql: str) -> tuple[Target, TableDef]:
    """A CREATE TABLE's columns (source order, MySQL type text) and primary key.

    ValueError when the statement is not a CREATE TABLE; DdlError when it is one but cannot be
    read, or takes its columns from elsewhere (LIKE, AS SELECT)."""
    tokens = _tokens(sql)
    kind = _statement(tokens)
    if kind is None or kind[0] != "create":
        raise ValueError("not a CREATE TABLE statement")
    target, i = _table_name(tokens, kind[1])
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        raise DdlError(
            f"CREATE TABLE {target.table} takes its columns from another table or a query "
            "(LIKE / AS SELECT); give the table's `ddl:` in the pipeline config"
        )
    end = _closing(tokens, i)
    head = f"CREATE TABLE t ({_normalized(sql, tokens, i + 1, end)})"
    tree = _parse(head)
    schema = tree.this if isinstance(tree, exp.Create) else None
    if not isinstance(schema, exp.Schema):
        raise DdlError(f"cannot read the columns of CREATE TABLE {target.table}")
    tdef = TableDef()
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            name, mysql_type = _column(item)
            tdef.columns.append(name)
            tdef.types[name] = mysql_type
            _note_default(tdef, item, name, mysql_type)
            if _has_pk_constraint(item) and not tdef.primary_key:
                tdef.primary_key = [name]
        elif (pk := _primary_key(item)) is not None:
            tdef.primary_key = pk
    if not tdef.columns:
        raise DdlError(f"CREATE TABLE {target.table} names no columns")
    return target, tdef


def _column(cd: exp.ColumnDef) -> tuple[str, str]:
    """(name, MySQL type text in lower case, e.g. `bigint unsigned`, `decimal(12, 2)`)."""
    kind = cd.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlError(f"column {cd.name} has no type")
    text = kind.sql(dialect="mysql").lower()
    if any(_is_zerofill(c) for c in cd.args.get("constraints") or []) and "unsigned" not in text:
        text += " unsigned"  # ZEROFILL implies UNSIGNED
    return cd.name, text


_IMPLICIT_DEFAULTS = {
    "date": "0000-00-00",
    "datetime": "0000-00-00 00:00:00",
    "timestamp": "0000-00-00 00:00:00",
    "time": "00:00:00",
    "year": "0000",
}


def column_default(cd: exp.ColumnDef, mysql_type: str) -> tuple[str | None, str | None]:
    """(what existing rows read in a column added with this definition, as SQL value text;
    the default's text when it cannot be evaluated here). A NOT NULL column without DEFAULT
    reads the type's implicit default: 0, '', the zero date, an ENUM's first member."""
    default: Any = None
    not_null = False
    for c in cd.args.get("constraints") or []:
        kind = c.kind if isinstance(c, exp.ColumnConstraint) else None
        if isinstance(kind, exp.DefaultColumnConstraint):
            default = kind.this
        elif isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            not_null = True
    if default is None:
        return (_implicit_default(cd, mysql_type) if not_null else None), None
    if isinstance(default, exp.Null):
        return None, None
    if isinstance(default, exp.Boolean):
        return ("1" if default.this else "0"), None
    neg = isinstance(default, exp.Neg) and isinstance(default.this, exp.Literal)
    lit = default.this if neg else default
    if isinstance(lit, exp.Literal):
        return ("-" if neg else "") + str(lit.this), None
    return None, default.sql(dialect="mysql")


def _implicit_default(cd: exp.ColumnDef, mysql_type: str) -> str:
    kind = cd.args.get("kind")
    base = mysql_type.split("(")[0].split()[0]
    if base == "enum" and isinstance(kind, exp.DataType) and kind.expressions:
        first = kind.expressions[0]
        return str(first.this) if isinstance(first, exp.Literal) else ""
    if base in _IMPLICIT_DEFAULTS:
        return _IMPLICIT_DEFAULTS[base]
    text = ("char", "varchar", "text", "tinytext", "mediumtext", "longtext", "json", "set")
    binary = ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob")
    return "" if base in text or base in binary else "0"


def _note_default(tdef: TableDef, cd: exp.ColumnDef, name: str, mysql_type: str) -> None:
    value, unknown = column_default(cd, mysql_type)
    tdef.defaults.pop(name, None)
    if value is not None:
        tdef.defaults[name] = value
    if unknown is not None:
        tdef.unknown_defaults[name] = unknown


def _is_zerofill(c: Any) -> bool:
    text = c.sql(dialect="mysql", comments=False) if isinstance(c, exp.ColumnConstraint) else ""
    return text.upper() == "ZEROFILL"


def _has_pk_constraint(cd: exp.ColumnDef) -> bool:
    return any(
        isinstance(c, exp.ColumnConstraint) and isinstance(c.kind, exp.PrimaryKeyColumnConstraint)
        for c in cd.args.get("constraints") or []
    )


def _primary_key(item: Any) -> list[str] | None:
    """The columns of a table-level PRIMARY KEY (named by CONSTRAINT or not), else None."""
    if isinstance(item, exp.Constraint):
        for e in item.expressions:
            if isinstance(e, exp.PrimaryKey):
                return _key_names(e)
        return None
    if isinstance(item, exp.PrimaryKey):
        return _key_names(item)
    return None


def _key_names(pk: exp.PrimaryKey) -> list[str]:
    return [e.name for e in pk.expressions]


# -- ALTER TABLE ---------------------------------------------------------------------------------
def read_alter_table(sql: str, tdef: TableDef) -> tuple[Target, TableDef] | None:
    """Apply an ALTER TABLE to a copy of `tdef`, clause by clause in order (as MySQL does).

    None when the statement is not an ALTER TABLE; DdlError when a clause that changes columns
    or the primary key cannot be read, or names a column the definition does not have (the
    definition in force is then not the table's: carrying on would be a guess)."""
    tokens = _tokens(sql)
    kind = _statement(tokens)
    if kind is None or kind[0] != "alter":
        return None
    target, i = _table_name(tokens, kind[1])
    new = TableDef(
        list(tdef.columns), dict(tdef.types), list(tdef.primary_key), dict(tdef.defaults)
    )
    for lo, hi in _split_commas(tokens, i, len(tokens)):
        _alter_action(new, sql, tokens, lo, hi)
    return target, new


def _alter_action(new: TableDef, sql: str, tokens: list[Token], lo: int, hi: int) -> None:
    words = [_word(t) for t in tokens[lo : min(hi, lo + 4)]]
    first = words[0] if words else ""
    if first == "ADD":
        _add_action(new, sql, tokens, lo, hi)
    elif first == "DROP":
        _drop_action(new, sql, tokens, lo, hi)
    elif first in ("MODIFY", "CHANGE"):
        _modify_action(new, sql, tokens, lo, hi)
    elif words[:2] == ["RENAME", "COLUMN"]:
        _apply_parsed(new, _action_tree(sql, tokens, lo, hi))
    elif first in _NO_COLUMN_CHANGE or first in ("ALTER", "RENAME") or first.endswith("="):
        return  # options, indexes, defaults, table renames: the columns stay as they are
    else:
        raise DdlError(f"cannot read `{shortened(_normalized(sql, tokens, lo, hi))}`")


def _add_action(new: TableDef, sql: str, tokens: list[Token], lo: int, hi: int) -> None:
    j = lo + 1
    if j < hi and _word(tokens[j]) == "COLUMN":
        j += 1
    if j < hi and tokens[j].token_type == TokenType.L_PAREN:  # ADD [COLUMN] (a INT, b INT)
        end = _closing(tokens, j)
        for a, b in _split_commas(tokens, j + 1, end):
            text = "ALTER TABLE t ADD COLUMN " + _normalized(sql, tokens, a, b)
            _apply_parsed(new, _parse(text).args.get("actions") or [])
        return
    rest = [_word(t) for t in tokens[lo + 1 : min(hi, lo + 3)]]
    if rest and rest[0] == "CONSTRAINT":
        if "PRIMARY KEY" not in {_word(t) for t in tokens[lo:hi]}:
            return  # a named foreign key, unique key or check
    elif rest and (rest[0] in _KEY_WORDS or rest[0] in ("CHECK", "PARTITION")):
        if rest[0] != "PRIMARY KEY":
            return  # an index, a check, a partition
    _apply_parsed(new, _action_tree(sql, tokens, lo, hi))


def _drop_action(new: TableDef, sql: str, tokens: list[Token], lo: int, hi: int) -> None:
    words = [_word(t) for t in tokens[lo + 1 : hi]]
    if words[:1] == ["PRIMARY KEY"]:
        new.primary_key = []
        return
    if words[:1] and (words[0] in _KEY_WORDS or words[0] in ("CHECK", "CONSTRAINT", "PARTITION")):
        return
    if words[:1] == ["COLUMN"]:
        words = words[1:]
    exists = words[:2] == ["IF", "EXISTS"]
    names = tokens[hi - 1 : hi]
    if not names or len(words) != (3 if exists else 1):
        raise DdlError(f"cannot read `{shortened(_normalized(sql, tokens, lo, hi))}`")
    name = _ident_text(names[0])
    if name in new.types:
        new.columns.remove(name)
        del new.types[name]
        new.defaults.pop(name, None)
        new.primary_key = [k for k in new.primary_key if k != name]
    elif not exists:
        raise DdlError(f"DROP COLUMN {name}: the table definition in force has no such column")


def _ident_text(t: Token) -> str:
    return t.text[1:-1].replace("``", "`") if t.text.startswith("`") else t.text


def _modify_action(new: TableDef, sql: str, tokens: list[Token], lo: int, hi: int) -> None:
    """MODIFY / CHANGE, with MariaDB's `IF EXISTS` taken out before sqlglot reads it."""
    j = lo + 1
    if j < hi and _word(tokens[j]) == "COLUMN":
        j += 1
    exists = [_word(t) for t in tokens[j : j + 2]] == ["IF", "EXISTS"]
    if exists:
        head = _normalized(sql, tokens, lo, j)
        text = f"ALTER TABLE t {head} {_normalized(sql, tokens, j + 2, hi)}"
        actions = _parse(text).args.get("actions") or []
        old = _ident_text(tokens[j + 2])
        if old not in new.types:
            return  # IF EXISTS: nothing to change
        _apply_parsed(new, actions)
        return
    _apply_parsed(new, _action_tree(sql, tokens, lo, hi))


def _action_tree(sql: str, tokens: list[Token], lo: int, hi: int) -> list[Any]:
    tree = _parse("ALTER TABLE t " + _normalized(sql, tokens, lo, hi))
    actions = tree.args.get("actions")
    if not isinstance(tree, exp.Alter) or not actions:
        raise DdlError(f"cannot read `{shortened(_normalized(sql, tokens, lo, hi))}`")
    return list(actions)


def _apply_parsed(new: TableDef, actions: list[Any]) -> None:
    for a in actions:
        if isinstance(a, exp.ColumnDef):
            _add_column(new, a)
        elif isinstance(a, exp.ModifyColumn):
            _modify_column(new, a)
        elif isinstance(a, exp.RenameColumn):
            _rename(new, a.this.name, a.args["to"].name, bool(a.args.get("exists")))
        elif isinstance(a, exp.AddConstraint):
            for c in a.expressions:
                pk = _primary_key(c)
                if pk is not None:
                    _check_known(new, pk, "PRIMARY KEY")
                    new.primary_key = pk
        elif isinstance(a, exp.DropPrimaryKey):
            new.primary_key = []
        else:
            raise DdlError(f"cannot apply `{shortened(a.sql(dialect='mysql'))}` to the columns")


def _add_column(new: TableDef, cd: exp.ColumnDef) -> None:
    name, mysql_type = _column(cd)
    if name in new.types:
        if cd.args.get("exists"):
            return  # ADD COLUMN IF NOT EXISTS of a column that exists
        new.types[name] = mysql_type  # the definition in force already had it (e.g. `ddl:`)
        return
    new.columns.insert(_position(new, cd, len(new.columns)), name)
    new.types[name] = mysql_type
    _note_default(new, cd, name, mysql_type)
    if _has_pk_constraint(cd):
        new.primary_key = [name]


def _modify_column(new: TableDef, mc: exp.ModifyColumn) -> None:
    cd = mc.this
    name, mysql_type = _column(cd)
    old = mc.args["rename_from"].name if mc.args.get("rename_from") else name
    if old not in new.types:
        raise DdlError(f"MODIFY/CHANGE {old}: the table definition in force has no such column")
    i = new.columns.index(old)
    if old != name:
        _rename(new, old, name, False)
    new.types[name] = mysql_type
    if cd.args.get("position") is not None:
        new.columns.pop(i)
        new.columns.insert(_position(new, cd, i), name)


def _position(new: TableDef, cd: exp.ColumnDef, default: int) -> int:
    """Where FIRST / AFTER x puts a column in `new.columns` (the column itself not in it)."""
    pos = cd.args.get("position")
    if pos is None:
        return default
    if str(pos.args.get("position")).upper() == "FIRST":
        return 0
    after = pos.this.name if pos.this is not None else ""
    if after not in new.columns:
        raise DdlError(f"AFTER {after}: the table definition in force has no such column")
    return new.columns.index(after) + 1


def _rename(new: TableDef, old: str, to: str, if_exists: bool) -> None:
    if old not in new.types:
        if if_exists:
            return
        raise DdlError(f"RENAME COLUMN {old}: the table definition in force has no such column")
    new.columns[new.columns.index(old)] = to
    new.types[to] = new.types.pop(old)
    if old in new.defaults:
        new.defaults[to] = new.defaults.pop(old)
    first = next((k for k, v in new.renames.items() if v == old), old)
    new.renames[first] = to
    new.primary_key = [to if k == old else k for k in new.primary_key]


def _check_known(new: TableDef, cols: list[str], what: str) -> None:
    missing = [c for c in cols if c not in new.types]
    if missing:
        raise DdlError(f"{what} names {missing[0]}, which the table definition in force lacks")


# -- the API the decoders and the config use -------------------------------------------------------
def parse_create_table(sql: str) -> tuple[str | None, str, TableDef]:
    """`CREATE TABLE [db.]t (...)` -> (db, table, TableDef). ValueError if it is not one;
    DdlError (a ValueError) if it is one that cannot be read."""
    target, tdef = read_create_table(sql)
    return target.db, target.table, tdef


def apply_alter_table(sql: str, tdef: TableDef) -> tuple[str | None, str, TableDef] | None:
    """Apply an ALTER TABLE to a copy of `tdef`: (db, table, new TableDef); None when the
    statement is not an ALTER TABLE; DdlError when it cannot be read."""
    got = read_alter_table(sql, tdef)
    if got is None:
        return None
    return got[0].db, got[0].table, got[1]


def apply_ddl(
    tables: dict[str, TableDef], db: str, sql: str
) -> tuple[str | None, str | None, str | None]:
    """Fold one DDL statement of the stream into `tables` ("db.table" -> definition), the one
    rule the decoders and the decode stage share: a CREATE TABLE defines the table, an ALTER
    TABLE changes a known definition, and one that cannot be read leaves the table's definition
    unreadable (`TableDef.unreadable`) instead of guessed. Returns (db, table) the statement
    names ((None, None) for statements that name no table: CREATE DATABASE, GRANT, ...) and,
    when this statement could not be read, why."""
    target = ddl_target(sql)
    if target is None:
        return None, None, None
    tdb = target.db or db
    key = f"{tdb}.{target.table}"
    kind = _statement(_tokens(sql))
    try:
        if kind is not None and kind[0] == "create":
            tables[key] = read_create_table(sql)[1]
        elif key in tables and not tables[key].unreadable:
            got = read_alter_table(sql, tables[key])
            if got is not None:
                tables[key] = got[1]
    except DdlError as err:
        tables[key] = TableDef(unreadable=f"{err} (in `{shortened(sql)}`)")
        return tdb, target.table, str(err)
    return tdb, target.table, None

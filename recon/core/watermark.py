"""The consistent point of an out-of-band snapshot (`_watermark.json`, contract 2.2).

A change is at or before the point, and so already in the snapshot, when (first rule whose data
both the change and the watermark have):
1. GTID: MySQL `uuid:N` (8.4: `uuid:tag:N`) with N inside the set's intervals for that uuid (and
   tag: each tag numbers its own transactions); MariaDB `domain-server-seq`
   with seq <= the set's seq for that domain (MariaDB GTIDs are ordered per domain);
2. binlog: (file number, position) before the watermark's (file, pos): the position recorded by
   `SHOW MASTER STATUS` is where the next event starts, so an event starting there is after it;
3. sequence: Tencent `seqId` / DataWorks `sequenceId` (as numbers) <= `seq_id` / `sequence_id`.
A change none of the rules can place is applied (counted as `not_comparable` by the merge).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any

from recon.core.order import binlog_file_number
from recon.errors import ConfigError

_UUID_RE = re.compile(r"^[0-9a-fA-F-]{36}$")
_MARIADB_RE = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_TAG_RE = re.compile(r"^[a-z_][a-z0-9_]{0,31}$", re.I)  # MySQL 8.4 GTID tags


# the source of a MySQL GTID in SQL: `uuid` of `uuid:N`, `uuid:tag` of `uuid:tag:N` (MySQL 8.4)
GTID_SOURCE_SQL = "regexp_extract(gtid, '^(.*):[^:]*$', 1)"
# ... compared in ASCII lower case (a server UUID is hex, a tag ASCII letters, digits and `_`):
# `translate`, not `lower`, whose first use in a JVM loads ICU's case tables (~1 s of CPU, once
# per Spark application, measured with JFR: 6% of a small pipeline's three hours)
GTID_SOURCE_LOWER_SQL = (
    f"translate({GTID_SOURCE_SQL}, '{string.ascii_uppercase}', '{string.ascii_lowercase}')"
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_lower(text: str) -> str:
    """`text` with A-Z in lower case, and nothing else changed (`GTID_SOURCE_LOWER_SQL`)."""
    return text.translate(_ASCII_LOWER)


@dataclass(frozen=True)
class Watermark:
    mysql: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    mariadb: dict[int, int] = field(default_factory=dict)  # domain -> highest seq
    binlog: tuple[int, int] | None = None  # (file number, pos)
    binlog_file: str | None = None
    sequence: int | None = None
    taken_at: str | None = None
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "gtid_mysql": {u: [list(iv) for iv in ivs] for u, ivs in self.mysql.items()},
            "gtid_mariadb": {str(d): s for d, s in self.mariadb.items()},
            "binlog": list(self.binlog) if self.binlog else None,
            "binlog_file": self.binlog_file,
            "sequence": str(self.sequence) if self.sequence is not None else None,
            "taken_at": self.taken_at,
            "source": self.source,
        }

    # -- the rule in Python (tests, oracle) ------------------------------------------------------
    def covers(
        self, gtid: str | None, binlog_file: str | None, binlog_pos: int | None, seq: str | None
    ) -> bool | None:
        """True: at/before the point (skip); False: after (apply); None: not comparable."""
        if gtid and (self.mysql or self.mariadb):
            g = gtid.strip()
            if ":" in g:
                uuid, _, n = g.rpartition(":")
                if n.isdigit() and self.mysql:
                    ivs = self.mysql.get(ascii_lower(uuid), ())
                    return any(lo <= int(n) <= hi for lo, hi in ivs)
            m = _MARIADB_RE.match(g)
            if m and self.mariadb:
                top = self.mariadb.get(int(m.group(1)))
                return top is not None and int(m.group(3)) <= top
        if binlog_file and self.binlog:
            return (binlog_file_number(binlog_file), binlog_pos or 0) < self.binlog
        if seq and self.sequence is not None and seq.isdigit():
            return int(seq) <= self.sequence
        return None

    # -- the same rule as a Spark SQL expression over the event columns -------------------------
    def sql(self) -> str:
        """SQL over `gtid`, `binlog_file`, `binlog_pos`, `seq`: true (skip), false, or NULL."""
        cases: list[str] = []
        if self.mysql:
            n = "try_cast(substring_index(gtid, ':', -1) as decimal(20,0))"
            u = GTID_SOURCE_LOWER_SQL
            per_uuid = [
                f"({u} = '{uuid}' and ("
                + " or ".join(f"{n} between {lo} and {hi}" for lo, hi in ivs)
                + "))"
                for uuid, ivs in sorted(self.mysql.items())
            ]
            cases.append(
                "when gtid like '%:%' and "
                f"{n} is not null then coalesce({' or '.join(per_uuid) or 'false'}, false)"
            )
        if self.mariadb:
            dom = "try_cast(split_part(gtid, '-', 1) as bigint)"
            sq = "try_cast(split_part(gtid, '-', 3) as decimal(20,0))"
            per_dom = [f"({dom} = {d} and {sq} <= {s})" for d, s in sorted(self.mariadb.items())]
            cases.append(
                f"when gtid rlike '^[0-9]+-[0-9]+-[0-9]+$' then coalesce({' or '.join(per_dom)}, false)"
            )
        if self.binlog:
            f, p = self.binlog
            fn = "coalesce(try_cast(regexp_extract(binlog_file, '([0-9]+)$', 1) as bigint), 0)"
            cases.append(
                f"when binlog_file is not null and binlog_file <> '' then "
                f"({fn} < {f} or ({fn} = {f} and coalesce(binlog_pos, 0) < {p}))"
            )
        if self.sequence is not None:
            cases.append(
                "when try_cast(seq as decimal(38,0)) is not null then "
                f"try_cast(seq as decimal(38,0)) <= {self.sequence}"
            )
        if not cases:
            return "cast(null as boolean)"
        return "case " + " ".join(cases) + " else null end"


def parse_gtid_set(
    text: str, where: str
) -> tuple[dict[str, tuple[tuple[int, int], ...]], dict[int, int]]:
    """`uuid:1-100:105,uuid2:1-5` (MySQL) and/or `0-1-100,1-1-7` (MariaDB)."""
    mysql: dict[str, tuple[tuple[int, int], ...]] = {}
    mariadb: dict[int, int] = {}
    for part in (p.strip() for p in text.replace("\n", "").split(",")):
        if not part:
            continue
        m = _MARIADB_RE.match(part)
        if m:
            d, s = int(m.group(1)), int(m.group(3))
            mariadb[d] = max(mariadb.get(d, 0), s)
            continue
        _mysql_entry(part, where, mysql)
    return mysql, mariadb


def _mysql_entry(part: str, where: str, mysql: dict[str, tuple[tuple[int, int], ...]]) -> None:
    """`uuid:1-100:105` or, MySQL 8.4, `uuid:1-5:tag:1-3` (a tag starts the intervals of its
    own source `uuid:tag`) into `mysql` (source -> intervals)."""
    bits = part.split(":")
    if len(bits) < 2 or not _UUID_RE.match(bits[0]):
        raise ConfigError(
            f"{where}: gtid_set entry {part!r} is neither MySQL uuid:1-100 nor MariaDB "
            "domain-server-seq; write e.g. 3E11FA47-71CA-11E1-9E33-C80AA9429562:1-100 or 0-1-100"
        )
    uuid = ascii_lower(bits[0])
    source = uuid
    for iv in bits[1:]:
        if _TAG_RE.match(iv) and not iv.isdigit():
            source = f"{uuid}:{ascii_lower(iv)}"
            continue
        lo, _, hi = iv.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ConfigError(
                f"{where}: gtid_set interval {iv!r} in {part!r} is not N, N-M or a tag; fix the set"
            )
        mysql[source] = tuple(sorted((*mysql.get(source, ()), (int(lo), int(hi or lo)))))


def watermark_from_doc(d: Any, where: str) -> Watermark:
    """A snapshot's `_watermark.json` document (already parsed) as a Watermark; `where` names
    the file in errors."""
    path = where
    if not isinstance(d, dict):
        raise ConfigError(f"{path}: must hold a JSON object with gtid_set, binlog or sequence_id")
    mysql: dict[str, tuple[tuple[int, int], ...]] = {}
    mariadb: dict[int, int] = {}
    if d.get("gtid_set"):
        if not isinstance(d["gtid_set"], str):
            raise ConfigError(f'{path}: gtid_set must be text, e.g. "uuid:1-100"')
        mysql, mariadb = parse_gtid_set(d["gtid_set"], path)
    binlog = None
    binlog_file = None
    if d.get("binlog") is not None:
        b = d["binlog"]
        if (
            not isinstance(b, dict)
            or not isinstance(b.get("file"), str)
            or not isinstance(b.get("pos"), int)
        ):
            raise ConfigError(
                f'{path}: binlog must be {{"file": "mysql-bin.000003", "pos": 154}}; fix the file'
            )
        binlog = (binlog_file_number(b["file"]), int(b["pos"]))
        binlog_file = b["file"]
    sequence = None
    for k in ("sequence_id", "seq_id"):
        if d.get(k) is not None:
            if not str(d[k]).isdigit():
                raise ConfigError(f"{path}: {k} must be a whole number; fix the file")
            sequence = int(d[k])
    if not (mysql or mariadb or binlog or sequence is not None):
        raise ConfigError(
            f"{path}: names no consistent point; give gtid_set, binlog or sequence_id/seq_id"
        )
    return Watermark(mysql, mariadb, binlog, binlog_file, sequence, d.get("taken_at"), path)

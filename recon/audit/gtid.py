"""The GTID span of each source in an hour's events, read by Arrow a batch at a time.

A span is a GTID source's first and last transaction number in the hour and how many distinct
numbers it saw (`GtidSpan`). The events' `gtid` column is read in batches on the driver and
kept per source as a sorted list of intervals of numbers: a producer's GTIDs run consecutively,
so a source of a million transactions is a few intervals. The Spark job that computed this
(`recon.audit.facts.spark_gtid_spans`, three shuffles: 0.6-1.3 s of a Debezium hour's audit
for 100k-500k events) is kept for what this reading declines (`None`): GTIDs so scattered that
their intervals pass `MAX_INTERVALS` (the driver's memory stays bounded), and GTIDs holding one
of Java's line terminators, whose reading by that job's regular expressions is not copied here.

It reads a GTID as that job does: MySQL `uuid:N` (8.4: `uuid:tag:N`) has the text before its
last `:` as its source (A-Z in lower case), MariaDB `domain-server-seq` its domain; a number is
ASCII digits within a signed 64-bit integer, and a GTID without one (a GTID set `uuid:1-5`,
say) is left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recon.audit.rules import GtidSpan
from recon.merge.contributions import JAVA_LINE_ENDS

MAX_INTERVALS = 1_000_000
"""Intervals kept over all sources before the reading declines (16 MB of numbers)."""
_BATCH = 64 * 1024
_LINE_ENDS = tuple(c.encode() for c in JAVA_LINE_ENDS)
_I64_MAX = str(2**63 - 1)


class _Declined(Exception):
    """The hour's GTIDs are left to the Spark job."""


def arrow_gtid_spans(ev_dir: Path) -> dict[str, GtidSpan] | None:
    """The span of each GTID source in the events under `ev_dir` ({}: no event has a GTID);
    None where the reading declines (module docstring)."""
    runs: dict[str, np.ndarray] = {}
    try:
        for path in sorted(ev_dir.glob("*.parquet")):
            pf = pq.ParquetFile(path)
            if "gtid" not in pf.schema_arrow.names:
                continue
            for batch in pf.iter_batches(_BATCH, columns=["gtid"]):
                _add_batch(runs, batch.column(0))
    except _Declined:
        return None
    return {
        src: {"first": int(iv[0, 0]), "last": int(iv[-1, 1]), "distinct": _width(iv)}
        for src, iv in sorted(runs.items())
    }


def _width(iv: np.ndarray) -> int:
    return int((iv[:, 1] - iv[:, 0] + 1).sum(dtype=object))


def _add_batch(runs: dict[str, np.ndarray], gtid: pa.Array) -> None:
    """One batch's GTIDs, into each source's intervals (`runs`)."""
    gtid = pc.filter(gtid, pc.not_equal(gtid, ""))  # NULLs go too
    if len(gtid) == 0:
        return
    if _has_line_end(gtid):
        raise _Declined
    mysql = pc.match_substring(gtid, ":")
    n_mysql = pc.sum(mysql).as_py() or 0
    if n_mysql == len(gtid):  # one kind in a batch (most hours): no copy of it by kind
        src, num = _read_mysql(gtid)
    elif n_mysql == 0:
        src, num = _read_mariadb(gtid)
    else:
        mysql_src, mysql_num = _read_mysql(pc.filter(gtid, mysql))
        maria_src, maria_num = _read_mariadb(pc.filter(gtid, pc.invert(mysql)))
        src = pa.concat_arrays([mysql_src, maria_src])
        num = pa.concat_arrays([mysql_num, maria_num])
    ok = _is_bigint(num)
    src, num = pc.filter(src, ok), pc.filter(num, ok)
    if len(src) == 0:
        return
    values = pc.cast(_no_leading_zeros(num), pa.int64()).to_numpy()
    codes = pc.dictionary_encode(src)
    names = codes.dictionary.to_pylist()
    ids = codes.indices.to_numpy()
    order = np.argsort(ids, kind="stable")  # each source's rows together, in one pass
    for rows in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1):
        name = names[ids[rows[0]]]
        runs[name] = _union(runs.get(name), values[rows])
    if sum(len(iv) for iv in runs.values()) > MAX_INTERVALS:
        raise _Declined


def _read_mysql(g: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(source, number text) of `uuid[:tag]:N` GTIDs: split at the last `:`, the source in
    ASCII lower case (`GTID_SOURCE_LOWER_SQL`: A-Z only, as Arrow's `ascii_lower` does)."""
    parts = pc.split_pattern(g, ":", max_splits=1, reverse=True)
    return pc.ascii_lower(pc.list_element(parts, 0)), pc.list_element(parts, 1)


def _read_mariadb(g: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(source, number text) of `domain-server-seq` GTIDs: `domain <domain>` and the third
    `-` field. Two `-` are added first, so that every GTID has a third field ("" where it had
    none, as Spark's `split_part` gives)."""
    parts = pc.split_pattern(pc.binary_join_element_wise(g, "--", ""), "-")
    domain = pc.binary_join_element_wise("domain ", pc.list_element(parts, 0), "")
    return domain, pc.list_element(parts, 2)


def _has_line_end(g: pa.StringArray) -> bool:
    """Whether a text of `g` may hold one of Java's line terminators: its bytes searched
    whole (a regular expression per text took longer than the rest of the reading)."""
    data = g.buffers()[2]
    text = b"" if data is None else data.to_pybytes()
    return any(end in text for end in _LINE_ENDS)


def _no_leading_zeros(num: pa.Array) -> pa.Array:
    trimmed = pc.utf8_ltrim(num, "0")
    return pc.if_else(pc.equal(trimmed, ""), "0", trimmed)


def _is_bigint(num: pa.Array) -> pa.Array:
    """Whether each text is ASCII digits whose value fits a signed 64-bit integer (Spark's
    `try_cast` of it to bigint is not NULL)."""
    digits = pc.fill_null(pc.ascii_is_decimal(num), False)  # "" is not
    bare = _no_leading_zeros(pc.if_else(digits, num, "0"))
    size = pc.utf8_length(bare)
    fits = pc.or_(
        pc.less(size, len(_I64_MAX)),
        pc.and_(pc.equal(size, len(_I64_MAX)), pc.less_equal(bare, _I64_MAX)),
    )
    return pc.and_(digits, fits)


def _union(iv: np.ndarray | None, values: np.ndarray) -> np.ndarray:
    """Intervals (rows of [lo, hi], sorted, apart by at least one number) of `iv` and
    `values` together."""
    u = np.sort(values)  # `np.unique` took ten times as long as a sort here (numpy 2.4)
    u = u[np.concatenate(([True], u[1:] != u[:-1]))]
    breaks = np.flatnonzero(np.diff(u) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks - 1, [len(u) - 1]))
    new = np.stack((u[starts], u[ends]), axis=1)
    if iv is None or len(iv) == 0:
        return new
    both = np.concatenate((iv, new))
    both = both[np.argsort(both[:, 0], kind="stable")]
    # an interval joins the run before it when it starts at most one past that run's end
    reach = np.maximum.accumulate(both[:, 1])
    opens = np.concatenate(([True], both[1:, 0] - 1 > reach[:-1]))  # no overflow past 2**63-1
    first = np.flatnonzero(opens)
    last = np.concatenate((first[1:] - 1, [len(both) - 1]))
    return np.stack((both[first, 0], reach[last]), axis=1)

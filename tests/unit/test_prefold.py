"""A decode task's pre-fold (`recon.decode.premerge.prefold`) against the merge's rules written out in
Python: the winners' contributions fold to what every event's fold to, no superseded event
could have won, and the order keys the winners carry count, below any order key an older state
may hold, exactly the changes the whole hour has there (what `skip_counts` counts as stale or
already applied)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from recon.decode.premerge.prefold import WINNER_COLUMNS, Prefold, _key_ids
from recon.decode.tasks.task_files import _FILE_SCHEMA
from tests.support.examples import examples

Contribution = tuple[tuple[Any, ...], bytes, int, str, bool]  # key, order key, sign, op, main


def _contributions(ev: dict[str, Any]) -> list[Contribution]:
    """`recon.merge.contributions.contributions` of one event of a keyed table whose key
    columns are those the event states (`pk`), keyed as the decode keys it: source db, table,
    key columns and their values."""
    pk, op, ok = ev["pk"], ev["op"], ev["order_key"]
    if not pk or op == "ddl" or not ok:
        return []
    before, after = _image(ev["before"]), _image(ev["after"])
    head = (ev["db"], ev["tbl"], tuple(pk))
    out: list[Contribution] = []
    if after is not None:
        out.append(((*head, *[after.get(c) for c in pk]), ok, 1, op, True))
    if before is not None and op in ("update", "delete") and all(c in before for c in pk):
        old = tuple(before.get(c) for c in pk)
        moved = after is None or old != tuple(after.get(c) for c in pk)
        if op == "delete" or moved:
            out.append(((*head, *old), ok, 0, "delete" if op == "delete" else "pk_change",
                        op == "delete"))  # fmt: skip
    return out


def _image(pairs: list[tuple[str, str | None]] | None) -> dict[str, str | None] | None:
    """A map's entries as Spark reads them: a name's first entry."""
    if pairs is None:
        return None
    out: dict[str, str | None] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


def _fold(contribs: list[Contribution]) -> dict[tuple[Any, ...], tuple[bytes, int]]:
    best: dict[tuple[Any, ...], tuple[bytes, int]] = {}
    for key, ok, sign, _, _ in contribs:
        if key not in best or (ok, sign) > best[key]:
            best[key] = (ok, sign)
    return best


_IMAGE = st.lists(  # a name may come twice (a producer's repeated member): its first counts
    st.tuples(
        st.sampled_from(["id", "x", "v", "a\x00b", "q\\"]),
        st.one_of(st.none(), st.sampled_from(["1", "2", "3", "\x00", "\\0", "1\x00"])),
    ),
    max_size=4,
)
_EVENT = st.fixed_dictionaries(
    {
        "db": st.sampled_from(["d", "e", None]),
        "tbl": st.sampled_from(["t", "t\x00"]),
        "op": st.sampled_from(["insert", "update", "delete", "snapshot", "ddl"]),
        "pk": st.sampled_from([["id"], ["id", "x"], [], ["a\x00b"]]),
        "before": st.one_of(st.none(), _IMAGE),
        "after": st.one_of(st.none(), _IMAGE),
        "empty_ok": st.booleans(),
    }
)


def _rows(drawn: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    oks = random.Random(seed).sample(range(1, 1 << 20), len(drawn))
    rows = []
    for d, n in zip(drawn, oks, strict=True):
        row = {f.name: None for f in _FILE_SCHEMA}
        row.update({k: d[k] for k in ("db", "tbl", "op", "pk")})
        for img in ("before", "after"):
            row[img] = d[img]
        row["order_key"] = b"" if d["empty_ok"] and n % 7 == 0 else n.to_bytes(4, "big")
        rows.append(row)
    return rows


def _prefold(rows: list[dict[str, Any]], path: Path, batch: int) -> Any:
    fold = Prefold()
    with pq.ParquetWriter(path, _FILE_SCHEMA) as w:
        for i in range(0, len(rows), batch):
            b = pa.RecordBatch.from_pylist(rows[i : i + batch], schema=_FILE_SCHEMA)
            fold.add(b)
            w.write_batch(b, row_group_size=max(1, batch // 2))
    return fold.finish()


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=60), st.integers(0, 10**6), st.integers(1, 9))
def test_the_winners_fold_to_what_every_event_folds_to(
    tmp_path_factory: Any, drawn: list[dict[str, Any]], seed: int, batch: int
) -> None:
    rows = _rows(drawn, seed)
    # the same keys changed again and again, as a busy hour's
    rows += [dict(r, order_key=(int.from_bytes(r["order_key"], "big") + (1 << 21)).to_bytes(4, "big"))
             for r in rows if r["order_key"]]  # fmt: skip
    folder = tmp_path_factory.mktemp("prefold")
    sup = _prefold(rows, folder / "events.parquet", batch)
    every = [c for r in rows for c in _contributions(r)]
    if sup is None:  # nothing superseded: every event with a contribution is a winner
        assert all(len(_contributions(r)) != 1 or not _contributions(r)[0][4]
                   or _fold(every)[_contributions(r)[0][0]][0] == r["order_key"]
                   for r in rows)  # fmt: skip
        return
    sup.write_winners(folder / "events.parquet", folder / "winners.parquet")
    won = pq.read_table(folder / "winners.parquet").to_pylist()
    gone = set(sup.rows.tolist())
    assert len(won) == len(rows) - len(gone)
    kept = [r for i, r in enumerate(rows) if i not in gone]
    assert [w["order_key"] for w in won] == [r["order_key"] for r in kept]
    assert all(w[c] == r[c] for w, r in zip(won, kept, strict=True) for c in WINNER_COLUMNS)
    kept_contribs = [c for r in kept for c in _contributions(r)]
    assert _fold(kept_contribs) == _fold(every)
    for i in gone:  # one contribution, counted as its change, beaten
        (c,) = _contributions(rows[i])
        assert c[4] and _fold(every)[c[0]][0] > c[1]
    # per key, below any order key: the changes of the whole hour = the winners' own + carried
    carried: dict[tuple[Any, ...], list[bytes]] = {}
    for w, r in zip(won, kept, strict=True):
        for (key, *_), lst in zip(_by_slot(r), (w["sup_img"], w["sup_tomb"]), strict=True):
            if key is not None:
                carried.setdefault(key, []).extend(lst)
            else:
                assert lst == []
    for key in {c[0] for c in every}:
        mains = [c[1] for c in every if c[0] == key and c[4]]
        own = [c[1] for c in kept_contribs if c[0] == key and c[4]]
        for x in [*mains, b"", b"\xff" * 5]:
            assert sum(o < x for o in mains) == sum(o < x for o in own) + sum(
                o < x for o in carried.get(key, [])
            )
            assert sum(o == x for o in mains) == sum(o == x for o in own) + sum(
                o == x for o in carried.get(key, [])
            )
    assert sup.counts == Counter((rows[i]["db"], rows[i]["tbl"], rows[i]["op"]) for i in gone)


def _by_slot(ev: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The event's image contribution and its tombstone ((None,) where it makes none)."""
    cs = _contributions(ev)
    img = next((c for c in cs if c[2] == 1), (None,))
    tomb = next((c for c in cs if c[2] == 0), (None,))
    return img, tomb


def test_a_busy_key_leaves_one_winner_carrying_the_rest(tmp_path: Path) -> None:
    """Ten updates of one key and one of another: the key's last update wins and carries the
    nine before it; the other key's lone update is kept as it is."""
    rows = []
    for i in range(10):
        r = {f.name: None for f in _FILE_SCHEMA}
        r.update(db="d", tbl="t", op="update", pk=["id"], order_key=bytes([i + 1]),
                 after=[("id", "1"), ("v", str(i))])  # fmt: skip
        rows.append(r)
    other = dict(rows[0], order_key=b"\x20", after=[("id", "2"), ("v", "x")])
    sup = _prefold([*rows, other], tmp_path / "e.parquet", 4)
    assert sup is not None and sup.rows.tolist() == list(range(9)) and sup.worth_writing()
    sup.write_winners(tmp_path / "e.parquet", tmp_path / "w.parquet")
    won = pq.read_table(tmp_path / "w.parquet").to_pylist()
    assert [w["order_key"] for w in won] == [b"\x0a", b"\x20"]
    assert won[0]["sup_img"] == [bytes([i + 1]) for i in range(9)] and won[0]["sup_tomb"] == []
    assert won[1]["sup_img"] == []
    assert sup.counts == Counter({("d", "t", "update"): 9})


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.none(), st.sampled_from(["a", "b", ""])),
            st.one_of(st.none(), st.sampled_from(["a", "c"])),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_two_contributions_share_a_key_id_only_when_they_share_the_key(
    keys: list[tuple[int, str | None, str | None]],
) -> None:
    t = pa.table(
        {
            "src": pa.array([s for s, _, _ in keys], pa.int32()),
            "v0": pa.array([a for _, a, _ in keys], pa.string()),
            "v1": pa.array([b for _, _, b in keys], pa.string()),
        }
    )
    ids = _key_ids(t, 2).tolist()
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            assert (ids[i] == ids[j]) == (a == b)


def test_a_name_an_image_holds_twice_is_read_at_its_first_entry(tmp_path: Path) -> None:
    """As Spark reads a map: the images whose first name is not the key's (so the key's place
    is guessed from them) and one holding the key twice, the later entry another value."""
    rows = []
    for i, img in enumerate(
        [[("x", "0"), ("id", "1")], [("id", "2"), ("id", "1")], [("x", "0"), ("id", "2")]]
    ):
        r = {f.name: None for f in _FILE_SCHEMA}
        r.update(db="d", tbl="t", op="insert", pk=["id"], order_key=bytes([i + 1]), after=img)
        rows.append(r)
    sup = _prefold(rows, tmp_path / "e.parquet", 3)
    # the second event is of key 2 (its first entry), beaten by the third; key 1 keeps its one
    assert sup is not None and sup.rows.tolist() == [1]


def test_a_task_past_what_it_holds_reads_its_winners_back(tmp_path: Path, monkeypatch: Any) -> None:
    """A task whose events take more than `HOLD_BYTES` reads its winners back from its event
    file: the same winners as from the batches it held."""
    rows = []
    for i in range(40):
        r = {f.name: None for f in _FILE_SCHEMA}
        r.update(db="d", tbl="t", op="update", pk=["id"], order_key=bytes([i + 1]),
                 after=[("id", str(i % 7)), ("v", str(i))], types=[("id", "int32")])  # fmt: skip
        rows.append(r)
    held = _prefold(rows, tmp_path / "e.parquet", 6)
    held.write_winners(tmp_path / "e.parquet", tmp_path / "held.parquet")
    monkeypatch.setattr("recon.decode.premerge.prefold.HOLD_BYTES", 0)
    read = _prefold(rows, tmp_path / "e.parquet", 6)
    assert held.batches is not None and read.batches is None
    read.write_winners(tmp_path / "e.parquet", tmp_path / "read.parquet")
    won = pq.read_table(tmp_path / "read.parquet")
    assert won.equals(pq.read_table(tmp_path / "held.parquet")) and won.num_rows == 7

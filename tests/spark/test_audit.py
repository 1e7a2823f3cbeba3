"""The audit (issue 4): faults injected into real dumps are named in the report and the verdict
follows the pipeline's policy; a clean run balances and passes."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq
import pytest

from recon.airflow.ui import dag_page
from recon.audit.report import SCHEMA_FILE
from recon.audit.rules import iso_ms
from recon.cli import main
from recon.config import PipelineConfig, load_config
from recon.core.model import RawRecord
from recon.demo import sample
from recon.demo.demo import write_dump
from recon.hours import format_hour
from tests.support.browser import Browser
from tests.support.builders import edit_pipeline, write_pipeline

START = datetime(2026, 5, 1, 0, tzinfo=UTC)
H0, H1, H2 = (START + timedelta(hours=i) for i in range(3))


def _setup(
    tmp: Path,
    fmt: str,
    recs: list[RawRecord],
    hours: int = 2,
    audit: dict[str, Any] | None = None,
) -> Path:
    write_dump(tmp / "raw", "t", recs, "jsonl", [START + timedelta(hours=i) for i in range(hours)])
    extra: dict[str, Any] = {} if audit is None else {"audit": audit}
    return write_pipeline(
        tmp / "aud.yaml",
        name="aud",
        format=fmt,
        raw=tmp / "raw",
        warehouse=tmp / "wh",
        topics=["t"],
        start=START,
        buckets=4,
        **extra,
    )


def _run(cfg: Path, hours: int = 2) -> int:
    return main(
        [
            "run",
            "--pipeline",
            str(cfg),
            "--from",
            format_hour(H0),
            "--to",
            format_hour(START + timedelta(hours=hours - 1)),
        ]
    )


def _report(tmp: Path, h: datetime) -> dict[str, Any]:
    d = tmp / "wh" / "audit" / "aud" / format_hour(h)
    assert (d / "report.html").is_file()
    return dict(json.loads((d / "report.json").read_text()))


def _kinds(r: dict[str, Any]) -> dict[str, str]:
    return {f["kind"]: f["severity"] for f in r["findings"]}


def _records(fmt: str, hours: int = 2) -> list[RawRecord]:
    txns = sample.workload(START, hours, txns_per_hour=10, seed=3)
    return sample.to_records(sample.ENCODERS[fmt](txns), "t")


def test_a_clean_run_balances_and_passes(spark, tmp_path: Path, capsys) -> None:
    cfg = _setup(tmp_path, "debezium_json", _records("debezium_json"))
    assert _run(cfg) == 0
    schema = json.loads(SCHEMA_FILE.read_text())
    for h in (H0, H1):
        r = _report(tmp_path, h)
        jsonschema.validate(r, schema)
        assert r["verdict"] == "pass", r["findings"]
        assert r["identity"]["balanced"] is True
        t = r["tables"]["shop.orders"]
        assert t["applied"] == sum(t["changes_by_op"].values()) > 0
        assert r["identity"]["records"]["read"] == r["input"]["records"] > 0
        assert r["input"]["partitions"][0]["offset_gaps"] == []
        assert r["decoding"]["counters"]["tombstones"] > 0  # Debezium's, counted as control
    # the audit table has one row per hour, and re-running an hour replaces its row
    assert main(["audit", "--pipeline", str(cfg), "--hour", format_hour(H1)]) == 0
    from recon.publish.iceberg import get_catalog

    rows = get_catalog(load_config(cfg)).load_table(("aud__recon_audit", "hours")).scan()
    got = sorted((r["hour"], r["verdict"]) for r in rows.to_arrow().to_pylist())
    assert got == [(format_hour(H0), "pass"), (format_hour(H1), "pass")]
    capsys.readouterr()
    assert main(["report", "--pipeline", str(cfg), "--hour", format_hour(H1)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"aud {format_hour(H1)}: PASS") and "identity balances" in out


def test_the_newest_source_time_is_the_decodes_count_or_else_read_from_the_events(
    spark, tmp_path: Path
) -> None:
    """The newest source time per table, which the audit's freshness reads, is counted by the
    decode where it reads its events back (the audit read the hour's events again for it); an
    hour decoded before the decode counted it is read from its events, to the same report."""
    cfg = _setup(tmp_path, "debezium_json", _records("debezium_json"))
    assert _run(cfg) == 0
    layout = load_config(cfg).layout
    for h in (H0, H1):
        ev = pq.read_table(layout.events(h), columns=["db", "tbl", "event_time_ms"]).to_pylist()
        newest: dict[str, int] = {}
        for e in ev:
            name = f"{e['db']}.{e['tbl']}"
            newest[name] = max(newest.get(name, e["event_time_ms"]), e["event_time_ms"])
        counters = json.loads(layout.decode_counters(h).read_text())
        assert counters["newest_event_ms"] == newest and newest
        shown = _report(tmp_path, h)["tables"]["shop.orders"]["newest_source_time"]
        assert shown == iso_ms(newest["shop.orders"])
    del counters["newest_event_ms"]
    layout.decode_counters(H1).write_text(json.dumps(counters))
    assert main(["audit", "--pipeline", str(cfg), "--hour", format_hour(H1)]) == 0
    assert _report(tmp_path, H1)["tables"]["shop.orders"]["newest_source_time"] == shown


def test_gap_duplicate_and_garbage_are_named_and_fail_the_hour(spark, tmp_path: Path) -> None:
    recs = _records("debezium_json")
    in_h1 = [r for r in recs if (r.ts_ms or 0) >= H1.timestamp() * 1000]
    gap = {r.offset for r in in_h1[5:8]}  # three offsets lost inside hour 1
    kept = [r for r in recs if r.offset not in gap]
    dup = RawRecord(
        in_h1[10].topic, 0, in_h1[10].offset, in_h1[10].key, in_h1[10].value, in_h1[10].ts_ms
    )
    garbage = RawRecord("t", 0, recs[-1].offset + 1, None, b"{not json", in_h1[-1].ts_ms)
    cfg = _setup(tmp_path, "debezium_json", kept + [dup, garbage])
    assert _run(cfg) == 1  # the verdict fails the command, after the reports are written
    r0, r1 = _report(tmp_path, H0), _report(tmp_path, H1)
    assert r0["verdict"] == "pass"
    assert r1["verdict"] == "fail"
    k = _kinds(r1)
    assert k["offset_gap"] == "fail" and k["quarantined"] == "fail" and k["duplicate"] == "warn"
    p = r1["input"]["partitions"][0]
    assert p["offset_gaps"] == [[min(gap), max(gap)]] and p["offsets_missing"] == 3
    assert p["duplicates_in_hour"] == 1
    samples = r1["decoding"]["quarantine_samples"]
    assert any(s["offset"] == garbage.offset for v in samples.values() for s in v)
    assert r1["identity"]["balanced"] is True  # faults in the input, but every record accounted
    page = tmp_path / "wh" / "audit" / "aud" / format_hour(H1) / "report.html"
    assert _verdict_in_chromium(page, tmp_path) == "FAIL"
    assert (
        _verdict_in_chromium(
            tmp_path / "wh" / "audit" / "aud" / format_hour(H0) / "report.html", tmp_path
        )
        == "PASS"
    )
    _pictures_in_chromium(load_config(cfg), page, r1, tmp_path)


BLUE_BOX, BLUE_BAR, GREEN, RED = (221, 244, 255), (9, 105, 218), (26, 127, 55), (207, 34, 46)


def _shot(b: Browser, selector: str, out: Path) -> Counter[tuple[int, int, int]]:
    """The colours of the element `selector` as Chromium drew it: a screenshot of the whole
    page, cut to the element's box (kept in `out`)."""
    from PIL import Image

    find = f"document.querySelector({json.dumps(selector)}).getBoundingClientRect()"
    r = json.loads(b.js(f"(r => JSON.stringify([r.x + scrollX, r.y + scrollY, r.right + scrollX, "
                         f"r.bottom + scrollY]))({find})"))  # fmt: skip
    assert r[2] > r[0] and r[3] > r[1], (selector, r)
    shot = b.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    page = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    part = page.crop(tuple(round(v) for v in r))
    part.save(out)
    return Counter({rgb: n for n, rgb in part.getcolors(maxcolors=1 << 24) or []})


def _pictures_in_chromium(cfg: PipelineConfig, page: Path, rep: dict[str, Any], tmp: Path) -> None:
    """What a user sees in a real browser: the report's flow picture with the identity's
    numbers on its boxes, drawn (its boxes' colour in a screenshot); the hour against the day
    before; and the DAG page's trend columns and verdict strip, from the audit table."""
    dag = tmp / "dag.html"
    dag.write_text(dag_page(cfg))
    b = Browser()
    try:
        b.goto(page.as_uri())
        b.wait_for("document.readyState === 'complete' && !!document.querySelector('svg.flow')")
        boxes = b.js("[...document.querySelectorAll('svg.flow g')].map(g => g.textContent)")
        ident = rep["identity"]
        assert f"records read{ident['records']['read']}" in boxes
        assert f"quarantined{ident['dispositions']['quarantined']}" in boxes
        assert f"events merged{ident['events']['merged']}" in boxes
        assert any(x.startswith("shop.orders") for x in boxes)
        assert _shot(b, "svg.flow", tmp / "flow.png")[BLUE_BOX] > 1000
        compared = b.js("document.body.innerText")
        assert "Against the day before" in compared and "records read" in compared
        b.goto(dag.as_uri())
        b.wait_for("document.readyState === 'complete' && !!document.querySelector('svg.trend')")
        strip = _shot(b, "svg.trend", tmp / "verdicts.png")
        assert strip[GREEN] > 0 and strip[RED] > 0  # H0 passed, H1 failed
        bars = _shot(b, "table.trends", tmp / "trends.png")
        assert bars[BLUE_BAR] > 50
    finally:
        b.close()


def _verdict_in_chromium(page: Path, tmp: Path) -> str:
    """Open the page in headless Chromium and read the rendered verdict heading back."""
    import re
    import shutil
    import subprocess

    exe = shutil.which("chromium")
    assert exe, "chromium not found: scripts/system-packages.sh tests installs Debian's chromium"
    dom = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    m = re.search(r'<h1 id="verdict"[^>]*>([^<]*)</h1>', dom)
    assert m, dom[:500]
    return m.group(1)


def test_the_policy_decides_what_fails(spark, tmp_path: Path) -> None:
    recs = _records("debezium_json")
    garbage = RawRecord("t", 0, recs[-1].offset + 1, None, b"\x00\x01", recs[-1].ts_ms)
    cfg = _setup(tmp_path, "debezium_json", recs + [garbage], audit={"fail_on": ["offset_gap"]})
    assert _run(cfg) == 0
    r1 = _report(tmp_path, H1)
    assert r1["verdict"] == "warn" and _kinds(r1) == {"quarantined": "warn"}


def test_a_gap_between_hours_is_found_from_the_previous_hours_last_offset(
    spark, tmp_path: Path
) -> None:
    recs = _records("debezium_json")
    h1 = [r for r in recs if (r.ts_ms or 0) >= H1.timestamp() * 1000]

    def gtid(r: RawRecord) -> str | None:
        return json.loads(r.value)["payload"]["source"]["gtid"] if r.value else None

    first = gtid(h1[0]) or ""  # hour 1's first transaction never arrives (nor its tombstones)
    txn = {r.offset for r in h1 if gtid(r) == first}
    lost = txn | {r.offset for r in h1 if r.value is None and r.offset - 1 in txn}
    cfg = _setup(tmp_path, "debezium_json", [r for r in recs if r.offset not in lost])
    assert _run(cfg) == 1
    r1 = _report(tmp_path, H1)
    p = r1["input"]["partitions"][0]
    assert p["gap_from_previous_hour"] == [min(lost), max(lost)]
    assert p["offset_gaps"] == []
    gaps = [f["message"] for f in r1["findings"] if f["kind"] == "gtid_gap"]
    n = int(first.rsplit(":", 1)[1])
    assert gaps == [
        f"GTIDs {n}..{n} of {first.rsplit(':', 1)[0]} are in neither this hour nor the previous one"
    ]


def test_tencent_seq_gap_and_orphan_segment(spark, tmp_path: Path) -> None:
    from recon._proto import tencent_subscribe_pb2 as pb

    recs = _records("tencent_dts_pb")
    envelopes: list[list[RawRecord]] = []
    for r in recs:
        env = pb.Envelope.FromString(r.value or b"")
        if env.index == 0:
            envelopes.append([])
        envelopes[-1].append(r)
    multi = [g for g in envelopes if len(g) >= 3 and g[0].ts_ms < H1.timestamp() * 1000]
    lost_whole = {r.offset for r in multi[1]}  # an envelope lost entirely: its seqIds jump
    lost_first = {multi[3][0].offset}  # segment 0 lost: the rest are orphans
    kept = [r for r in recs if r.offset not in lost_whole | lost_first]
    cfg = _setup(tmp_path, "tencent_dts_pb", kept, audit={"fail_on": ["seq_gap"]})
    assert _run(cfg) == 1
    r0 = _report(tmp_path, H0)
    k = _kinds(r0)
    assert k["seq_gap"] == "fail" and k["orphan_segment"] == "warn" and k["offset_gap"] == "warn"
    assert (
        r0["decoding"]["seq_gaps"] >= 1 and r0["decoding"]["segments_orphaned"] == len(multi[3]) - 1
    )
    assert r0["identity"]["balanced"] is True


def test_a_transaction_left_open_is_reported_after_n_hours(spark, tmp_path: Path) -> None:
    txns = sample.workload(START, 1, txns_per_hour=6, seed=5)
    recs = sample.to_records(sample.encode_tdsql(txns), "t")
    last_xid = max(r.offset for r in recs if b'"xid"' in (r.value or b""))
    recs = [r for r in recs if r.offset != last_xid]  # the last transaction never commits
    cfg = _setup(tmp_path, "tdsql_json", recs, hours=3, audit={"open_transaction_hours": 1})
    edit_pipeline(cfg, tables={"shop.orders": {"ddl": sample.CREATE_SQL}})  # TDSQL: no names
    assert _run(cfg, hours=3) == 1
    assert "open_transaction" not in _kinds(_report(tmp_path, H0))  # open for under an hour
    r2 = _report(tmp_path, H2)
    assert _kinds(r2)["open_transaction"] == "fail"  # in the default policy
    assert r2["decoding"]["records_carried_out"] > 0 and r2["identity"]["balanced"] is True


def test_an_identity_that_does_not_balance_fails(spark, tmp_path: Path) -> None:
    cfg = _setup(tmp_path, "debezium_json", _records("debezium_json"), audit={"fail_on": []})
    assert _run(cfg) == 0
    # an hour whose merge lost events (here: its result file says fewer were seen)
    f = tmp_path / "wh" / "_state" / "aud" / "merge" / "hours" / f"hour={format_hour(H1)}.json"
    doc = json.loads(f.read_text())
    doc["tables"]["shop.orders"]["changes_by_op"]["insert"] -= 1
    f.write_text(json.dumps(doc))
    assert main(["audit", "--pipeline", str(cfg), "--hour", format_hour(H1)]) == 1
    r = _report(tmp_path, H1)
    assert r["verdict"] == "fail" and _kinds(r)["balance"] == "fail"
    assert r["identity"]["events"]["balanced"] is False


@pytest.mark.parametrize("hour", ["2026-05-01T07"])
def test_report_of_an_hour_never_run_is_one_line(tmp_path: Path, hour: str, capsys) -> None:
    cfg = _setup(tmp_path, "debezium_json", [])
    assert main(["report", "--pipeline", str(cfg), "--hour", hour]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no report for 2026-05-01T07" in err


def test_hours_run_out_of_order_fail_with_hour_order(spark, tmp_path: Path) -> None:
    # a hand-run `recon run --hour H1` before H0 (issue 12, item 6): decoded without the hour
    # before (whose open transactions it would need) and merged with an earlier hour missing
    cfg = _setup(tmp_path, "tdsql_json", _records("tdsql_json"))
    edit_pipeline(cfg, tables={"shop.orders": {"ddl": sample.CREATE_SQL}})
    assert main(["run", "--pipeline", str(cfg), "--from", format_hour(H1)]) == 1
    r1 = _report(tmp_path, H1)
    msgs = [f["message"] for f in r1["findings"] if f["kind"] == "hour_order"]
    assert r1["verdict"] == "fail" and len(msgs) == 2, r1["findings"]
    assert "not decoded first" in msgs[0] and f"({format_hour(H0)})" in msgs[1]
    # run in order, the same hours pass
    assert _run(cfg) == 0
    assert _report(tmp_path, H1)["verdict"] == "pass"


def test_transaction_markers_and_compaction_are_not_losses_but_a_loss_among_them_is(
    tmp_path: Path,
) -> None:
    """Issue 79 item 3: a transactional producer leaves an offset per transaction for its
    commit marker, and compaction removes offsets: each used to be an `offset_gap`, failing the
    hour. With the topics described (`transactional`, `compacted`), a transactional topic's
    single-offset gaps are counted as markers and its longer gap is still a loss; a compacted
    topic's gaps are counted as compacted offsets."""
    fmt = "canal_json"
    values = [
        r.value
        for r in sample.to_records(sample.ENCODERS[fmt](sample.workload(START, 1, 8, seed=4)), "x")
    ]
    ts = int(START.timestamp() * 1000)

    def offsets_with_gaps(n: int, skip: set[int]) -> list[int]:
        out, o = [], 0
        while len(out) < n:
            if o not in skip:
                out.append(o)
            o += 1
        return out

    # tx: a marker after every 4 records, and a real loss of two offsets (6, 7)
    tx_skip = {o for o in range(200) if o % 5 == 4} | {6, 7}
    # cmp: offsets compaction removed, singles and runs
    cmp_skip = {3, 7, 8, 9, 15}
    recs = [
        RawRecord("tx", 0, o, None, v, ts + i)
        for i, (o, v) in enumerate(
            zip(offsets_with_gaps(len(values), tx_skip), values, strict=True)
        )
    ] + [
        RawRecord("cmp", 0, o, None, v, ts + i)
        for i, (o, v) in enumerate(
            zip(offsets_with_gaps(len(values), cmp_skip), values, strict=True)
        )
    ]
    for topic in ("tx", "cmp"):
        write_dump(tmp_path / "raw", topic, [r for r in recs if r.topic == topic], "jsonl", [H0])
    cfg = write_pipeline(
        tmp_path / "aud.yaml",
        name="aud",
        format=fmt,
        raw=tmp_path / "raw",
        warehouse=tmp_path / "wh",
        topics=[{"name": "tx", "transactional": True}, {"name": "cmp", "compacted": True}],
        start=START,
    )
    assert _run(cfg, hours=1) == 1  # the loss fails the hour
    rep = _report(tmp_path, H0)
    rows = {r["topic"]: r for r in rep["input"]["partitions"]}
    last_tx = max(r.offset for r in recs if r.topic == "tx")
    markers = len([o for o in tx_skip if o <= last_tx and o not in (6, 7)])
    assert markers >= 2
    assert rows["tx"]["transaction_markers"] == markers and rows["tx"]["offsets_missing"] == 2
    assert rows["tx"]["offset_gaps"] == [[6, 7]]
    assert rows["cmp"]["compacted_offsets"] == len(cmp_skip) and rows["cmp"]["offset_gaps"] == []
    gaps = [f for f in rep["findings"] if f["kind"] == "offset_gap"]
    assert [(f["topic"], f["severity"]) for f in gaps] == [("tx", "fail")]

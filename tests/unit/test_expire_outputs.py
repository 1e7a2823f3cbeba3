"""What `recon expire` deletes without Spark: every output named by an hour before the window's
previous hour, and the offset intervals folded into one file that later hours still read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recon.config import PipelineConfig, load_config
from recon.decode.input.offset_index import INTERVALS, earlier_intervals, expire_intervals
from recon.hours import parse_hour
from recon.ops.expire import expire_hour_outputs, hour_output_roots
from tests.support.builders import write_pipeline

HOURS = ["2026-11-20T00", "2026-11-20T01", "2026-11-20T02"]


def _cfg(tmp: Path) -> PipelineConfig:
    return load_config(
        write_pipeline(
            tmp / "p.yaml", name="p", format="debezium_json", raw=tmp / "raw",
            warehouse=tmp / "wh", start="2026-11-20T00:00:00Z", tables={"shop.orders": {}},
        )
    )  # fmt: skip


def _intervals(cfg: PipelineConfig, hour: str, rows: list[tuple[str, int, int, int]]) -> None:
    d = cfg.layout.offsets(parse_hour(hour))
    d.mkdir(parents=True, exist_ok=True)
    t = pa.Table.from_pylist(
        [dict(zip(["topic", "partition", "lo", "hi"], r, strict=True)) for r in rows], INTERVALS
    )
    pq.write_table(t, d / "part-0.parquet")


def test_expire_deletes_every_output_of_hours_before_the_given_one(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    roots = hour_output_roots(cfg)
    for root in roots:
        for h in HOURS:
            if root.name in ("schema", "decode", "hours"):
                root.mkdir(parents=True, exist_ok=True)
                (root / f"hour={h}.json").write_text("{}")
            else:
                name = h if root == cfg.layout.audit_root else f"hour={h}"
                (root / name).mkdir(parents=True, exist_ok=True)
                (root / name / "x.parquet").write_bytes(b"x")
    merge_q = cfg.layout.merge_quarantine(parse_hour(HOURS[0])).parent
    out = expire_hour_outputs(cfg, HOURS[1])
    assert out["removed"] == len(roots)
    for root in roots:
        left = sorted(p.name for p in root.iterdir() if p != merge_q)
        assert [n.removeprefix("hour=").removesuffix(".json") for n in left] == HOURS[1:], root
    assert json.loads(cfg.layout.expired_marker.read_text()) == {"hours_before": HOURS[1]}
    expire_hour_outputs(cfg, HOURS[0])  # a wider window later: the marker keeps the newest
    assert json.loads(cfg.layout.expired_marker.read_text()) == {"hours_before": HOURS[1]}


def test_expired_offset_intervals_are_folded_and_still_read(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    _intervals(cfg, HOURS[0], [("t", 0, 0, 9), ("t", 1, 0, 4), ("u", 0, 0, 2)])
    _intervals(cfg, HOURS[1], [("t", 0, 10, 19), ("t", 1, 7, 9)])  # t/1: a gap, 5-6
    _intervals(cfg, HOURS[2], [("t", 0, 20, 29)])
    later = datetime(2026, 11, 20, 3, tzinfo=UTC)
    full = earlier_intervals(cfg.layout, later)
    (cfg.layout.state / "acknowledged_resets.json").write_text(
        json.dumps({"resets": [{"topic": "u", "partition": 0, "hour": HOURS[1]}]})
    )
    assert expire_intervals(cfg.layout, HOURS[2]) == 2
    assert sorted(p.name for p in cfg.layout.offsets_root.iterdir()) == [f"hour={HOURS[2]}"]
    got = earlier_intervals(cfg.layout, later).to_pylist()
    assert got == [
        {"topic": "t", "partition": 0, "lo": 0, "hi": 19, "hour": HOURS[1]},
        {"topic": "t", "partition": 1, "lo": 0, "hi": 4, "hour": HOURS[0]},
        {"topic": "t", "partition": 1, "lo": 7, "hi": 9, "hour": HOURS[1]},
        {"topic": "t", "partition": 0, "lo": 20, "hi": 29, "hour": HOURS[2]},
    ]  # u/0's were read before the reset acknowledged for it: dropped, not folded
    assert full.num_rows == 6
    # an hour before the expired ones sees none of them; folding again changes nothing
    assert earlier_intervals(cfg.layout, parse_hour(HOURS[0])).num_rows == 0
    assert expire_intervals(cfg.layout, HOURS[2]) == 0
    assert earlier_intervals(cfg.layout, later).to_pylist() == got

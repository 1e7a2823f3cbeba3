"""The third-party vectors (`tests/data/cdc-vectors`): their index, their records as the
decoders take them, and the normalisation that compares a source's expected table state (its
own value encoding) with ours (the canonical text of `recon.core.values`)."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, date, datetime, timedelta

from recon.core.model import RawRecord
from recon.decode.base import DecodeContext
from recon.decode.stream import decode_records
from tests.conftest import VECTORS

INDEX = json.loads((VECTORS / "index.json").read_text()) if VECTORS.is_dir() else []
FOLDER_FORMAT = {
    "canal-json": "canal_json",
    "canal-protobuf": "canal_pb",
    "debezium-json": "debezium_json",
    "dataworks-json": "dataworks_json",
}


def json_lines(text: str) -> list[bytes]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            json.loads(line)
        except ValueError:
            continue  # Paimon files start with a license comment
        out.append(line.encode())
    return out


def load_values(entry: dict) -> list[bytes | None]:
    path = VECTORS / entry["file"]
    pre = entry["preprocess"]
    if path.suffix == ".bin":
        return [path.read_bytes()]
    if path.suffix == ".b64":
        return [base64.b64decode(path.read_text().strip())]
    text = path.read_text(encoding="utf-8")
    if pre.startswith("one pretty JSON object; feed .expected_snapshot then .expected_binlog"):
        d = json.loads(text)
        return [
            json.dumps(d["expected_snapshot"]).encode(),
            json.dumps(d["expected_binlog"]).encode(),
        ]
    if pre.startswith("one pretty JSON object") or pre.startswith("whole file is one JSON"):
        return [json.dumps(json.loads(text)).encode()]
    values: list[bytes | None] = list(json_lines(text))
    return values


def sequence_entries(entry: dict) -> list[dict]:
    """Files 1..N of a multi-file sequence, in order (expected states are cumulative)."""
    return sorted(
        (e for e in INDEX if e["sequence"] == entry["sequence"] and e["order"] <= entry["order"]),
        key=lambda e: e["order"],
    )


def expected_table_lines(entry: dict) -> list[dict]:
    text = (VECTORS / entry["expected"]).read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def decoded_events(entry: dict, primary_keys: bool = True) -> tuple[list[dict], dict]:
    fmt = FOLDER_FORMAT[entry["file"].split("/")[0]]
    # Where a message states no key (no Kafka key, no pkNames), the upstream test's table
    # definition gives it: the pipeline's `primary_key:`. Here: the expected file's first column.
    pks = (
        {x["table"]: [next(iter(x["row"]))] for x in expected_table_lines(entry)}
        if primary_keys
        else {}
    )
    values: list[bytes | None] = []
    for e in sequence_entries(entry):
        values.extend(load_values(e))
        if "inject a Kafka record with value=null AFTER this file" in (e.get("note") or ""):
            values.append(None)
    tables = {x["table"] for x in expected_table_lines(entry)}
    # messages that name no table take it from a Debezium-style topic name (contract 2.3)
    topic = f"vectors.{next(iter(tables))}" if len(tables) == 1 else "vectors"
    recs = [RawRecord(topic, 0, i, None, v, 0) for i, v in enumerate(values)]
    out = decode_records(recs, fmt, DecodeContext(primary_keys=pks)).to_pylist()
    stats = {r["stat"]: r["n"] for r in out if r["kind"] == "stat"}
    assert not [r for r in out if r["kind"] == "quarantine"], [
        r["reason"] for r in out if r["kind"] == "quarantine"
    ]
    return [r for r in out if r["kind"] == "event"], stats


# -- the oracle: expected (source encoding) -> canonical text, given our logical type --------------
def normalized(v: object, lt: str, fmt: str) -> object:
    if v is None:
        return None
    if isinstance(v, dict) and "wkb" in v:
        return v["wkb"]
    if isinstance(v, bool):
        return "true" if v else "false"
    if lt == "binary":
        if fmt in ("canal_json", "canal_pb") and isinstance(v, str):
            return base64.b64encode(v.encode("latin-1")).decode()
        return v
    if lt.startswith("decimal") and isinstance(v, str) and not re.fullmatch(r"-?\d+(\.\d+)?", v):
        return ("DECIMAL-BYTES", int.from_bytes(base64.b64decode(v), "big", signed=True))
    if lt == "date" and isinstance(v, int):
        return (date(1970, 1, 1) + timedelta(days=v)).isoformat()
    if lt == "datetime" and isinstance(v, int):
        us = v * 1000 if v < 10**14 else v  # ms (DATETIME(0-3)) or us (DATETIME(4-6))
        dt = datetime(1970, 1, 1) + timedelta(microseconds=us)
        return dt.strftime("%Y-%m-%d %H:%M:%S") + (
            f".{dt.microsecond:06d}" if dt.microsecond else ""
        )
    if lt == "timestamp" and isinstance(v, int):
        dt = datetime.fromtimestamp(v / 1000, UTC)
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if (
        lt == "timestamp"
        and isinstance(v, str)
        and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", v)
    ):
        return v.replace(" ", "T") + "Z"  # Canal's zone-less TIMESTAMP text is read as UTC
    if lt == "time" and isinstance(v, int):
        s, us = divmod(v, 1_000_000)
        return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}" + (f".{us:06d}" if us else "")
    if isinstance(v, float):
        return repr(v)
    return str(v)


def as_ours(v: object, expected: object) -> object:
    if isinstance(expected, tuple) and expected[0] == "DECIMAL-BYTES" and isinstance(v, str):
        return ("DECIMAL-BYTES", int(v.replace(".", "")))
    return v


WITH_EXPECTED = [e for e in INDEX if e.get("expected") and e["file"].split("/")[0] in FOLDER_FORMAT]

"""`recon acknowledge-reset`: an operator says a partition's offsets started again on purpose.

A topic re-created (or moved to another cluster) numbers its offsets from the start again: the
decode finds records at offsets earlier hours read with other content, counts them as offset
resets and decodes them as new, and the hour's `offset_reset` finding fails it. Without an
acknowledgement every later hour would fail again until the new offsets pass the old ones.
Acknowledging the reset at hour H (one line per topic, partition and hour in
`_state/<p>/acknowledged_resets.json`, written under the pipeline's lock) makes the hours from
H on compare the partition's offsets with hours from H on only (`recon.decode.input.offset_index.
acknowledged_at`), and the hour's own `offset_reset` finding a warning: run its audit again.
"""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from typing import Any

from recon.config import PipelineConfig
from recon.errors import ConfigError
from recon.hours import format_hour, parse_hour
from recon.layout import read_json, write_json_atomic
from recon.ops.lock import pipeline_lock


def acknowledge_reset(
    cfg: PipelineConfig, topic: str, partition: int, hour: str, note: str = ""
) -> tuple[dict[str, Any], bool]:
    """Record the acknowledgement; (it, whether it is new)."""
    if topic not in cfg.topics:
        raise ConfigError(
            f"topic {topic!r} is not one of pipeline {cfg.name}'s ({', '.join(cfg.topics)})"
        )
    if partition < 0:
        raise ConfigError(f"--partition {partition}: a Kafka partition is a number >= 0")
    h = format_hour(parse_hour(hour, "--hour"))
    path = cfg.layout.acknowledged_resets
    with pipeline_lock(cfg, "recon acknowledge-reset"):
        doc = read_json(path) if path.is_file() else {"resets": []}
        for a in doc["resets"]:
            if (a["topic"], a["partition"], a["hour"]) == (topic, partition, h):
                return a, False
        entry = {
            "topic": topic,
            "partition": partition,
            "hour": h,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "by": getpass.getuser(),
            "note": note,
        }
        doc["resets"].append(entry)
        write_json_atomic(path, doc)
    return entry, True

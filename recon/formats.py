"""The wire formats a pipeline can name: one `FormatSpec` per format (stdlib only).

The config and the DAG file import this at parse time, so the decoder and the sample encoder are
named by dotted path and loaded only when used (they pull in pyarrow and protobuf). Adding a
format is one decoder module under `recon/decode/formats/`, one encoder in
`recon/demo/sample.py` and one entry here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal[
    "tencent_dts_pb", "tdsql_json", "canal_pb", "canal_json", "debezium_json", "dataworks_json"
]
DumpKind = Literal["parquet", "jsonl", "jsonl.gz"]


@dataclass(frozen=True)
class FormatSpec:
    name: Format
    decoder: str
    """`module:Class` of its `StreamDecoder`."""
    sample_encoder: str
    """`module:function` turning sample transactions into its messages (demo and tests)."""
    dump_kind: DumpKind
    """The dump file kind the demo writes for it."""


_SPECS = (
    FormatSpec(
        "tencent_dts_pb",
        "recon.decode.formats.tencent_dts_pb:TencentDtsPbDecoder",
        "recon.demo.sample:encode_tencent",
        "parquet",
    ),
    FormatSpec(
        "tdsql_json",
        "recon.decode.formats.tdsql_json:TdsqlJsonDecoder",
        "recon.demo.sample:encode_tdsql",
        "jsonl.gz",
    ),
    FormatSpec(
        "canal_pb",
        "recon.decode.formats.canal_pb:CanalPbDecoder",
        "recon.demo.sample:encode_canal_pb",
        "parquet",
    ),
    FormatSpec(
        "canal_json",
        "recon.decode.formats.canal_json:CanalJsonDecoder",
        "recon.demo.sample:encode_canal_json",
        "jsonl",
    ),
    FormatSpec(
        "debezium_json",
        "recon.decode.formats.debezium_json:DebeziumJsonDecoder",
        "recon.demo.sample:encode_debezium",
        "parquet",
    ),
    FormatSpec(
        "dataworks_json",
        "recon.decode.formats.dataworks_json:DataworksJsonDecoder",
        "recon.demo.sample:encode_dataworks",
        "jsonl",
    ),
)
FORMAT_SPECS: dict[str, FormatSpec] = {s.name: s for s in _SPECS}
FORMATS: tuple[str, ...] = tuple(FORMAT_SPECS)


def load_object(dotted: str) -> Any:
    """`package.module:attribute` -> the attribute (imported on first use)."""
    module, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module), attr)

"""Decoder registry: the config's `format` name -> the decoder class (one module per format)."""

from __future__ import annotations

from recon.decoders.base import DecodeContext, Sink, StreamDecoder
from recon.formats import FORMATS


def decoder_class(fmt: str) -> type[StreamDecoder]:
    """Import lazily, so a pipeline only loads what its format needs (protobuf classes)."""
    if fmt == "tencent_dts_pb":
        from recon.decoders.tencent_dts_pb import TencentDtsPbDecoder

        return TencentDtsPbDecoder
    if fmt == "tdsql_json":
        from recon.decoders.tdsql_json import TdsqlJsonDecoder

        return TdsqlJsonDecoder
    if fmt == "canal_pb":
        from recon.decoders.canal_pb import CanalPbDecoder

        return CanalPbDecoder
    if fmt == "canal_json":
        from recon.decoders.canal_json import CanalJsonDecoder

        return CanalJsonDecoder
    if fmt == "debezium_json":
        from recon.decoders.debezium_json import DebeziumJsonDecoder

        return DebeziumJsonDecoder
    if fmt == "dataworks_json":
        from recon.decoders.dataworks_json import DataworksJsonDecoder

        return DataworksJsonDecoder
    raise KeyError(fmt)


__all__ = ["FORMATS", "DecodeContext", "Sink", "StreamDecoder", "decoder_class"]

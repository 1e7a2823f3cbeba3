"""The wire formats a pipeline can name (kept apart from the decoders: the config and the DAG
files import this at parse time, the decoders pull in pyarrow and protobuf)."""

FORMATS = (
    "tencent_dts_pb",
    "tdsql_json",
    "canal_pb",
    "canal_json",
    "debezium_json",
    "dataworks_json",
)

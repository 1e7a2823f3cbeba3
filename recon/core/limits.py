"""How large a record's value may be (stdlib only: the config reads it)."""

MAX_RECORD_BYTES = 256 << 20
"""The default largest record value decoded (`max_record_bytes`; Kafka's own default limit for
a message is 1 MB): a larger one is quarantined unread, with its bytes."""
MAX_VALUE_BYTES = (1 << 31) - 1
"""The largest value an Arrow binary column holds (its offsets are 32 bits): the quarantine
keeps a record's bytes in one."""

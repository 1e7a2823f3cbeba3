"""Reading an hour's raw records: the dump files in place or as a staging copy, Kafka Connect's
files, the offsets earlier hours read, and the raw bytes behind given coordinates."""

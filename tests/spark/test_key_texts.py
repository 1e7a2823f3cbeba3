"""`key_texts` reads back the texts of a key that `pk_key` wrote (the JSON array of the key
columns' texts), on its fast path (no escape: cut at the quotes) and on `from_json`'s (an
escape, a NULL column), for keys of one to three columns: merge-on-read finds the published
rows of the hour's keys by them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from recon.publish.iceberg import key_texts

# texts made of the characters that matter: quotes, backslashes, commas, brackets, control
# and non-ASCII characters, and the pieces `key_texts` cuts at
PIECES = st.sampled_from(['"', "\\", ",", "[", "]", '","', '["', '"]', "null", "\n", "é", "a", "7"])
TEXT = st.lists(PIECES, max_size=4).map("".join)
KEYS = st.integers(1, 3).flatmap(
    lambda n: st.lists(st.lists(st.none() | TEXT, min_size=n, max_size=n), min_size=1, max_size=20)
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(keys=KEYS)
def test_key_texts_reads_back_what_pk_key_wrote(spark: SparkSession, keys: list[list[str | None]]):
    n = len(keys[0])
    df = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "i int, k array<string>")
    key = F.to_json(F.col("k"))  # as `pk_key` writes it
    got = {r["i"]: r["t"] for r in df.select("i", key_texts(key, n).alias("t")).collect()}
    assert got == dict(enumerate(keys))


def test_plain_keys_take_the_fast_path(spark: SparkSession):
    """A key with no escape is cut, not parsed: its texts come back even where JSON would
    not read them (a raw tab, which `pk_key`'s JSON escapes and a JSON reader refuses)."""
    rows = [('["a\tb","c"]',), ('["a\tb"]',), ('["4"]',)]
    df = spark.createDataFrame(rows, "key string")
    two = [r["t"] for r in df.select(key_texts(F.col("key"), 2).alias("t")).collect()]
    assert two == [["a\tb", "c"], None, ["4"]]  # the 2nd and 3rd have one text: parsed
    one = [r["t"] for r in df.select(key_texts(F.col("key"), 1).alias("t")).collect()]
    assert one == [None, ["a\tb"], ["4"]]

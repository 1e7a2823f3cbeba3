"""Table names with characters Spark escapes in folder names (issue 79 item 9): `s.a=b` is
written as `_t=s.a%3Db`, and the merge looked for `_t=s.a=b`, wedging the table's second
hour."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from recon.hours import parse_hour
from recon.layout import partition_folder
from recon.merge.stage import merge_hour
from recon.publish.export import export_rows
from tests.support.builders import pipeline
from tests.support.merge import event, write_hour

H0 = parse_hour("2026-01-01T00")
T = {"id": "int32", "v": "string"}


def test_folder_names_are_the_ones_spark_writes(spark, tmp_path: Path) -> None:
    names = ["s.a=b", 's.x#y:z%{[]^"*?', "s.plain_name", "s.ä b", "s.t\\u\x01v"]
    df = spark.createDataFrame([(n, 1) for n in names], "t string, v int")
    df.write.partitionBy("t").parquet(str(tmp_path / "out"))
    written = {p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("t=")}
    assert written == {partition_folder("t", n) for n in names}


def test_a_table_named_with_escaped_characters_merges_hour_after_hour(
    spark, tmp_path: Path
) -> None:
    name = "s.a=b:c"
    cfg = pipeline(tmp_path, {name: {"primary_key": ["id"]}})
    for i in range(3):
        row = {"id": i % 2, "v": f"h{i}"}
        write_hour(cfg, H0 + timedelta(hours=i), [event(i, name, "insert", None, row, T)])
        merge_hour(spark, cfg, H0 + timedelta(hours=i), buckets=2)
    assert sorted((r["id"], r["v"]) for r in export_rows(cfg, name)) == [(0, "h2"), (1, "h1")]

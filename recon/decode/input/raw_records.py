"""Where an hour's raw records are: its dump files in the pipeline's layout, and the records
carried into it; and the raw records behind given coordinates (the merge quarantines a change
with the bytes it came from)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.decode.input.connect_input import normalize
from recon.decode.input.copy_input import CARRY_COLUMNS
from recon.decode.input.dumps import read_hour
from recon.layout import has_parquet
from recon.rawdumps import HourFiles, list_hour


def raw_records_at(
    spark: SparkSession, cfg: PipelineConfig, hour: datetime, coords: DataFrame
) -> DataFrame:
    """The raw records behind `coords` (topic, partition, offset) among the hour's dumps and the
    records carried into it: the bytes of changes set aside after decoding (few, so the join
    is broadcast and the dumps are scanned once)."""
    keys = ["topic", "partition", "offset"]
    files = normalize(spark, cfg.layout, cfg.format, cfg.dump, hour, hour_files(cfg, hour))
    records, _ = read_hour(spark, files)
    carry_dir = cfg.layout.carry(hour - timedelta(hours=1))
    if has_parquet(carry_dir):
        records = records.unionByName(carried_records(spark, carry_dir))
    wanted = F.broadcast(coords.select(*keys).distinct())
    return records.join(wanted, keys, "left_semi").dropDuplicates(keys)


def hour_files(cfg: PipelineConfig, hour: datetime) -> list[HourFiles]:
    """The hour's dump files of every topic, in the pipeline's layout (`recon.rawdumps`)."""
    return [list_hour(cfg.raw_path, t, hour, cfg.dump) for t in cfg.topics]


def carried_records(spark: SparkSession, carry_dir: Path) -> DataFrame:
    """The previous hour's carried records, in the raw record shape, marked as carried."""
    cols = [F.col(c).alias(raw) for c, raw in CARRY_COLUMNS.items()]
    return spark.read.parquet(str(carry_dir)).select(*cols, F.lit(True).alias("carried"))

"""Where an hour's raw records are: its dump files in the pipeline's layout, and the records
carried into it; and the raw records behind given coordinates (the merge quarantines a change
with the bytes it came from)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.decode.input.connect_input import normalize
from recon.decode.input.copy_input import CARRY_COLUMNS
from recon.decode.input.dumps import read_hour
from recon.layout import has_parquet
from recon.objstore import S3Folder, local_copies, mirrored
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
    """The hour's dump files of every topic, in the pipeline's layout (`recon.rawdumps`); a
    bucket's listed there and read from their copies in the warehouse (`local_copies`)."""
    listed = [list_hour(cfg.raw_root, t, hour, cfg.dump) for t in cfg.topics]
    return [_copied(hf, cfg.layout.object_mirror) for hf in listed]


def _copied(hf: HourFiles, mirror: Path) -> HourFiles:
    """`hf` with each file of a bucket's as its copy in `mirror` (fetched now)."""
    if not isinstance(hf.folder, S3Folder):
        return hf
    sizes = dict(zip(hf.files, hf.sizes, strict=True))

    def local(files: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(p) for p in local_copies(files, mirror, sizes))

    return replace(
        hf,
        folder=mirrored(hf.folder.uri, mirror),
        parquet=local(hf.parquet),
        jsonl=local(hf.jsonl),
        connect=local(hf.connect),
    )


def carried_records(spark: SparkSession, carry_dir: Path) -> DataFrame:
    """The previous hour's carried records, in the raw record shape, marked as carried."""
    cols = [F.col(c).alias(raw) for c, raw in CARRY_COLUMNS.items()]
    return spark.read.parquet(str(carry_dir)).select(*cols, F.lit(True).alias("carried"))

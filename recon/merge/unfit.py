"""Changes whose values do not fit their columns are set aside before the merge: the key keeps
its previous version, and the change goes to the merge's quarantine with the bytes of the record
it came from and a reason naming the columns (`layout.merge_quarantine`). A value never reaches a
published table as NULL because its type was wrong (issue 12, item 8).

"Does not fit" is judged by the same cast publish uses (the column's published type), so what
is set aside here is exactly what publish would have turned into NULL.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections import Counter
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from recon.config import PipelineConfig
from recon.core.schema import DECIMAL_RE, TableSchema
from recon.decode.input.raw_records import raw_records_at
from recon.decode.premerge.value_classes import ALL
from recon.layout import partition_folder
from recon.publish.iceberg import cast_type, unfit_value_checks
from recon.spark.session import job_named

UNFIT = "_unfit"
"""Column added to the events: the names of the columns whose values do not fit (empty: fits)."""


def flag_unfit(
    events: DataFrame,
    schemas: dict[str, TableSchema],
    names: list[str],
    published: dict[str, dict[str, str]],
) -> DataFrame:
    """`events` with `_unfit`: for inserts and updates of the merged tables, the columns whose
    after-image value would not survive the cast to the published type (`published`: each
    table's `published_types`)."""
    branches: Column | None = None
    for n in names:
        cols = unfit_value_checks(schemas[n], published[n], "after")
        if not cols:  # every column is published as text: nothing can misfit
            continue
        arr = F.array(*[F.when(F.expr(b), F.lit(c)) for c, b in cols])
        cond = (F.col("table") == n) & F.col("op").isin("insert", "update", "snapshot")
        branches = F.when(cond, arr) if branches is None else branches.when(cond, arr)
    if branches is None:
        return events.withColumn(UNFIT, F.array().cast("array<string>"))
    # `array_compact`, not a `filter` lambda (interpreted row by row): the flags of a
    # 500k-event DataWorks hour took 1.25 s warm with it, 0.87 s without (its read: 0.27 s)
    flagged = F.array_compact(F.coalesce(branches, F.array().cast("array<string>")))
    return events.withColumn(UNFIT, flagged)


def any_unfit(
    schemas: dict[str, TableSchema], names: list[str], published: dict[str, dict[str, str]]
) -> Column:
    """Whether an event's `UNFIT` (`flag_unfit`) would name a column, as one condition: no
    array is built per event (the winners' count over every event: `recon.merge.winners`)."""
    out: Column | None = None
    for n in names:
        cols = unfit_value_checks(schemas[n], published[n], "after")
        if not cols:
            continue
        bad = functools.reduce(
            Column.__or__, [F.coalesce(F.expr(b), F.lit(False)) for _, b in cols]
        )
        cond = (F.col("table") == n) & F.col("op").isin("insert", "update", "snapshot")
        out = F.when(cond, bad) if out is None else out.when(cond, bad)
    return F.lit(False) if out is None else F.coalesce(out, F.lit(False))


_NUM_CLASS = re.compile(r"^num:(\d+)\.(\d+)$")
_INTS = {"int": 9, "bigint": 18}  # digits any such number of may have


def fits(cls: str, target: str) -> bool:
    """Whether every value of class `cls` (`recon.decode.premerge.value_classes`) survives the cast to
    Spark type `target` that publish makes (`recon.publish.iceberg`)."""
    num = _NUM_CLASS.match(cls)
    if num:
        whole, frac = int(num.group(1)), int(num.group(2))
        if target in _INTS:
            return frac == 0 and whole <= _INTS[target]
        dec = DECIMAL_RE.match(target)
        if dec:
            p, s = int(dec.group(1)), int(dec.group(2))
            return whole <= p - s and frac <= s
        return target in ("float", "double") and whole <= 30 and frac <= 30
    if target == "date":
        return cls == "date"
    if target in ("timestamp", "timestamp_ntz"):  # a zone is read, or left out for NTZ
        return cls in ("date", "datetime", "tsz")
    return (target, cls) in (("binary", "b64"), ("boolean", "bool"))


def fit_in_decode(
    schema: TableSchema, published: dict[str, str], classes: dict[str, Counter[str]]
) -> bool:
    """Whether the decode's classes of a table's checked values (`classes`: per column, the
    values per class and in all, `ALL`) show that none of them is unfit: every column checked
    (`unfit_value_checks`) has all its values in classes that fit its published type. Only for
    a table whose schema renames, drops and defaults nothing (its images are checked as
    written)."""
    if schema.former or schema.dropped or schema.defaults:
        return False
    types = dict(schema.columns)
    for c, _ in unfit_value_checks(schema, published, "after"):
        got = classes.get(c, Counter())
        target = cast_type(types[c], published.get(c))
        fit = sum(n for cls, n in got.items() if cls != ALL and fits(cls, target))
        if fit != got[ALL]:
            return False
    return True


def write_unfit_quarantine(
    spark: SparkSession,
    cfg: PipelineConfig,
    hour: datetime,
    flagged: DataFrame,
    schemas: dict[str, TableSchema],
    names: list[str],
    any_unfit: bool,
) -> None:
    """The set-aside changes with their records' bytes and a reason, one folder per table,
    replacing what an earlier merge of the hour wrote for the tables merged now."""
    out = cfg.layout.merge_quarantine(hour)
    for n in names:
        shutil.rmtree(out / partition_folder("table", n), ignore_errors=True)
    if not any_unfit:
        return
    bad = flagged.where(F.size(UNFIT) > 0).select(
        "topic", "partition", "offset", "table", _reason(schemas).alias("reason")
    )
    raw = raw_records_at(spark, cfg, hour, bad)
    with job_named(spark, "merge: values that do not fit, to quarantine"):
        (
            bad.join(raw, ["topic", "partition", "offset"], "left")
            .select(
                F.lit("quarantine").alias("kind"),
                "topic",
                "partition",
                "offset",
                "table",
                "reason",
                F.col("key").alias("raw_key"),
                F.col("value").alias("raw_value"),
                F.col("ts_ms").alias("raw_ts_ms"),
                F.col("headers").alias("raw_headers"),
            )
            .repartition("table")
            .write.mode("append")
            .partitionBy("table")
            .parquet(str(out))
        )


def _reason(schemas: dict[str, TableSchema]) -> Column:
    """`value does not fit its column: c = 'abc' (not int), ...` (values cut at 60 chars)."""
    # only called when something was set aside, so the tables have columns
    pairs = [(F.lit(f"{n}.{c}"), F.lit(lt)) for n, s in schemas.items() for c, lt in s.columns]
    types = F.create_map(*[x for pair in pairs for x in pair])

    def one(c: Column) -> Column:
        v = F.substring(F.col("after")[c], 1, 60)
        lt = types[F.concat(F.col("table"), F.lit("."), c)]
        return F.concat(c, F.lit(" = '"), v, F.lit("' (not "), lt, F.lit(")"))

    listed = F.array_join(F.transform(F.col(UNFIT), one), ", ")
    return F.concat(F.lit("value does not fit its column: "), listed)

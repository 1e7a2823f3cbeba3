"""The merge trusts the decode's classes of the values (`recon.decode.premerge.value_classes`) instead of
checking each value (`recon.merge.unfit.fit_in_decode`) only where every value of a class fits
its column: here each pairing `fits` claims is put to Spark's own check of a value
(`recon.publish.iceberg.unfit_value_checks`, the cast publish makes), over edge values of every
class, for each published type, by the column's own type and by a table that already publishes
the column as that type."""

from __future__ import annotations

import base64
import itertools
from collections import Counter

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from recon.core.model import EVENT_SCHEMA
from recon.core.schema import TableSchema
from recon.decode.premerge.value_classes import ALL, ValueClasses
from recon.merge.unfit import fit_in_decode, fits
from recon.publish.iceberg import unfit_value_checks

STATED = ("int64", "decimal(10,2)", "date", "datetime", "timestamp", "binary", "bool")
TARGETS = {  # the published type -> a logical type published as it
    "int": "int32", "bigint": "int64", "decimal(10,2)": "decimal(10,2)",
    "decimal(5,0)": "decimal(5,0)", "decimal(4,4)": "decimal(4,4)", "float": "float32",
    "double": "float64", "date": "date", "timestamp": "timestamp",
    "timestamp_ntz": "datetime", "binary": "binary", "boolean": "bool",
}  # fmt: skip


def edge_values() -> list[str]:
    nums = [s + d for s in ("", "-") for n in (1, 2, 8, 9, 10, 17, 18, 19, 20, 31)
            for d in ("9" * n, "1" + "0" * (n - 1))]  # fmt: skip
    nums += [f"{w}.{f}" for w, f in itertools.product(("0", "9" * 8, "9" * 9, "1" * 31),
                                                      ("5", "99", "999", "1" * 7))]  # fmt: skip
    nums += ["0", "-0", "007", "-0.0"]
    days = [f"{y}-{m:02d}-{d:02d}" for y in (1000, 1900, 2000, 2023, 2024, 9999)
            for m in (1, 2, 4, 12) for d in (1, 28, 29, 30, 31)]  # fmt: skip
    times = [f"{d}{sep}{t}" for d in ("2024-02-29", "1000-01-01", "9999-12-31")
             for sep in (" ", "T")
             for t in ("00:00:00", "23:59:59", "12:30:45.5", "23:59:59.999999")]  # fmt: skip
    tsz = [t + "Z" for t in times]
    b64 = [base64.b64encode(bytes(range(n))).decode() for n in range(9)] + ["+/+/", "////"]
    return nums + days + times + tsz + b64 + ["true", "false"]


def classes(values: list[str]) -> dict[tuple[str, str], str]:
    """(value, stated type) -> the class the decode gives it (values without one left out)."""
    out: dict[tuple[str, str], str] = {}
    for stated in STATED:
        names = [f"c{i}" for i in range(len(values))]
        event = {"db": "d", "tbl": "t", "op": "insert", "pk": ["c0"],
                 "after": list(zip(names, values, strict=True)),
                 "types": [(n, stated) for n in names]}  # fmt: skip
        got = ValueClasses()
        got.add(pa.Table.from_pylist([event], schema=EVENT_SCHEMA).to_batches()[0])
        for (_, _, name, cls), _n in got.counts.items():
            if cls != ALL:
                out[(values[int(name[1:])], stated)] = cls
    return out


def test_every_value_of_a_class_that_fits_passes_sparks_check(spark: SparkSession) -> None:
    values = edge_values()
    classed = classes(values)
    df = spark.createDataFrame([(v,) for v in values], "v string").select(
        "v", F.create_map(F.lit("c"), F.col("v")).alias("after")
    )
    bad_exprs = []
    for target, logical in TARGETS.items():
        for path, schema, existing in (
            ("own", TableSchema("t", [("c", logical)]), {}),
            ("published", TableSchema("t", [("c", "unknown")]), {"c": target}),
        ):
            checks = unfit_value_checks(schema, existing, "after")
            assert len(checks) == 1, (target, path)
            bad_exprs.append(F.expr(checks[0][1]).alias(f"{target}|{path}"))
    rows = df.select("v", *bad_exprs).collect()
    judged = 0
    by_target: Counter[str] = Counter()
    for r in rows:
        for (v, _stated), cls in classed.items():
            if v != r["v"]:
                continue
            for target in TARGETS:
                if not fits(cls, target):
                    continue
                for path in ("own", "published"):
                    assert r[f"{target}|{path}"] is False, (v, cls, target, path)
                    judged += 1
                by_target[target] += 1
    # every published type had values vouched for, each judged by Spark both ways (none for
    # DECIMAL(4,4): a class counts the 0 before the point as a digit, so none is claimed)
    assert set(by_target) == set(TARGETS) - {"decimal(4,4)"} and judged > 500, by_target


def test_a_column_with_a_value_of_no_class_is_checked() -> None:
    """`fit_in_decode` vouches for a table only when every value of every checked column is in
    a class that fits: one value short, a column never counted as a class, or a schema that
    renames a column (its images are not checked as written), and the merge checks."""
    schema = TableSchema("t", [("id", "int64"), ("at", "timestamp"), ("s", "string")])
    ok = {"id": Counter({ALL: 3, "num:5.0": 3}), "at": Counter({ALL: 2, "tsz": 2}),
          "s": Counter({ALL: 3})}  # fmt: skip
    assert fit_in_decode(schema, {}, ok)
    short = {**ok, "at": Counter({ALL: 3, "tsz": 2})}
    assert not fit_in_decode(schema, {}, short)
    wide = {**ok, "id": Counter({ALL: 3, "num:19.0": 3})}  # 19 digits may not be a bigint
    assert not fit_in_decode(schema, {}, wide)
    assert fit_in_decode(schema, {}, {**ok, "at": Counter()})  # no value: nothing to check
    assert not fit_in_decode(schema, {"s": "int"}, ok)  # published as int: text unclassed
    renamed = TableSchema("t", schema.columns, former={"old": "id"})
    assert not fit_in_decode(renamed, {}, ok)

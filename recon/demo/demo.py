"""`recon demo`: a realistic sample dump of every format, run through the pipeline, summarized.

The dumps are what a Kafka dumper would write (contract 2.1): one folder per topic and hour,
Parquet or JSON Lines (gzip too), `_SUCCESS` markers, records in no particular order, some
delivered twice (in the same hour and in the next), Tencent envelopes split into segments with
one envelope straddling an hour boundary, one garbage record, and an out-of-band snapshot with
its watermark. Pipelines are `pipelines/demo_<format>.yaml` in the project.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import random
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import NoSuchTableError

from recon._proto import tencent_subscribe_pb2 as pb
from recon.appsocket import SHARED_VAR, stop_shared_apps
from recon.audit.report import load_report
from recon.config import PipelineConfig, catalog_identifier, load_config
from recon.core.model import RawRecord
from recon.decode.input.dumps import KAFKA_PARQUET_SCHEMA
from recon.decode.stats import Stat, read_counters
from recon.demo import sample
from recon.demo.airflow_local import DagsTestServer, airflow_env, dags_test, migrate
from recon.errors import ReconError
from recon.formats import FORMAT_SPECS, FORMATS
from recon.hours import format_hour
from recon.layout import CHECKOUT, DEMO_DATA, demo_home, raw_hour_folder, shipped
from recon.merge.result import read_merge_result
from recon.ops.run import HourResult, run_hours
from recon.publish.export import export_rows, render_value
from recon.publish.iceberg import SHARED_CATALOG_URI, get_catalog

DEMO_START = datetime(2026, 11, 20, 0, tzinfo=UTC)
PIPELINES = demo_home() / "pipelines"  # the demo pipelines (not RECON_PIPELINES_DIR)


def demo_pipelines() -> Path:
    """The demo pipelines' folder: the checkout's `pipelines/`, or (an installed package) the
    copies of the ones the package ships, made once, beside `demo-data/` as in the checkout (their
    paths are relative: `../demo-data/raw`)."""
    for fmt in FORMATS:
        path = PIPELINES / f"demo_{fmt}.yaml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shipped(f"pipelines/demo_{fmt}.yaml"), path)
    return PIPELINES


def write_dump(
    raw: Path,
    topic: str,
    records: list[RawRecord],
    kind: str,
    hours: list[datetime],
    files_per_hour: int = 2,
    seed: int = 1,
    in_order: bool = False,
) -> None:
    """Write records into the dump layout, bucketed by record timestamp, shuffled over files;
    `in_order`: in offset order instead, as Spark's Kafka source writes them (each file a run
    of each partition's offsets, the partitions interleaved as they were produced)."""
    rnd = random.Random(seed)
    by_hour: dict[str, list[RawRecord]] = {format_hour(h): [] for h in hours}
    for r in records:
        h = datetime.fromtimestamp((r.ts_ms or 0) / 1000, UTC).replace(
            minute=0, second=0, microsecond=0
        )
        by_hour.setdefault(format_hour(h), []).append(r)
    for hour_text, recs in by_hour.items():
        h = datetime.strptime(hour_text, "%Y-%m-%dT%H").replace(tzinfo=UTC)
        folder = raw_hour_folder(raw, topic, h)
        folder.mkdir(parents=True, exist_ok=True)
        recs = list(recs)
        rnd.shuffle(recs)
        if in_order:
            recs.sort(key=lambda r: (r.offset, r.partition))
        size = -(-len(recs) // files_per_hour)  # of a run, in order
        for i in range(files_per_hour):
            chunk = recs[i * size : (i + 1) * size] if in_order else recs[i::files_per_hour]
            if kind == "parquet":
                table = pa.Table.from_pylist(
                    [
                        {
                            "key": r.key,
                            "value": r.value,
                            "topic": r.topic,
                            "partition": r.partition,
                            "offset": r.offset,
                            "timestamp": datetime.fromtimestamp((r.ts_ms or 0) / 1000, UTC),
                            "timestampType": 0,
                            "headers": r.headers,
                        }
                        for r in chunk
                    ],
                    schema=KAFKA_PARQUET_SCHEMA,
                )
                pq.write_table(table, folder / f"part-{i:05d}.parquet")
            else:
                lines = b"".join(
                    orjson.dumps(
                        {
                            "key": base64.b64encode(r.key).decode() if r.key is not None else None,
                            "value": base64.b64encode(r.value).decode()
                            if r.value is not None
                            else None,
                            "topic": r.topic,
                            "partition": r.partition,
                            "offset": r.offset,
                            "timestamp": r.ts_ms,
                            "timestampType": 0,
                        }
                    )
                    + b"\n"
                    for r in chunk
                )
                if kind == "jsonl.gz":
                    (folder / f"part-{i:05d}.jsonl.gz").write_bytes(gzip.compress(lines))
                else:
                    (folder / f"part-{i:05d}.jsonl").write_bytes(lines)
        (folder / "_SUCCESS").write_bytes(b"")


def make_demo_data(root: Path, hours: int) -> dict[str, Any]:
    """Write sample dumps for every format under `root`; returns facts the summary prints."""
    hour_list = [DEMO_START + timedelta(hours=i) for i in range(hours)]
    txns = sample.workload(DEMO_START, hours)
    raw = root / "raw"
    for old in (raw, root / "warehouse"):  # a fresh sample: no state from an earlier demo
        if old.exists():
            shutil.rmtree(old)
    forget_demo_tables()
    for fmt, encode in sample.ENCODERS.items():
        topic = f"demo_{fmt}"
        recs = sample.to_records(encode(txns), topic)
        if fmt == "tencent_dts_pb":
            _straddle_last_envelope(recs, hour_list[0])
        if fmt == "dataworks_json":
            recs.append(
                RawRecord(
                    topic, 0, recs[-1].offset + 1, None, b"\x00garbage{not json", recs[-1].ts_ms
                )
            )
        # at-least-once dumper: a few records delivered again, in their hour and in the next
        again = [
            RawRecord(r.topic, r.partition, r.offset, r.key, r.value, r.ts_ms) for r in recs[5:8]
        ]
        late = [
            RawRecord(r.topic, r.partition, r.offset, r.key, r.value, (r.ts_ms or 0) + 3600_000)
            for r in recs[10:12]
        ]
        write_dump(raw, topic, recs + again + late, FORMAT_SPECS[fmt].dump_kind, hour_list)
    # out-of-band snapshot: the table after the first third of the transactions
    cut = len(txns) // 3
    snap = root / "snapshot"
    if snap.exists():
        shutil.rmtree(snap)
    (snap / "shop.orders").mkdir(parents=True)
    rows = sample.final_state(txns[:cut])
    with (snap / "shop.orders" / "part-00000.jsonl").open("w") as f:
        for _, row in sorted(rows.items()):
            f.write(json.dumps({c: _snap_value(row[c]) for c in sample.COLUMNS}) + "\n")
    (snap / "_watermark.json").write_text(
        json.dumps(
            {
                "gtid_set": f"{sample.SERVER_UUID}:1-{txns[cut - 1].gtid_no}",
                "binlog": {"file": txns[cut - 1].file, "pos": txns[cut - 1].pos + 400},
                "taken_at": datetime.fromtimestamp(txns[cut - 1].ts_ms / 1000, UTC).isoformat(),
            },
            indent=2,
        )
    )
    return {
        "hours": hour_list,
        "transactions": len(txns),
        "rows_at_end": len(sample.final_state(txns)),
    }


def forget_demo_tables() -> None:
    """A catalog outside the demo's warehouse (the compose file's PostgreSQL) still lists the
    tables of an earlier demo, whose files were just deleted: drop them from it."""
    if not os.environ.get(SHARED_CATALOG_URI):
        return  # the default catalog lives in the warehouse and went with it
    for fmt in FORMATS:
        cfg = load_config(PIPELINES / f"demo_{fmt}.yaml")
        cat = get_catalog(cfg)
        for n in [*cfg.tables, "recon_audit.hours"]:
            for ident in (catalog_identifier(cfg.name, n), (cfg.name, *n.split(".", 1))):
                with contextlib.suppress(NoSuchTableError):
                    cat.drop_table(ident)


def _snap_value(v: object) -> object:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if v is None or isinstance(v, (int, str)):
        return v
    return str(v)


def _straddle_last_envelope(recs: list[RawRecord], first_hour: datetime) -> None:
    """Move the tail segments of the last multi-segment envelope of the first hour into the next
    hour, as a dumper does when an envelope is produced across the boundary."""

    end_ms = int((first_hour + timedelta(hours=1)).timestamp() * 1000)
    groups: list[list[RawRecord]] = []
    for r in recs:
        env = pb.Envelope.FromString(r.value or b"")
        if env.index == 0:
            groups.append([])
        groups[-1].append(r)
    candidates = [g for g in groups if len(g) >= 2 and all((r.ts_ms or 0) < end_ms for r in g)]
    if not candidates:
        raise ReconError("demo: no multi-segment envelope in the first hour to split")
    g = candidates[-1]
    for r in g[len(g) // 2 :]:
        r.ts_ms = end_ms + 500


def _results_from_files(cfg: PipelineConfig, hours: list[datetime]) -> list[HourResult]:
    """What `run_hours` returns, read back from what the DAG's stages wrote."""
    return [
        {
            "hour": format_hour(h),
            "decode": read_counters(cfg, h),
            "merge": read_merge_result(cfg, h),
            "audit": load_report(cfg, h),
        }
        for h in hours
    ]


@dataclass
class _Outcome:
    cfg: PipelineConfig
    totals: dict[str, int]
    events: int
    rows: int
    same: bool
    verdicts: list[str]


def _run_pipeline(
    fmt: str,
    facts: dict[str, Any],
    env: dict[str, str] | None,
    expected: list[dict[str, Any]],
    server: DagsTestServer | None = None,
) -> _Outcome:
    """One demo pipeline through its DAG (or `recon run`), compared with the source."""
    path = PIPELINES / f"demo_{fmt}.yaml"
    cfg = load_config(path)
    first, last = format_hour(facts["hours"][0]), format_hour(facts["hours"][-1])
    if env is not None:
        log = DEMO_DATA / "airflow" / "runs" / f"recon_{cfg.name}.log"
        print(f"demo: airflow dags test recon_{cfg.name} (hours {first}..{last}) ...")
        state = dags_test(env, f"recon_{cfg.name}", first, last, log, server=server)
        if state != "success":
            raise ReconError(f"demo: DAG run of recon_{cfg.name} ended {state}; see {log}")
        results = _results_from_files(cfg, facts["hours"])
    else:
        results = run_hours(str(path), first, last)
    tot: dict[str, int] = {}
    for r in results:
        for k, v in r["decode"]["totals"].items():
            tot[k] = tot.get(k, 0) + int(v)
    got = [_comparable(r) for r in export_rows(cfg, "shop.orders")]
    return _Outcome(
        cfg,
        tot,
        sum(sum(r["decode"]["events_by_op"].values()) for r in results),
        results[-1]["merge"]["tables"]["shop.orders"]["rows_after"],
        got == expected,
        [r["audit"]["verdict"] for r in results],
    )


def default_parallel() -> int:
    """DAG runs at a time: one per core, at most three (each holds a Spark driver)."""
    return max(1, min(3, os.cpu_count() or 1))


def run_demo(
    hours: int,
    via_airflow: bool = True,
    write_only: bool = False,
    own_airflow: bool = True,
    parallel: int = 1,
) -> None:
    """`own_airflow`: a demo Airflow home on SQLite; else the Airflow this environment
    configures (its metadata database, `spark_default`: the compose file's services).
    `parallel`: pipelines run at a time."""
    root = DEMO_DATA
    demo_pipelines()
    facts = make_demo_data(root, hours)
    first, last = format_hour(facts["hours"][0]), format_hour(facts["hours"][-1])
    print(
        f"demo: {facts['transactions']} source transactions over {hours} hours "
        f"({first} .. {last}), encoded in 6 formats under {root / 'raw'}"
    )
    if write_only:
        return
    expected = _expected_rows(sample.final_state(sample.workload(DEMO_START, hours)))
    env = None
    if via_airflow and not own_airflow:
        env = dict(os.environ)
        print("demo: the Airflow this environment configures (its database, spark_default)")
    elif via_airflow:
        env = airflow_env(root / "airflow", PIPELINES)
        print(f"demo: Airflow home {root / 'airflow'} (SQLite); `airflow db migrate` ...")
    # the pipelines are independent (as the scheduler would run them): `parallel` DAG runs at a
    # time; one run is mostly one busy core (its Airflow process, then one Spark driver)
    # (`recon run` in this process shares one Spark session: one pipeline at a time)
    # each `airflow dags test` forked from one interpreter that imported Airflow once
    # (`recon.demo.dags_fork`): the same runs, without six Airflow start-ups
    # the server imports Airflow while the demo's own home is migrated (~6 s each, one core)
    migrating = via_airflow and own_airflow
    # a DAG run takes the Spark application an earlier one left (`recon.airflow.spark_app`):
    # `parallel` JVMs, each started and warmed once, instead of one per pipeline; stopped
    # when the demo ends
    shared = tempfile.mkdtemp(prefix="recon-demo-apps-") if migrating else None
    if env is not None and shared is not None:
        env[SHARED_VAR] = shared
    try:
        summary = _run_pipelines(env, facts, expected, parallel, migrating)
    finally:
        if shared is not None:
            stop_shared_apps(shared)
            shutil.rmtree(shared, ignore_errors=True)
    _print_summary(summary, last, via_airflow)
    if not all(o.same for o in summary):
        raise ReconError("demo: a published table differs from the source's final state")
    failed = [o.cfg.name for o in summary if "fail" in o.verdicts]
    if failed:
        raise ReconError(f"demo: audit verdict fail for {', '.join(failed)}; see its reports")


def _run_pipelines(
    env: dict[str, str] | None,
    facts: dict[str, Any],
    expected: list[dict[str, Any]],
    parallel: int,
    migrating: bool,
) -> list[_Outcome]:
    with (
        DagsTestServer(env, after_migrate=migrating)
        if env is not None
        else contextlib.nullcontext() as server,
        ThreadPoolExecutor(parallel if env is not None else 1) as pool,
    ):
        if migrating and env is not None and server is not None:
            server.configured()
            migrate(env)
            server.migrated()
        return list(pool.map(lambda f: _run_pipeline(f, facts, env, expected, server), FORMATS))


def _print_summary(summary: list[_Outcome], last: str, via_airflow: bool) -> None:
    print()
    print(
        f"{'pipeline':<22}{'records':>8}{'dups':>6}{'events':>8}{'quarant.':>9}"
        f"{'rows':>6}  {'vs source':<10} verdict per hour"
    )
    for o in summary:
        t = o.totals
        dups = t.get(Stat.DUPLICATES_IN_HOUR, 0) + t.get(Stat.DUPLICATES_CROSS_HOUR, 0)
        quarantined = t.get(Stat.RECORDS_QUARANTINED, 0) + t.get(Stat.UNREADABLE_LINES, 0)
        print(
            f"{o.cfg.name:<22}{t.get(Stat.RECORDS, 0):>8}{dups:>6}{o.events:>8}{quarantined:>9}"
            f"{o.rows:>6}  {'equal' if o.same else 'DIFFERENT':<10} " + " ".join(o.verdicts)
        )
    wh = summary[0].cfg.warehouse
    demo_yaml = "pipelines/demo_canal_pb.yaml"
    print()
    print(f"published tables: Iceberg, catalog {wh}/catalog.db (tables <pipeline>__shop.orders)")
    print(
        f"  read one:       recon export --pipeline {demo_yaml} --table shop.orders --out orders.jsonl"
    )
    print(f"  its versions:   recon history --pipeline {demo_yaml} --table shop.orders")
    print(f"table state:      {wh}/_state/<pipeline>/merge/manifest.json")
    print(f"quarantine:       {wh}/quarantine/<pipeline>/hour=<H>/")
    if via_airflow:
        print(f"DAG runs:         recon_<pipeline> logs in {DEMO_DATA / 'airflow' / 'runs'}/")
    print(f"audit reports:    {wh}/audit/<pipeline>/<hour>/report.html (and report.json)")
    print(f"  in a terminal:  recon report --pipeline {demo_yaml} --hour {last}")
    ui = "`make airflow`" if CHECKOUT else "`python -m recon.demo.airflow_local`"
    print(
        f"  in Airflow's UI: {ui}, log in at http://localhost:8080, then Browse > Recon "
        "audit (or a DAG's / DAG run's audit tab)"
    )
    print(
        "  (warn: duplicates the sample delivers twice on purpose; DataWorks' garbage record is "
        "quarantined, a warning by that pipeline's audit.fail_on)"
    )


def _expected_rows(state: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    def value(v: Any) -> Any:  # shop.orders.amount is DECIMAL(10,2): the source keeps 2 places
        return render_value(v.quantize(Decimal("0.01")) if isinstance(v, Decimal) else v)

    return [_comparable({c: value(v) for c, v in state[k].items()}) for k in sorted(state)]


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """DataWorks types every temporal value as an instant (DATE, epoch ms; docs/formats.md): its
    `YYYY-MM-DDTHH:MM:SSZ` equals the source DATETIME read as UTC."""
    out = {}
    for k, v in row.items():
        if isinstance(v, str) and len(v) >= 20 and v.endswith("Z") and v[10] == "T":
            v = v[:-1].replace("T", " ")
        out[k] = v
    return out

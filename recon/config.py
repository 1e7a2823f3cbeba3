"""Pipeline config (contract 2.3): YAML parsed into frozen dataclasses, rejected loudly.

Every error is one line naming the file, the key and the fix. Relative paths in a config are
resolved against the folder the config file is in, so a pipelines folder can travel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from recon.core.ddl import parse_create_table
from recon.core.findings import FINDINGS
from recon.core.limits import MAX_RECORD_BYTES, MAX_VALUE_BYTES
from recon.core.sqlddl import TableDef
from recon.errors import ConfigError
from recon.formats import FORMATS, Format
from recon.layout import Layout
from recon.objstore import S3Folder, is_s3, mirrored, split
from recon.rawdumps import (
    DEFAULT_GRACE_MINUTES,
    DEFAULT_PATH_FORMAT,
    KAFKA_CONNECT_S3,
    LAYOUTS,
    SPARK_KAFKA_DUMP,
    DumpConfig,
    path_format_strftime,
)

_NAME_RE = re.compile(r"^[a-z0-9_]+$")
_TABLE_RE = re.compile(r"^[^.\s]+\.[^.\s]+$")
_SOURCE_RE = _TABLE_RE  # db.table, where * and ? are wildcards
_TOP_KEYS = {
    "name",
    "format",
    "raw_path",
    "topics",
    "warehouse",
    "start",
    "snapshot",
    "tables",
    "audit",
    "description",
    "catalog",
    "buckets",
    "retention_hours",
    "write_mode",
    "dump",
    "max_record_bytes",
    "airflow",
    "notify",
}
_REQUIRED = ("name", "format", "raw_path", "topics", "warehouse", "start", "tables")
WRITE_MODES = ("copy-on-write", "merge-on-read")
DEFAULT_WRITE_MODE = "merge-on-read"  # since session 59 (README, "Merge and publish")
_TABLE_KEYS = {"primary_key", "columns", "ddl", "from", "history"}
_AUDIT_KEYS = {"fail_on", "open_transaction_hours"}
_AIRFLOW_KEYS = {"owner", "pool", "queue", "retries", "end_date", "tags"}
_NOTIFY_KEYS = {"email", "from", "smtp_conn_id", "slack_conn_id", "deadline_minutes"}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_AIRFLOW_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")
_DUMP_KEYS = {"layout", "path_format", "grace_minutes", "separator"}
_TOPIC_KEYS = {"name", "transactional", "compacted"}


@dataclass(frozen=True)
class TopicOptions:
    """What a topic's Kafka settings leave in its offsets (`recon.audit.rules.expected_gaps`)."""

    transactional: bool = False
    """Written by transactional producers: a commit or abort marker takes an offset that no
    consumer receives."""
    compacted: bool = False
    """`cleanup.policy=compact`: compaction removes offsets."""


@dataclass(frozen=True)
class TableConfig:
    name: str  # db.table
    primary_key: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    ddl: str | None = None
    # source tables whose changes feed this one (shards, renamed databases); `*` and `?` match
    # any text / one character. Empty: the table of the same name.
    sources: tuple[str, ...] = ()
    # keep every version of every row in `<db>.<table>__history` (`recon.publish.history`)
    history: bool = False

    def table_def(self) -> TableDef | None:
        """Column names/types known from the config (`ddl:` wins over `columns:`)."""
        if self.ddl:
            _, _, tdef = parse_create_table(self.ddl)
            if self.primary_key:
                tdef.primary_key = list(self.primary_key)
            return tdef
        if self.columns:
            return TableDef(list(self.columns), {}, list(self.primary_key))
        return None


@dataclass(frozen=True)
class AuditConfig:
    fail_on: tuple[str, ...] = (
        "offset_gap",
        "quarantined",
        "open_transaction",
        "reconcile_mismatch",
        "balance",
        "hour_order",
        "offset_reset",
        "unread_file",
    )
    open_transaction_hours: int = 3


@dataclass(frozen=True)
class AirflowConfig:
    """The pipeline YAML's `airflow:` block: how its DAG is owned, queued and scheduled."""

    owner: str = "recon"
    pool: str = "recon_spark"
    """The Airflow pool of the Spark stage tasks (created by `python -m recon.airflow.pool`
    where Airflow's database is set up)."""
    queue: str | None = None
    """The executor queue of every task (CeleryExecutor); None: the default queue."""
    retries: int = 2
    end_date: datetime | None = None
    """The last hour the DAG schedules (its runs stop after it)."""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotifyConfig:
    """The pipeline YAML's `notify:` block: who hears of a failed task (a `fail` verdict fails
    the audit task) and how (Airflow's SMTP notifier)."""

    email: tuple[str, ...] = ()
    sender: str | None = None
    """`from`; None: the SMTP connection's `from_email`."""
    smtp_conn_id: str = "smtp_default"
    slack_conn_id: str | None = None
    """An Airflow Slack incoming-webhook connection the alerts are posted to (None: none)."""
    deadline_minutes: int | None = None
    """Alert when an hour is not published this many minutes after its end (None: no alert)."""

    @property
    def any(self) -> bool:
        return bool(self.email or self.slack_conn_id)


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    format: Format
    raw_path: Path
    topics: tuple[str, ...]
    warehouse: Path
    start: datetime
    tables: dict[str, TableConfig]
    snapshot_path: Path | None = None
    audit: AuditConfig = field(default_factory=AuditConfig)
    source_file: Path | None = None
    catalog: dict[str, str] = field(default_factory=dict)  # pyiceberg catalog properties
    buckets: int = 16  # key-hash buckets of a new table's state (fixed once the table exists)
    retention_hours: int | None = None  # the DAG expires older versions/state (recon expire)
    # how an hour's changes reach the state and the tables: the changed rows added beside the
    # buckets with position deletes where that is cheaper, else the buckets rewritten
    # (merge-on-read, the default), or the buckets always rewritten (copy-on-write, for
    # readers that apply no Iceberg v2 deletes) (`recon.merge.stage`)
    write_mode: str = DEFAULT_WRITE_MODE
    max_record_bytes: int = MAX_RECORD_BYTES
    """A record whose value is larger is quarantined unread (its bytes kept)."""
    topic_options: dict[str, TopicOptions] = field(default_factory=dict)
    """Topics given as a mapping with `transactional:` or `compacted:` (`_topics`)."""
    dump: DumpConfig = SPARK_KAFKA_DUMP  # the raw dumps' layout (`recon.rawdumps`)
    raw_uri: str | None = None
    """`raw_path` given as `s3://...`: the dumps are listed there and read from their copies
    under `raw_path`, the mirror of that URI in the warehouse (`recon.objstore`)."""
    snapshot_uri: str | None = None
    """`snapshot.path` given as `s3://...`, mirrored so at `snapshot_path`."""
    airflow: AirflowConfig = field(default_factory=AirflowConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    description: str = ""
    """Free text: the DAG's documentation in the Airflow UI."""

    @property
    def raw_root(self) -> Path | S3Folder:
        """Where the dumps are listed: the raw folder, or its bucket's prefix."""
        return S3Folder(self.raw_uri) if self.raw_uri else self.raw_path

    @property
    def dag_id(self) -> str:
        return f"recon_{self.name}"

    @property
    def layout(self) -> Layout:
        """Every path under this pipeline's warehouse (`recon.layout`)."""
        return Layout(self.warehouse, self.name)


def _fail(path: Path, key: str, msg: str) -> ConfigError:
    return ConfigError(f"{path}: `{key}`: {msg}", key)


_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
_LOCAL_ONLY = (
    "the pipeline's state, manifests and reports need a POSIX folder shared by Airflow and the "
    "Spark workers (atomic renames, a lock); raw_path, snapshot.path and catalog.warehouse may "
    "be s3:// (docs/deployment.md: Object stores)"
)
_S3_ONLY = (
    "the object stores read are S3 and S3-compatible ones (s3://, with AWS_ENDPOINT_URL for "
    "MinIO, Ceph and the like); give an s3:// URI or a folder path (docs/deployment.md: Object "
    "stores)"
)


_ONE_SLASH = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")


def _place(path: Path, key: str, value: Any) -> str | Path:
    """A folder that may be on S3: its `s3://bucket/prefix` URI, or a path (`_path`)."""
    if isinstance(value, str) and is_s3(value.strip()):
        uri = value.strip().rstrip("/")
        if uri[len("s3://") :].startswith("/") or not split(uri)[0]:
            raise _fail(path, key, f"{value!r} names no bucket; write s3://bucket/folder")
        return uri
    m = _URI.match(value.strip()) if isinstance(value, str) else None
    if m and m.group(1).lower() != "file":
        raise _fail(path, key, f"{m.group(1)}:// is not supported; {_S3_ONLY}")
    return _path(path, key, value)


def _path(path: Path, key: str, value: Any) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, key, "must be a folder path (text), e.g. /data/raw")
    if "\0" in value:
        raise _fail(path, key, "holds a NUL character; write the folder's path without it")
    bad = _ONE_SLASH.match(value.strip())
    if bad:
        raise _fail(
            path, key, f"{value!r} is neither a path nor a URI ({bad.group(1)}:// has two slashes)"
        )
    m = _URI.match(value.strip())
    if m:
        if m.group(1).lower() != "file":
            raise _fail(path, key, f"{m.group(1)}:// is not supported; {_LOCAL_ONLY}")
        value = m.group(2) or "/"
    p = Path(value).expanduser()
    return p if p.is_absolute() else (path.parent / p).resolve()


def _start(path: Path, value: Any, key: str = "start") -> datetime:
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _fail(
                path, key, f"{value!r} is not a time; write e.g. 2026-11-20T00:00:00Z"
            ) from None
        dt = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    else:
        raise _fail(path, key, "missing or not a time; write e.g. 2026-11-20T00:00:00Z")
    try:
        dt = dt.astimezone(UTC)
    except OverflowError:
        raise _fail(
            path, key, f"{value} is out of range in UTC; write e.g. 2026-11-20T00:00:00Z"
        ) from None
    if dt.minute or dt.second or dt.microsecond:
        raise _fail(
            path, key, f"{value} is not at the top of an hour; use e.g. {dt:%Y-%m-%dT%H}:00:00Z"
        )
    return dt


def _str_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, key, "must be a list of names, e.g. [id]")
    return tuple(value)


def _tables(path: Path, value: Any) -> dict[str, TableConfig]:
    if not isinstance(value, dict) or not value:
        raise _fail(
            path, "tables", "must map at least one db.table to its options, e.g. shop.orders: {}"
        )
    out = {}
    for name, opts in value.items():
        key = f"tables.{name}"
        if not isinstance(name, str) or not _TABLE_RE.match(name):
            raise _fail(path, key, "table names are written db.table, e.g. shop.orders")
        opts = opts or {}
        if not isinstance(opts, dict):
            raise _fail(path, key, "options must be a mapping, e.g. {primary_key: [id]}")
        unknown = set(opts) - _TABLE_KEYS
        if unknown:
            raise _fail(
                path,
                f"{key}.{sorted(unknown)[0]}",
                f"unknown option; valid options are {', '.join(sorted(_TABLE_KEYS))}",
            )
        pk = (
            _str_list(path, f"{key}.primary_key", opts["primary_key"])
            if "primary_key" in opts
            else ()
        )
        cols = _str_list(path, f"{key}.columns", opts["columns"]) if "columns" in opts else ()
        ddl = opts.get("ddl")
        if ddl is not None:
            if not isinstance(ddl, str):
                raise _fail(path, f"{key}.ddl", "must be a CREATE TABLE statement (text)")
            try:
                parse_create_table(ddl)
            except ValueError as err:
                raise _fail(
                    path, f"{key}.ddl", f"{err}; write CREATE TABLE t (id INT PRIMARY KEY, ...)"
                ) from None
        sources = _str_list(path, f"{key}.from", opts["from"]) if "from" in opts else ()
        for src in sources:
            if not _SOURCE_RE.match(src):
                raise _fail(
                    path,
                    f"{key}.from",
                    f"{src!r} is not db.table (with * or ? as wildcards), e.g. shop_*.orders",
                )
        history = opts.get("history", False)
        if not isinstance(history, bool):
            raise _fail(path, f"{key}.history", "must be true or false")
        out[name] = TableConfig(name, pk, cols, ddl, sources, history)
    seen: dict[str, str] = {}
    for name in out:
        key = ".".join(_catalog_part(p) for p in name.split(".", 1))
        if key in seen:
            raise _fail(
                path,
                f"tables.{name}",
                f"is published under the same catalog name as {seen[key]} ({key}: "
                "catalogs take lower case letters, digits and _); keep one of them",
            )
        seen[key] = name
    return out


_UNSAFE = re.compile(r"[^a-z0-9_]")


def catalog_identifier(pipeline: str, table: str) -> tuple[str, str]:
    """A published table's two-level catalog name, which Hive, Glue, REST and SQL catalogs all
    accept: namespace `<pipeline>__<db>`, name `<table>`, lower case, anything but letters,
    digits and `_` as `_` (`shop.Order-Items` of pipeline `p` is `p__shop.order_items`)."""
    db, tbl = table.split(".", 1)
    return f"{pipeline}__{_catalog_part(db)}", _catalog_part(tbl)


def _catalog_part(name: str) -> str:
    return _UNSAFE.sub("_", name.lower())


def _block(path: Path, key: str, value: Any, keys: set[str], example: str) -> dict[str, Any] | None:
    """A mapping of known options (None: the block is left out), or a one-line error."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail(path, key, f"must be a mapping, e.g. {example}")
    unknown = set(value) - keys
    if unknown:
        raise _fail(
            path,
            f"{key}.{sorted(unknown)[0]}",
            f"unknown option; valid options are {', '.join(sorted(keys))}",
        )
    return value


def _audit(path: Path, value: Any) -> AuditConfig:
    value = _block(path, "audit", value, _AUDIT_KEYS, "{fail_on: [offset_gap]}")
    if value is None:
        return AuditConfig()
    fail_on = AuditConfig.fail_on
    if "fail_on" in value:
        fail_on = _str_list(path, "audit.fail_on", value["fail_on"])
        for f in fail_on:
            if f not in FINDINGS:
                raise _fail(
                    path,
                    "audit.fail_on",
                    f"{f!r} is not a finding; use any of {', '.join(FINDINGS)}",
                )
    hours = value.get("open_transaction_hours", AuditConfig.open_transaction_hours)
    if not isinstance(hours, int) or hours < 1:
        raise _fail(path, "audit.open_transaction_hours", "must be a whole number of hours >= 1")
    return AuditConfig(tuple(fail_on), hours)


def _airflow(path: Path, value: Any, start: datetime) -> AirflowConfig:
    value = _block(path, "airflow", value, _AIRFLOW_KEYS, "{owner: data-eng, retries: 2}")
    if value is None:
        return AirflowConfig()
    names = {k: value.get(k) for k in ("owner", "pool", "queue")}
    for k, v in names.items():
        if v is not None and not (isinstance(v, str) and _AIRFLOW_NAME.match(v)):
            raise _fail(path, f"airflow.{k}", "must be a name of letters, digits, _ . or -")
    retries = value.get("retries", AirflowConfig.retries)
    if not _whole(retries) or not 0 <= retries <= 20:
        raise _fail(path, "airflow.retries", "must be a whole number from 0 to 20 (default 2)")
    end = None
    if value.get("end_date") is not None:
        end = _start(path, value["end_date"], "airflow.end_date")
        if end < start:
            raise _fail(path, "airflow.end_date", f"{end:%Y-%m-%dT%H}:00Z is before `start`")
    tags = value.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise _fail(path, "airflow.tags", "must be a list of tags, e.g. [shop, tier1]")
    return AirflowConfig(
        owner=names["owner"] or AirflowConfig.owner,
        pool=names["pool"] or AirflowConfig.pool,
        queue=names["queue"],
        retries=retries,
        end_date=end,
        tags=tuple(tags),
    )


def _notify(path: Path, value: Any) -> NotifyConfig:
    value = _block(path, "notify", value, _NOTIFY_KEYS, "{email: [oncall@example.com]}")
    if value is None:
        return NotifyConfig()
    emails = value.get("email") or []
    if isinstance(emails, str):
        emails = [emails]
    if not isinstance(emails, list) or not all(
        isinstance(e, str) and _EMAIL.match(e) for e in emails
    ):
        raise _fail(path, "notify.email", "must be a list of addresses, e.g. [oncall@example.com]")
    sender = value.get("from")
    if sender is not None and not (isinstance(sender, str) and _EMAIL.match(sender)):
        raise _fail(path, "notify.from", "must be an address, e.g. recon@example.com")
    conns = {k: value.get(k) for k in ("smtp_conn_id", "slack_conn_id")}
    for k, v in conns.items():
        if v is not None and not (isinstance(v, str) and _AIRFLOW_NAME.match(v)):
            raise _fail(path, f"notify.{k}", "must be an Airflow connection id, e.g. alerts")
    minutes = value.get("deadline_minutes")
    if minutes is not None and (not _whole(minutes) or not 1 <= minutes <= 7 * 24 * 60):
        raise _fail(path, "notify.deadline_minutes", "must be whole minutes >= 1, e.g. 30")
    if not (emails or conns["slack_conn_id"]):
        raise _fail(path, "notify", "names no one to tell: give `email` or `slack_conn_id`")
    return NotifyConfig(
        tuple(emails),
        sender,
        conns["smtp_conn_id"] or NotifyConfig.smtp_conn_id,
        conns["slack_conn_id"],
        minutes,
    )


def _description(path: Path, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _fail(path, "description", "must be text (Markdown), shown on the DAG's page")
    return value


def _name(path: Path, name: Any) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _fail(
            path,
            "name",
            f"{name!r} is not allowed; use lower-case letters, digits and _ (it becomes DAG id recon_<name>)",
        )
    return name


def _snapshot(path: Path, snap: Any) -> str | Path | None:
    if snap is None:
        return None
    if not isinstance(snap, dict) or set(snap) != {"path"}:
        raise _fail(path, "snapshot", "must be {path: /folder/of/the/snapshot}")
    return _place(path, "snapshot.path", snap["path"])


def _places(path: Path, data: dict[str, Any], warehouse: Path) -> dict[str, Any]:
    """`raw_path`, `raw_uri`, `snapshot_path` and `snapshot_uri` of a config (`PipelineConfig`)."""
    raw_path, raw_uri = _local(_place(path, "raw_path", data["raw_path"]), warehouse)
    snapshot_path, snapshot_uri = _local(_snapshot(path, data.get("snapshot")), warehouse)
    return {
        "raw_path": raw_path,
        "raw_uri": raw_uri,
        "snapshot_path": snapshot_path,
        "snapshot_uri": snapshot_uri,
    }


def _local(place: str | Path | None, warehouse: Path) -> tuple[Path | None, str | None]:
    """(the local folder, the S3 URI it mirrors) of a place `_place` read."""
    if isinstance(place, str):
        return mirrored(place, Layout(warehouse, "").object_mirror), place
    return place, None


def _topics(path: Path, value: Any) -> tuple[tuple[str, ...], dict[str, TopicOptions]]:
    """`topics:` names, each a name or `{name: t, transactional: true, compacted: true}`."""
    if not isinstance(value, list) or not value:
        raise _fail(path, "topics", "must list at least one topic, e.g. [shop_cdc]")
    names: list[str] = []
    options: dict[str, TopicOptions] = {}
    for i, item in enumerate(value):
        key = f"topics[{i}]"
        if isinstance(item, dict):
            unknown = set(item) - _TOPIC_KEYS
            if unknown or not isinstance(item.get("name"), str) or not item["name"]:
                raise _fail(
                    path,
                    "topics",
                    f"{key} must be a name or {{name: t, transactional: true, compacted: true}}",
                )
            flags = {k: item.get(k, False) for k in ("transactional", "compacted")}
            if not all(isinstance(v, bool) for v in flags.values()):
                raise _fail(path, "topics", f"{key}: transactional and compacted are true or false")
            name = item["name"]
            options[name] = TopicOptions(**flags)
        elif isinstance(item, str) and item:
            name = item
        else:
            raise _fail(path, "topics", f"{key} must be a topic's name, e.g. shop_cdc")
        if name in names:
            raise _fail(path, "topics", f"{name!r} is listed twice; keep one")
        names.append(name)
    return tuple(names), options


def _dump(path: Path, value: Any) -> DumpConfig:
    if value is None:
        return SPARK_KAFKA_DUMP
    if not isinstance(value, dict):
        raise _fail(path, "dump", f"must be a mapping, e.g. {{layout: {KAFKA_CONNECT_S3}}}")
    unknown = set(value) - _DUMP_KEYS
    if unknown:
        raise _fail(
            path,
            f"dump.{sorted(unknown)[0]}",
            f"unknown option; valid options are {', '.join(sorted(_DUMP_KEYS))}",
        )
    layout = value.get("layout", SPARK_KAFKA_DUMP.layout)
    if layout not in LAYOUTS:
        raise _fail(
            path, "dump.layout", f"{layout!r} is not a layout; use one of {', '.join(LAYOUTS)}"
        )
    if layout != KAFKA_CONNECT_S3:
        extra = sorted(set(value) - {"layout"})
        if extra:
            raise _fail(
                path, f"dump.{extra[0]}", f"is read only with layout {KAFKA_CONNECT_S3}; remove it"
            )
        return SPARK_KAFKA_DUMP
    fmt = value.get("path_format", DEFAULT_PATH_FORMAT)
    if not isinstance(fmt, str):
        raise _fail(path, "dump.path_format", f'must be text, e.g. "{DEFAULT_PATH_FORMAT}"')
    try:
        path_format_strftime(fmt)
    except ValueError as err:
        raise _fail(
            path,
            "dump.path_format",
            f'{err}; give the connector\'s path.format, e.g. "{DEFAULT_PATH_FORMAT}"',
        ) from None
    grace = value.get("grace_minutes", DEFAULT_GRACE_MINUTES)
    if not _whole(grace) or grace < 0:
        raise _fail(path, "dump.grace_minutes", "must be a whole number of minutes >= 0")
    sep = value.get("separator", "\n")
    if not isinstance(sep, str) or not sep:
        raise _fail(path, "dump.separator", 'must be non-empty text, e.g. "\\n"')
    return DumpConfig(KAFKA_CONNECT_S3, fmt, grace, sep.encode("utf-8"))


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _catalog(path: Path, catalog: Any) -> dict[str, str]:
    if not isinstance(catalog, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, bool)) for k, v in catalog.items()
    ):
        raise _fail(
            path,
            "catalog",
            "must map pyiceberg catalog properties to values, e.g. {type: sql, uri: 'postgresql+psycopg2://...'}",
        )
    props = {k: str(v) for k, v in catalog.items()}
    for k, v in props.items():
        m = _URI.match(v)
        if k == "warehouse" and m and m.group(1).lower() not in ("file", "s3"):
            raise _fail(path, "catalog.warehouse", f"{m.group(1)}:// is not supported; {_S3_ONLY}")
        secret = any(w in k.lower() for w in ("password", "secret", "token", "credential"))
        if (secret and "${" not in v) or (m and _has_password(v)):
            raise _fail(
                path,
                f"catalog.{k}",
                "holds a secret in plain text; write ${AN_ENV_VAR} in its place (read from the "
                "environment of Airflow and Spark) or leave it out and set "
                f"PYICEBERG_CATALOG__RECON__{k.upper().replace('.', '__').replace('-', '_')}",
            )
    return props


def _has_password(uri: str) -> bool:
    try:
        password = urlsplit(uri).password
    except ValueError:
        return False
    return password is not None and password != "" and "${" not in password


def _buckets(path: Path, data: dict[str, Any]) -> int:
    buckets = data.get("buckets", 16)
    if not _whole(buckets) or not 1 <= buckets <= 4096:
        raise _fail(path, "buckets", "must be a whole number from 1 to 4096 (default 16)")
    return int(buckets)


def _retention(path: Path, data: dict[str, Any]) -> int | None:
    retention = data.get("retention_hours")
    if retention is not None and (not _whole(retention) or retention < 1):
        raise _fail(
            path, "retention_hours", "must be a whole number of hours >= 1 (or left out: keep all)"
        )
    return retention


def parse_config(data: Any, path: Path) -> PipelineConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the file must hold a YAML mapping (name: ..., format: ...)")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        k = sorted(unknown)[0]
        raise _fail(path, k, f"unknown key; valid keys are {', '.join(sorted(_TOP_KEYS))}")
    for k in _REQUIRED:
        if k not in data:
            raise _fail(
                path,
                k,
                "missing; every pipeline needs name, format, raw_path, topics, warehouse, start, tables",
            )
    name = _name(path, data["name"])
    fmt = data["format"]
    if fmt not in FORMATS:
        raise _fail(path, "format", f"{fmt!r} is not a format; use one of {', '.join(FORMATS)}")
    topics, topic_options = _topics(path, data["topics"])
    warehouse = _path(path, "warehouse", data["warehouse"])
    places = _places(path, data, warehouse)
    start = _start(path, data["start"])
    catalog = _catalog(path, data.get("catalog") or {})
    buckets, retention = _buckets(path, data), _retention(path, data)
    max_bytes = data.get("max_record_bytes", MAX_RECORD_BYTES)
    if not _whole(max_bytes) or not 1 <= max_bytes <= MAX_VALUE_BYTES:
        raise _fail(
            path,
            "max_record_bytes",
            f"must be a whole number of bytes from 1 to {MAX_VALUE_BYTES} (default {MAX_RECORD_BYTES})",
        )
    write_mode = data.get("write_mode", DEFAULT_WRITE_MODE)
    if write_mode not in WRITE_MODES:
        raise _fail(
            path, "write_mode", f"{write_mode!r} is not a mode; use one of {', '.join(WRITE_MODES)}"
        )
    return PipelineConfig(
        dump=_dump(path, data.get("dump")),
        max_record_bytes=max_bytes,
        write_mode=write_mode,
        catalog=catalog,
        buckets=buckets,
        retention_hours=retention,
        name=name,
        format=fmt,  # checked against FORMATS above
        **places,
        topics=topics,
        topic_options=topic_options,
        warehouse=warehouse,
        start=start,
        tables=_tables(path, data["tables"]),
        audit=_audit(path, data.get("audit")),
        airflow=_airflow(path, data.get("airflow"), start),
        notify=_notify(path, data.get("notify")),
        description=_description(path, data.get("description")),
        source_file=path,
    )


def load_config(path: str | Path) -> PipelineConfig:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"{p}: no such pipeline file; pass the path of a pipeline YAML, e.g. pipelines/shop.yaml"
        )
    try:
        text = p.read_text(encoding="utf-8")
        lines = key_lines(yaml.compose(text, Loader=yaml.SafeLoader), p)
        data = yaml.safe_load(text)
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{p}: not UTF-8 text (byte {err.start}: {err.reason}); save the file as UTF-8"
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{p}: not valid YAML{where}: {problem}; fix the syntax") from None
    except ValueError as err:  # YAML's own date and time values: `start: 2026-11-31`
        raise ConfigError(
            f"{p}: a value is not what it looks like ({err}); write a real date and time, "
            "e.g. start: 2026-11-30T00:00:00Z"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{p}: nested too deeply to read; a pipeline is a few levels deep"
        ) from None
    try:
        return parse_config(data, p.resolve())
    except ConfigError as err:
        line = _line_of(lines, err.key)
        if line is None:
            raise
        where = str(p.resolve())
        raise ConfigError(str(err).replace(f"{where}: ", f"{where}:{line}: ", 1), err.key) from None
    except (OverflowError, RecursionError) as err:
        raise ConfigError(f"{p}: a value is out of range ({err}); check the times in it") from None


def key_lines(node: yaml.Node | None, path: Path, prefix: str = "") -> dict[str, int]:
    """Each key's line in the file (`a.b` for key b in mapping a); ConfigError on a key given
    twice in one mapping (YAML keeps the last, silently)."""
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            name = f"{prefix}{k.value}" if isinstance(k, yaml.ScalarNode) else prefix.rstrip(".")
            if name in out:
                raise ConfigError(
                    f"{path}:{k.start_mark.line + 1}: `{name}` is given twice (first at line "
                    f"{out[name]}); keep one",
                    name,
                )
            out[name] = k.start_mark.line + 1
            out.update(key_lines(v, path, f"{name}."))
    return out


def _line_of(lines: dict[str, int], key: str | None) -> int | None:
    """The line of `key`, or of the nearest key above it that the file has."""
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return None


def load_folder(folder: str | Path) -> tuple[list[PipelineConfig], dict[Path, str]]:
    """Every `*.yaml`/`*.yml` in a folder: the valid configs, and one error line per bad file."""
    good, bad = [], {}
    for p in sorted(Path(folder).glob("*.y*ml")):
        try:
            good.append(load_config(p))
        except ConfigError as err:
            bad[p] = str(err)
        except Exception as err:  # noqa: BLE001 - one file's failure is that file's alone
            bad[p] = f"{p}: could not be read ({type(err).__name__}: {err}); fix or move it"
    return good, bad

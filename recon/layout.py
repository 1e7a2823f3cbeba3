"""Where everything lives on disk, and the one way files are replaced (stdlib only).

This module is the only owner of paths under a pipeline's `raw_path` and `warehouse` (contract
2.1 and 4); every stage asks it instead of joining folder names itself.

Raw dumps: `recon.rawdumps` (the Spark-Kafka and Kafka Connect layouts).

Warehouse of pipeline `p`:
- `_state/p/events/hour=H/`, `_state/p/carry/hour=H/`, `_state/p/offsets/hour=H/`,
  `_state/p/offset_hashes/hour=H/`: decode outputs (Parquet); `_state/p/schema/hour=H.json` table definitions; `_state/p/decode/hour=H.json`
  decode counters, written last; `_state/p/timings/hour=H.json` each stage's seconds; `_state/p/_staging/<run>/` a decode run's scratch space;
  `_state/p/offsets_expired.parquet` and `_state/p/expired.json`: what `recon expire` left of
  expired hours.
- `quarantine/p/hour=H/`: records that could not be decoded.
- `_state/p/merge/`: `manifest.json` (the merge state in force), `manifests/hour=H.json` (the
  state each hour left, for rollback), `data/run=<id>/hour=H/try=<attempt>/_t=<table>/_b=<bucket>/`
  (state rows; one folder per attempt),
  `hours/hour=H.json` (the merge result of an hour).
- `_state/p/repairs/hour=H/repair=<id>/`: the corrections `recon reconcile --repair` made to
  the version of hour H (Parquet; `recon.merge.repairs`).
- `audit/p/H/`: `report.json`, `report.html`, `reconcile-<table>.json`, `repair-<table>.json`.
- `catalog.db` + `iceberg/`: the default Iceberg catalog and its data.
- `_s3/<bucket>/<key>`: the copies of what the pipelines read from S3, and the published files
  of tables on S3 as Spark wrote them (`recon.objstore`).

`write_json_atomic` / `write_text_atomic` are the only writers of those JSON files: a unique
temporary name beside the target, fsync of the file, `os.replace`, fsync of the folder, so a
reader (or a crash) sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from recon.rawdumps import SPARK_KAFKA_DUMP, DumpConfig, Root, dump_files, hour_folder

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
"""The project checkout (pipelines/, dags/, docs/ beside the package; editable install), or
site-packages when the package is installed from a wheel."""
CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file() and (PROJECT_ROOT / "pipelines").is_dir()


def shipped(rel: str) -> Path:
    """A file of the checkout the package needs (`dags/recon_pipelines.py`, the demo pipelines,
    `docs/reference/pipeline.schema.json`): the checkout's own, else the copy a wheel carries
    under `recon/_shipped/` (setup.py)."""
    return (PROJECT_ROOT if CHECKOUT else PACKAGE_DIR / "_shipped") / rel


def demo_home() -> Path:
    """Where `recon demo` keeps its pipelines (`pipelines/`) and data (`demo-data/`):
    `RECON_DEMO_HOME`, else the checkout, else (an installed package) the current folder."""
    home = os.environ.get("RECON_DEMO_HOME")
    if home:
        return Path(home).resolve()
    return PROJECT_ROOT if CHECKOUT else Path.cwd().resolve()


def hour_text(hour: datetime) -> str:
    """`YYYY-MM-DDTHH` (UTC), the hour's name in every folder and file below."""
    return hour.astimezone(UTC).strftime("%Y-%m-%dT%H")


def raw_hour_folder(raw_path: Path, topic: str, hour: datetime) -> Path:
    """The Spark-Kafka dump folder of one topic-hour (`recon.rawdumps` owns both layouts)."""
    folder = hour_folder(raw_path, topic, hour, SPARK_KAFKA_DUMP)
    assert isinstance(folder, Path)
    return folder


def dump_bytes(
    raw_path: Root, topics: Iterable[str], hours: Iterable[datetime], dump: DumpConfig
) -> int:
    """The size on disk of the dump files of `hours` over `topics`: what decides whether a
    run, or a stage's hour, is small (`recon.ops.sizing`)."""
    return sum(size for _, size in dump_files(raw_path, list(topics), list(hours), dump))


_SPARK_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
"""The characters Spark's partitioned writes escape in a folder's value (its
`ExternalCatalogUtils.escapePathName`)."""


def partition_folder(column: str, value: str) -> str:
    """`column=value` as Spark names the folder of a partitioned write: each character of
    `_SPARK_ESCAPED` as `%XX` (`_t=s.a=b` is `_t=s.a%3Db`)."""
    return f"{column}=" + "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED else c for c in value)


def pipelines_dir() -> Path:
    """The folder of pipeline YAMLs the DAGs and the UI read (`RECON_PIPELINES_DIR`)."""
    return Path(os.environ.get("RECON_PIPELINES_DIR", demo_home() / "pipelines"))


STAGE_JOB = PACKAGE_DIR / "jobs" / "stage.py"
APP_JOB = PACKAGE_DIR / "jobs" / "app.py"
DEMO_DATA = demo_home() / "demo-data"


@dataclass(frozen=True)
class Layout:
    """Every path under one pipeline's warehouse."""

    warehouse: Path
    pipeline: str

    @property
    def object_mirror(self) -> Path:
        """The copies of what the pipelines of this warehouse read from S3, as
        `<bucket>/<key>` (`recon.objstore`)."""
        return self.warehouse / "_s3"

    # -- decode -------------------------------------------------------------------------------
    @property
    def state(self) -> Path:
        return self.warehouse / "_state" / self.pipeline

    def events(self, hour: datetime) -> Path:
        return self.state / "events" / f"hour={hour_text(hour)}"

    @property
    def repairs_root(self) -> Path:
        """`recon.merge.repairs`: `hour=H/repair=<id>/` per repair of hour H's version."""
        return self.state / "repairs"

    def winners(self, hour: datetime) -> Path:
        """The hour's events less those a decode task superseded (`recon.decode.premerge.prefold`)."""
        return self.state / "winners" / f"hour={hour_text(hour)}"

    def carry(self, hour: datetime) -> Path:
        return self.state / "carry" / f"hour={hour_text(hour)}"

    @property
    def offsets_root(self) -> Path:
        return self.state / "offsets"

    def offsets(self, hour: datetime) -> Path:
        return self.offsets_root / f"hour={hour_text(hour)}"

    def offset_hashes(self, hour: datetime | str) -> Path:
        """The content hash read at each offset of the hour (offset resets tell from replays)."""
        h = hour if isinstance(hour, str) else hour_text(hour)
        return self.state / "offset_hashes" / f"hour={h}"

    def schema(self, hour: datetime) -> Path:
        return self.state / "schema" / f"hour={hour_text(hour)}.json"

    def decode_counters(self, hour: datetime) -> Path:
        return self.state / "decode" / f"hour={hour_text(hour)}.json"

    def timings(self, hour: datetime) -> Path:
        """The seconds each stage of the hour's last successful run took (`recon.ops.guard`)."""
        return self.state / "timings" / f"hour={hour_text(hour)}.json"

    @property
    def acknowledged_resets(self) -> Path:
        """Offset resets an operator acknowledged (`recon acknowledge-reset`)."""
        return self.state / "acknowledged_resets.json"

    @property
    def expired_marker(self) -> Path:
        """`{"hours_before": H}`: `recon expire` deleted what hours before H decoded."""
        return self.state / "expired.json"

    @property
    def connect_root(self) -> Path:
        return self.state / "connect"

    def connect(self, hour: datetime) -> Path:
        """The hour's Kafka Connect files as Kafka source records (`recon.decode.input.connect_input`)."""
        return self.connect_root / f"hour={hour_text(hour)}"

    def staging(self, run_id: str) -> Path:
        return self.state / "_staging" / run_id

    def quarantine(self, hour: datetime) -> Path:
        return self.warehouse / "quarantine" / self.pipeline / f"hour={hour_text(hour)}"

    def merge_quarantine(self, hour: datetime) -> Path:
        """Changes the merge set aside (a value that does not fit its column), with the bytes
        of the records they came from; rewritten by every merge of the hour."""
        return self.warehouse / "quarantine" / self.pipeline / "merge" / f"hour={hour_text(hour)}"

    # -- merge --------------------------------------------------------------------------------
    @property
    def merge(self) -> Path:
        return self.state / "merge"

    @property
    def manifest(self) -> Path:
        return self.merge / "manifest.json"

    @property
    def saved_manifests(self) -> Path:
        return self.merge / "manifests"

    def saved_manifest(self, hour: datetime | str) -> Path:
        h = hour if isinstance(hour, str) else hour_text(hour)
        return self.saved_manifests / f"hour={h}.json"

    @property
    def merge_data(self) -> Path:
        return self.merge / "data"

    def merge_run(self, run_id: str, hour: datetime, attempt: str) -> Path:
        """One folder per (run, hour, attempt): a run over several hours never overwrites its
        own, and a retried or cleared task (Airflow re-uses the run id) never rewrites a folder
        the state in force, or a saved state, still names."""
        return self.merge_data / f"run={run_id}" / f"hour={hour_text(hour)}" / f"try={attempt}"

    def merge_result(self, hour: datetime) -> Path:
        return self.merge / "hours" / f"hour={hour_text(hour)}.json"

    # -- audit and tables ---------------------------------------------------------------------
    @property
    def audit_root(self) -> Path:
        return self.warehouse / "audit" / self.pipeline

    def audit(self, hour: datetime) -> Path:
        return self.audit_root / hour_text(hour)

    def report(self, hour: datetime) -> Path:
        return self.audit(hour) / "report.json"

    @property
    def default_catalog_db(self) -> Path:
        return self.warehouse / "catalog.db"

    @property
    def default_iceberg(self) -> Path:
        return self.warehouse / "iceberg"


def table_data_run(table_location: Path, run_id: str, hour: str, attempt: str) -> Path:
    """Where one publish attempt writes a table's new data files (under the table's own
    location): a folder no earlier attempt wrote, so a retry never deletes files the current
    version reads and never commits an earlier attempt's leftovers."""
    return table_location / "data" / f"run={run_id}" / f"hour={hour}" / f"try={attempt}"


def new_attempt() -> str:
    """A name for one attempt of a stage: sortable by start time, unique across processes."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


# -- writing --------------------------------------------------------------------------------------
def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that replaces `path` when the block ends without an error: unique temp
    name beside it, fsync, `os.replace`, fsync of the folder. On an error `path` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (see `atomic_writer`)."""
    with atomic_writer(path) as f:
        f.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, doc: Any, indent: int = 2, sort_keys: bool = False) -> None:
    write_text_atomic(path, json.dumps(doc, indent=indent, sort_keys=sort_keys, default=str))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def replace_dir(src: Path, dst: Path) -> None:
    """Make `dst` what `src` holds (an empty folder when `src` does not exist)."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.exists():
        src.rename(dst)
    else:
        dst.mkdir(parents=True)


def folder_files(folder: Path) -> list[tuple[str, int, int]]:
    """A folder's files as (name, size, modification time), sorted: what a run that replaces
    the folder's files changes (empty when there is no folder)."""
    if not folder.is_dir():
        return []
    with os.scandir(folder) as it:
        return sorted((e.name, (st := e.stat()).st_size, st.st_mtime_ns) for e in it if e.is_file())


def has_parquet(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*.parquet"))

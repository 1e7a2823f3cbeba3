"""The raw dump layouts a pipeline reads, and when an hour of them is complete (stdlib only: the
DAG's sensor and the config import it).

- `spark-kafka` (the default): Spark's Kafka source written hourly,
  `<raw_path>/<topic>/dt=YYYY-MM-DD/hour=HH/part-*.parquet|.jsonl[.gz]`, complete once the
  folder holds `_SUCCESS`.
- `kafka-connect-s3`: Confluent's S3 sink connector with its TimeBasedPartitioner (hourly, UTC),
  `<raw_path>/<topic>/<path_format>/<topic>+<partition>+<startOffset>.<ext>`, `raw_path` being
  the connector's `topics.dir`. It writes no marker, so an hour is complete when every partition
  seen in it has a file in one of the next `LOOKAHEAD_HOURS` hours (the connector moved on), or
  when the hour ended more than `grace_minutes` ago. `recon.decode.input.connect_input` turns its files
  into the Kafka source's records.

`list_hour` is the one listing both the decode and the sensor use, so they agree on
completeness. A raw folder may be a bucket's prefix (`recon.objstore.S3Folder`): the layouts
list it the same way, and the decode reads the files' copies (`recon.objstore.local_copies`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recon.objstore import S3Folder, list_files

Root = Path | S3Folder
"""A raw folder: on the file system, or a bucket's prefix."""

SPARK_KAFKA = "spark-kafka"
KAFKA_CONNECT_S3 = "kafka-connect-s3"
LAYOUTS = (SPARK_KAFKA, KAFKA_CONNECT_S3)
DEFAULT_PATH_FORMAT = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"
"""The connector's documented hourly `path.format`."""
DEFAULT_GRACE_MINUTES = 30
LOOKAHEAD_HOURS = 6
PARQUET_DUMP = ".parquet"
JSONL_DUMPS = (".jsonl", ".jsonl.gz")
"""How Spark-Kafka dump files (`part-*`) end: the decode reads these and no others."""
CONNECT_EXTENSIONS = (".avro", ".bin", ".bin.gz", ".json", ".json.gz")
"""The connector's AvroFormat, ByteArrayFormat and JsonFormat files (gzip: `s3.compression.type`)."""
BINARY_FORMATS = ("tencent_dts_pb", "canal_pb")
"""Formats whose values are binary: a separator cannot delimit them in a `.bin` file."""

_TOKENS = {"YYYY": "%Y", "yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H"}
_NEEDED = {
    "%Y": "the year (YYYY)",
    "%m": "the month (MM)",
    "%d": "the day (dd)",
    "%H": "the hour (HH)",
}


@dataclass(frozen=True)
class DumpConfig:
    """The pipeline YAML's `dump:` block."""

    layout: str = SPARK_KAFKA
    path_format: str = DEFAULT_PATH_FORMAT
    grace_minutes: int = DEFAULT_GRACE_MINUTES
    separator: bytes = b"\n"
    """ByteArrayFormat's `format.bytearray.separator` (`.bin` files)."""

    @property
    def strftime(self) -> str:
        return path_format_strftime(self.path_format)


SPARK_KAFKA_DUMP = DumpConfig()


def path_format_strftime(text: str) -> str:
    """The connector's `path.format` (a Joda-Time pattern: `'literal'` in single quotes, `''` a
    quote, YYYY/yyyy MM dd HH the fields) as a strftime pattern; ValueError naming what is not
    read (a field other than these, or one of the four missing)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "'":
            end = i + 1
            lit: list[str] = []
            while True:
                j = text.find("'", end)
                if j < 0:
                    raise ValueError(f"a quote opened at character {i + 1} is not closed")
                lit.append(text[end:j])
                if text[j + 1 : j + 2] == "'":  # '' inside a literal: one quote
                    lit.append("'")
                    end = j + 2
                    continue
                break
            out.append("".join(lit).replace("%", "%%") or "'")
            i = j + 1
        elif c.isalpha():
            j = i
            while j < len(text) and text[j] == c:
                j += 1
            token = text[i:j]
            if token not in _TOKENS:
                raise ValueError(
                    f"{token!r} is not read; use YYYY (or yyyy), MM, dd and HH, and quote "
                    "literal text ('year'=YYYY)"
                )
            out.append(_TOKENS[token])
            i = j
        else:
            out.append("%%" if c == "%" else c)
            i += 1
    pattern = "".join(out)
    missing = [v for k, v in _NEEDED.items() if k not in pattern]
    if missing:
        raise ValueError(f"it names no {', '.join(missing)}: hourly folders need all four")
    return pattern


@dataclass(frozen=True)
class HourFiles:
    """One topic-hour's dump files, and whether the hour is complete."""

    topic: str
    folder: Root
    complete: bool
    parquet: tuple[str, ...] = ()
    jsonl: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()
    """Kafka Connect files (`recon.decode.input.connect_input` turns them into `parquet` ones)."""
    unread: tuple[str, ...] = ()
    """Files in the hour's folder that match no dump name (a finding names each)."""
    waiting_for: str = ""
    """What the hour waits for when it is not complete."""
    sizes: tuple[int, ...] = ()
    """The sizes of `files`, in their order."""

    @property
    def files(self) -> tuple[str, ...]:
        return (*self.parquet, *self.jsonl, *self.connect)


def hour_folder(raw_path: Root, topic: str, hour: datetime, dump: DumpConfig) -> Root:
    h = hour.astimezone(UTC)
    if dump.layout == KAFKA_CONNECT_S3:
        return raw_path / topic / h.strftime(dump.strftime)
    return raw_path / topic / f"dt={h:%Y-%m-%d}" / f"hour={h:%H}"


def connect_name(topic: str, name: str) -> tuple[int, int, str] | None:
    """(partition, start offset, extension) of a connector file of `topic`, else None."""
    m = re.fullmatch(re.escape(topic) + r"\+(\d{1,9})\+(\d{1,19})(\.[a-z.]+)", name)
    if not m or m.group(3) not in CONNECT_EXTENSIONS:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3)


def _files(folder: Root) -> dict[str, int]:
    """Name -> size of the folder's files, by name."""
    if isinstance(folder, S3Folder):
        return dict(sorted(folder.files().items()))
    try:
        return dict(sorted((e.name, e.stat().st_size) for e in os.scandir(folder) if e.is_file()))
    except (FileNotFoundError, NotADirectoryError):
        return {}


def _hidden(name: str) -> bool:
    """Files every Hadoop reader passes over (`.crc`, `_SUCCESS`, `_committed_*`)."""
    return name.startswith((".", "_"))


def list_hour(
    raw_path: Root,
    topic: str,
    hour: datetime,
    dump: DumpConfig = SPARK_KAFKA_DUMP,
    now: datetime | None = None,
) -> HourFiles:
    folder = hour_folder(raw_path, topic, hour, dump)
    names = _files(folder)
    if dump.layout != KAFKA_CONNECT_S3:
        parts = [n for n in names if n.startswith("part-")]
        parquet = [n for n in parts if n.endswith(PARQUET_DUMP)]
        jsonl = [n for n in parts if n.endswith(JSONL_DUMPS)]
        complete = "_SUCCESS" in names
        return HourFiles(
            topic,
            folder,
            complete,
            parquet=tuple(str(folder / n) for n in parquet),
            jsonl=tuple(str(folder / n) for n in jsonl),
            waiting_for="" if complete else f"{folder}/_SUCCESS",
            sizes=tuple(names[n] for n in (*parquet, *jsonl)),
        )
    connect = [n for n in names if connect_name(topic, n)]
    unread = [n for n in names if not _hidden(n) and n not in connect]
    partitions = {connect_name(topic, n)[0] for n in connect}  # type: ignore[index]
    waiting = _connect_waiting(raw_path, topic, hour, dump, partitions, now)
    return HourFiles(
        topic,
        folder,
        not waiting,
        connect=tuple(str(folder / n) for n in connect),
        unread=tuple(str(folder / n) for n in unread),
        waiting_for=waiting,
        sizes=tuple(names[n] for n in connect),
    )


def _connect_waiting(
    raw_path: Root,
    topic: str,
    hour: datetime,
    dump: DumpConfig,
    partitions: set[int],
    now: datetime | None,
) -> str:
    """'' when the hour is complete, else what it waits for."""
    end = hour.astimezone(UTC) + timedelta(hours=1)
    due = end + timedelta(minutes=dump.grace_minutes)
    if (now or datetime.now(UTC)) >= due:
        return ""
    if partitions:
        later: set[int] = set()
        for k in range(1, LOOKAHEAD_HOURS + 1):
            for n in _files(hour_folder(raw_path, topic, hour + timedelta(hours=k), dump)):
                found = connect_name(topic, n)
                if found:
                    later.add(found[0])
        if partitions <= later:
            return ""
    return (
        f"a later hour's file of every partition of topic {topic} seen in "
        f"{hour_folder(raw_path, topic, hour, dump)}, or {due:%Y-%m-%dT%H:%M}Z "
        f"(the hour's end + dump.grace_minutes {dump.grace_minutes})"
    )


def dump_files(
    raw_path: Root, topics: tuple[str, ...] | list[str], hours: list[datetime], dump: DumpConfig
) -> list[tuple[str, int]]:
    """The dump files of `hours` over `topics`, each with its size (what decides whether a run
    is small): paths, or `s3://` URIs."""
    out: list[tuple[str, int]] = []
    for h in hours:
        for topic in topics:
            hf = list_hour(raw_path, topic, h, dump, now=_FAR_FUTURE)
            out.extend(zip(hf.files, hf.sizes, strict=True))
    return out


_FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
"""A listing that does not care about completeness (no later hours looked at)."""


def scan_topic(
    raw_path: Root, topic: str, dump: DumpConfig, limit: int = 10_000
) -> dict[datetime, list[str]]:
    """Every hour folder of a topic with its dump files (at most `limit` hours), by walking
    the topic's folder and reading each folder's hour from the layout's path."""
    base = raw_path / topic
    pattern = dump.strftime if dump.layout == KAFKA_CONNECT_S3 else "dt=%Y-%m-%d/hour=%H"
    depth = pattern.count("/") + 1
    found: dict[datetime, list[str]] = {}
    for folder in _folders_at(base, depth):
        rel = _relative(folder, base)
        try:
            hour = datetime.strptime(rel, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
        files = list_hour(raw_path, topic, hour, dump, now=_FAR_FUTURE).files
        if files:
            found[hour] = list(files)
        if len(found) >= limit:
            break
    return dict(sorted(found.items()))


def _relative(folder: Root, base: Root) -> str:
    if isinstance(folder, S3Folder) and isinstance(base, S3Folder):
        return folder.relative_to(base).as_posix()
    assert isinstance(folder, Path) and isinstance(base, Path)
    return folder.relative_to(base).as_posix()


def _folders_at(base: Root, depth: int) -> list[Root]:
    level: list[Root] = [base] if isinstance(base, S3Folder) or base.is_dir() else []
    for _ in range(depth):
        nxt: list[Root] = []
        for d in level:
            if isinstance(d, S3Folder):
                nxt.extend(d.folders())
                continue
            try:
                nxt.extend(Path(e.path) for e in os.scandir(d) if e.is_dir())
            except OSError:
                continue
        level = nxt
    return sorted(level, key=str)


def bin_file_of_binary_format(
    raw_path: Root, topics: tuple[str, ...], fmt: str, dump: DumpConfig, limit: int = 20_000
) -> str | None:
    """A `.bin` connector file of a binary format's topic (its values cannot be split by a
    separator), looking at `limit` entries at most; None when there is none."""
    if dump.layout != KAFKA_CONNECT_S3 or fmt not in BINARY_FORMATS:
        return None
    seen = 0
    for topic in topics:
        for folder, names in _walk(raw_path / topic):
            for n in names:
                found = connect_name(topic, n)
                if found and found[2].startswith(".bin"):
                    return f"{folder}/{n}"
            seen += len(names) + 1
            if seen > limit:
                return None
    return None


def _walk(top: Root) -> Iterator[tuple[str, list[str]]]:
    """(folder, its file names) of every folder under `top`."""
    if isinstance(top, Path):
        for folder, _, names in os.walk(top):
            yield folder, names
        return
    by_folder: dict[str, list[str]] = {}
    for uri in list_files(str(top)):
        folder, _, name = uri.rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    yield from sorted(by_folder.items())

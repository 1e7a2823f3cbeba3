"""Object stores: the raw dumps, the snapshot and the published tables on `s3://` (AWS S3 or an
S3-compatible store: MinIO, Ceph, moto), through pyarrow's S3 file system (the one pyiceberg's
FileIO uses; no Hadoop S3 jars).

The stages read and write through the file system (Spark's Parquet reads and writes, the merge
state's atomic renames and lock), so what they read from a bucket is copied into the pipeline's
warehouse first, a POSIX folder shared by Airflow and the Spark workers: `<mirror>/<bucket>/<key>`
(`Layout.object_mirror`). A copy is made once (a file of the size listed is kept) and atomically
(a temporary name, then a rename), so runs beside each other and retries share it. Published
data files are written there by Spark and uploaded before the commit that names them; Spark
reads them back from there (`local_copies` fetches one another host wrote).

Credentials and endpoint come from the environment, the AWS way: `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` (or the SDK's other sources: a profile, an
instance role), `AWS_REGION`, and `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`) for an
S3-compatible store. pyarrow is imported when a bucket is used (the DAG's sensor and the
config import this module).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from recon.errors import ReconError

SCHEME = "s3://"
_THREADS = 8
"""Transfers at once (each a stream of its own)."""


class StoreError(ReconError):
    """An object store cannot be read or written: one line naming the bucket and the fix."""


def is_s3(text: str) -> bool:
    return text[: len(SCHEME)].lower() == SCHEME


def endpoint() -> str | None:
    """The S3-compatible store's endpoint from the environment (None: AWS itself)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def filesystem() -> Any:
    """pyarrow's S3 file system, as the environment configures it."""
    from pyarrow.fs import S3FileSystem

    return S3FileSystem(
        endpoint_override=endpoint(), region=region(), connect_timeout=10, request_timeout=60
    )


def iceberg_properties() -> dict[str, str]:
    """pyiceberg's `s3.*` FileIO properties the environment gives (its FileIO reads neither the
    endpoint nor the region from it)."""
    out = {}
    if endpoint():
        out["s3.endpoint"] = str(endpoint())
    if region():
        out["s3.region"] = str(region())
    return out


def explain(uri: str, err: Exception) -> StoreError:
    """One line for a failed request: a missing bucket, access denied, an endpoint that does not
    answer, or the store's own words."""
    text = str(err)
    bucket = split(uri)[0]
    if (
        "NO_SUCH_BUCKET" in text
        or "NoSuchBucket" in text
        or re.search(r"[Bb]ucket .* not found", text)
    ):
        return StoreError(f"{uri}: bucket {bucket} does not exist; create it or fix the path")
    if "ACCESS_DENIED" in text or "AccessDenied" in text or "403" in text:
        return StoreError(
            f"{uri}: access denied; check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the "
            f"role) and that its policy allows s3:ListBucket, s3:GetObject and s3:PutObject "
            f"on bucket {bucket} (docs/deployment.md: Object stores)"
        )
    if re.search(r"INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|InvalidAccessKeyId|"
                 r"SignatureDoesNotMatch|EXPIRED_TOKEN|ExpiredToken", text):  # fmt: skip
        return StoreError(
            f"{uri}: the store refused the credentials; check AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or the profile or role in use)"
        )
    if "NETWORK_CONNECTION" in text or "curlCode" in text or "Could not resolve" in text:
        where = endpoint() or "AWS S3"
        return StoreError(
            f"{uri}: the store at {where} does not answer; check AWS_ENDPOINT_URL and the network"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return StoreError(f"{uri}: {first}")


def split(uri: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`."""
    rest = uri[len(SCHEME) :].strip("/")
    bucket, _, key = rest.partition("/")
    return bucket, key


@dataclass(frozen=True)
class S3Folder:
    """A folder (a key prefix) of a bucket, with the few path operations the dump layouts use
    (`recon.rawdumps`): join, name, and listing its files and sub-folders."""

    uri: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "uri", self.uri.rstrip("/"))

    def __truediv__(self, part: str) -> S3Folder:
        return S3Folder(f"{self.uri}/{part}")

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    @property
    def path(self) -> str:
        """`bucket/key`, as pyarrow names it."""
        return split_path(self.uri)

    def relative_to(self, other: S3Folder) -> PurePosixPath:
        return PurePosixPath(self.path).relative_to(other.path)

    def entries(self) -> list[Any]:
        """The folder's files and sub-folders (none for a prefix that holds nothing; a bucket
        that does not exist is a `StoreError`, not an empty folder)."""
        return _listed(self.uri, recursive=False)

    def files(self) -> dict[str, int]:
        """Name -> size of the folder's files."""
        from pyarrow.fs import FileType

        return {e.base_name: int(e.size) for e in self.entries() if e.type == FileType.File}

    def folders(self) -> list[S3Folder]:
        from pyarrow.fs import FileType

        return sorted(
            (self / e.base_name for e in self.entries() if e.type == FileType.Directory),
            key=str,
        )


def mirrored(uri: str, mirror: Path) -> Path:
    """Where an object's copy lives in the warehouse: `<mirror>/<bucket>/<key>`."""
    bucket, key = split(uri)
    return mirror.joinpath(bucket, *[p for p in key.split("/") if p])


def uri_of(local: Path, mirror: Path) -> str:
    """The object a mirrored file stands for (`mirrored`'s inverse)."""
    return SCHEME + local.relative_to(mirror).as_posix()


def local_copies(
    uris: Iterable[str], mirror: Path, sizes: dict[str, int] | None = None
) -> list[Path]:
    """The mirrored copies of `uris` (local paths pass through), each fetched unless a copy of
    its size (`sizes`, else the store's) is there: several at once, each to a temporary name
    then renamed, so a reader never sees part of one."""
    uris = list(uris)
    todo = [u for u in uris if is_s3(u)]
    if todo:
        fs = filesystem()
        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(lambda u: _fetch(fs, u, mirror, (sizes or {}).get(u)), todo))
    return [mirrored(u, mirror) if is_s3(u) else Path(u) for u in uris]


def _copy(src: str, dst: str, src_fs: Any, dst_fs: Any) -> None:
    """One file from one file system to another (pyarrow's copy, streamed)."""
    from pyarrow.fs import copy_files as copy

    copy(src, dst, source_filesystem=src_fs, destination_filesystem=dst_fs)


def _fetch(fs: Any, uri: str, mirror: Path, size: int | None) -> None:
    from pyarrow.fs import LocalFileSystem

    dst = mirrored(uri, mirror)
    try:
        if size is None:
            info = fs.get_file_info(split_path(uri))
            if info.size is None:
                raise StoreError(f"{uri}: no such object; check the path")
            size = int(info.size)
        if dst.is_file() and dst.stat().st_size == size:
            return
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex[:8]}.tmp")
        _copy(split_path(uri), str(tmp), fs, LocalFileSystem())
        os.replace(tmp, dst)
    except OSError as err:
        raise explain(uri, err) from None


def split_path(uri: str) -> str:
    """`bucket/key` of `s3://bucket/key`, as pyarrow names it."""
    return uri[len(SCHEME) :]


def _listed(uri: str, recursive: bool) -> list[Any]:
    """What is under a prefix (nothing for one that holds nothing; a bucket that does not exist
    is a `StoreError`, not an empty folder)."""
    from pyarrow.fs import FileSelector, FileType

    fs = filesystem()
    selector = FileSelector(split_path(uri).rstrip("/"), recursive=recursive, allow_not_found=True)
    try:
        found = list(fs.get_file_info(selector))
        if not found and fs.get_file_info(split(uri)[0]).type == FileType.NotFound:
            raise OSError("NO_SUCH_BUCKET")
    except OSError as err:
        raise explain(uri, err) from None
    return found


def upload_tree(folder: Path, mirror: Path) -> list[str]:
    """Every file under `folder` (a folder of the mirror) uploaded to the object it stands for,
    several at once; their URIs, sorted. Spark's checksum files (`.crc`) and markers stay."""
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
    )
    from pyarrow.fs import LocalFileSystem

    fs = filesystem()

    def put(p: Path) -> str:
        uri = uri_of(p, mirror)
        try:
            _copy(str(p), split_path(uri), LocalFileSystem(), fs)
        except OSError as err:
            raise explain(uri, err) from None
        return uri

    with ThreadPoolExecutor(_THREADS) as pool:
        return sorted(pool.map(put, files))


def remove(uris: Iterable[str], mirror: Path) -> None:
    """Delete objects and their mirrored copies."""
    uris = list(uris)
    if not uris:
        return
    fs = filesystem()
    for u in uris:
        try:
            fs.delete_file(split_path(u))
        except FileNotFoundError:
            pass
        except OSError as err:
            raise explain(u, err) from None
        mirrored(u, mirror).unlink(missing_ok=True)


def list_files(uri: str) -> dict[str, int]:
    """URI -> size of every object under a prefix."""
    from pyarrow.fs import FileType

    return {
        SCHEME + i.path: int(i.size)
        for i in _listed(uri, recursive=True)
        if i.type == FileType.File
    }


def check_access(uri: str, write: bool) -> None:
    """Raise `StoreError` (one line) unless the folder can be listed, and written when `write`
    (a marker object put and deleted)."""
    S3Folder(uri).entries()
    if write:
        probe = f"{uri.rstrip('/')}/_recon_access_check_{uuid.uuid4().hex[:8]}"
        fs = filesystem()
        try:
            with fs.open_output_stream(split_path(probe)) as out:
                out.write(b"")
            fs.delete_file(split_path(probe))
        except OSError as err:
            raise explain(uri, err) from None

"""The dumps' layouts listed on S3 as on a folder, their copies in the warehouse, the config's
object-store places, and a store that cannot be reached said in one line (a real S3 protocol
server: moto's, on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from recon.cli import main
from recon.config import load_config
from recon.errors import ConfigError
from recon.merge.manifest import unloaded_snapshot_bytes
from recon.objstore import S3Folder, StoreError, local_copies, mirrored
from recon.rawdumps import KAFKA_CONNECT_S3, SPARK_KAFKA_DUMP, DumpConfig, list_hour
from tests.support.builders import write_pipeline
from tests.support.s3 import (
    make_bucket,
    moto_server,
    moto_server_checking_credentials,
    upload,
    use_s3,
)

H = datetime(2026, 11, 20, 5, tzinfo=UTC)
CONNECT = DumpConfig(KAFKA_CONNECT_S3, "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 30, b"\n")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def bucket(endpoint: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    use_s3(monkeypatch, endpoint)
    name = "b-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    return make_bucket(name)


def _touch(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def test_an_hour_lists_on_s3_as_in_a_folder(bucket: str, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    spark = raw / "t" / "dt=2026-11-20"
    _touch(spark / "hour=05", {"part-0.parquet": b"ab", "part-1.jsonl": b"abc", "x.txt": b""})
    _touch(spark / "hour=06", {"part-0.parquet": b"a", "_SUCCESS": b""})
    conn = raw / "c"
    _touch(conn / "year=2026/month=11/day=20/hour=05", {"c+0+0.json": b"{}\n", "c+1+4.json": b"1"})
    _touch(conn / "year=2026/month=11/day=20/hour=07", {"c+0+9.json": b"{}\n"})
    upload(raw, f"{bucket}/raw")
    root = S3Folder(f"{bucket}/raw")
    far = datetime(2026, 11, 20, 5, tzinfo=UTC)  # the grace has not passed: lookahead decides
    for hour in (H, H + timedelta(hours=1)):
        local, remote = (list_hour(r, "t", hour, SPARK_KAFKA_DUMP) for r in (raw, root))
        assert remote.complete == local.complete
        assert [f.removeprefix(str(root)) for f in remote.files] == [
            f.removeprefix(str(raw)) for f in local.files
        ]
        assert remote.sizes == local.sizes and sum(remote.sizes) > 0
    assert not list_hour(root, "t", H, SPARK_KAFKA_DUMP).complete  # no _SUCCESS yet
    local, remote = (list_hour(r, "c", H, CONNECT, now=far) for r in (raw, root))
    # partition 1 has no later file: the hour waits, on S3 as on the folder
    assert not remote.complete and not local.complete
    assert remote.waiting_for.replace(str(root), "") == local.waiting_for.replace(str(raw), "")
    assert len(remote.connect) == 2 and remote.sizes == local.sizes
    _touch(conn / "year=2026/month=11/day=20/hour=08", {"c+1+5.json": b"1"})
    upload(raw, f"{bucket}/raw")
    assert list_hour(root, "c", H, CONNECT, now=far).complete


def test_copies_are_fetched_once_and_whole(bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _touch(src / "a", {"x.parquet": b"x" * 1000, "y.parquet": b"y"})
    upload(src, f"{bucket}/d")
    uris = [f"{bucket}/d/a/x.parquet", f"{bucket}/d/a/y.parquet"]
    mirror = tmp_path / "mirror"
    got = local_copies(uris, mirror)
    assert got == [mirrored(u, mirror) for u in uris]
    assert [p.read_bytes() for p in got] == [b"x" * 1000, b"y"]
    stamp = got[0].stat().st_mtime_ns
    assert local_copies(uris, mirror)[0].stat().st_mtime_ns == stamp  # not fetched again
    got[1].write_bytes(b"torn")  # a copy of another size is fetched again
    assert local_copies(uris, mirror)[1].read_bytes() == b"y"
    assert not [p for p in mirror.rglob("*") if p.name.endswith(".tmp")]
    with pytest.raises(StoreError, match="no such object"):
        local_copies([f"{bucket}/d/a/gone.parquet"], mirror)


def _pipeline(tmp_path: Path, **places: object) -> Path:
    doc: dict[str, object] = {"raw": "raw", "warehouse": tmp_path / "wh"}
    doc.update(places)
    return write_pipeline(tmp_path / "p.yaml", name="p", format="debezium_json", **doc)  # type: ignore[arg-type]


def test_the_config_takes_s3_places_and_mirrors_them_in_the_warehouse(tmp_path: Path) -> None:
    path = _pipeline(
        tmp_path,
        raw="s3://lake/raw/",
        snapshot={"path": "s3://lake/snap"},
        catalog={"warehouse": "s3://lake/ice"},
    )
    cfg = load_config(path)
    assert cfg.raw_uri == "s3://lake/raw" and cfg.raw_root == S3Folder("s3://lake/raw")
    assert cfg.raw_path == tmp_path / "wh" / "_s3" / "lake" / "raw"
    assert cfg.snapshot_uri == "s3://lake/snap"
    assert cfg.snapshot_path == tmp_path / "wh" / "_s3" / "lake" / "snap"
    local = load_config(_pipeline(tmp_path))
    assert local.raw_uri is None and local.raw_root == local.raw_path == tmp_path / "raw"


@pytest.mark.parametrize(
    ("places", "said"),
    [
        (
            {"warehouse": "s3://lake/wh"},
            "`warehouse`: s3:// is not supported; the pipeline's state",
        ),
        (
            {"raw": "gs://lake/raw"},
            "`raw_path`: gs:// is not supported; the object stores read are S3",
        ),
        ({"raw": "s3:///raw"}, "`raw_path`: 's3:///raw' names no bucket"),
        ({"snapshot": {"path": "abfs://c/s"}}, "`snapshot.path`: abfs:// is not supported"),
        ({"catalog": {"warehouse": "gs://b/ice"}}, "`catalog.warehouse`: gs:// is not supported"),
        ({"catalog": {"warehouse": "s3://b/ice", "s3.secret-access-key": "x"}}, "plain text"),
    ],
)
def test_a_place_on_another_store_is_refused_in_one_line(
    tmp_path: Path, places: dict[str, object], said: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_pipeline(tmp_path, **places))
    assert said in str(err.value) and "\n" not in str(err.value)


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["validate", "--check-access", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out.strip()


def test_check_access_says_which_store_cannot_be_reached(
    bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = _pipeline(
        tmp_path, raw=f"{bucket}/raw", catalog={"type": "sql", "warehouse": f"{bucket}/ice"}
    )
    assert _validate(ok, capsys) == (0, f"ok  {ok}  (dag recon_p, format debezium_json)")
    missing = _pipeline(tmp_path, raw="s3://no-such-bucket/raw")
    rc, out = _validate(missing, capsys)
    assert rc == 2 and out.count("\n") == 0
    assert "bucket no-such-bucket does not exist" in out
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    rc, out = _validate(ok, capsys)
    assert rc == 2 and "the store at http://127.0.0.1:9 does not answer" in out
    assert out.count("\n") == 0


def test_refused_credentials_are_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with moto_server_checking_credentials() as url:
        use_s3(monkeypatch, url)
        rc, out = _validate(_pipeline(tmp_path, raw="s3://lake/raw"), capsys)
    assert rc == 2 and out.count("\n") == 0
    assert "the store refused the credentials; check AWS_ACCESS_KEY_ID" in out


def test_denied_access_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user the store knows, whose policy allows nothing on the bucket."""
    with moto_server_checking_credentials(unchecked=3) as url:
        use_s3(monkeypatch, url)
        aws = {"endpoint_url": url, "region_name": "us-east-1"}  # one request each
        boto3.client("s3", **aws).create_bucket(Bucket="lake")
        iam = boto3.client("iam", **aws)
        iam.create_user(UserName="reader")
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        rc, out = _validate(_pipeline(tmp_path, raw="s3://lake/raw"), capsys)
    assert rc == 2 and out.count("\n") == 0
    assert "s3://lake/raw: access denied; check" in out and "s3:ListBucket" in out


def test_a_snapshot_on_s3_is_sized_on_the_bucket_until_loaded(bucket: str, tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    _touch(snap / "shop.orders", {"part-0.parquet": b"x" * 300, "part-1.parquet": b"y" * 20})
    _touch(snap / "shop.other", {"part-0.parquet": b"z" * 5000})  # not a table of the pipeline
    _touch(snap, {"_watermark.json": b"{}"})
    upload(snap, f"{bucket}/snap")
    cfg = load_config(_pipeline(tmp_path, snapshot={"path": f"{bucket}/snap"}))
    assert unloaded_snapshot_bytes(cfg, {"tables": {}, "snapshot": None}) == 320  # type: ignore[typeddict-item]
    loaded = {"tables": {"shop.orders": {"snapshot_loaded": True}}, "snapshot": None}
    assert unloaded_snapshot_bytes(cfg, loaded) == 0  # type: ignore[arg-type]

"""A real S3 protocol server on this machine for the object-store tests: moto's server mode on
127.0.0.1 (`ThreadedMotoServer`), with the environment a pipeline reads its endpoint and
credentials from (`recon.objstore`)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from moto.server import ThreadedMotoServer

from recon.objstore import filesystem


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server in this process; its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@contextmanager
def moto_server_checking_credentials(unchecked: int = 0) -> Iterator[str]:
    """A moto server (its own process) that authenticates and authorizes every request but its
    first `unchecked` (the set-up's): no key it does not know is taken, and a known key only
    does what its IAM policy allows."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(unchecked)}
    moto = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError("moto_server did not start") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def use_s3(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Point this process (and the processes it starts) at `endpoint`, with test credentials."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for k in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)


def make_bucket(name: str) -> str:
    """Create bucket `name` on the store the environment names; its URI."""
    fs = pafs.S3FileSystem(
        endpoint_override=os.environ["AWS_ENDPOINT_URL"], allow_bucket_creation=True
    )
    fs.create_dir(name)
    return f"s3://{name}"


def upload(folder: Path, uri: str) -> None:
    """Every file under `folder` to the same place under `uri` (`s3://bucket/prefix`)."""
    pafs.copy_files(str(folder), uri.removeprefix("s3://"), destination_filesystem=filesystem())


def objects(uri: str) -> list[str]:
    """The keys under `uri`, as URIs, sorted."""
    sel = pafs.FileSelector(uri.removeprefix("s3://"), recursive=True, allow_not_found=True)
    infos = filesystem().get_file_info(sel)
    return sorted("s3://" + i.path for i in infos if i.type == pafs.FileType.File)

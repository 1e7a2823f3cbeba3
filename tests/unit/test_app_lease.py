"""Runs that start at once never share a Spark application an earlier run left serving
(`recon.airflow.spark_app._lease`, `RECON_SPARK_APP_SHARED`): each setup task leases one
application to its run, or a folder of its own to start one in. The e2e test of the DAGs shares
applications between three runs, two at a time, so their setup tasks rarely meet; here many
processes lease at the same moment, and a stand-in application (a process listening on the
socket its `app.json` names, that socket in its command line, as the application's is) serves
in a folder."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recon.airflow.spark_app import READY_S, _lease
from recon.appsocket import APP_INFO, LEASE

KEY = "conn-abc"
RUNS = 6
_SERVE = (
    "import socket, sys, time\n"
    "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(64)\n"
    "print('ready', flush=True); time.sleep(120)\n"
)


_SERVERS: list[subprocess.Popen[str]] = []


@pytest.fixture
def shared() -> Iterator[str]:
    """The folder of shared applications; the stand-ins a test started are killed after it."""
    folder = tempfile.mkdtemp(prefix="rl-")  # short: a socket's path is at most 107 bytes
    try:
        yield folder
    finally:
        for p in _SERVERS:
            p.kill()
            p.wait()
        _SERVERS.clear()
        shutil.rmtree(folder, ignore_errors=True)


def _serve(folder: str) -> None:
    """A stand-in application serving in `folder` (killed after the test)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    sock = os.path.join(folder, "s")
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, sock], stdout=subprocess.PIPE, text=True)
    _SERVERS.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    Path(folder, APP_INFO).write_text(json.dumps({"socket": sock, "pid": proc.pid}))


def _take(shared: str, run: str, start: mp.synchronize.Barrier, out: mp.Queue) -> None:
    start.wait()
    try:
        folder, info = _lease(shared, KEY, run)
    except Exception as err:  # noqa: BLE001 - the test names it
        out.put((run, repr(err), False))
    else:
        out.put((run, folder, info is not None))


def _lease_at_once(shared: str, runs: list[str]) -> dict[str, tuple[str, bool]]:
    """Each run's (folder, whether it got a serving application), every run leasing at once
    in a process of its own."""
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(len(runs)), ctx.Queue()
    procs = [ctx.Process(target=_take, args=(shared, r, start, out)) for r in runs]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in runs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return {run: (folder, serving) for run, folder, serving in got}


def _lease_of(folder: str) -> str:
    return Path(folder, LEASE).read_text()


@pytest.mark.parametrize("contest", range(5))  # a race: without the lock most contests fail
def test_runs_at_once_lease_one_free_application_once(shared: str, contest: int) -> None:
    app = os.path.join(shared, f"{KEY}-0")
    _serve(app)
    runs = [f"run{i}" for i in range(RUNS)]
    got = _lease_at_once(shared, runs)
    takers = [r for r, (_, serving) in got.items() if serving]
    assert len(takers) == 1, got  # one run takes the free application, no other shares it
    assert got[takers[0]][0] == app
    folders = [folder for folder, _ in got.values()]
    assert len(set(folders)) == RUNS, got  # the others start one each, in folders of their own
    for run, (folder, _) in got.items():
        assert _lease_of(folder) == run


def test_a_leased_application_waits_for_its_teardown(shared: str) -> None:
    app = os.path.join(shared, f"{KEY}-0")
    _serve(app)
    first, info = _lease(shared, KEY, "first")
    assert (first, info is not None) == (app, True)
    second, info = _lease(shared, KEY, "second")
    assert second != app and info is None  # leased: the second run starts its own
    os.unlink(os.path.join(app, LEASE))  # the first run's teardown gives it back, serving
    third, info = _lease(shared, KEY, "third")
    assert (third, info is not None) == (app, True) and _lease_of(app) == "third"


def test_a_folder_is_reused_only_once_its_lease_is_stale(shared: str) -> None:
    """A leased folder whose application does not serve is one still starting (its lease is
    recent: left alone) or one whose start failed long ago (taken for a new application)."""
    starting = os.path.join(shared, f"{KEY}-0")
    os.makedirs(starting)
    Path(starting, LEASE).write_text("starting")
    folder, info = _lease(shared, KEY, "next")
    assert folder != starting and info is None and _lease_of(starting) == "starting"
    old = time.time() - READY_S - 120
    os.utime(os.path.join(starting, LEASE), (old, old))
    os.unlink(os.path.join(folder, LEASE))  # the next run's start failed and it ended
    got = {_lease(shared, KEY, r)[0] for r in ("a", "b")}
    assert got == {starting, folder}  # both free folders taken again, one each


def test_the_shared_folder_must_be_this_users_alone(tmp_path: Path, monkeypatch) -> None:
    """Issue 79 item 9: `/tmp/recon-apps-<uid>` was used whoever made it and however open it
    was, and its lock file followed links: another user could hand a run its application."""
    import os

    import pytest

    from recon.airflow.spark_app import SHARED, _lease, shared_folder

    mine = tmp_path / "mine"
    monkeypatch.setenv(SHARED, str(mine))
    assert shared_folder() == str(mine) and (mine.stat().st_mode & 0o777) == 0o700
    mine.chmod(0o777)
    with pytest.raises(PermissionError, match="open to others"):
        shared_folder()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    monkeypatch.setenv(SHARED, str(link))
    with pytest.raises(PermissionError, match="not a folder"):
        shared_folder()
    # a lock file that is a link is not followed
    mine.chmod(0o700)
    (mine / "k.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError):
        _lease(str(mine), "k", "run")
    assert not (tmp_path / "victim").exists()
    assert os.getuid() == mine.stat().st_uid


def test_switched_off_the_setup_starts_no_application(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`RECON_SPARK_APP_PER_RUN=false`: the setup task returns no application (its stages then
    run spark-submit each, as when the application is gone: the e2e test of that fallback)
    and starts nothing: no spark-submit, no folder."""
    from recon.airflow.spark_app import SWITCH, SparkAppStart

    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    op = SparkAppStart(task_id="spark_app", application="recon/jobs/app.py")
    for off in ("false", "0", "off"):
        monkeypatch.setenv(SWITCH, off)
        assert op.execute({}) is None
    assert not started and not list(tmp_path.iterdir())

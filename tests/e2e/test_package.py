"""The package as a user installs it: a wheel built from this checkout (its C modules
compiled, its protobuf code generated, the spark-submit jobs, the demo pipelines, the DAG file
and the schema inside it, the UI plugin behind an `airflow.plugins` entry point), installed
into an empty venv with constraints.txt, runs `recon demo --without-airflow` from an empty
folder. Installing it also shows the one step pip gets wrong: the Airflow Spark provider's
pyspark-client overwrites pyspark's files, which recon names in one line with the fix."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, (
        f"{argv[:4]} exited {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    )
    return r.stdout + r.stderr


def _source_copy(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored): no build output
    of the checkout (its .so, recon/_proto, build/) can slip into the wheel."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    archive = dest.with_suffix(".tar")
    with tarfile.open(archive, "w") as tar:
        for f in files:
            if (ROOT / f).is_file() and not f.startswith(("demo-data/", "var/")):
                tar.add(ROOT / f, arcname=f)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest


def test_the_wheel_installs_into_an_empty_venv_and_runs_the_demo(tmp_path: Path) -> None:
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(dist), str(src)])  # fmt: skip
    [wheel] = dist.glob("recon_cdc-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for built in ("_tencent_lane", "_debezium_lane", "_dataworks_lane", "_run_hashes"):
        assert any(n.startswith(f"recon/decode/formats/{built}.") and n.endswith(".so")
                   for n in names), built  # fmt: skip
    assert {"recon/_proto/tencent_subscribe_pb2.py", "recon/jobs/stage.py", "recon/jobs/app.py",
            "recon/_shipped/dags/recon_pipelines.py",
            "recon/_shipped/pipelines/demo_canal_pb.yaml",
            "recon/_shipped/docs/reference/pipeline.schema.json"} <= names  # fmt: skip
    meta = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        .decode()
    )
    requires = [x for x in meta.splitlines() if x.startswith("Requires-Dist:")]
    assert requires and not [x for x in requires if re.search(r"==\s*[0-9]", x)]  # pins: -c
    entry = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    assert "[airflow.plugins]\nrecon = recon.airflow.plugin:ReconPlugin" in entry

    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)])
    env = {"HOME": str(tmp_path), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    here = tmp_path / "work"
    here.mkdir()
    demo = [str(venv / "bin" / "recon"), "demo", "--without-airflow", "--hours", "2"]
    first = subprocess.run(demo, cwd=here, env=env, capture_output=True, text=True, timeout=600)
    if first.returncode != 0:  # pip put pyspark-client's files over pyspark's: one line says so
        line = first.stderr.strip().splitlines()[-1]
        assert "Traceback" not in first.stderr and "pyspark-client" in line, first.stderr[-3000:]
        fix = line.split("`")[1].split()
        assert fix[0].startswith(str(venv / "bin" / "python")) and fix[1:3] == ["-m", "pip"]
        _run(fix, env=env)
        out = _run(demo, cwd=here, env=env)
    else:
        out = first.stdout
    summary = [x for x in out.splitlines() if x.startswith("demo_")]
    assert len(summary) == 6 and all(" equal " in x for x in summary), out[-3000:]
    # it ran from the package: the demo's files are in the folder it ran in
    assert (here / "pipelines" / "demo_canal_pb.yaml").is_file()
    assert list((here / "demo-data" / "warehouse" / "audit").glob("*/*/report.html"))
    # the UI plugin loads from the entry point
    plugin = _run([py, "-c", "import recon.airflow.plugin as p; print(p.ReconPlugin.name)"],
                  env=env)  # fmt: skip
    assert plugin.strip().endswith("recon")

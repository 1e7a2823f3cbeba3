"""The classes a recon stage loads into its Spark driver, kept in a class-data-sharing archive
(the JDK's AppCDS) that setup builds once: a driver JVM maps them instead of finding, reading and
verifying each from Spark's jars again. Spark loads classes all through a run (each new kind of
query plan brings its own), so this is not only start-up: a small hour took ~20% less time
(docs/deployment.md, "Spark settings and sizing").

`make setup` runs `python -m recon.demo.archive_sample` (`build`): one small `recon run` of the
demo's sample dumps whose JVM writes the archive at exit (`-XX:ArchiveClassesAtExit`), again only when
the JDK, pyspark's jars (their sizes and times) or the interpreter changed. Sessions and
spark-submits add `recon.sparkconf.cds_jvm_options()` to the driver's options. A JVM that
cannot map the archive (another JDK, jars rewritten since, other jars first on the class path,
a driver on another machine where the file is absent) runs as it would without it, silently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from recon.sparkconf import CDS_ARCHIVE as ARCHIVE
from recon.sparkconf import CDS_QUIET, JVM_OPTIONS


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def archive_key() -> str:
    """What the archive depends on: the JDK, pyspark's jars (the JVM refuses an archive when
    a jar's size or time differs: a reinstall of pyspark invalidates it), this interpreter."""
    import pyspark

    java = subprocess.run([_java(), "-version"], capture_output=True, text=True, check=False)
    jars = sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")
    )
    return json.dumps(
        {"java": java.stderr.strip(), "pyspark": pyspark.__version__, "jars": jars},
        sort_keys=True,
    )


Training = Callable[[Path], tuple[Path, str, str]]
"""Writes a small pipeline and its dumps under a folder: (its YAML, first hour, last hour)."""


def build(training: Training, archive: Path = ARCHIVE) -> bool:
    """Build the archive from the classes a `recon run` of `training`'s pipeline loads, unless
    one for this JDK and pyspark is there; True when built."""
    key_file = archive.with_suffix(".key")
    key = archive_key()
    if archive.is_file() and key_file.is_file() and key_file.read_text() == key:
        return False
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="recon-cds-") as tmp:
        work = Path(tmp)
        pipeline, first, last = training(work)
        part = work / "spark-classes.jsa"
        jvm = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={part} {CDS_QUIET}"
        # code generation on: its classes are loaded too, so big hours find them in the archive
        conf = {"spark.driver.extraJavaOptions": jvm, "spark.sql.codegen.wholeStage": "true"}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYICEBERG_CATALOG__")}
        env["RECON_SPARK_CONF"] = json.dumps(conf)
        cmd = [sys.executable, "-m", "recon.cli", "run", "--pipeline", str(pipeline)]
        r = subprocess.run(
            [*cmd, "--from", first, "--to", last],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if r.returncode != 0 or not part.is_file():
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"the class archive's sample run failed: {tail[0][:300]}")
        # copied next to it, then renamed over it: a JVM starting meanwhile maps the old file or
        # the new one whole (one cut short would crash it when mapped)
        staged = archive.with_suffix(".partial")
        shutil.copyfile(part, staged)
        os.replace(staged, archive)
    key_file.write_text(key)
    return True

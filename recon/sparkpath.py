"""pyspark from its installed package, not from the zip spark-submit puts first (stdlib only).

spark-submit puts `$SPARK_HOME/python/lib/pyspark.zip` (and py4j's source zip) at the head of
a driver's and of Spark's Python daemon's `sys.path`. A zip holds no compiled files, so every
such process compiled the pyspark modules it imports (~0.5 s of CPU against ~0.1 s from the
installed package's cached bytecode), and each Python task re-read the zips' directories
(`importlib.invalidate_caches`, called by pyspark's worker for every task). When `SPARK_HOME`
is the pip-installed pyspark this interpreter imports (local runs, the demo), the zips hold the
very same files, so they are taken off the path; on a cluster's own Spark they stay.

`overwritten_pyspark()` says when pyspark's own Python files are not its own: the Airflow Spark
provider depends on `pyspark-client`, whose files (an older version) overwrite pyspark's when
pip installs it after pyspark; Spark's Python workers then fail with a serializer error. `make
setup` reinstalls pyspark; a user's `pip install` of the package must too (docs/deployment.md).

`prefer_installed_pyspark()` runs first in the spark-submit entry scripts (`recon/jobs/`); run as
`python -m recon.sparkpath` this module is Spark's Python daemon (`spark.python.daemon.module`,
set by `recon.spark.session.get_spark` for a local master on this interpreter), whose forked
workers inherit the path.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

DAEMON_MODULE = "recon.sparkpath"


def _installed(name: str, path: list[str]) -> str | None:
    """The folder of package `name` found on `path`, resolved."""
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def overwritten_pyspark(path: list[str] | None = None) -> str | None:
    """One line naming the fix when pyspark's files (its `version.py` says) are another
    version's than the installed pyspark's (found on `path`, default `sys.path`), else None."""
    pkg = _installed("pyspark", sys.path if path is None else path)
    recorded = _version(pkg) if pkg else None
    if pkg is None or recorded is None:
        return None
    try:
        with open(os.path.join(pkg, "version.py"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    if f"'{recorded}'" in text or f'"{recorded}"' in text:
        return None
    return (
        f"pyspark {recorded}'s Python files were overwritten by another version's (pyspark-client, "
        f"which the Airflow Spark provider installs): run `{sys.executable} -m pip install "
        f"--force-reinstall --no-deps pyspark=={recorded}`"
    )


def _version(pkg_dir: str) -> str | None:
    """The version an installed package's dist-info names (`py4j-0.10.9.9.dist-info`)."""
    site, name = os.path.split(pkg_dir)
    for entry in os.listdir(site):
        if entry.startswith(f"{name}-") and entry.endswith(".dist-info"):
            return entry[len(name) + 1 : -len(".dist-info")]
    return None


def prefer_installed_pyspark() -> list[str]:
    """Take spark-submit's pyspark and py4j zips off `sys.path` when they are the installed
    pyspark's own (same files); returns the entries taken off. Before pyspark is imported."""
    if "pyspark" in sys.modules:
        return []
    zips = [
        p
        for p in sys.path
        if p.endswith(".zip") and os.path.basename(p).startswith(("pyspark.", "py4j-"))
    ]
    if not zips:
        return []
    others = [p for p in sys.path if p not in zips]
    pyspark_dir = _installed("pyspark", others)
    if pyspark_dir is None:
        return []
    lib = os.path.join(pyspark_dir, "python", "lib")
    py4j_dir = _installed("py4j", others)
    py4j_zip = f"py4j-{_version(py4j_dir)}-src.zip" if py4j_dir else None
    removed = []
    for z in zips:
        folder, name = os.path.split(os.path.realpath(z))
        if folder == lib and name in ("pyspark.zip", py4j_zip):
            sys.path.remove(z)
            removed.append(z)
    return removed


if __name__ == "__main__":  # Spark's Python daemon: `python -m recon.sparkpath pyspark.worker`
    prefer_installed_pyspark()
    from pyspark.daemon import manager

    manager()

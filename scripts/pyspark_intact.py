"""Exit 0 when every Python file pyspark installed still has the content its wheel recorded
(stdlib only; scripts/setup.sh runs it). apache-airflow-providers-apache-spark pulls
pyspark-client, which overwrites ~100 of pyspark's Python files; setup reinstalls pyspark only
when this finds one changed or missing, since a reinstall also rewrites pyspark's jars, and the
Spark class archive (recon/spark/class_archive.py) is only valid for the jars it was built from.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from importlib import metadata


def changed_files() -> list[str]:
    try:
        dist = metadata.distribution("pyspark")
    except metadata.PackageNotFoundError:
        return ["pyspark (not installed)"]
    bad = []
    for f in dist.files or []:
        if not f.hash or not str(f).endswith(".py"):
            continue
        path = f.locate()
        try:
            digest = hashlib.new(f.hash.mode, path.read_bytes()).digest()
        except OSError:
            bad.append(str(f))
            continue
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != f.hash.value:
            bad.append(str(f))
    return bad


if __name__ == "__main__":
    changed = changed_files()
    if changed:
        print(f"setup: {len(changed)} of pyspark's files changed (e.g. {changed[0]}): reinstalling")
    sys.exit(1 if changed else 0)

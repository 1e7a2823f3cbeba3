#!/usr/bin/env bash
# `make pack`: what a cluster's executors need to run the stages without a shared venv path:
#   dist/recon-venv.tar.gz  the pinned venv, packed by venv-pack (relocatable; without pyspark's
#                        jars, which the cluster's Spark has, the driver's class archive, and
#                        without the editable link to this checkout), with the `recon` package
#                        itself in its site-packages
# Ship it with spark.archives (README "Where Spark runs"). The
# packed venv links `python` to this machine's interpreter prefix; executors need Python 3.11
# there too (or give --python-prefix through RECON_PACK_PYTHON_PREFIX). The driver keeps using
# the venv it runs in: only the executors' Python workers run from the archive.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${RECON_PACK_DIR:-dist}
mkdir -p "$out"
site=lib/python3.11/site-packages
tarball="$out/recon-venv.tar"
args=(-p .venv -o "$tarball" --format tar --force --quiet
      --exclude "$site/pyspark/jars/*" --exclude "$site/__editable__*"
      --exclude "share/recon/*")
if [ -n "${RECON_PACK_PYTHON_PREFIX:-}" ]; then
  args+=(--python-prefix "$RECON_PACK_PYTHON_PREFIX")
fi
.venv/bin/venv-pack "${args[@]}"
# the project's own code (protobuf code and package data included) as an installed package
tar --append -f "$tarball" --exclude __pycache__ --transform "s,^recon,$site/recon," recon
# gzipped: Spark unpacks a plain .tar with Java, which refuses the venv's python symlink; a
# .tar.gz goes through the system's tar
gzip -1 -f "$tarball"
abs=$(cd "$out" && pwd)
echo "pack: $tarball.gz; use"
echo "  RECON_SPARK_CONF='{\"spark.archives\": \"$abs/recon-venv.tar.gz#env\", \"spark.pyspark.python\": \"./env/bin/python\"}'"

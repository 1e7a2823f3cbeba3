#!/usr/bin/env bash
# Build .venv from nothing: pinned dependencies, the pyspark fix-up, generated protobuf code,
# the package's C modules, the Spark class archive.
# Safe to re-run; it only reinstalls what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -z "${RECON_SKIP_SYSTEM_PACKAGES:-}" ]; then  # the Dockerfile installs its own compiler
  bash scripts/system-packages.sh build  # a C compiler; the tests' servers: scripts/run-tests.sh
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# The pinned dependencies are installed again only when what pins them changed (each install
# re-resolves and rebuilds the editable wheel: ~8 s of every `make demo` / `make test`), or
# when this script changed.
# Deleting the stamp forces an install.
STAMP=.venv/.recon-deps
want="$(cat constraints.txt pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1) $(.venv/bin/python --version 2>&1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && .venv/bin/python -c "import recon" 2>/dev/null; then
  echo "setup: dependencies unchanged since the last install ($STAMP)"
else
  rm -f "$STAMP"
  .venv/bin/python -m pip install -q --upgrade "pip>=24"
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
fi
# apache-airflow-providers-apache-spark pulls pyspark-client, which overwrites ~100 of pyspark's
# Python files with an incompatible version; pip check stays silent and mapInArrow then dies with
# a Py4J constructor error. Reinstalling pyspark last restores its own files
# (tests/test_environment.py runs a real mapInArrow job to keep this fixed); only when they
# were, since a reinstall rewrites the jars too and the class archive below is for the jars
# it was built from.
PYSPARK_VERSION=$(grep -i '^pyspark==' constraints.txt | cut -d= -f3)
# The same check stops `recon` before Spark starts, with this command, where a user's `pip
# install` did the same (`recon.sparkpath.overwritten_pyspark`).
if ! .venv/bin/python -c 'import sys; from recon.sparkpath import overwritten_pyspark as o; sys.exit(1 if o() else 0)'; then
  echo "setup: pyspark's files were overwritten by pyspark-client's: reinstalling pyspark"
  .venv/bin/python -m pip install -q --force-reinstall --no-deps "pyspark==${PYSPARK_VERSION}"
fi
[ -f "$STAMP" ] || echo "$want" > "$STAMP"
# Generated protobuf code is a build output, never committed.
bash scripts/gen-proto.sh
# The C part of the package (the three lanes' reads), compiled in place
bash scripts/build-native.sh
# Spark's classes in a class-data-sharing archive for the driver JVMs (recon/spark/class_archive.py): one
# small sample run, only when the JDK, pyspark or its jars changed
PATH="$PWD/.venv/bin:$PATH" PYSPARK_PYTHON="$PWD/.venv/bin/python" \
  PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python" .venv/bin/python -m recon.demo.archive_sample
echo "setup: .venv ready ($(.venv/bin/python --version), pyspark ${PYSPARK_VERSION})"

#!/usr/bin/env bash
# Run the whole pytest suite; "no tests collected" (exit 5) is a failure, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh tests  # the servers and the browser the tests run for real
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"

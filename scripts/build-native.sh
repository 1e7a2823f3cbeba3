#!/usr/bin/env bash
# The C part of the package, compiled in place as any build of the package compiles it
# (setup.py's ext_modules: recon/decode/formats/_tencent_lane.c, _debezium_lane.c,
# _dataworks_lane.c and _run_hashes.c, with the headers they include). setuptools builds each
# again only when its source or a header is newer than its module. Build outputs, never
# committed, as the protobuf code.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
cc=${CC:-$(command -v cc || command -v gcc || true)}
if [ -z "$cc" ]; then
  echo "setup: no C compiler to build the package's C modules; install one (Debian: apt-get install gcc libc6-dev) and run make setup again" >&2
  exit 1
fi
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "setup: $PY has no C headers ($inc/Python.h) to build the package's C modules; install them (Debian: apt-get install python3-dev) and run make setup again" >&2
  exit 1
fi
"$PY" setup.py -q build_ext --inplace 2>&1 | grep -v -e '^$' -e 'SetuptoolsDeprecationWarning' -e '^\s*!!' -e '^\s*\*\*\*' || true
"$PY" -c 'import recon.decode.formats._tencent_lane, recon.decode.formats._debezium_lane, recon.decode.formats._dataworks_lane, recon.decode.formats._run_hashes'

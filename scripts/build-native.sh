#!/usr/bin/env bash
# The C part of the package, compiled in place (a build output, never committed, as the
# protobuf code): recon/decode/formats/_tencent_lane.c, the Tencent lane's read. Again only
# when the source is newer than the module or the module is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
src=recon/decode/formats/_tencent_lane.c
so="${src%.c}$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if [ -f "$so" ] && [ ! "$src" -nt "$so" ]; then
  exit 0
fi
cc=${CC:-$(command -v cc || command -v gcc || true)}
if [ -z "$cc" ]; then
  echo "setup: no C compiler to build $src; install one (Debian: apt-get install gcc libc6-dev) and run make setup again" >&2
  exit 1
fi
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "setup: $PY has no C headers ($inc/Python.h) to build $src; install them (Debian: apt-get install python3-dev) and run make setup again" >&2
  exit 1
fi
"$cc" -O2 -Wall -Wextra -Wno-unused-parameter -shared -fPIC -I"$inc" "$src" -o "$so.tmp"
mv "$so.tmp" "$so"
echo "setup: built $so"

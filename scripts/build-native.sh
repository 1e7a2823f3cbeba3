#!/usr/bin/env bash
# The C part of the package, compiled in place (build outputs, never committed, as the
# protobuf code): recon/decode/formats/_tencent_lane.c, _debezium_lane.c and _dataworks_lane.c,
# the Tencent, Debezium and DataWorks lanes' reads, and _run_hashes.c, the dumps' content hashes
# (with the headers they include: _utf8.h, _lane_rows.h, _run_values.h,
# and _json.h for the JSON ones). Each again only when its source or a header is newer than its
# module, or the module is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
todo=()
d=recon/decode/formats
for src in $d/_tencent_lane.c $d/_debezium_lane.c $d/_dataworks_lane.c $d/_run_hashes.c; do
  so="${src%.c}$suffix"
  if [ ! -f "$so" ] || [ "$src" -nt "$so" ] || [ $d/_utf8.h -nt "$so" ] || [ $d/_json.h -nt "$so" ] || [ $d/_lane_rows.h -nt "$so" ] || [ $d/_run_values.h -nt "$so" ]; then
    todo+=("$src")
  fi
done
if [ ${#todo[@]} -eq 0 ]; then
  exit 0
fi
cc=${CC:-$(command -v cc || command -v gcc || true)}
if [ -z "$cc" ]; then
  echo "setup: no C compiler to build ${todo[*]}; install one (Debian: apt-get install gcc libc6-dev) and run make setup again" >&2
  exit 1
fi
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "setup: $PY has no C headers ($inc/Python.h) to build ${todo[*]}; install them (Debian: apt-get install python3-dev) and run make setup again" >&2
  exit 1
fi
for src in "${todo[@]}"; do
  so="${src%.c}$suffix"
  "$cc" -O2 -Wall -Wextra -Wno-unused-parameter -shared -fPIC -I"$inc" "$src" -o "$so.tmp"
  mv "$so.tmp" "$so"
  echo "setup: built $so"
done

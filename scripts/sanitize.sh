#!/usr/bin/env bash
# The package's C modules built with AddressSanitizer and UndefinedBehaviorSanitizer, and their
# tests run against them: the C reads' differential tests (each against its Python decoder),
# the lanes' property tests and the mutation fuzz of each record loop. Any memory error or
# undefined behaviour aborts the run. A copy of the package and tests under var/sanitize/
# holds the sanitized modules, so the ones in place stay as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python
out=var/sanitize
rm -rf "$out"
mkdir -p "$out"
cp -r recon tests benchmarks pyproject.toml "$out"/
find "$out/recon" -name '*.so' -delete
find "$out" -name __pycache__ -prune -exec rm -rf {} +
cc=${CC:-$(command -v gcc || command -v cc)}
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
d=$out/recon/decode/formats
for src in $d/_tencent_lane.c $d/_debezium_lane.c $d/_dataworks_lane.c $d/_run_hashes.c; do
  "$cc" -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Wno-unused-parameter -shared -fPIC -I"$inc" "$src" -o "${src%.c}$suffix"
done
asan=$("$cc" -print-file-name=libasan.so)
ubsan=$("$cc" -print-file-name=libubsan.so)
echo "sanitize: C modules built with ASan and UBSan in $out; running their tests"
cd "$out"
# Python itself is not instrumented: its allocations are not leaks to report
export LD_PRELOAD="$asan:$ubsan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PYTHONDONTWRITEBYTECODE=1
# the copy's package, not the checkout's (the editable install's finder comes after the path)
"$PY" -c 'import recon.decode.formats._tencent_lane as m; assert "/var/sanitize/" in m.__file__, m.__file__'
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/unit/test_tencent_c_read.py tests/unit/test_debezium_c_read.py \
  tests/unit/test_dataworks_c_read.py tests/unit/test_decode_lanes.py \
  tests/unit/test_dump_input.py "$@"

#!/usr/bin/env bash
# Debian packages, installed only when missing:
#   system-packages.sh build   what `make setup` (and so `make demo`) needs: a C compiler for the
#                              package's C modules (scripts/build-native.sh; the Dockerfile has its own)
#   system-packages.sh tests   what only the tests run for real (scripts/run-tests.sh): a
#                              throwaway MariaDB server (mariadbd) and its JDBC driver for Spark, a
#                              throwaway PostgreSQL server, and Chromium to read the HTML reports headless
# Needs root to install (CI runs as root). Without root it names the command to run and stops,
# so a missing server never turns into a skipped test.
set -euo pipefail
need=()
case "${1:-}" in
  build)
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
    ;;
  tests)
    command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
    [ -e /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)
    command -v chromium >/dev/null 2>&1 || need+=(chromium)
    # PostgreSQL: Airflow's metadata database and the Iceberg catalog in the production-path tests
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
    ;;
  *)
    echo "usage: scripts/system-packages.sh build|tests" >&2
    exit 2
    ;;
esac
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing Debian packages ${need[*]}; run: sudo apt-get install -y --no-install-recommends ${need[*]}" >&2
  exit 1
fi
echo "setup: installing ${need[*]} (Debian)"
export DEBIAN_FRONTEND=noninteractive
# apt's output in a file of this run's own (a fixed name in /tmp, written as root, could be a
# link another user left there)
log=$(mktemp -t recon-apt.XXXXXX.log)
if ! apt-get install -y -q --no-install-recommends "${need[@]}" >"$log" 2>&1; then
  apt-get update -q >>"$log" 2>&1
  apt-get install -y -q --no-install-recommends "${need[@]}" >>"$log" 2>&1 \
    || { echo "setup: apt-get install ${need[*]} failed; see $log" >&2; exit 1; }
fi
rm -f "$log"

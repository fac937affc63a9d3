#!/bin/sh
# The catalog benchmark: search latency and entity-read throughput of catalogd
# on the bundled dataset and on a generated one of 20 000 entities, next to
# nginx serving static files of the same sizes, in the same run. Writes
# bench/catalog/RESULTS.md.
#
# usage: bench/catalog/run.sh [BUILD_DIR]        (default: build)
# environment: DURATION (seconds per wrk run, default 10), CONNECTIONS (default 32)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
./bench/catalog/install-deps.sh
if [ ! -x "$BUILD/catalogd" ]; then
	cmake -S . -B "$BUILD" >/dev/null
	cmake --build "$BUILD" -j2 --target catalogd
fi
exec /usr/bin/python3 bench/catalog/bench.py --build "$BUILD" --duration "${DURATION:-10}" \
	--connections "${CONNECTIONS:-32}" --out bench/catalog/RESULTS.md

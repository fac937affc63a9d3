#!/usr/bin/env bash
# Profiles relayd under the benchmark's loads (see bench/PROFILE-NOTES.md).
#
#   bench/profile.sh stream [RATE] [SECONDS] [INSTALLATIONS]
#                                              perf while relaybench streams deltas (default 4000/s, 6 s,
#                                              over 1000 installations; the bench's 5 000/s bar uses 100)
#   bench/profile.sh rest [SECONDS]            perf while wrk reads GET /v1/me (default 6 s)
#   bench/profile.sh checkpoint [RATE]         the streaming run twice: as is, then with an outside
#                                              process checkpointing the WAL every 200 ms
#
# Uses the binaries `make bench` built (bench/build). Output: bench/out/profile-*.txt.
# PROFILE_DATA=/dev/shm puts relayd's data folder on tmpfs instead of the disk.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BENCH_BUILD:-$HERE/build}
RELAYD=$BUILD/relayd/relayd
GEN=$BUILD/loadgen/relaybench
WORK=$(mktemp -d "${PROFILE_DATA:-/tmp}/relay-profile.XXXXXX")
OUT=$HERE/out
PIDS=()
mkdir -p "$OUT"
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.3
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
[ -x "$RELAYD" ] && [ -x "$GEN" ] || { echo "run make bench first (bench/build is missing)" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/data"
TEMPLATE=$("$RELAYD" token tmpl --data "$WORK/data" 2>/dev/null | tail -1)
"$RELAYD" --listen "127.0.0.1:$PORT" --data "$WORK/data" --log-level warn 2>"$WORK/relayd.log" &
RPID=$!
PIDS+=("$RPID")
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
"$GEN" mint --key "$WORK/data/issuer.key" --template "$TEMPLATE" --prefix b --from 0 --count 1000 >"$WORK/users.tsv"
"$GEN" setup --url "127.0.0.1:$PORT" --users "$WORK/users.tsv" --count 1000 --streaming 1000 --out "$WORK/state.tsv" 2>/dev/null

report() { # perf.data out
	{
		echo "== by component (bench/perf-categories.py)"
		perf script -i "$1" -F comm,tid,time,ip,sym,dso 2>/dev/null | python3 "$HERE/perf-categories.py"
		echo
		echo "== self time, by library"
		perf report -i "$1" --no-children --sort dso --percent-limit 0.5 --stdio -g none 2>/dev/null | grep -E '^ +[0-9]'
		echo
		echo "== self time, by symbol"
		perf report -i "$1" --no-children --sort dso,sym --percent-limit 0.7 --stdio -g none 2>/dev/null | grep -E '^ +[0-9]'
		echo
		echo "== inclusive time, by symbol (callers included)"
		perf report -i "$1" --children --sort sym --percent-limit 2 --stdio -g none 2>/dev/null | grep -E '^ +[0-9]'
	} >"$2"
	cp "$1" "${2%.txt}.perf.data"
	echo "wrote $2 and ${2%.txt}.perf.data" >&2
}

stream_once() { # rate seconds label
	"$GEN" stream --url "127.0.0.1:$PORT" --state "$WORK/state.tsv" --rate "$1" --installations "${INSTALLATIONS:-1000}" --conns "${INSTALLATIONS:-1000}" \
		--duration "$2" --warmup 1 --label "$3" --server-pids "$RPID" --out "$OUT/profile-stream.jsonl"
}

case "${1:-stream}" in
stream)
	RATE=${2:-4000} SECS=${3:-6} INSTALLATIONS=${4:-1000}
	stream_once "$RATE" "$((SECS + 2))" profile &
	G=$!
	sleep 2
	perf record --call-graph dwarf,32768 -F 499 -p "$RPID" -o "$WORK/perf.data" -- sleep "$SECS" >/dev/null 2>&1
	wait "$G"
	report "$WORK/perf.data" "$OUT/profile-stream.txt"
	ls -l "$WORK/data" >&2
	;;
rest)
	SECS=${2:-6}
	"$GEN" mint --key "$WORK/data/issuer.key" --template "$TEMPLATE" --prefix r --from 0 --count 12000 >"$WORK/rest.tsv"
	"$GEN" warm --url "127.0.0.1:$PORT" --users "$WORK/rest.tsv" >/dev/null
	BENCH_TOKENS="$WORK/rest.tsv" BENCH_PATH=/v1/me BENCH_THREADS=2 \
		wrk -t2 -c64 -d"$((SECS + 2))s" -s "$HERE/rest.lua" "http://127.0.0.1:$PORT" >"$WORK/wrk.out" &
	G=$!
	sleep 1
	perf record --call-graph dwarf,32768 -F 499 -p "$RPID" -o "$WORK/perf.data" -- sleep "$SECS" >/dev/null 2>&1
	wait "$G"
	tail -1 "$WORK/wrk.out" >&2
	report "$WORK/perf.data" "$OUT/profile-rest.txt"
	;;
checkpoint)
	RATE=${2:-4000}
	command -v sqlite3 >/dev/null || { echo "this mode needs the sqlite3 shell (apt-get install sqlite3)" >&2; exit 1; }
	stream_once "$RATE" 8 as-is
	ls -l "$WORK/data" >&2
	# What a working checkpointer would give: another connection checkpoints, the writer then recycles the WAL.
	(while sleep 0.2; do sqlite3 "$WORK/data/relay.db" 'PRAGMA wal_checkpoint(PASSIVE);' >/dev/null 2>&1 || true; done) &
	PIDS+=($!)
	sleep 2
	stream_once "$RATE" 8 outside-checkpoint
	ls -l "$WORK/data" >&2
	;;
*)
	echo "usage: $0 stream [RATE] [SECONDS] | rest [SECONDS] | checkpoint [RATE]" >&2
	exit 2
	;;
esac

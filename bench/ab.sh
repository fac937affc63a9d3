#!/usr/bin/env bash
# Before/after: two relayd binaries under the same loads, interleaved round by round.
#
#   bench/ab.sh OLD_RELAYD NEW_RELAYD [ROUNDS]
#
# AB_LOADS (default "5k 10k rest") picks the loads below.
# Each round runs, for A then B, on a fresh data folder each:
#   - streaming: relaybench at 5 000 deltas/s over 100 installations (the bench's "low" run),
#   - streaming: relaybench at 10 000 deltas/s over 1 000 installations (also 20k and 50k: 20 000 and
#     50 000 deltas/s over 1 000 installations),
#   - REST: wrk -t2 -c64 on GET /v1/me.
# Prints one line per run and the medians; the figures for a commit message or an issue note.
# Uses the load generator that `make bench` builds (bench/build/loadgen).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
GEN=${BENCH_BUILD:-$HERE/build}/loadgen/relaybench
A=$1 B=$2 ROUNDS=${3:-3}
WORK=$(mktemp -d /tmp/relay-ab.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.3
	rm -rf "$WORK"
}
trap cleanup EXIT
[ -x "$GEN" ] || { echo "build the load generator first (make bench, or cmake -S bench -B bench/build/loadgen)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() { # binary -> sets PID, PORT, DATA
	DATA=$(mktemp -d "$WORK/data.XXXX")
	PORT=$(port)
	TEMPLATE=$("$1" token tmpl --data "$DATA" 2>/dev/null | tail -1)
	"$1" --listen "127.0.0.1:$PORT" --data "$DATA" --log-level warn 2>>"$WORK/relayd.log" &
	PID=$!
	PIDS+=("$PID")
	for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0; sleep 0.1; done
	echo "relayd did not start" >&2
	exit 1
}

stop() {
	kill "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	rm -rf "$DATA"
}

stream() { # which binary rate installations
	start "$2"
	"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix b --from 0 --count 1000 >"$WORK/users.tsv"
	"$GEN" setup --url "127.0.0.1:$PORT" --users "$WORK/users.tsv" --count 1000 --streaming 1000 \
		--out "$WORK/state.tsv" 2>/dev/null
	"$GEN" stream --url "127.0.0.1:$PORT" --target relayd --state "$WORK/state.tsv" --rate "$3" \
		--installations "$4" --duration 6 --warmup 2 --conns "$4" --delta-bytes 64 --label "$1" \
		--server-pids "$PID" --out "$WORK/stream.jsonl" 2>/dev/null
	python3 - "$WORK/stream.jsonl" "$1" "$3" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("%-2s stream %6s/s  delivered %8.0f/s  p50 %9.1f us  p99 %10.1f us  max %10.1f us  relayd CPU %3.0f %%  errors %d" % (
    sys.argv[2], sys.argv[3], r.get("delivered_rate", 0), r.get("e2e_p50_us", 0), r.get("e2e_p99_us", 0),
    r.get("e2e_max_us", 0), 100 * r.get("server_cpu", 0), r.get("errors", 0)))
EOF
	stop
}

rest() { # which binary
	start "$2"
	"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix r --from 0 --count 12000 >"$WORK/rest.tsv"
	"$GEN" warm --url "127.0.0.1:$PORT" --users "$WORK/rest.tsv" >/dev/null
	BENCH_TOKENS="$WORK/rest.tsv" BENCH_PATH=/v1/me BENCH_THREADS=2 \
		wrk -t2 -c64 -d8s -s "$HERE/rest.lua" "http://127.0.0.1:$PORT" >"$WORK/wrk.txt" 2>&1
	printf '%-2s rest   %s req/s\n' "$1" "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")"
	stop
}

for r in $(seq 1 "$ROUNDS"); do
	for which in A B; do
		bin=$A
		[ "$which" = B ] && bin=$B
		for load in ${AB_LOADS:-5k 10k rest}; do
			case $load in
			5k) stream "$which" "$bin" 5000 100 ;;
			10k) stream "$which" "$bin" 10000 1000 ;;
			20k) stream "$which" "$bin" 20000 1000 ;;
			50k) stream "$which" "$bin" 50000 1000 ;;
			rest) rest "$which" "$bin" ;;
			esac
		done
	done
done | tee "$WORK/lines.txt"
python3 - "$WORK/lines.txt" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    key = (f[0], f[1], f[2] if f[1] == "stream" else "")
    rows.setdefault(key, []).append(line)
print("medians:")
for key in sorted(rows, key=lambda k: (k[1], k[2], k[0])):
    lines = rows[key]
    def med(pattern):
        vals = [float(m.group(1)) for l in lines for m in [re.search(pattern, l)] if m]
        return statistics.median(vals) if vals else float("nan")
    if key[1] == "stream":
        print("  %s stream %s: delivered %.0f/s, p50 %.1f us, p99 %.1f us" % (
            key[0], key[2], med(r"delivered +([\d.]+)"), med(r"p50 +([\d.]+)"), med(r"p99 +([\d.]+)")))
    else:
        print("  %s rest: %.0f req/s" % (key[0], med(r"rest +([\d.]+)")))
EOF

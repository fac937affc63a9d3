#!/usr/bin/env bash
# What it costs when one owner's requests reach several relayd processes (issue 39, the --reuse-port anomaly):
# PostgreSQL round trips per delta and Redis calls per REST request, counted by relayd's own metrics, for
#
#   pg1  one node on PostgreSQL + Redis
#   pg2  two nodes on two ports; each bridge and each user talks to one of them (a sticky balancer)
#   pgr  two processes on one port (--reuse-port on): the kernel spreads connections, so every bridge's deltas
#        and every user's requests reach both
#   pgs  two nodes on two ports, every user's requests sent to both (a balancer without stickiness)
#
#   bench/spread.sh [CONFIG...]        (all four when none; not part of make test or make bench)
#
# Streaming: relaybench posts RATE deltas/s (1 000) over INST bridges (20) for 5 s from a pool of connections,
# so one message's deltas take whichever connection is free. REST: two wrk processes (-t1 -c32, 5 s) on
# GET /v1/me for 4 000 users (10 requests/s each, burst 30), about 6 requests/s a user. Loopback only; it
# starts and stops its own PostgreSQL (tests/support/pg.sh) and Redis in a temporary folder. The figures are
# counts, not rates: a busy machine changes the rates, hardly the counts. docs/operations.md ("One process per
# core") quotes them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BENCH_BUILD:-$HERE/build}
RATE=${RATE:-1000} INST=${INST:-20} REST_USERS=${REST_USERS:-4000}
CONFIGS="${*:-pg1 pg2 pgr pgs}"
for c in $CONFIGS; do
	case $c in pg1 | pg2 | pgr | pgs) ;; *) echo "unknown configuration '$c' (pg1 pg2 pgr pgs)" >&2; exit 2 ;; esac
done
for tool in wrk redis-server curl; do
	command -v "$tool" >/dev/null || { echo "spread: $tool is needed (bench/run.sh installs the bench's tools)" >&2; exit 2; }
done
cmake -S "$ROOT" -B "$BUILD/relayd" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD/relayd" -j2 --target relayd >/dev/null
cmake -S "$HERE" -B "$BUILD/loadgen" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD/loadgen" -j2 >/dev/null
RELAYD=$BUILD/relayd/relayd GEN=$BUILD/loadgen/relaybench

WORK="" PIDS=()
stop_all() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	PIDS=()
	if [ -n "$WORK" ]; then
		"$ROOT/tests/support/pg.sh" stop "$WORK/pg" >/dev/null 2>&1 || true
		rm -rf "$WORK"
	fi
	WORK=""
}
trap stop_all EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
metric() { # metrics-port name: the counter summed over its labels
	curl -s "http://127.0.0.1:$1/metrics" | awk -v k="$2" '$1 == k || index($1, k "{") == 1 {t += $2} END {print t + 0}'
}
sum_metric() { # name metrics-port...
	local name=$1 total=0 m
	shift
	for m in "$@"; do total=$((total + $(metric "$m" "$name"))); done
	echo "$total"
}

run_config() { # config
	local c=$1 p1 p2 m1 m2 mports node_flags=() token t0 n0 d0 b0 r0 q0 w
	WORK=$(mktemp -d /tmp/relay-spread.XXXXXX)
	chmod 755 "$WORK" # PostgreSQL's own user reaches its folder through it
	mkdir -p "$WORK/pg" "$WORK/n1" "$WORK/n2" "$WORK/files"
	"$ROOT/tests/support/pg.sh" start "$WORK/pg" >/dev/null
	local store
	store=$("$ROOT/tests/support/pg.sh" url "$WORK/pg" relay)
	redis-server --port 0 --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --save '' --appendonly no \
		--logfile "$WORK/redis.log" &
	PIDS+=($!)
	for _ in $(seq 1 50); do [ -S "$WORK/redis.sock" ] && break; sleep 0.1; done
	token=$("$RELAYD" token tmpl --data "$WORK/n1" --store "$store" 2>/dev/null | tail -1)
	p1=$(free_port) p2=$(free_port) m1=$(free_port) m2=$(free_port)
	[ "$c" = pgr ] && p2=$p1 && node_flags=(--reuse-port on)
	start_node() { # name port metrics-port
		"$RELAYD" --listen "127.0.0.1:$2" --data "$WORK/$1" --store "$store" --bus "unix://$WORK/redis.sock?db=1" \
			--attachments "$WORK/files" --metrics-listen "127.0.0.1:$3" --log-level warn "${node_flags[@]}" \
			2>>"$WORK/$1.log" &
		PIDS+=($!)
	}
	start_node n1 "$p1" "$m1"
	mports=("$m1")
	if [ "$c" != pg1 ]; then
		start_node n2 "$p2" "$m2"
		mports+=("$m2")
	else
		p2=$p1
	fi
	for m in "${mports[@]}"; do
		for _ in $(seq 1 100); do curl -s -o /dev/null -m 1 "http://127.0.0.1:$m/metrics" && break; sleep 0.1; done
	done

	# Streaming: bridges paired through node 1; deltas posted to node 1's port (on pgr the kernel spreads them).
	"$GEN" mint --key "$WORK/n1/issuer.key" --template "$token" --prefix b --from 0 --count "$INST" >"$WORK/bridges.tsv"
	"$GEN" setup --url "127.0.0.1:$p1" --users "$WORK/bridges.tsv" --count "$INST" --streaming "$INST" \
		--out "$WORK/state.tsv" --src-base 127.9.0.1 --per-ip 8 >/dev/null 2>&1
	t0=$(sum_metric relay_store_round_trips_total "${mports[@]}")
	d0=$(sum_metric relay_deltas_total "${mports[@]}")
	"$GEN" stream --url "127.0.0.1:$p1" --target relayd --state "$WORK/state.tsv" --rate "$RATE" \
		--installations "$INST" --conns "$INST" --duration 5 --warmup 1 --delta-bytes 64 --label "$c" \
		--out "$WORK/stream.jsonl" 2>"$WORK/stream.err" || true
	t0=$(($(sum_metric relay_store_round_trips_total "${mports[@]}") - t0))
	d0=$(($(sum_metric relay_deltas_total "${mports[@]}") - d0))

	# REST: two wrk processes, each on one node (pg2: half the users each; pgs: all users on both).
	"$GEN" mint --key "$WORK/n1/issuer.key" --template "$token" --prefix r --from 0 --count "$REST_USERS" >"$WORK/rest.tsv"
	"$GEN" warm --url "127.0.0.1:$p1" --users "$WORK/rest.tsv" >/dev/null
	[ "$p2" != "$p1" ] && "$GEN" warm --url "127.0.0.1:$p2" --users "$WORK/rest.tsv" >/dev/null
	local ta=$WORK/rest.tsv tb=$WORK/rest.tsv
	if [ "$c" = pg2 ]; then
		awk 'NR % 2 == 1' "$WORK/rest.tsv" >"$WORK/rest-a.tsv"
		awk 'NR % 2 == 0' "$WORK/rest.tsv" >"$WORK/rest-b.tsv"
		ta=$WORK/rest-a.tsv tb=$WORK/rest-b.tsv
	fi
	b0=$(sum_metric relay_bus_calls_total "${mports[@]}")
	r0=$(sum_metric relay_http_requests_total "${mports[@]}")
	BENCH_TOKENS=$ta BENCH_PATH=/v1/me BENCH_THREADS=1 wrk -t1 -c32 -d5s -s "$HERE/rest.lua" "http://127.0.0.1:$p1" \
		>"$WORK/wrk-a.txt" &
	w=$!
	BENCH_TOKENS=$tb BENCH_PATH=/v1/me BENCH_THREADS=1 wrk -t1 -c32 -d5s -s "$HERE/rest.lua" "http://127.0.0.1:$p2" \
		>"$WORK/wrk-b.txt"
	wait "$w"
	b0=$(($(sum_metric relay_bus_calls_total "${mports[@]}") - b0))
	r0=$(($(sum_metric relay_http_requests_total "${mports[@]}") - r0))
	q0=$(awk '/Requests\/sec/ {t += $2} END {printf "%.0f", t}' "$WORK/wrk-a.txt" "$WORK/wrk-b.txt")
	python3 - "$c" "$t0" "$d0" "$b0" "$r0" "$q0" "$WORK/stream.jsonl" <<'EOF'
import json, sys
c, trips, deltas, calls, reqs, rate, out = sys.argv[1:8]
trips, deltas, calls, reqs = int(trips), int(deltas), int(calls), int(reqs)
rows = [json.loads(l) for l in open(out)] if deltas else []
s = rows[-1] if rows else {}
print("| %s | %.3f | %d | %s | %s | %.4f | %d | %s |" % (
    c, trips / deltas if deltas else float("nan"), deltas, s.get("delivered_rate", "—"),
    s.get("e2e_p50_us", "—"), calls / reqs if reqs else float("nan"), reqs, rate))
EOF
	stop_all
}

echo "| configuration | PostgreSQL round trips per delta | deltas counted | delivered/s | p50 µs | Redis calls per REST request | requests counted | req/s |"
echo "|---|---|---|---|---|---|---|---|"
for c in $CONFIGS; do run_config "$c"; done

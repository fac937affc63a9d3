#!/usr/bin/env bash
# `make bench`: measures relayd against its peers and writes bench/RESULTS.md.
#
#   bench/run.sh [PHASE...]     (no phase: all of them, in this order)
#
#   rest       wrk on GET /v1/me (relayd) vs nginx serving a file of the same size
#   scale      15 000 SSE streams + 3 000 bridge WebSockets held; RSS per connection; REST again
#   tls        the same connections over TLS (relayd --tls-cert), RSS per connection
#   storm      relayd restarts, then four processes reopen streams and bridge sockets at once
#   streaming  sendMessageDelta -> SSE end to end (relayd) vs nchan pub -> EventSource, same payloads;
#              the WAL's peak size while it runs
#   overload   offered 2x the highest sustained rate, beside runs at that rate: delivered, shed, how fast
#   cluster    issues 13 and 25's rows: one node on PostgreSQL + Redis, two nodes on them, and two processes
#              on one port (--reuse-port), beside the SQLite node (REST, streaming latency and capacity, idle
#              scale), interleaved; PostgreSQL round trips and Redis calls per delta and per request, counted
#              by relayd's metrics
#   durability kill -9 under a write load, restart, verify
#
# A phase given alone replaces its own results in bench/out/ and keeps the others', so one part can be
# rerun and RESULTS.md rewritten (bench/out/phases.jsonl says when each part ran, under what load).
# Peers run in the same script, interleaved round by round, on loopback only.
# Settings (environment): BENCH_QUICK=1 for a short smoke run; BENCH_KEEP=1 keeps the work folder.
set -euo pipefail

ALL_PHASES="rest scale tls storm streaming overload cluster durability"
PHASES="${*:-$ALL_PHASES}"
for p in $PHASES; do
	case " $ALL_PHASES " in
	*" $p "*) ;;
	*) echo "unknown phase '$p' (phases: $ALL_PHASES)" >&2; exit 2 ;;
	esac
done
want() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
QUICK=${BENCH_QUICK:-0}
BUILD=${BENCH_BUILD:-$HERE/build}
OUT=$HERE/out
WORK=$(mktemp -d /tmp/relay-bench.XXXXXX)
STARTED=$(date +%s)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()
PGDIR=""

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

log() { printf '[bench %4ds] %s\n' "$(($(date +%s) - STARTED))" "$*" >&2; }

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	sleep 0.5
	for pid in "${PIDS[@]}"; do
		kill -9 "$pid" 2>/dev/null || true
	done
	[ -n "$PGDIR" ] && "$ROOT/tests/support/pg.sh" stop "$PGDIR" >/dev/null 2>&1
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		log "work folder kept: $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

stop_pid() { # pid [signal]: stops a process this script started and forgets it
	kill "-${2:-TERM}" "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=() p
	for p in "${PIDS[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# ---------------------------------------------------------------- packages, limits, builds

install_packages
ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)

log "building relayd and the load generator"
cmake -S "$ROOT" -B "$BUILD/relayd" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD/relayd" -j2 --target relayd >/dev/null
cmake -S "$HERE" -B "$BUILD/loadgen" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD/loadgen" -j2 >/dev/null
RELAYD=$BUILD/relayd/relayd
GEN=$BUILD/loadgen/relaybench
# What was built (the tree can move while the benchmark runs).
RELAYD_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo '+changes')"

# Each phase's own results; a phase that runs replaces them (profile.sh's files and other phases' stay).
phase_files() {
	case $1 in
	rest) echo rest.jsonl ;;
	scale) echo scale.json scale-open.json scale-close.json rest-held.jsonl ;;
	tls) echo scale-tls.json ;;
	storm) echo storm.json ;;
	streaming) echo stream.jsonl store.json ;;
	overload) echo overload.jsonl overload-store.json ;;
	cluster) echo cluster-rest.jsonl cluster-stream.jsonl cluster-scale.jsonl cluster-counters.jsonl cluster.json ;;
	durability) echo durability.jsonl durability-load.jsonl verify.err ;;
	esac
}
mkdir -p "$OUT"
for p in $PHASES; do
	for f in $(phase_files "$p"); do rm -f "$OUT/$f"; done
done
rm -f "$OUT/crashes.jsonl"
# When each phase ran and the machine's load around it (two other engineers share these 2 cores).
PHASE_T0=0 PHASE_LOAD0=""
phase_begin() {
	PHASE_T0=$(date +%s) PHASE_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	log "phase $1 (load average $PHASE_LOAD0)"
}
phase_end() {
	local keep
	keep=$(grep -v "\"phase\": \"$1\"" "$OUT/phases.jsonl" 2>/dev/null || true)
	{
		[ -n "$keep" ] && printf '%s\n' "$keep"
		printf '{"phase": "%s", "date": "%s", "seconds": %d, "loadavg_start": "%s", "loadavg_end": "%s", "relayd_commit": "%s"}\n' \
			"$1" "$(date -u '+%Y-%m-%d %H:%M UTC')" $(($(date +%s) - PHASE_T0)) "$PHASE_LOAD0" \
			"$(cut -d' ' -f1-3 /proc/loadavg)" "$RELAYD_COMMIT"
	} >"$OUT/phases.jsonl.new"
	mv "$OUT/phases.jsonl.new" "$OUT/phases.jsonl"
}

# ---------------------------------------------------------------- the peers

NGINX_PORT=$(free_port)
nginx_conf "$WORK/nginx" "$NGINX_PORT" "$NOFILE"

DATA=$WORK/relay-data
mkdir -p "$DATA"
RELAY_PORT=$(free_port)
# Request logs are off on both sides: relayd logs one JSON line per request at info.
RELAY_FLAGS=(--log-level warn)

start_relayd() { # data port logfile [more flags...]; https when the flags name --tls-cert
	local data=$1 port=$2 logf=$3 scheme=http
	shift 3
	case " $* " in *" --tls-cert "*) scheme=https ;; esac
	"$RELAYD" --listen "127.0.0.1:$port" --data "$data" "${RELAY_FLAGS[@]}" "$@" 2>>"$logf" &
	RELAYD_PID=$!
	PIDS+=("$RELAYD_PID")
	wait_http "$scheme://127.0.0.1:$port/healthz"
}

# The issuer key exists before relayd starts, so that tokens can be minted from it.
TEMPLATE=$("$RELAYD" token tmpl --data "$DATA" 2>/dev/null | tail -1)
cp -p "$DATA/issuer.key" "$WORK/issuer.key"
start_relayd "$DATA" "$RELAY_PORT" "$WORK/relayd.log"
MAIN_PID=$RELAYD_PID
log "relayd $MAIN_PID on 127.0.0.1:$RELAY_PORT, data $DATA"

head -c 1 /dev/zero >"$WORK/nginx/www/me.json"
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx/" 2>>"$WORK/nginx/stderr" &
NGINX_MASTER=$!
PIDS+=("$NGINX_MASTER")
wait_http "http://127.0.0.1:$NGINX_PORT/me.json"
NGINX_PIDS="$NGINX_MASTER,$(pgrep -P "$NGINX_MASTER" | paste -sd, -)"
log "nginx+nchan $NGINX_PIDS on 127.0.0.1:$NGINX_PORT"

# ---------------------------------------------------------------- sizes of the runs

if [ "$QUICK" = 1 ]; then
	N_BRIDGES=600 N_STREAMING=300 N_OPEN=600 N_SSE=3000 N_WS=600 N_REST_USERS=4000 N_DUR=50
	REST_SECONDS=4 REST_ROUNDS=1 STREAM_WARMUP=1 STREAM_SECONDS=3 STREAM_ROUNDS=1 RAMP_SECONDS=2 DUR_ROUNDS=1
	RAMP_RATES="2500 5000 10000 20000"
	HIGH_RATE=20000 STORM_ROUNDS=1 OVERLOAD_ROUNDS=1 CLUSTER_ROUNDS=1
	CLUSTER_RAMP="5000 10000"
else
	N_BRIDGES=3000 N_STREAMING=1000 N_OPEN=3000 N_SSE=15000 N_WS=3000 N_REST_USERS=12000 N_DUR=200
	REST_SECONDS=10 REST_ROUNDS=3 STREAM_WARMUP=2 STREAM_SECONDS=8 STREAM_ROUNDS=3 RAMP_SECONDS=4 DUR_ROUNDS=3
	RAMP_RATES="2500 5000 10000 20000 35000 50000 70000 90000"
	HIGH_RATE=50000 STORM_ROUNDS=3 OVERLOAD_ROUNDS=2 CLUSTER_ROUNDS=2
	CLUSTER_RAMP="5000 10000 20000 35000"
fi
LOW_RATE=5000
LOW_INST=100 # 50 deltas/s each: under the 100/s delta bucket of one installation

# ---------------------------------------------------------------- users, pairing

log "minting tokens, pairing $N_BRIDGES bridges"
"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix b --from 0 --count "$((N_BRIDGES + N_DUR))" >"$WORK/bridge-users.tsv"
"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix r --from 0 --count "$N_REST_USERS" >"$WORK/rest-users.tsv"
"$GEN" setup --url "127.0.0.1:$RELAY_PORT" --users "$WORK/bridge-users.tsv" --count "$N_BRIDGES" \
	--streaming "$N_OPEN" --out "$WORK/state.tsv" --src-base 127.1.0.1 --per-ip 8
BODY_BYTES=$("$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/rest-users.tsv")
head -c "$BODY_BYTES" /dev/zero | tr '\0' 'x' >"$WORK/nginx/www/me.json"

# ---------------------------------------------------------------- helpers the phases share

wrk_run() { # label target out [threads conns tokens url]: one wrk run, one JSON line appended to out
	local url path threads=${4:-2} conns=${5:-64} tokens=${6:-$WORK/rest-users.tsv}
	if [ "$2" = nginx ]; then url="http://127.0.0.1:$NGINX_PORT" path=/me.json; else url=${7:-http://127.0.0.1:$RELAY_PORT} path=/v1/me; fi
	BENCH_TOKENS="$tokens" BENCH_PATH=$path BENCH_THREADS=$threads \
		wrk -t"$threads" -c"$conns" -d"${REST_SECONDS}s" -s "$HERE/rest.lua" "$url" | tail -1 |
		sed "s/^{/{\"label\":\"$1\",\"target\":\"$2\",\"body_bytes\":$BODY_BYTES,/" >>"$3"
	tail -1 "$3" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("[bench] wrk %-12s %-6s %9.0f req/s  non2xx %d  p99 %.1f ms" % (d["label"], d["target"], d["requests"]/d["duration_us"]*1e6, d["non2xx"], d["lat_p99_us"]/1000))' >&2
}

rest_rounds() { # label rounds out
	local r
	for r in $(seq 1 "$2"); do
		wrk_run "$1" relayd "$3"
		sleep 1
		wrk_run "$1" nginx "$3"
		sleep 1
	done
}

# Restarts relayd on the same folder and port if it died, and records the crash.
ensure_relayd() { # phase
	kill -0 "$MAIN_PID" 2>/dev/null && return 0
	wait "$MAIN_PID" 2>/dev/null || true
	local last
	last=$(tail -1 "$WORK/relayd.log" | tr -d '"\\' | cut -c1-200)
	echo "{\"phase\": \"$1\", \"log\": \"$last\"}" >>"$OUT/crashes.jsonl"
	log "relayd died during $1: $last — restarting it on the same folder"
	stop_pid "$MAIN_PID"
	start_relayd "$DATA" "$RELAY_PORT" "$WORK/relayd.log"
	MAIN_PID=$RELAYD_PID
	warm_main
}
# A new process knows no user yet; make them known as they were before.
warm_main() {
	"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/bridge-users.tsv" >/dev/null 2>&1
	"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/rest-users.tsv" >/dev/null 2>&1
}

HOLD_PIDS=()
hold_start() { # name sse-count sse-users ws-range src-base [url state more...]
	local name=$1 nsse=$2 users=$3 ws=$4 src=$5 url=${6:-127.0.0.1:$RELAY_PORT} state=${7:-$WORK/state.tsv}
	shift 5
	[ $# -gt 0 ] && shift
	[ $# -gt 0 ] && shift
	"$GEN" hold --url "$url" --state "$state" --ready "$WORK/$name.ready" \
		--sse "$nsse" --sse-users "$users" --ws "$ws" --src-base "$src" --src-count 50 "$@" >"$WORK/$name.out" 2>&1 &
	HOLD_PIDS+=($!)
	PIDS+=($!)
}
hold_wait() { # names...: waits until each wrote its ready file
	local i n name
	for i in $(seq 1 600); do
		n=0
		for name in "$@"; do [ -s "$WORK/$name.ready" ] && n=$((n + 1)); done
		[ "$n" = "$#" ] && return 0
		sleep 0.5
	done
}
hold_stop() {
	local pid
	for pid in "${HOLD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${HOLD_PIDS[@]}"; do stop_pid "$pid"; done
	HOLD_PIDS=()
}
sum_json() { # files...: sums the numeric fields of one JSON object per file (max of "seconds")
	cat "$@" 2>/dev/null | grep '^{' | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
keys = rows[0].keys() if rows else []
print(json.dumps({k: (max if k == "seconds" else sum)(r[k] for r in rows) for k in keys}))'
}
rss_kib() { # pid
	awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

# Opens N_SSE streams (5 per user) then N_WS bridge sockets, from 4 + 4 processes, each process on its
# node of the list (one node: all on it); prints the summed ready files. Leaves them held.
hold_scale() { # prefix state nodes(host:port,...) [more hold flags...]
	local prefix=$1 state=$2 p nodes node
	shift 2
	IFS=, read -r -a nodes <<<"$1"
	shift
	rm -f "$WORK/$prefix"-*.ready
	local per=$((N_BRIDGES / 4))
	for p in 0 1 2 3; do
		node=${nodes[$((p % ${#nodes[@]}))]}
		hold_start "$prefix-sse-$p" $((N_SSE / 4)) $((p * per)):$(((p + 1) * per)) 0:0 "127.2$prefix_octet.$p.1" "$node" "$state" "$@"
	done
	hold_wait "$prefix-sse-0" "$prefix-sse-1" "$prefix-sse-2" "$prefix-sse-3"
	for p in 0 1 2 3; do
		node=${nodes[$((p % ${#nodes[@]}))]}
		hold_start "$prefix-ws-$p" 0 0:0 $((p * N_WS / 4)):$(((p + 1) * N_WS / 4)) "127.3$prefix_octet.$p.1" "$node" "$state" "$@"
	done
	hold_wait "$prefix-ws-0" "$prefix-ws-1" "$prefix-ws-2" "$prefix-ws-3"
	sum_json "$WORK/$prefix"-sse-*.ready "$WORK/$prefix"-ws-*.ready
}
prefix_octet=""

# One publisher connection per installation, as each bridge has its own: a shared pool of 64 would cap
# the deltas in flight at 64, and since a delta is answered once its batch is written (milliseconds, not
# microseconds), the pool, not the relay, would set the rate.
stream_run() { # label target rate installations seconds warmup [out url pids state sub-url]
	local url pids out=${7:-$OUT/stream.jsonl} state=${10:-$WORK/state.tsv} sub=()
	sync # relayd's WAL leaves dirty pages; neither peer should pay for the other's writeback
	if [ "$2" = relayd ] && [ -z "${8:-}" ]; then ensure_relayd streaming; fi
	if [ "$2" = relayd ]; then url=${8:-127.0.0.1:$RELAY_PORT} pids=${9:-$MAIN_PID}; else url="127.0.0.1:$NGINX_PORT" pids=$NGINX_PIDS; fi
	[ -n "${11:-}" ] && sub=(--sub-url "${11}")
	if ! "$GEN" stream --url "$url" --target "$2" --state "$state" --rate "$3" --installations "$4" \
		--duration "$5" --warmup "$6" --conns "$4" --delta-bytes 64 --label "$1" --server-pids "$pids" \
		"${sub[@]}" --out "$out" 2>"$WORK/stream.err"; then
		echo "{\"label\":\"$1\",\"target\":\"$2\",\"rate\":$3,\"installations\":$4,\"failed\":true}" >>"$out"
	fi
	sed 's/^/[bench] /' "$WORK/stream.err" >&2
}

# The WAL's size sampled every 100 ms while a phase writes: its peak is a bar of issue 16.
WAL_WATCH=""
wal_watch_start() { # file
	(
		peak=0
		while :; do
			n=$(stat -c %s "$DATA/relay.db-wal" 2>/dev/null || echo 0)
			[ "$n" -gt "$peak" ] && { peak=$n; echo "$peak" >"$1"; }
			sleep 0.1
		done
	) &
	WAL_WATCH=$!
	PIDS+=("$WAL_WATCH")
}
wal_watch_stop() {
	stop_pid "$WAL_WATCH"
}
store_json() { # peak-file out
	echo "{\"wal_peak_bytes\": $(cat "$1" 2>/dev/null || echo 0), \"wal_bytes\": $(stat -c %s "$DATA/relay.db-wal" 2>/dev/null || echo 0), \"db_bytes\": $(stat -c %s "$DATA/relay.db" 2>/dev/null || echo 0)}" >"$2"
}

# ---------------------------------------------------------------- REST

if want rest; then
	phase_begin rest
	log "REST: wrk -t2 -c64 -d${REST_SECONDS}s, $REST_ROUNDS interleaved rounds, body $BODY_BYTES bytes"
	REST_SECONDS=2 wrk_run warmup relayd "$WORK/warmup.jsonl"
	REST_SECONDS=2 wrk_run warmup nginx "$WORK/warmup.jsonl"
	sleep 3 # let the users' buckets fill again
	rest_rounds baseline "$REST_ROUNDS" "$OUT/rest.jsonl"
	phase_end rest
fi

# ---------------------------------------------------------------- idle scale

if want scale; then
	phase_begin scale
	log "scale: $N_SSE SSE streams + $N_WS bridge sockets held by relayd $MAIN_PID (fd limit $NOFILE)"
	RSS_BEFORE=$(rss_kib "$MAIN_PID")
	hold_scale m "$WORK/state.tsv" "127.0.0.1:$RELAY_PORT" >"$OUT/scale-open.json"
	sleep 3
	SCALE_ALIVE=0 RSS_HELD=0 FDS_HELD=0
	if kill -0 "$MAIN_PID" 2>/dev/null; then
		SCALE_ALIVE=1
		RSS_HELD=$(rss_kib "$MAIN_PID")
		FDS_HELD=$(ls /proc/$MAIN_PID/fd | wc -l)
	fi
	log "scale: $(cat "$OUT/scale-open.json"), RSS $RSS_BEFORE -> $RSS_HELD KiB, relayd fds $FDS_HELD"
	[ "$SCALE_ALIVE" = 1 ] && rest_rounds held "$((REST_ROUNDS > 2 ? 2 : REST_ROUNDS))" "$OUT/rest-held.jsonl"
	RSS_AFTER_REST=$(rss_kib "$MAIN_PID")
	kill -0 "$MAIN_PID" 2>/dev/null || SCALE_ALIVE=0
	hold_stop
	sum_json "$WORK"/m-sse-*.out "$WORK"/m-ws-*.out >"$OUT/scale-close.json"
	cat >"$OUT/scale.json" <<EOF
{"sse": $N_SSE, "ws": $N_WS, "rss_before_kib": $RSS_BEFORE, "rss_held_kib": $RSS_HELD,
 "rss_after_rest_kib": $RSS_AFTER_REST, "relayd_fds": $FDS_HELD, "nofile": $NOFILE, "survived": $SCALE_ALIVE,
 "open": $(cat "$OUT/scale-open.json"), "close": $(cat "$OUT/scale-close.json")}
EOF
	log "scale: closed $(cat "$OUT/scale-close.json")"
	ensure_relayd scale
	phase_end scale
fi

# ---------------------------------------------------------------- idle scale over TLS

if want tls; then
	phase_begin tls
	# relayd serves one listener: it restarts on the same folder with a certificate, so the same users,
	# installations and tokens hold the same connections over TLS; then it comes back on plain HTTP.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/tls.key" \
		-out "$WORK/tls.crt" -days 2 -subj /CN=127.0.0.1 2>/dev/null
	stop_pid "$MAIN_PID"
	TLS_PORT=$(free_port)
	start_relayd "$DATA" "$TLS_PORT" "$WORK/relayd.log" --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key"
	TLS_PID=$RELAYD_PID
	"$GEN" warm --url "127.0.0.1:$TLS_PORT" --users "$WORK/bridge-users.tsv" --tls 1 >/dev/null 2>&1
	RSS_BEFORE=$(rss_kib "$TLS_PID")
	log "tls: $N_SSE SSE streams + $N_WS bridge sockets over TLS held by relayd $TLS_PID"
	hold_scale t "$WORK/state.tsv" "127.0.0.1:$TLS_PORT" --tls 1 >"$WORK/tls-open.json"
	sleep 3
	ALIVE=0 RSS_HELD=0
	kill -0 "$TLS_PID" 2>/dev/null && ALIVE=1 RSS_HELD=$(rss_kib "$TLS_PID")
	hold_stop
	sum_json "$WORK"/t-sse-*.out "$WORK"/t-ws-*.out >"$WORK/tls-close.json"
	cat >"$OUT/scale-tls.json" <<EOF
{"sse": $N_SSE, "ws": $N_WS, "rss_before_kib": $RSS_BEFORE, "rss_held_kib": $RSS_HELD, "survived": $ALIVE,
 "open": $(cat "$WORK/tls-open.json"), "close": $(cat "$WORK/tls-close.json")}
EOF
	log "tls: $(cat "$WORK/tls-open.json"), RSS $RSS_BEFORE -> $RSS_HELD KiB"
	stop_pid "$TLS_PID"
	start_relayd "$DATA" "$RELAY_PORT" "$WORK/relayd.log"
	MAIN_PID=$RELAYD_PID
	warm_main
	phase_end tls
fi

# ---------------------------------------------------------------- reconnect storm

if want storm; then
	phase_begin storm
	# Every client of a relay that restarts comes back at once: four processes open the SSE streams and
	# the bridge sockets of the same users together, right after a clean restart, a few times over.
	STORM_USERS=$((N_BRIDGES < 600 ? N_BRIDGES : 600))
	log "storm: up to $STORM_ROUNDS × (restart relayd, then 4 processes open $((STORM_USERS * 5)) SSE streams and $STORM_USERS bridge sockets of the same users at once)"
	STORM_ALIVE=1 STORM_DONE=0
	for round in $(seq 1 "$STORM_ROUNDS"); do
		stop_pid "$MAIN_PID"
		start_relayd "$DATA" "$RELAY_PORT" "$WORK/relayd.log"
		MAIN_PID=$RELAYD_PID
		rm -f "$WORK"/storm-*.ready
		for p in 0 1 2 3; do
			a=$((p * STORM_USERS / 4)) b=$(((p + 1) * STORM_USERS / 4))
			hold_start "storm-$p" $(((b - a) * 5)) "$a:$b" "$a:$b" "127.4.$p.1"
		done
		hold_wait storm-0 storm-1 storm-2 storm-3
		sleep 1
		kill -0 "$MAIN_PID" 2>/dev/null || STORM_ALIVE=0
		hold_stop
		STORM_DONE=$round
		[ "$STORM_ALIVE" = 1 ] || break
	done
	echo "{\"sse\": $((STORM_USERS * 5)), \"ws\": $STORM_USERS, \"planned\": $STORM_ROUNDS, \"rounds\": $STORM_DONE, \"survived\": $STORM_ALIVE, \"last\": $(sum_json "$WORK"/storm-*.ready)}" >"$OUT/storm.json"
	log "storm: $(cat "$OUT/storm.json")"
	ensure_relayd storm
	warm_main
	phase_end storm
fi

# ---------------------------------------------------------------- streaming

if want streaming; then
	phase_begin streaming
	wal_watch_start "$WORK/wal-peak-streaming"
	log "streaming: $LOW_RATE deltas/s over $LOW_INST installations, $STREAM_ROUNDS interleaved rounds"
	for r in $(seq 1 "$STREAM_ROUNDS"); do
		stream_run low relayd "$LOW_RATE" "$LOW_INST" "$STREAM_SECONDS" "$STREAM_WARMUP"
		stream_run low nchan "$LOW_RATE" "$LOW_INST" "$STREAM_SECONDS" "$STREAM_WARMUP"
	done
	log "streaming: $HIGH_RATE deltas/s over $N_STREAMING installations"
	for r in $(seq 1 "$((STREAM_ROUNDS > 2 ? 2 : STREAM_ROUNDS))"); do
		stream_run high relayd "$HIGH_RATE" "$N_STREAMING" "$STREAM_SECONDS" "$STREAM_WARMUP"
		stream_run high nchan "$HIGH_RATE" "$N_STREAMING" "$STREAM_SECONDS" "$STREAM_WARMUP"
	done
	log "streaming: capacity ramp ($RAMP_RATES deltas/s, ${RAMP_SECONDS}s each, a peer stops after two misses)"
	declare -A MISSES=([relayd]=0 [nchan]=0)
	for rate in $RAMP_RATES; do
		for target in relayd nchan; do
			[ "${MISSES[$target]}" -ge 2 ] && continue
			stream_run ramp "$target" "$rate" "$N_STREAMING" "$RAMP_SECONDS" 1
			if tail -1 "$OUT/stream.jsonl" | python3 "$HERE/report.py" --sustained; then
				MISSES[$target]=0
			else
				MISSES[$target]=$((MISSES[$target] + 1))
			fi
		done
	done
	wal_watch_stop
	store_json "$WORK/wal-peak-streaming" "$OUT/store.json"
	log "store after streaming: $(cat "$OUT/store.json")"
	phase_end streaming
fi

# ---------------------------------------------------------------- overload

# relayd's maximum in this run's ramp (or the last recorded one): the highest rate it sustained, or,
# when the machine's load left it none, the most it delivered (rounded down to 500/s). Without any
# ramp, a short ramp of its own finds it. Prints 0 when nothing was delivered at all.
relayd_capacity() { # stream.jsonl
	python3 - "$1" "$HERE" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[2])
from report import sustained
best = delivered = 0
if os.path.exists(sys.argv[1]):
    for line in open(sys.argv[1]):
        d = json.loads(line)
        if d.get("label") == "ramp" and d.get("target") == "relayd" and not d.get("failed"):
            delivered = max(delivered, d["delivered_rate"])
            if sustained(d):
                best = max(best, d["rate"])
print(int(best) if best else int(delivered // 500 * 500))
EOF
}

if want overload; then
	phase_begin overload
	CAP=$(relayd_capacity "$OUT/stream.jsonl")
	if [ "$CAP" = 0 ]; then
		log "overload: no ramp recorded; a short ramp finds the sustained maximum"
		for rate in $RAMP_RATES; do
			stream_run ramp relayd "$rate" "$N_STREAMING" "$RAMP_SECONDS" 1 "$WORK/overload-ramp.jsonl"
			tail -1 "$WORK/overload-ramp.jsonl" | python3 "$HERE/report.py" --sustained || break
		done
		CAP=$(relayd_capacity "$WORK/overload-ramp.jsonl")
	fi
	if [ "$CAP" -le 0 ]; then
		log "overload: relayd delivered nothing in the ramp; no overload run"
		echo '{"label":"max","target":"relayd","rate":0,"installations":0,"failed":true}' >>"$OUT/overload.jsonl"
		phase_end overload
		CAP=skip
	fi
fi
if want overload && [ "$CAP" != skip ]; then
	OVER=$((CAP * 2))
	# Every paired installation posts (3 000: up to 3 000 deltas in flight), so that relayd, not the
	# generator's one-delta-per-bridge limit, decides what waits and what is refused.
	log "overload: $OVERLOAD_ROUNDS interleaved rounds of $CAP deltas/s (the sustained maximum) and $OVER deltas/s (2×) over $N_OPEN installations"
	wal_watch_start "$WORK/wal-peak-overload"
	for r in $(seq 1 "$OVERLOAD_ROUNDS"); do
		stream_run max relayd "$CAP" "$N_OPEN" "$STREAM_SECONDS" "$STREAM_WARMUP" "$OUT/overload.jsonl"
		stream_run twice relayd "$OVER" "$N_OPEN" "$STREAM_SECONDS" "$STREAM_WARMUP" "$OUT/overload.jsonl"
		sleep 2 # the refused installations' buckets fill again
	done
	wal_watch_stop
	store_json "$WORK/wal-peak-overload" "$OUT/overload-store.json"
	phase_end overload
fi

# ---------------------------------------------------------------- cluster (issues 13 and 25)

if want cluster; then
	phase_begin cluster
	# PostgreSQL as the tests run it (tests/support/pg.sh: a cluster in a folder of its own on a Unix
	# socket, as an unprivileged user), but restarted as a server in service runs: fsync on (the tests
	# turn it off). relayd sets synchronous_commit on for its own connection whatever the server says, so
	# every commit waits for its WAL flush: stronger than SQLite's synchronous=NORMAL, and what it costs
	# is part of these figures.
	PGDIR=$(mktemp -d /tmp/rb-pg.XXXXXX)
	"$ROOT/tests/support/pg.sh" start "$PGDIR" >/dev/null
	"$ROOT/tests/support/pg.sh" down "$PGDIR"
	PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	as_pg=()
	[ "$(id -u)" -eq 0 ] && as_pg=(runuser -u relaytest --)
	"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 \
		-o "-c listen_addresses='' -c unix_socket_directories='$PGDIR' -c unix_socket_permissions=0777 \
-c fsync=on -c max_connections=200 -c shared_buffers=256MB" start >/dev/null
	PG1=$("$ROOT/tests/support/pg.sh" url "$PGDIR" relay)
	PG2=$("$ROOT/tests/support/pg.sh" createdb "$PGDIR" relay2)
	PG3=$("$ROOT/tests/support/pg.sh" createdb "$PGDIR" relay3)
	redis-server --port 0 --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --save '' --appendonly no \
		--logfile "$WORK/redis.log" &
	REDIS_PID=$!
	PIDS+=("$REDIS_PID")
	for _ in $(seq 1 50); do [ -S "$WORK/redis.sock" ] && break; sleep 0.1; done
	log "cluster: PostgreSQL $(basename "$(dirname "$PG_BIN")") in $PGDIR, Redis $(redis-server --version | awk '{print $3}' | sed 's/v=//') on $WORK/redis.sock"

	# Config "pg1": one node; config "pg2": nodes A and B on another database and Redis db; config "pgr":
	# processes R1 and R2 listening on one port (--reuse-port on: the kernel spreads the connections) on a
	# third. Every process has a metrics listener of its own, read before and after the runs below.
	mkdir -p "$WORK/files/p1" "$WORK/files/p2" "$WORK/files/p3"
	P1_PORT=$(free_port) A_PORT=$(free_port) B_PORT=$(free_port) R_PORT=$(free_port)
	M_P1=$(free_port) M_A=$(free_port) M_B=$(free_port) M_R1=$(free_port) M_R2=$(free_port)
	# The first node of each store creates the issuer key in the store; the others read it from there.
	mkdir -p "$WORK/p1" "$WORK/na" "$WORK/nb" "$WORK/nr1" "$WORK/nr2"
	T_P1=$("$RELAYD" token tmpl --data "$WORK/p1" --store "$PG1" 2>/dev/null | tail -1)
	T_P2=$("$RELAYD" token tmpl --data "$WORK/na" --store "$PG2" 2>/dev/null | tail -1)
	T_P3=$("$RELAYD" token tmpl --data "$WORK/nr1" --store "$PG3" 2>/dev/null | tail -1)
	cluster_node() { # name port metrics-port store redis-db files [more flags...]: starts one, sets NODE_PID
		local name=$1 port=$2 mport=$3 store=$4 db=$5 files=$6
		shift 6
		"$RELAYD" --listen "127.0.0.1:$port" --data "$WORK/$name" --store "$store" --bus "unix://$WORK/redis.sock?db=$db" \
			--attachments "$WORK/files/$files" --metrics-listen "127.0.0.1:$mport" "${RELAY_FLAGS[@]}" "$@" \
			2>>"$WORK/$name.log" &
		NODE_PID=$!
		PIDS+=("$NODE_PID")
	}
	cluster_node p1 "$P1_PORT" "$M_P1" "$PG1" 1 p1
	PID_P1=$NODE_PID
	cluster_node na "$A_PORT" "$M_A" "$PG2" 2 p2
	PID_A=$NODE_PID
	cluster_node nb "$B_PORT" "$M_B" "$PG2" 2 p2
	PID_B=$NODE_PID
	cluster_node nr1 "$R_PORT" "$M_R1" "$PG3" 3 p3 --reuse-port on
	PID_R1=$NODE_PID
	cluster_node nr2 "$R_PORT" "$M_R2" "$PG3" 3 p3 --reuse-port on
	PID_R2=$NODE_PID
	# A process's metrics listener opens once it serves (on the shared port, /healthz may be the other's).
	for mport in "$M_P1" "$M_A" "$M_B" "$M_R1" "$M_R2"; do wait_http "http://127.0.0.1:$mport/metrics"; done
	log "cluster: pg1 node $PID_P1 on :$P1_PORT; pg2 nodes $PID_A on :$A_PORT and $PID_B on :$B_PORT; pgr processes $PID_R1 and $PID_R2 both on :$R_PORT"

	for c in p1 p2 p3; do
		case $c in
		p1) key=$WORK/p1/issuer.key tmpl=$T_P1 url=127.0.0.1:$P1_PORT src=127.7.0.1 ;;
		p2) key=$WORK/na/issuer.key tmpl=$T_P2 url=127.0.0.1:$A_PORT src=127.8.0.1 ;;
		p3) key=$WORK/nr1/issuer.key tmpl=$T_P3 url=127.0.0.1:$R_PORT src=127.9.0.1 ;;
		esac
		"$GEN" mint --key "$key" --template "$tmpl" --prefix b --from 0 --count "$N_BRIDGES" >"$WORK/$c-bridge-users.tsv"
		"$GEN" mint --key "$key" --template "$tmpl" --prefix r --from 0 --count "$N_REST_USERS" >"$WORK/$c-rest-users.tsv"
		t0=$(date +%s.%N)
		"$GEN" setup --url "$url" --users "$WORK/$c-bridge-users.tsv" --count "$N_BRIDGES" \
			--streaming "$N_STREAMING" --out "$WORK/$c-state.tsv" --src-base "$src" --per-ip 8
		log "cluster: $c paired $N_BRIDGES bridges in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
		# Half the REST users per token file, for the two wrk processes of the two-node runs.
		"$GEN" warm --url "$url" --users "$WORK/$c-rest-users.tsv" >/dev/null
		[ $c = p2 ] && "$GEN" warm --url "127.0.0.1:$B_PORT" --users "$WORK/$c-rest-users.tsv" >/dev/null
		# On the shared port the kernel picks the process: a second pass likely warms the other one too.
		[ $c = p3 ] && "$GEN" warm --url "$url" --users "$WORK/$c-rest-users.tsv" >/dev/null
		awk 'NR % 2 == 1' "$WORK/$c-rest-users.tsv" >"$WORK/$c-rest-a.tsv"
		awk 'NR % 2 == 0' "$WORK/$c-rest-users.tsv" >"$WORK/$c-rest-b.tsv"
	done
	awk 'NR % 2 == 1' "$WORK/rest-users.tsv" >"$WORK/sq-rest-a.tsv"
	awk 'NR % 2 == 0' "$WORK/rest-users.tsv" >"$WORK/sq-rest-b.tsv"

	# REST: every configuration gets the same two wrk processes (-t1 -c32 each, half the users each);
	# on two nodes each process talks to its own node, as a balancer would spread them.
	cluster_rest() { # label config
		local a b ta tb
		case $2 in
		sqlite) a=$RELAY_PORT b=$RELAY_PORT ta=$WORK/sq-rest-a.tsv tb=$WORK/sq-rest-b.tsv ;;
		pg1) a=$P1_PORT b=$P1_PORT ta=$WORK/p1-rest-a.tsv tb=$WORK/p1-rest-b.tsv ;;
		pg2) a=$A_PORT b=$B_PORT ta=$WORK/p2-rest-a.tsv tb=$WORK/p2-rest-b.tsv ;;
		pgr) a=$R_PORT b=$R_PORT ta=$WORK/p3-rest-a.tsv tb=$WORK/p3-rest-b.tsv ;;
		esac
		rm -f "$WORK/crest-a.jsonl" "$WORK/crest-b.jsonl"
		wrk_run "$1" "$2" "$WORK/crest-a.jsonl" 1 32 "$ta" "http://127.0.0.1:$a" 2>/dev/null &
		local w=$!
		wrk_run "$1" "$2" "$WORK/crest-b.jsonl" 1 32 "$tb" "http://127.0.0.1:$b" 2>/dev/null
		wait "$w"
		cat "$WORK/crest-a.jsonl" "$WORK/crest-b.jsonl" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
d = dict(rows[0])
for k in ("requests", "bytes", "non2xx", "err_connect", "err_read", "err_write", "err_timeout"):
    d[k] = sum(r[k] for r in rows)
d["duration_us"] = max(r["duration_us"] for r in rows)
for k in ("lat_p50_us", "lat_p99_us", "lat_max_us"):
    d[k] = max(r[k] for r in rows)
d["processes"] = len(rows)
print(json.dumps(d))' >>"$OUT/cluster-rest.jsonl"
		tail -1 "$OUT/cluster-rest.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("[bench] cluster REST %-6s %9.0f req/s  non2xx %d" % (d["target"], d["requests"]/d["duration_us"]*1e6, d["non2xx"]))' >&2
	}

	# Issue 25's counters, read from relayd's own metrics (summed over the configuration's processes)
	# before and after a run: PostgreSQL round trips (relay_store_round_trips_total) and Redis calls
	# (relay_bus_calls_total) per delta accepted (relay_deltas_total) and per request answered
	# (relay_http_requests_total). A relayd without one of these metrics gives null ("n/a" in the report).
	metrics_ports() { # config
		case $1 in
		pg1) echo "$M_P1" ;;
		pg2) echo "$M_A,$M_B" ;;
		pgr) echo "$M_R1,$M_R2" ;;
		esac
	}
	counters_read() { # ports: one JSON object, the counters summed over those processes' metrics
		python3 -c '
import json, sys, urllib.request
names = ("relay_deltas_total", "relay_http_requests_total", "relay_store_round_trips_total", "relay_bus_calls_total")
total, missing = dict.fromkeys(names, 0.0), set()
try:
    for port in sys.argv[1].split(","):
        seen = set()
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read().decode()
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in total and not line.startswith("#"):
                total[name] += float(line.rsplit(" ", 1)[1])
                seen.add(name)
        missing |= set(names) - seen  # a metric one process lacks is absent for the configuration
except OSError:
    missing = set(names)
total.update(dict.fromkeys(missing))
print(json.dumps(total))' "$1"
	}
	counters_run() { # label config command...: runs the command and appends the counters it moved
		local ports before label=$1 cfg=$2
		shift 2
		ports=$(metrics_ports "$cfg")
		[ -n "$ports" ] && before=$(counters_read "$ports")
		"$@"
		[ -n "$ports" ] || return 0
		python3 -c '
import json, sys
label, cfg, before, after = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
def moved(name):
    b, a = before.get(name), after.get(name)
    return None if a is None or b is None else a - b
row = {"label": label, "config": cfg, "deltas": moved("relay_deltas_total"),
       "requests": moved("relay_http_requests_total"), "store_round_trips": moved("relay_store_round_trips_total"),
       "bus_calls": moved("relay_bus_calls_total")}
print(json.dumps(row))
per = row["deltas"] if label != "rest" else row["requests"]
def each(n):
    return "n/a" if n is None or not per else "%.3f" % (n / per)
print("[bench] counters %s %-4s per %s: PostgreSQL round trips %s, Redis calls %s" % (
    label, cfg, "request" if label == "rest" else "delta", each(row["store_round_trips"]), each(row["bus_calls"])),
    file=sys.stderr)' "$label" "$cfg" "$before" "$(counters_read "$ports")" >>"$OUT/cluster-counters.jsonl"
	}

	ensure_relayd cluster
	log "cluster: REST, $CLUSTER_ROUNDS interleaved rounds of sqlite / pg1 / pg2 / pgr"
	for r in $(seq 1 "$CLUSTER_ROUNDS"); do
		for c in sqlite pg1 pg2 pgr; do
			counters_run rest "$c" cluster_rest rest "$c"
			sleep 1
		done
	done

	# Streaming: the two-node runs post every delta to node A and read every stream from node B, so each
	# delta crosses the bus (a bridge on one node, its user on another: what a balancer produces).
	cluster_stream() { # label config rate installations seconds warmup
		case $2 in
		sqlite) stream_run "$1" relayd "$3" "$4" "$5" "$6" "$OUT/cluster-stream.jsonl" "127.0.0.1:$RELAY_PORT" "$MAIN_PID" "$WORK/state.tsv" ;;
		pg1) stream_run "$1" relayd "$3" "$4" "$5" "$6" "$OUT/cluster-stream.jsonl" "127.0.0.1:$P1_PORT" "$PID_P1" "$WORK/p1-state.tsv" ;;
		pg2) stream_run "$1" relayd "$3" "$4" "$5" "$6" "$OUT/cluster-stream.jsonl" "127.0.0.1:$A_PORT" "$PID_A,$PID_B" "$WORK/p2-state.tsv" "127.0.0.1:$B_PORT" ;;
		pgr) stream_run "$1" relayd "$3" "$4" "$5" "$6" "$OUT/cluster-stream.jsonl" "127.0.0.1:$R_PORT" "$PID_R1,$PID_R2" "$WORK/p3-state.tsv" ;;
		esac
		# The line's target becomes the configuration's name.
		sed -i '$ s/"target":"relayd"/"target":"'"$2"'"/' "$OUT/cluster-stream.jsonl"
	}
	log "cluster: streaming at $LOW_RATE deltas/s, $CLUSTER_ROUNDS interleaved rounds"
	for r in $(seq 1 "$CLUSTER_ROUNDS"); do
		for c in sqlite pg1 pg2 pgr; do
			counters_run low "$c" cluster_stream low "$c" "$LOW_RATE" "$LOW_INST" "$STREAM_SECONDS" "$STREAM_WARMUP"
		done
	done
	log "cluster: capacity ramp ($CLUSTER_RAMP deltas/s), a configuration stops after two misses"
	declare -A CMISS=([sqlite]=0 [pg1]=0 [pg2]=0 [pgr]=0)
	for rate in $CLUSTER_RAMP; do
		for c in sqlite pg1 pg2 pgr; do
			[ "${CMISS[$c]}" -ge 2 ] && continue
			cluster_stream ramp "$c" "$rate" "$N_STREAMING" "$RAMP_SECONDS" 1
			if tail -1 "$OUT/cluster-stream.jsonl" | python3 "$HERE/report.py" --sustained; then CMISS[$c]=0; else CMISS[$c]=$((CMISS[$c] + 1)); fi
		done
	done

	# Idle scale: the same 15 000 + 3 000 connections on one PostgreSQL node, then spread over two nodes
	# (two hold processes of each kind per node); memory is the nodes' resident memory together. Not for
	# pgr: the phase's time goes to its REST and streaming rows.
	cluster_scale() { # config nodes pids state
		local before=0 held=0 pid opened
		for pid in ${3//,/ }; do before=$((before + $(rss_kib "$pid"))); done
		prefix_octet=${1: -1}
		hold_scale "c$1" "$4" "$2" >"$WORK/c$1-open.json"
		prefix_octet=""
		opened=$(cat "$WORK/c$1-open.json")
		sleep 3
		for pid in ${3//,/ }; do held=$((held + $(rss_kib "$pid"))); done
		hold_stop
		echo "{\"config\": \"$1\", \"sse\": $N_SSE, \"ws\": $N_WS, \"rss_before_kib\": $before, \"rss_held_kib\": $held, \"open\": $opened, \"close\": $(sum_json "$WORK/c$1"-*.out)}" >>"$OUT/cluster-scale.jsonl"
		log "cluster: scale $1: $opened, RSS $before -> $held KiB"
	}
	cluster_scale pg1 "127.0.0.1:$P1_PORT" "$PID_P1" "$WORK/p1-state.tsv"
	cluster_scale pg2 "127.0.0.1:$A_PORT,127.0.0.1:$B_PORT" "$PID_A,$PID_B" "$WORK/p2-state.tsv"

	echo "{\"postgres\": \"$("$PG_BIN/postgres" --version | awk '{print $3}')\", \"redis\": \"$(redis-server --version | awk '{print $3}' | sed 's/v=//')\", \"pg_settings\": \"fsync=on, shared_buffers=256MB, relayd setting synchronous_commit=on\"}" >"$OUT/cluster.json"
	for pid in "$PID_P1" "$PID_A" "$PID_B" "$PID_R1" "$PID_R2"; do stop_pid "$pid"; done
	stop_pid "$REDIS_PID"
	"$ROOT/tests/support/pg.sh" stop "$PGDIR" >/dev/null 2>&1
	PGDIR=""
	phase_end cluster
fi
stop_pid "$MAIN_PID"

# ---------------------------------------------------------------- durability

if want durability; then
	phase_begin durability
	log "durability: $DUR_ROUNDS rounds of kill -9 under load from $N_DUR installations"
	DDATA=$WORK/dur-data
	mkdir -p "$DDATA"
	cp -p "$WORK/issuer.key" "$DDATA/issuer.key"
	DPORT=$(free_port)
	start_relayd "$DDATA" "$DPORT" "$WORK/relayd-dur.log"
	sed -n "$((N_BRIDGES + 1)),$((N_BRIDGES + N_DUR))p" "$WORK/bridge-users.tsv" >"$WORK/dur-users.tsv"
	"$GEN" setup --url "127.0.0.1:$DPORT" --users "$WORK/dur-users.tsv" --count "$N_DUR" --streaming 0 \
		--out "$WORK/dur-state.tsv" --src-base 127.6.0.1 --per-ip 8
	JOURNALS=()
	for r in $(seq 1 "$DUR_ROUNDS"); do
		kill_ms=$((1500 + RANDOM % 2000))
		"$GEN" durability --url "127.0.0.1:$DPORT" --state "$WORK/dur-state.tsv" --inst "0:$N_DUR" --pid "$RELAYD_PID" \
			--journal "$WORK/journal-$r.tsv" --round "$r" --kill-after-ms "$kill_ms" >>"$OUT/durability-load.jsonl"
		stop_pid "$RELAYD_PID" KILL # already dead: the generator killed it
		JOURNALS+=(--journal "$WORK/journal-$r.tsv")
		t0=$(date +%s.%N)
		start_relayd "$DDATA" "$DPORT" "$WORK/relayd-dur.log"
		t1=$(date +%s.%N)
		set +e
		"$GEN" verify --url "127.0.0.1:$DPORT" --state "$WORK/dur-state.tsv" "${JOURNALS[@]}" >"$WORK/verify.json" 2>>"$WORK/verify.err"
		set -e
		python3 -c "
import json, sys
v = json.load(open('$WORK/verify.json'))
v.update(round=$r, restart_seconds=round($t1 - $t0, 2))
print(json.dumps(v))" >>"$OUT/durability.jsonl"
		log "durability round $r: $(tail -1 "$OUT/durability-load.jsonl") -> $(tail -1 "$OUT/durability.jsonl")"
		sleep 3 # the replays used the installations' buckets; let them fill before the next round
	done
	cp "$WORK/verify.err" "$OUT/verify.err" 2>/dev/null || true
	stop_pid "$RELAYD_PID"
	phase_end durability
fi

# ---------------------------------------------------------------- report

cat >"$OUT/machine.json" <<EOF
{"nproc": $(nproc), "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "kernel": "$(uname -r)", "date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "loadavg_start": "$LOADAVG_START",
 "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)", "nginx": "$(nginx -v 2>&1 | sed 's/.*nginx\///')",
 "nchan": "$(dpkg-query -W -f='${Version}' libnginx-mod-nchan 2>/dev/null)",
 "wrk": "$(dpkg-query -W -f='${Version}' wrk 2>/dev/null)",
 "relayd_commit": "$RELAYD_COMMIT", "phases": "$PHASES",
 "quick": $QUICK, "seconds": $(($(date +%s) - STARTED))}
EOF
python3 "$HERE/report.py" --out "$OUT" --results "$HERE/RESULTS.md"
log "wrote $HERE/RESULTS.md"

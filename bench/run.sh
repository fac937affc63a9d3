#!/usr/bin/env bash
# `make bench`: measures relayd against its peers and writes bench/RESULTS.md.
#
#   1. REST      wrk on GET /v1/me (relayd) vs nginx serving a file of the same size
#   2. scale     15 000 SSE streams + 3 000 bridge WebSockets held; RSS per connection; REST again
#   3. streaming sendMessageDelta -> SSE end to end (relayd) vs nchan pub -> EventSource, same payloads
#   4. storm     relayd restarts, then four processes reopen streams and bridge sockets at once
#   5. durability kill -9 under a write load, restart, verify
#
# Peers run in the same script, interleaved round by round, on loopback only.
# Settings (environment): BENCH_QUICK=1 for a short smoke run; BENCH_KEEP=1 keeps the work folder.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
QUICK=${BENCH_QUICK:-0}
BUILD=${BENCH_BUILD:-$HERE/build}
OUT=$HERE/out
WORK=$(mktemp -d /tmp/relay-bench.XXXXXX)
STARTED=$(date +%s)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()

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

install_packages() {
	local missing="" p
	[ -x "$ROOT/scripts/install-deps.sh" ] && "$ROOT/scripts/install-deps.sh"
	for p in nginx libnginx-mod-nchan wrk curl procps cmake pkg-config libjansson-dev libssl-dev python3; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages:$missing — run: sudo apt-get install -y$missing" >&2
		exit 1
	fi
	log "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends $missing >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
}

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

mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.jsonl "$OUT"/verify.err # profile.sh's files stay

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url
	local i
	for i in $(seq 1 100); do
		curl -s -o /dev/null -m 1 "$1" && return 0
		sleep 0.1
	done
	echo "nothing answers at $1" >&2
	exit 1
}

# ---------------------------------------------------------------- the peers

NGINX_PORT=$(free_port)
NCHAN_MODULE=$(ls /usr/lib/nginx/modules/ngx_nchan_module.so 2>/dev/null || true)
[ -n "$NCHAN_MODULE" ] || { echo "the nchan module is not installed" >&2; exit 1; }
mkdir -p "$WORK/nginx/www" "$WORK/nginx/tmp"
# Same shape as relayd: one event loop (one worker), no request log.
cat >"$WORK/nginx/nginx.conf" <<EOF
load_module $NCHAN_MODULE;
worker_processes 1;
daemon off;
master_process on;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
worker_rlimit_nofile $NOFILE;
user root root;
events { worker_connections 30000; use epoll; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/tmp/body;
  proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
  scgi_temp_path $WORK/nginx/tmp/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  default_type application/json;
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    location = /me.json { root $WORK/nginx/www; }
    location ~ ^/pub/(\w+)$ { nchan_publisher; nchan_channel_id \$1; }
    location ~ ^/sub/(\w+)$ {
      nchan_subscriber eventsource;
      nchan_channel_id \$1;
      nchan_subscriber_first_message newest;
    }
  }
}
EOF

DATA=$WORK/relay-data
mkdir -p "$DATA"
RELAY_PORT=$(free_port)
# Request logs are off on both sides: relayd logs one JSON line per request at info.
RELAY_FLAGS=(--log-level warn)

start_relayd() { # data port logfile
	"$RELAYD" --listen "127.0.0.1:$2" --data "$1" "${RELAY_FLAGS[@]}" 2>>"$3" &
	RELAYD_PID=$!
	PIDS+=("$RELAYD_PID")
	wait_http "http://127.0.0.1:$2/healthz"
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
	N_BRIDGES=600 N_STREAMING=300 N_SSE=3000 N_WS=600 N_REST_USERS=4000 N_DUR=50
	REST_SECONDS=4 REST_ROUNDS=1 STREAM_WARMUP=1 STREAM_SECONDS=3 STREAM_ROUNDS=1 RAMP_SECONDS=2 DUR_ROUNDS=1
	RAMP_RATES="2500 5000 10000 20000"
	HIGH_RATE=20000 STORM_ROUNDS=1
else
	N_BRIDGES=3000 N_STREAMING=1000 N_SSE=15000 N_WS=3000 N_REST_USERS=12000 N_DUR=200
	REST_SECONDS=10 REST_ROUNDS=3 STREAM_WARMUP=2 STREAM_SECONDS=8 STREAM_ROUNDS=3 RAMP_SECONDS=4 DUR_ROUNDS=3
	RAMP_RATES="2500 5000 10000 20000 35000 50000 70000 90000"
	HIGH_RATE=50000 STORM_ROUNDS=3
fi
LOW_RATE=5000
LOW_INST=100 # 50 deltas/s each: under the 100/s delta bucket of one installation

# ---------------------------------------------------------------- users, pairing

log "minting tokens, pairing $N_BRIDGES bridges"
"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix b --from 0 --count "$((N_BRIDGES + N_DUR))" >"$WORK/bridge-users.tsv"
"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix r --from 0 --count "$N_REST_USERS" >"$WORK/rest-users.tsv"
"$GEN" setup --url "127.0.0.1:$RELAY_PORT" --users "$WORK/bridge-users.tsv" --count "$N_BRIDGES" \
	--streaming "$N_STREAMING" --out "$WORK/state.tsv" --src-base 127.1.0.1 --per-ip 8
BODY_BYTES=$("$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/rest-users.tsv")
head -c "$BODY_BYTES" /dev/zero | tr '\0' 'x' >"$WORK/nginx/www/me.json"

# ---------------------------------------------------------------- REST

wrk_run() { # label target out
	local url path
	if [ "$2" = relayd ]; then url="http://127.0.0.1:$RELAY_PORT" path=/v1/me; else url="http://127.0.0.1:$NGINX_PORT" path=/me.json; fi
	BENCH_TOKENS="$WORK/rest-users.tsv" BENCH_PATH=$path BENCH_THREADS=2 \
		wrk -t2 -c64 -d"${REST_SECONDS}s" -s "$HERE/rest.lua" "$url" | tail -1 |
		sed "s/^{/{\"label\":\"$1\",\"target\":\"$2\",\"body_bytes\":$BODY_BYTES,/" >>"$3"
	tail -1 "$3" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("[bench] wrk %-12s %-6s %9.0f req/s  non2xx %d  p99 %.1f ms" % (d["label"], d["target"], d["requests"]/d["duration_us"]*1e6, d["non2xx"], d["lat_p99_us"]/1000))' >&2
}

rest_rounds() { # label rounds
	local r
	for r in $(seq 1 "$2"); do
		wrk_run "$1" relayd "$OUT/rest.jsonl"
		sleep 1
		wrk_run "$1" nginx "$OUT/rest.jsonl"
		sleep 1
	done
}

log "REST: wrk -t2 -c64 -d${REST_SECONDS}s, $REST_ROUNDS interleaved rounds, body $BODY_BYTES bytes"
REST_SECONDS=2 wrk_run warmup relayd "$WORK/warmup.jsonl"
REST_SECONDS=2 wrk_run warmup nginx "$WORK/warmup.jsonl"
sleep 3 # let the users' buckets fill again
rest_rounds baseline "$REST_ROUNDS"

# ---------------------------------------------------------------- idle scale

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
	# A new process knows no user yet; make them known as they were before the crash.
	"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/bridge-users.tsv" >/dev/null 2>&1
	"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/rest-users.tsv" >/dev/null 2>&1
}

HOLD_PIDS=()
hold_start() { # name sse-count sse-users ws-range src-base
	"$GEN" hold --url "127.0.0.1:$RELAY_PORT" --state "$WORK/state.tsv" --ready "$WORK/$1.ready" \
		--sse "$2" --sse-users "$3" --ws "$4" --src-base "$5" --src-count 50 >"$WORK/$1.out" 2>&1 &
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

# The scale run proper: every stream first, then every bridge socket.
log "scale: $N_SSE SSE streams + $N_WS bridge sockets held by relayd $MAIN_PID (fd limit $NOFILE)"
RSS_BEFORE=$(awk '/VmRSS/ {print $2}' /proc/$MAIN_PID/status)
HOLD_PROCS=4
USERS_PER=$((N_BRIDGES / HOLD_PROCS))
for p in $(seq 0 $((HOLD_PROCS - 1))); do
	hold_start "sse-$p" $((N_SSE / HOLD_PROCS)) $((p * USERS_PER)):$(((p + 1) * USERS_PER)) 0:0 "127.2.$p.1"
done
hold_wait sse-0 sse-1 sse-2 sse-3
for p in $(seq 0 $((HOLD_PROCS - 1))); do
	hold_start "ws-$p" 0 0:0 $((p * N_WS / HOLD_PROCS)):$(((p + 1) * N_WS / HOLD_PROCS)) "127.3.$p.1"
done
hold_wait ws-0 ws-1 ws-2 ws-3
sum_json "$WORK"/sse-*.ready "$WORK"/ws-*.ready >"$OUT/scale-open.json"
sleep 3
SCALE_ALIVE=0 RSS_HELD=0 FDS_HELD=0
if kill -0 "$MAIN_PID" 2>/dev/null; then
	SCALE_ALIVE=1
	RSS_HELD=$(awk '/VmRSS/ {print $2}' /proc/$MAIN_PID/status)
	FDS_HELD=$(ls /proc/$MAIN_PID/fd | wc -l)
fi
log "scale: $(cat "$OUT/scale-open.json"), RSS $RSS_BEFORE -> $RSS_HELD KiB, relayd fds $FDS_HELD"
[ "$SCALE_ALIVE" = 1 ] && rest_rounds held "$((REST_ROUNDS > 2 ? 2 : REST_ROUNDS))"
RSS_AFTER_REST=$(awk '/VmRSS/ {print $2}' /proc/$MAIN_PID/status 2>/dev/null || echo 0)
kill -0 "$MAIN_PID" 2>/dev/null || SCALE_ALIVE=0
hold_stop
sum_json "$WORK"/sse-*.out "$WORK"/ws-*.out >"$OUT/scale-close.json"
cat >"$OUT/scale.json" <<EOF
{"sse": $N_SSE, "ws": $N_WS, "rss_before_kib": $RSS_BEFORE, "rss_held_kib": $RSS_HELD,
 "rss_after_rest_kib": $RSS_AFTER_REST, "relayd_fds": $FDS_HELD, "nofile": $NOFILE, "survived": $SCALE_ALIVE,
 "open": $(cat "$OUT/scale-open.json"), "close": $(cat "$OUT/scale-close.json")}
EOF
log "scale: closed $(cat "$OUT/scale-close.json")"
ensure_relayd scale

# ---------------------------------------------------------------- reconnect storm

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
# A new process knows no user yet: make them known, as before the restarts.
"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/bridge-users.tsv" >/dev/null 2>&1
"$GEN" warm --url "127.0.0.1:$RELAY_PORT" --users "$WORK/rest-users.tsv" >/dev/null 2>&1

# ---------------------------------------------------------------- streaming

stream_run() { # label target rate installations seconds warmup
	local url pids
	sync # relayd's WAL can leave gigabytes of dirty pages; neither peer should pay for the other's writeback
	ensure_relayd streaming
	if [ "$2" = relayd ]; then url="127.0.0.1:$RELAY_PORT" pids=$MAIN_PID; else url="127.0.0.1:$NGINX_PORT" pids=$NGINX_PIDS; fi
	if ! "$GEN" stream --url "$url" --target "$2" --state "$WORK/state.tsv" --rate "$3" --installations "$4" \
		--duration "$5" --warmup "$6" --conns 64 --delta-bytes 64 --label "$1" --server-pids "$pids" \
		--out "$OUT/stream.jsonl" 2>"$WORK/stream.err"; then
		echo "{\"label\":\"$1\",\"target\":\"$2\",\"rate\":$3,\"installations\":$4,\"failed\":true}" >>"$OUT/stream.jsonl"
	fi
	sed 's/^/[bench] /' "$WORK/stream.err" >&2
}

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
WAL_BYTES=$(stat -c %s "$DATA/relay.db-wal" 2>/dev/null || echo 0)
DB_BYTES=$(stat -c %s "$DATA/relay.db" 2>/dev/null || echo 0)
echo "{\"wal_bytes\": $WAL_BYTES, \"db_bytes\": $DB_BYTES}" >"$OUT/store.json"
log "store after streaming: relay.db $DB_BYTES bytes, relay.db-wal $WAL_BYTES bytes"
stop_pid "$MAIN_PID" KILL # a clean stop would checkpoint the whole WAL first; the folder goes anyway
rm -rf "$DATA"            # it can be gigabytes

# ---------------------------------------------------------------- durability

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

# ---------------------------------------------------------------- report

cat >"$OUT/machine.json" <<EOF
{"nproc": $(nproc), "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "kernel": "$(uname -r)", "date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "loadavg_start": "$LOADAVG_START",
 "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)", "nginx": "$(nginx -v 2>&1 | sed 's/.*nginx\///')",
 "nchan": "$(dpkg-query -W -f='${Version}' libnginx-mod-nchan 2>/dev/null)",
 "wrk": "$(dpkg-query -W -f='${Version}' wrk 2>/dev/null)",
 "relayd_commit": "$RELAYD_COMMIT",
 "quick": $QUICK, "seconds": $(($(date +%s) - STARTED))}
EOF
python3 "$HERE/report.py" --out "$OUT" --results "$HERE/RESULTS.md"
log "wrote $HERE/RESULTS.md"

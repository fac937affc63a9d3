#!/usr/bin/env bash
# System calls, context switches and CPU per streamed delta: relayd beside nginx + nchan, same workload.
#
#   bench/syscalls.sh
#
# relayd (fresh SQLite data folder) and nginx with nchan (one worker, run.sh's configuration) start; 100
# installations are paired, one SSE stream each; then `relaybench stream` posts 64-byte deltas open loop
# at each rate of SC_RATES (default 2000 10000) for SC_SECONDS (default 10) after SC_WARMUP (2), to
# relayd and then to nchan with the same payloads. Over the measured window only (relaybench tells perf
# when it opens and closes: --perf-ctl), `perf stat -e raw_syscalls:sys_enter,context-switches,task-clock`
# counts the SERVER's processes: all of relayd's threads, nginx's worker (not its idle master). Each count
# is divided by the deltas read off the streams in that window (relaybench's served_rate x window).
# Then one more run of each at the first rate under `perf record -e raw_syscalls:sys_enter`: calls by
# name and by thread (relayd's threads named from /proc/PID/task/*/comm).
#
# Output: bench/out/syscalls.jsonl (one line per run), bench/out/syscalls-breakdown.md (the tables per
# call and per thread), bench/out/syscalls-section.md, which replaces the section "System calls per
# delta" of bench/RESULTS.md (the rest of that file is kept; report.py appends it when it rewrites the
# file). Uses bench/build like run.sh (builds it when missing or stale). Not part of `make test`.
# Settings (environment): SC_RATES, SC_SECONDS, SC_WARMUP, SC_INST; BENCH_KEEP=1 keeps the work folder.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BENCH_BUILD:-$HERE/build}
OUT=$HERE/out
WORK=$(mktemp -d /tmp/relay-syscalls.XXXXXX)
STARTED=$(date +%s)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
RATES=${SC_RATES:-2000 10000}
SECONDS_RUN=${SC_SECONDS:-10}
WARMUP=${SC_WARMUP:-2}
INST=${SC_INST:-100}
PIDS=()

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

log() { printf '[syscalls %4ds] %s\n' "$(($(date +%s) - STARTED))" "$*" >&2; }

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	sleep 0.5
	for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then log "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

install_packages
if ! command -v perf >/dev/null; then
	[ "$(id -u)" -eq 0 ] || { echo "perf is missing — run: sudo apt-get install -y linux-perf" >&2; exit 1; }
	log "installing: linux-perf"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-perf >/dev/null
fi
ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)

log "building relayd and the load generator (load average $LOADAVG_START)"
# Configured once (as run.sh configures them); a build reconfigures by itself when a CMakeLists.txt changed.
[ -f "$BUILD/relayd/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD/relayd" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD/relayd" -j2 --target relayd >/dev/null
[ -f "$BUILD/loadgen/CMakeCache.txt" ] || cmake -S "$HERE" -B "$BUILD/loadgen" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD/loadgen" -j2 >/dev/null
RELAYD=$BUILD/relayd/relayd
GEN=$BUILD/loadgen/relaybench
RELAYD_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo '+changes')"

# ---------------------------------------------------------------- the two servers, 100 installations

DATA=$WORK/relay-data
mkdir -p "$DATA"
RELAY_PORT=$(free_port)
METRICS_PORT=$(free_port)
TEMPLATE=$("$RELAYD" token tmpl --data "$DATA" 2>/dev/null | tail -1)
"$RELAYD" --listen "127.0.0.1:$RELAY_PORT" --data "$DATA" --metrics-listen "127.0.0.1:$METRICS_PORT" --log-level warn \
	2>>"$WORK/relayd.log" &
RELAYD_PID=$!
PIDS+=("$RELAYD_PID")
wait_http "http://127.0.0.1:$RELAY_PORT/healthz"

NGINX_PORT=$(free_port)
nginx_conf "$WORK/nginx" "$NGINX_PORT" "$NOFILE"
head -c 1 /dev/zero >"$WORK/nginx/www/me.json"
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx/" 2>>"$WORK/nginx/stderr" &
NGINX_MASTER=$!
PIDS+=("$NGINX_MASTER")
wait_http "http://127.0.0.1:$NGINX_PORT/me.json"
NGINX_WORKERS=$(pgrep -P "$NGINX_MASTER" | paste -sd, -)
log "relayd $RELAYD_PID on :$RELAY_PORT; nginx+nchan master $NGINX_MASTER, worker(s) $NGINX_WORKERS on :$NGINX_PORT"

"$GEN" mint --key "$DATA/issuer.key" --template "$TEMPLATE" --prefix b --from 0 --count "$INST" >"$WORK/users.tsv"
"$GEN" setup --url "127.0.0.1:$RELAY_PORT" --users "$WORK/users.tsv" --count "$INST" --streaming "$INST" \
	--out "$WORK/state.tsv" --src-base 127.1.0.1 --per-ip 8

# ---------------------------------------------------------------- runs

mkdir -p "$OUT"
rm -f "$OUT/syscalls.jsonl"
mkfifo "$WORK/perf.ctl"

# relayd's store counters (docs/operations.md "Monitoring"), read around each of its runs: how many deltas
# a batch carried, how many log appends and folds the run made.
metrics_read() {
	python3 -c '
import json, sys, urllib.request
names = ("relay_deltas_total", "relay_store_batches_total", "relay_store_log_appends_total", "relay_store_log_folds_total")
found = dict.fromkeys(names)
for line in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode().splitlines():
    name = line.split("{", 1)[0].split(" ", 1)[0]
    if name in found and not line.startswith("#"):
        found[name] = (found[name] or 0) + float(line.rsplit(" ", 1)[1])
print(json.dumps(found))' "$METRICS_PORT"
}

# One relaybench stream run with perf (stat or record: "$@") counting the server over its window only.
measured_run() { # target rate label perf-args...
	local target=$1 rate=$2 label=$3 url pids perf_pid
	shift 3
	if [ "$target" = relayd ]; then url=127.0.0.1:$RELAY_PORT pids=$RELAYD_PID; else url=127.0.0.1:$NGINX_PORT pids=$NGINX_WORKERS; fi
	sync # relayd's WAL leaves dirty pages; neither peer should pay for the other's writeback
	echo '{}' >"$WORK/metrics-before.json"
	[ "$target" = relayd ] && metrics_read >"$WORK/metrics-before.json"
	local scope=(-p "$pids")
	[ "${SYSTEM_WIDE:-0}" = 1 ] && scope=(-a)
	perf "$@" "${scope[@]}" -D -1 --control "fifo:$WORK/perf.ctl" 2>>"$WORK/perf.err" &
	perf_pid=$!
	PIDS+=("$perf_pid")
	sleep 0.5 # perf opens the FIFO before relaybench writes to it
	"$GEN" stream --url "$url" --target "$target" --state "$WORK/state.tsv" --rate "$rate" --installations "$INST" \
		--conns "$INST" --warmup "$WARMUP" --duration "$SECONDS_RUN" --delta-bytes 64 --label "$label" \
		--server-pids "$pids" --perf-ctl "$WORK/perf.ctl" --out "$WORK/stream.jsonl" 2>&1 | sed 's/^/  /' >&2
	sleep 0.3
	kill -INT "$perf_pid"
	wait "$perf_pid" || true
	echo '{}' >"$WORK/metrics-after.json"
	[ "$target" = relayd ] && metrics_read >"$WORK/metrics-after.json"
	# The store's counters over the whole run (warm-up and drain included), added to relaybench's line.
	python3 - "$WORK/stream.jsonl" "$WORK/metrics-before.json" "$WORK/metrics-after.json" <<'PY'
import json, sys
path, before, after = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
lines = open(path).read().splitlines()
run = json.loads(lines[-1])
short = {"relay_deltas_total": "run_deltas", "relay_store_batches_total": "run_store_batches",
         "relay_store_log_appends_total": "run_log_appends", "relay_store_log_folds_total": "run_log_folds"}
for name, key in short.items():
    b, a = before.get(name), after.get(name)
    run[key] = None if a is None or b is None else a - b
lines[-1] = json.dumps(run)
open(path, "w").write("\n".join(lines) + "\n")
PY
}

# Each thread of a process: id, name (/proc/PID/task/*/comm) and role. relayd does not name its threads
# (all "relayd"), so the role is the function the thread started in, read once with gdb when it is there
# (relayd is RelWithDebInfo): the loop is the process's first thread.
thread_roles() { # pid
	local t tid comm role
	[ "$1" = "$RELAYD_PID" ] && command -v gdb >/dev/null &&
		timeout 60 gdb -p "$1" -batch -ex "thread apply all bt" 2>/dev/null >"$WORK/gdb-$1.txt" || true
	for t in /proc/"$1"/task/*; do
		tid=${t##*/} comm=$(cat "$t/comm") role=$comm
		if [ "$1" = "$RELAYD_PID" ]; then
			role=$(awk -v tid="$tid" '
				/^Thread / { on = ($0 ~ "LWP " tid "\\)") }
				on && /src\/store\/worker.c/ { print "store worker (src/store/worker.c)"; exit }
				on && /checkpoint_main/ { print "WAL checkpointer (src/store/sqlite.c)"; exit }
				on && /src\/common\/jobs.c/ { print "job worker (src/common/jobs.c)"; exit }' "$WORK/gdb-$1.txt" 2>/dev/null)
			[ "$tid" = "$1" ] && role="the loop (h2o, src/http, src/relay)"
			[ -n "$role" ] || role=$comm
		fi
		printf '%s\t%s\n' "$tid" "$role"
	done
}

# Each of relayd's threads and the CPU it has used (ns, /proc/PID/task/TID/schedstat): read around a run,
# exact whatever perf drops, and divided by the deltas relayd took in the run (warm-up included).
thread_cpu() {
	local t
	for t in /proc/"$RELAYD_PID"/task/*; do
		printf '%s\t%s\n' "${t##*/}" "$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)"
	done
}

thread_roles "$RELAYD_PID" >"$WORK/threads-relayd.tsv"
for rate in $RATES; do
	for target in relayd nchan; do
		log "$target at $rate deltas/s for ${SECONDS_RUN} s: perf stat (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		thread_cpu >"$WORK/cpu-before.tsv"
		measured_run "$target" "$rate" stat stat -x, -o "$WORK/stat.csv" -e raw_syscalls:sys_enter,context-switches,task-clock
		thread_cpu >"$WORK/cpu-after.tsv"
		python3 - "$WORK/stat.csv" "$WORK/stream.jsonl" "$(cut -d' ' -f1-3 /proc/loadavg)" "$target" "$WORK/threads-relayd.tsv" \
			"$WORK/cpu-before.tsv" "$WORK/cpu-after.tsv" "$HERE" >>"$OUT/syscalls.jsonl" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[8])
from offcpu import thread_cpu
counts = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and not line.startswith("#"):
        counts[f[2]] = float(f[0]) if f[0] not in ("<not counted>", "<not supported>", "") else None
run = json.loads(open(sys.argv[2]).read().splitlines()[-1])
run["served"] = round(run["served_rate"] * run["window_s"])
run["syscalls"] = counts.get("raw_syscalls:sys_enter")
run["context_switches"] = counts.get("context-switches")
run["task_clock_ms"] = counts.get("task-clock")
run["loadavg_end"] = sys.argv[3]
if sys.argv[4] == "relayd":  # each thread's CPU (schedstat) over the run, warm-up included, per delta taken
    roles = dict(line.rstrip("\n").split("\t", 1) for line in open(sys.argv[5]) if "\t" in line)
    run["thread_cpu_us_per_delta"] = thread_cpu(sys.argv[6], sys.argv[7], roles, run.get("run_deltas"))
print(json.dumps(run))
PY
		tail -1 "$OUT/syscalls.jsonl" | python3 -c '
import json, sys
r = json.load(sys.stdin); n = r["served"] or 1
print("[syscalls] %-6s %5d/s: served %d, %.2f syscalls, %.2f context switches, %.1f us CPU per delta" % (
    r["target"], r["rate"], r["served"], (r["syscalls"] or 0) / n, (r["context_switches"] or 0) / n,
    (r["task_clock_ms"] or 0) * 1000 / n))' >&2
	done
done

BREAK_RATE=${RATES%% *}
rm -f "$OUT/syscalls-breakdown.jsonl"
for target in relayd nchan; do
	log "$target at $BREAK_RATE deltas/s: perf record -e raw_syscalls:sys_enter, calls by name and thread"
	if [ "$target" = relayd ]; then pid=$RELAYD_PID; else pid=${NGINX_WORKERS%%,*}; fi
	thread_roles "$pid" >"$WORK/threads-$target.tsv"
	measured_run "$target" "$BREAK_RATE" breakdown record -q -e raw_syscalls:sys_enter -o "$WORK/record-$target.data"
	perf script -i "$WORK/record-$target.data" -F tid,trace 2>/dev/null >"$WORK/record-$target.txt"
	python3 - "$target" "$WORK/record-$target.txt" "$WORK/threads-$target.tsv" "$WORK/stream.jsonl" >>"$OUT/syscalls-breakdown.jsonl" <<'PY'
import collections, json, re, sys
target, trace, threads, stream = sys.argv[1:5]
names = {}
for line in open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"):
    m = re.match(r"#define __NR_(\w+) (\d+)", line)
    if m:
        names[int(m.group(2))] = m.group(1)
comm = dict(line.rstrip("\n").split("\t", 1) for line in open(threads))
calls = collections.Counter()
for line in open(trace):
    m = re.match(r"\s*(\d+)\s+NR (\d+)", line)
    if m:
        calls[(m.group(1), names.get(int(m.group(2)), "NR " + m.group(2)))] += 1
run = json.loads(open(stream).read().splitlines()[-1])
print(json.dumps({"target": target, "rate": run["rate"], "run_deltas": run.get("run_deltas"),
                  "run_log_appends": run.get("run_log_appends"), "run_log_folds": run.get("run_log_folds"), "served": round(run["served_rate"] * run["window_s"]),
                  "delivered": run["delivered"], "e2e_p50_us": run.get("e2e_p50_us"),
                  "threads": {tid: comm.get(tid, "?") for tid in sorted({t for t, _ in calls} | set(comm))},
                  "calls": [[tid, name, n] for (tid, name), n in calls.most_common()]}))
PY
done

# ---------------------------------------------------------------- the tail: the loop off CPU

# One run of relayd at each rate of SC_TAIL_RATES under a system-wide record of the scheduler's switches
# (with the kernel stack of the thread switched away) and wake-ups: bench/offcpu.py splits the loop
# thread's window into runs on CPU, sleeps (charged to what it slept in) and delays while runnable
# (charged to who held the CPUs). System-wide, because the switch to a thread is an event of the thread
# it replaces. Shorter windows (SC_TAIL_SECONDS, default 4 s): every switch of the machine is recorded.
TAIL_RATES=${SC_TAIL_RATES-5000 10000}
rm -f "$OUT/offcpu.jsonl"
if [ -n "$TAIL_RATES" ]; then
	LOOP_TID=$RELAYD_PID
	for rate in $TAIL_RATES; do
		log "relayd at $rate deltas/s: perf record of the scheduler (off-CPU), ${SC_TAIL_SECONDS:-4} s"
		SECONDS_SAVED=$SECONDS_RUN SECONDS_RUN=${SC_TAIL_SECONDS:-4}
		thread_cpu >"$WORK/cpu-before.tsv"
		SYSTEM_WIDE=1 measured_run relayd "$rate" offcpu record -q -m 4096 -o "$WORK/sched-$rate.data" \
			-e 'sched:sched_switch/call-graph=fp,max-stack=24/' -e sched:sched_wakeup
		thread_cpu >"$WORK/cpu-after.tsv"
		SECONDS_RUN=$SECONDS_SAVED
		perf script --show-lost-events -i "$WORK/sched-$rate.data" -F comm,tid,cpu,time,event,trace,ip,sym 2>/dev/null >"$WORK/sched-$rate.txt"
		python3 "$HERE/offcpu.py" "$WORK/sched-$rate.txt" "$WORK/threads-relayd.tsv" "$LOOP_TID" "$WORK/stream.jsonl" \
			"$WORK/cpu-before.tsv" "$WORK/cpu-after.tsv" >>"$OUT/offcpu.jsonl"
		rm -f "$WORK/sched-$rate.data" "$WORK/sched-$rate.txt"
	done
fi

# ---------------------------------------------------------------- report

python3 - "$OUT" "$RELAYD_COMMIT" "$LOADAVG_START" "$(cut -d' ' -f1-3 /proc/loadavg)" "$SECONDS_RUN" "$INST" \
	"$(($(date +%s) - STARTED))" <<'PY'
import collections, json, os, sys, time
out, commit, load0, load1, secs, inst, took = sys.argv[1:8]
runs = [json.loads(l) for l in open(out + "/syscalls.jsonl") if l.strip()]
parts = [json.loads(l) for l in open(out + "/syscalls-breakdown.jsonl") if l.strip()]
by = {(r["target"], int(r["rate"])): r for r in runs}
rates = sorted({int(r["rate"]) for r in runs})

def per(r, key, scale=1.0):
    n = r.get("served") or 0
    v = r.get(key)
    return None if v is None or n == 0 else v * scale / n

def fmt(v, digits=2):
    return "n/a" if v is None else "%.*f" % (digits, v)

def ratio(a, b):
    return "n/a" if a is None or not b else "%.1f×" % (a / b)

md = ["## System calls per delta\n",
      "`bench/syscalls.sh` on %s (relayd %s; load average %s before, %s after, %s s in all): %s installations, "
      "one SSE stream each, 64-byte deltas open loop for %s s per run, relayd then nginx + nchan (one worker) "
      "with the same payloads. Counted by `perf stat -e raw_syscalls:sys_enter,context-switches,task-clock` on "
      "the server's processes only (relayd: all its threads; nchan: the nginx worker) over relaybench's "
      "measured window, divided by the deltas read off the streams in that window.\n"
      % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit, load0, load1, took, inst, secs),
      "| rate | figure | relayd | nchan | ratio |", "|---|---|---|---|---|"]
for rate in rates:
    a, b = by.get(("relayd", rate), {}), by.get(("nchan", rate), {})
    rows = [("deltas served in the window", a.get("served"), b.get("served"), 0),
            ("syscalls per delta", per(a, "syscalls"), per(b, "syscalls"), 2),
            ("context switches per delta", per(a, "context_switches"), per(b, "context_switches"), 2),
            ("CPU per delta (µs)", per(a, "task_clock_ms", 1000), per(b, "task_clock_ms", 1000), 1),
            ("p50 / p99 end to end (µs)", None, None, 0),
            ("bridge's answer (ack) p50 (µs)", a.get("ack_p50_us"), b.get("ack_p50_us"), 0),
            ("server CPU over the window (cores, relaybench)", a.get("server_cpu"), b.get("server_cpu"), 2),
            ("CPU per delta by thread (µs, schedstat; relayd: loop / store worker / checkpointer)",
             None, None, 1),
            ("deltas per delta-log write (relayd's metrics, whole run)",
             a["run_deltas"] / a["run_log_appends"] if a.get("run_log_appends") else None, None, 1)]
    for name, x, y, d in rows:
        if name.startswith("CPU per delta by thread"):
            t = a.get("thread_cpu_us_per_delta") or {}
            pick = lambda word: next((v for k, v in t.items() if k.startswith(word)), None)
            md.append("| %d/s | %s | %s / %s / %s | | |" % (rate, name, fmt(pick("the loop"), 1), fmt(pick("store worker"), 1),
                                                        fmt(pick("WAL checkpointer"), 1)))
            continue
        if name.startswith("p50"):
            cell = lambda r: "n/a" if not r else "%.0f / %.0f" % (r["e2e_p50_us"], r["e2e_p99_us"])
            md.append("| %d/s | %s | %s | %s | |" % (rate, name, cell(a), cell(b)))
        else:
            md.append("| %d/s | %s | %s | %s | %s |" % (rate, name, fmt(x, d), fmt(y, d), "" if name.startswith("deltas") or y is None else ratio(x, y)))

detail = ["# System calls by call and by thread\n",
          "From `bench/syscalls.sh` (%s, relayd %s): `perf record -e raw_syscalls:sys_enter` on the server over "
          "the measured window of one run at %s deltas/s; calls per delta = calls / deltas served in the "
          "window.\n" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit, parts[0]["rate"] if parts else "?")]
summary = {}
for p in parts:
    n = p["served"] or 1
    total = collections.Counter()
    thread_total = collections.Counter()
    for tid, name, c in p["calls"]:
        total[name] += c
        thread_total[tid] += c
    summary[p["target"]] = (total, n)
    detail.append("## %s: %d deltas served, %.2f calls per delta\n" % (p["target"], n, sum(total.values()) / n))
    if p.get("run_log_appends"):
        detail.append("relayd's metrics over the whole run: %d deltas accepted, %d delta-log writes (%.1f deltas "
                      "each), %d folds.\n" % (p["run_deltas"], p["run_log_appends"],
                                               p["run_deltas"] / p["run_log_appends"], p["run_log_folds"] or 0))
    detail += ["| call | calls | per delta |", "|---|---|---|"]
    detail += ["| %s | %d | %.3f |" % (name, c, c / n) for name, c in total.most_common()]
    detail.append("")
    for tid, c in thread_total.most_common():
        detail.append("### %s thread %s (%s): %d calls, %.3f per delta\n" % (p["target"], tid, p["threads"].get(tid, "?"), c, c / n))
        detail += ["| call | calls | per delta |", "|---|---|---|"]
        detail += ["| %s | %d | %.3f |" % (name, k, k / n) for t, name, k in p["calls"] if t == tid]
        detail.append("")
    idle = [t for t in p["threads"] if t not in thread_total]
    if idle:
        detail.append("Threads that made no call in the window: %s\n" % ", ".join("%s (%s)" % (t, p["threads"][t]) for t in idle))
open(out + "/syscalls-breakdown.md", "w").write("\n".join(detail) + "\n")

if summary:
    rt, rn = summary.get("relayd", (collections.Counter(), 1))
    nt, nn = summary.get("nchan", (collections.Counter(), 1))
    md += ["", "By call, one run of each at %s/s under `perf record` (per thread: `bench/out/syscalls-breakdown.md`):\n"
           % (parts[0]["rate"]), "| call | relayd per delta | nchan per delta |", "|---|---|---|"]
    for name in sorted(set(rt) | set(nt), key=lambda k: -(rt[k] / rn + nt[k] / nn)):
        if rt[name] / rn >= 0.005 or nt[name] / nn >= 0.005:
            md.append("| %s | %.3f | %.3f |" % (name, rt[name] / rn, nt[name] / nn))
    md.append("| all | %.2f | %.2f |" % (sum(rt.values()) / rn, sum(nt.values()) / nn))
    md += ["", "By thread, same runs (the calls a thread makes at least 0.005 times per delta):\n",
           "| server | thread | calls per delta | of which |", "|---|---|---|---|"]
    for p in parts:
        n = p["served"] or 1
        per_thread = collections.defaultdict(collections.Counter)
        for tid, name, c in p["calls"]:
            per_thread[tid][name] += c
        for tid, calls in sorted(per_thread.items(), key=lambda kv: -sum(kv[1].values())):
            md.append("| %s | %s | %.3f | %s |" % (p["target"], p["threads"].get(tid, "?"), sum(calls.values()) / n,
                      ", ".join("%s %.3f" % (k, v / n) for k, v in calls.most_common() if v / n >= 0.005)))
tails = [json.loads(l) for l in open(out + "/offcpu.jsonl") if l.strip()] if os.path.exists(out + "/offcpu.jsonl") else []
if tails:
    md += ["", "The loop off CPU (`bench/offcpu.py`: a system-wide record of the scheduler's switches and wake-ups "
           "over %s s at each rate, relayd alone): its runs on CPU, its delays while runnable (woken and waiting "
           "for a core, or preempted), and what it slept in. Times in µs.\n" % tails[0]["window_s"],
           "| rate | e2e p50 / p99 | loop runs: n, p50 / p99 / max | runnable: n, p50 / p99 / max, total ms "
           "| preempted by | cores held at wake-up by | asleep in (total ms, max µs) |", "|---|---|---|---|---|---|---|"]
    for t in tails:
        r, q = t["on_cpu"], t["runnable"]
        md.append("| %s/s | %s / %s | %d, %.0f / %.0f / %.0f | %d, %.0f / %.0f / %.0f, %.1f | %s | %s | %s |" % (
            t["rate"], t["e2e_p50_us"], t["e2e_p99_us"], r["count"], r["p50_us"], r["p99_us"], r["max_us"],
            q["count"], q["p50_us"], q["p99_us"], q["max_us"], q["total_ms"],
            ", ".join("%s %d" % kv for kv in t["preempted_by"].items()) or "none",
            ", ".join("%s %d" % kv for kv in list(t["cpus_held_at_wakeup_by"].items())[:4]) or "none",
            "; ".join("%s %.1f, %.0f" % (k, v["total_ms"], v["max_us"]) for k, v in list(t["blocked"].items())[:4])))
    md += ["", "CPU per delta of each of relayd's threads in those runs (µs: its CPU time from "
           "/proc/PID/task/TID/schedstat around the run, warm-up included, over the deltas relayd took; "
           "recording every switch with its stack costs the switching thread, so these are above the "
           "`perf stat` runs' figures in the first table):\n"]
    for t in tails:
        md.append("- %s/s: %s" % (t["rate"], ", ".join("%s %.1f" % kv for kv in t.get("cpu_us_per_delta", {}).items())))
    md.append("\nThe switches perf lost (its buffers overflowed) are in `lost_events` of bench/out/offcpu.jsonl: %s."
              % ", ".join("%s/s %s" % (t["rate"], t.get("lost_events", "?")) for t in tails))
md.append("\nWhere each of relayd's calls comes from: docs/internals/performance.md, \"System calls per delta\". "
          "Raw: bench/out/syscalls.jsonl, bench/out/syscalls-breakdown.md.\n")
open(out + "/syscalls-section.md", "w").write("\n".join(md))
PY

# The section replaces its earlier self in RESULTS.md; the rest of the file stays as it is.
python3 - "$HERE/RESULTS.md" "$OUT/syscalls-section.md" <<'PY'
import sys
path, section = sys.argv[1], open(sys.argv[2]).read()
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# Benchmark results\n"
head = "## System calls per delta\n"
if head in text:
    before, rest = text.split(head, 1)
    nxt = rest.find("\n## ")
    after = rest[nxt + 1:] if nxt >= 0 else ""
    text = before + section.rstrip("\n") + "\n" + ("\n" + after if after else "")
else:
    text = text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
cat "$OUT/syscalls-section.md"
log "wrote bench/RESULTS.md (section \"System calls per delta\"), bench/out/syscalls-breakdown.md (load average $(cut -d' ' -f1-3 /proc/loadavg))"

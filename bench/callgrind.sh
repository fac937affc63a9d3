#!/usr/bin/env bash
# Cost per delta: CPU instructions per streamed delta, all of relayd's threads, on a fixed workload,
# counted by callgrind (BRIEF.md, "Cost per delta"). Deterministic up to timing effects, so two
# revisions can be compared on a shared machine where wall-clock benchmarks cannot.
#
#   bench/callgrind.sh [TREE...]        TREE: a git revision of this repository, or a relayd source folder
#                                       (none: this script's own tree)
#   BENCH_REV_A=b8cea00 BENCH_REV_B=main bench/callgrind.sh     the same as: bench/callgrind.sh b8cea00 main
#
# For each tree, CG_RUNS times (default 2), one "measured" and one "baseline" session, each on a fresh data
# folder and loopback port:
#   relayd (RelWithDebInfo) under valgrind --tool=callgrind --separate-threads=no, --sse-heartbeat 1h (no
#     heartbeat inside a run) and --delta-wait-max 60s (under valgrind a store commit can stall past the
#     default 100 ms, and relayd would shed deltas with 503: a different workload);
#   relaybench setup pairs CG_INST installations (default 10), each with an open message;
#   relaybench stream --warmup 0 --duration CG_SECONDS (default 20): one SSE stream per user, one publisher
#     connection per installation, 64-byte deltas, open loop at CG_RATE deltas/s (default 100: 10/s an
#     installation, under the delta bucket, and slow enough that relayd under valgrind keeps up);
#     the baseline session posts one delta per installation instead (rate CG_INST / CG_SECONDS), so it
#     pays everything else the measured one does: start, pairing, the connections, the same wall time;
#   the metrics endpoint is read (store transactions and operations), relayd gets SIGTERM, callgrind
#     writes its totals.
# Printed per session: instructions (all threads), deltas scheduled / sent / acknowledged / delivered; per
#   tree: instructions per delta = (measured − baseline) / (deltas delivered − baseline's deltas delivered),
#   store transactions and operations per delta the same way, and the spread over the runs; then where a
#   delta's instructions go by library and function, and the largest differences between the trees.
# A session in which a delta sent was refused, lost or not delivered is reported as invalid and left out.
# The generator's schedule is fixed (CG_RATE x CG_SECONDS); a delta still waiting behind its installation's
# delta in flight when the schedule ends (after a stall) is never sent, so "deltas delivered" is the count.
#   bench/callgrind.sh --report FILE.jsonl     prints the table again from CG_OUT's lines
#   bench/callgrind.sh --functions WORKDIR     the breakdown by library and function again (BENCH_KEEP=1's folder)
#
# A revision is checked out with `git worktree add --detach` into the work folder, built, and removed; the
# binary is kept in bench/build/callgrind/relayd-<commit> so a second run does not build again. The load
# generator is always this tree's (bench/loadgen), so every revision sees the same client.
# Settings: CG_RUNS, CG_INST, CG_RATE, CG_SECONDS as above; BENCH_KEEP=1 keeps the work folder (callgrind
# files, logs); CG_OUT=FILE also appends one JSON line per session to FILE.
set -euo pipefail

# The table, from the sessions' JSON lines (this run's, or CG_OUT's with --report).
report() { # sessions.jsonl
python3 - "$1" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
m0 = [r for r in rows if r["kind"] == "measured"][0]
print()
print("workload: %d installations, %g deltas/s for %g s, 64-byte deltas, one SSE stream per user; "
      "baseline: one delta per installation" % (m0["installations"], m0["rate"], m0["seconds"]))
print()
print("| tree | run | total Ir (all threads) | baseline Ir | deltas delivered (baseline) | Ir per delta "
      "| store transactions per delta | store operations per delta |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
labels = []
for r in rows:
    if r["label"] not in labels:
        labels.append(r["label"])
summary = {}
for label in labels:
    per = []
    for run in sorted({r["run"] for r in rows if r["label"] == label}):
        m = [r for r in rows if r["label"] == label and r["run"] == run and r["kind"] == "measured"]
        b = [r for r in rows if r["label"] == label and r["run"] == run and r["kind"] == "baseline"]
        if not m or not b:
            continue
        m, b = m[0], b[0]
        n = m["delivered"] - b["delivered"]
        ipd = (m["instructions"] - b["instructions"]) / n
        def per_delta(k):
            if m.get(k) is None or b.get(k) is None:
                return "n/a"
            return "%.3f" % ((m[k] - b[k]) / n)
        flag = "" if m["valid"] and b["valid"] else " (INVALID)"
        print("| %s | %d | %s | %s | %d (%d) | %s%s | %s | %s |" % (
            label, run, format(m["instructions"], ","), format(b["instructions"], ","), m["delivered"],
            b["delivered"], format(round(ipd), ","), flag, per_delta("store_batches"), per_delta("store_operations")))
        if m["valid"] and b["valid"]:
            per.append((ipd, m["instructions"], b["instructions"], n,
                        (m["store_batches"] - b["store_batches"]) / n if m.get("store_batches") is not None else None))
    summary[label] = per
print()
def spread(vals):
    med = statistics.median(vals)
    return "%s (%s..%s, %.2f %%)" % (format(round(med), ","), format(round(min(vals)), ","),
                                     format(round(max(vals)), ","), 100 * (max(vals) - min(vals)) / med)
for label in labels:
    per = summary[label]
    if not per:
        print("%s: no valid run" % label)
        continue
    print("%s, %d valid runs, median (min..max, spread):" % (label, len(per)))
    print("  instructions per delta  %s" % spread([p[0] for p in per]))
    print("  total instructions      %s" % spread([p[1] for p in per]))
    print("  baseline instructions   %s" % spread([p[2] for p in per]))
    print("  deltas counted          %s" % ", ".join(str(p[3]) for p in per))
    if all(p[4] is not None for p in per):
        print("  store transactions per delta  %s" % ", ".join("%.3f" % p[4] for p in per))
if len(labels) >= 2 and summary[labels[0]] and summary[labels[-1]]:
    a = statistics.median([p[0] for p in summary[labels[0]]])
    b = statistics.median([p[0] for p in summary[labels[-1]]])
    print("%s -> %s: %+.2f %% instructions per delta" % (labels[0], labels[-1], 100 * (b - a) / a))
EOF
}
# Where the instructions per delta go, by library and by function (self cost), and what changed between the
# first tree and the last: (sum of measured − sum of baselines) / deltas over every valid run of a tree.
# Reads the callgrind files of a work folder (this run's, or one kept with BENCH_KEEP=1).
functions() { # workdir
python3 - "$1" <<'EOF'
import collections, json, re, sys
work = sys.argv[1]
ALIAS = {"cob": "ob", "cfi": "fl", "cfl": "fl", "fi": "fl", "fe": "fl", "cfn": "fn"}
def self_costs(path):
    """Self instructions per (object, function) of one callgrind file (call lines' inclusive costs skipped)."""
    names = {"ob": {}, "fn": {}, "fl": {}}
    costs = collections.Counter()
    ob = key = None
    skip = False
    for line in open(path):
        m = re.match(r"^(ob|fn|fl|fi|fe|cob|cfn|cfi|cfl)=(?:\((\d+)\))?\s*(.*)$", line)
        if m:
            kind, idx, name = m.groups()
            base = ALIAS.get(kind, kind)
            if idx is not None:
                if name:
                    names[base][idx] = name
                name = names[base].get(idx, name)
            if kind == "ob":
                ob = name
            elif kind == "fn":
                # relayd's binary is named after its commit or folder: one name for every tree
                obj = re.sub(r"-[0-9a-f]{8,40}$", "", (ob or "?").split("/")[-1])
                key = (obj, name)
            continue
        if line.startswith("calls="):
            skip = True
            continue
        if line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if len(parts) >= 2:
                if skip:
                    skip = False
                else:
                    costs[key] += int(parts[1])
    return costs
rows = [json.loads(l) for l in open(work + "/sessions.jsonl") if l.strip()]
labels = []
for r in rows:
    if r["label"] not in labels:
        labels.append(r["label"])
per = {}
for label in labels:
    total, n = collections.Counter(), 0
    for run in sorted({r["run"] for r in rows if r["label"] == label}):
        pair = {r["kind"]: r for r in rows if r["label"] == label and r["run"] == run}
        if set(pair) != {"measured", "baseline"} or not (pair["measured"]["valid"] and pair["baseline"]["valid"]):
            continue
        total.update(self_costs("%s/%s-measured-%d/callgrind.out" % (work, label, run)))
        total.subtract(self_costs("%s/%s-baseline-%d/callgrind.out" % (work, label, run)))
        n += pair["measured"]["delivered"] - pair["baseline"]["delivered"]
    if n:
        per[label] = {k: v / n for k, v in total.items()}
if not per:
    sys.exit(0)
def by_object(costs):
    out = collections.Counter()
    for (obj, _), v in costs.items():
        out[obj] += v
    return out
print()
print("instructions per delta by library (self cost, all valid runs pooled):")
objs = {label: by_object(c) for label, c in per.items()}
names = sorted({o for c in objs.values() for o in c}, key=lambda o: -max(c.get(o, 0) for c in objs.values()))
print("  %-32s" % "" + "".join("%12s" % l for l in per))
for o in names[:8]:
    print("  %-32s" % o + "".join("%12.0f" % objs[l].get(o, 0) for l in per))
print("  %-32s" % "total" + "".join("%12.0f" % sum(objs[l].values()) for l in per))
if len(per) >= 2:
    a, b = per[list(per)[0]], per[list(per)[-1]]
    keys = set(a) | set(b)
    print()
    print("largest differences per delta, %s -> %s, by function (self cost):" % (list(per)[0], list(per)[-1]))
    for k in sorted(keys, key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[:15]:
        print("  %+8.0f  %9.0f -> %9.0f  %s %s" % (b.get(k, 0) - a.get(k, 0), a.get(k, 0), b.get(k, 0), k[0], k[1]))
    own = [k for k in keys if k[0].startswith("relayd")]
    print("relayd's own code: %.0f -> %.0f instructions per delta; its largest differences:" % (
        sum(a.get(k, 0) for k in own), sum(b.get(k, 0) for k in own)))
    for k in sorted(own, key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[:10]:
        print("  %+8.0f  %9.0f -> %9.0f  %s" % (b.get(k, 0) - a.get(k, 0), a.get(k, 0), b.get(k, 0), k[1]))
EOF
}
if [ "${1:-}" = --report ]; then
	report "$2"
	exit 0
fi
if [ "${1:-}" = --functions ]; then
	functions "$2"
	exit 0
fi

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BENCH_BUILD:-$HERE/build}
RUNS=${CG_RUNS:-2}
INST=${CG_INST:-10}
RATE=${CG_RATE:-100}
SECONDS_=${CG_SECONDS:-20}
WORK=$(mktemp -d /tmp/relay-callgrind.XXXXXX)
PIDS=()
WORKTREES=()
STARTED=$(date +%s)

log() { printf '[callgrind %4ds] %s\n' "$(($(date +%s) - STARTED))" "$*" >&2; }

cleanup() {
	local pid wt
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	for wt in "${WORKTREES[@]}"; do git -C "$ROOT" worktree remove --force "$wt" 2>/dev/null || true; done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then log "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

forget_pid() {
	local keep=() p
	for p in "${PIDS[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
	PIDS=("${keep[@]}")
}

command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
TREES=("$@")
if [ ${#TREES[@]} = 0 ]; then
	[ -n "${BENCH_REV_A:-}" ] && TREES+=("$BENCH_REV_A")
	[ -n "${BENCH_REV_B:-}" ] && TREES+=("$BENCH_REV_B")
fi
[ ${#TREES[@]} = 0 ] && TREES=("$ROOT")

# ---------------------------------------------------------------- builds

log "building the load generator (this tree's bench/loadgen)"
cmake -S "$HERE" -B "$BUILD/loadgen" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD/loadgen" -j2 >/dev/null
GEN=$BUILD/loadgen/relaybench
mkdir -p "$BUILD/callgrind"

# Builds relayd from TREE (a folder, or a revision of this repository): sets BUILT_NAME and BUILT_BIN.
build_relayd() { # tree
	local tree=$1 src commit bin name
	if [ -d "$tree" ]; then
		src=$(cd "$tree" && pwd)
		name=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo folder)
		git -C "$src" diff --quiet HEAD -- src CMakeLists.txt 2>/dev/null || name="$name+changes"
		bin=$WORK/relayd-$(echo "$src" | md5sum | cut -c1-8)
		log "building relayd from the folder $src ($name)"
		cmake -S "$src" -B "$bin.build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_BUILD_TESTS=OFF >/dev/null
		cmake --build "$bin.build" -j2 --target relayd >/dev/null
		cp "$bin.build/relayd" "$bin"
	else
		commit=$(git -C "$ROOT" rev-parse --verify "$tree^{commit}") || { echo "no such revision or folder: $tree" >&2; exit 2; }
		name=${commit:0:7}
		bin=$BUILD/callgrind/relayd-$commit
		if [ ! -x "$bin" ]; then
			src=$WORK/src-$name
			log "checking out $tree ($name) and building relayd"
			git -C "$ROOT" worktree add --detach "$src" "$commit" >/dev/null 2>&1
			WORKTREES+=("$src")
			cmake -S "$src" -B "$WORK/build-$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_BUILD_TESTS=OFF >/dev/null
			cmake --build "$WORK/build-$name" -j2 --target relayd >/dev/null
			cp "$WORK/build-$name/relayd" "$bin.tmp"
			mv "$bin.tmp" "$bin"
			git -C "$ROOT" worktree remove --force "$src"
		else
			log "relayd for $tree ($name) already built: $bin"
		fi
	fi
	BUILT_NAME=$name BUILT_BIN=$bin
}

LABELS=() BINS=()
for t in "${TREES[@]}"; do
	build_relayd "$t"
	LABELS+=("$BUILT_NAME")
	BINS+=("$BUILT_BIN")
done

# ---------------------------------------------------------------- one session

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# One relayd under callgrind, pairing, a stream at RATE for SECONDS_, metrics, SIGTERM. Appends one JSON line
# to $WORK/sessions.jsonl.
session() { # label binary kind(measured|baseline) run
	local label=$1 bin=$2 kind=$3 run=$4 dir rate port mport pid tmpl i status cg
	dir=$WORK/$label-$kind-$run
	mkdir -p "$dir/data"
	chmod 700 "$dir/data"
	port=$(free_port)
	mport=$(free_port)
	tmpl=$("$bin" token tmpl --data "$dir/data" 2>/dev/null | tail -1)
	"$GEN" mint --key "$dir/data/issuer.key" --template "$tmpl" --prefix b --from 0 --count "$INST" >"$dir/users.tsv"
	# RELAY_LOOP_LAG_MAX: under valgrind the loop runs ~50x slower and would shed deltas past --loop-lag-max
	# (a setting since fastpath; set through the environment, which older revisions ignore).
	RELAY_LOOP_LAG_MAX=60s valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$dir/callgrind.out" \
		"$bin" --listen "127.0.0.1:$port" --data "$dir/data" --log-level warn --sse-heartbeat 1h --delta-wait-max 60s \
		--metrics-listen "127.0.0.1:$mport" >"$dir/relayd.out" 2>"$dir/relayd.log" &
	pid=$!
	PIDS+=("$pid")
	for i in $(seq 1 300); do
		curl -s -o /dev/null -m 2 "http://127.0.0.1:$port/healthz" && break
		kill -0 "$pid" 2>/dev/null || { tail -5 "$dir/relayd.log" >&2; echo "relayd died at start" >&2; exit 1; }
		sleep 0.2
	done
	"$GEN" setup --url "127.0.0.1:$port" --users "$dir/users.tsv" --count "$INST" --streaming "$INST" \
		--out "$dir/state.tsv" --src-base 127.1.0.1 --per-ip 8 2>"$dir/setup.log"
	rate=$RATE
	[ "$kind" = baseline ] && rate=$(python3 -c "print($INST / $SECONDS_)")
	"$GEN" stream --url "127.0.0.1:$port" --target relayd --state "$dir/state.tsv" --rate "$rate" \
		--installations "$INST" --conns "$INST" --warmup 0 --duration "$SECONDS_" --delta-bytes 64 \
		--label "$label-$kind" --out "$dir/stream.json" 2>"$dir/stream.log"
	curl -s -m 30 "http://127.0.0.1:$mport/metrics" >"$dir/metrics.txt" || true
	kill -TERM "$pid"
	status=0
	for i in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		log "relayd $pid did not stop within 60 s of SIGTERM; killed, no totals"
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || status=$?
	forget_pid "$pid"
	cg=$dir/callgrind.out
	[ -s "$cg" ] || { echo "callgrind wrote nothing for $label $kind $run (exit $status); see $dir/relayd.log" >&2; exit 1; }
	python3 - "$dir" "$label" "$kind" "$run" "$status" "$INST" "$rate" "$SECONDS_" <<'EOF' >>"$WORK/sessions.jsonl"
import json, re, sys
d, label, kind, run, status, inst, rate, secs = sys.argv[1:]
ir = None
for line in open(d + "/callgrind.out"):
    m = re.match(r"(summary|totals):\s+(\d+)", line)
    if m:
        ir = int(m.group(2))
s = json.loads(open(d + "/stream.json").read().splitlines()[-1])
metrics = {}
for line in open(d + "/metrics.txt"):
    m = re.match(r"(relay_store_batches_total|relay_store_operations_total|relay_deltas_total|"
                 r"relay_events_published_total|relay_events_delivered_total) (\d+)", line)
    if m:
        metrics[m.group(1)] = int(m.group(2))
# Valid: every delta sent was acknowledged and delivered, nothing refused. Deltas the generator never sent
# (still waiting behind their installation's delta in flight when the schedule ended, after a stall) cost
# relayd nothing and are not counted.
sent = s["scheduled"] - s["unsent"] - s["dropped"]
ok = (sent == s["acked"] == s["delivered"] and s["non2xx"] == 0 and s["rate_limited"] == 0
      and s["errors"] == 0 and s["lost"] == 0 and s["dups"] == 0)
print(json.dumps({"label": label, "kind": kind, "run": int(run), "installations": int(inst), "rate": float(rate),
                  "seconds": float(secs), "instructions": ir, "scheduled": s["scheduled"], "sent": sent,
                  "acked": s["acked"], "delivered": s["delivered"], "non2xx": s["non2xx"],
                  "rate_limited": s["rate_limited"], "errors": s["errors"], "unsent": s["unsent"],
                  "e2e_p99_us": s.get("e2e_p99_us"), "valid": ok, "relayd_exit": int(status),
                  "store_batches": metrics.get("relay_store_batches_total"),
                  "store_operations": metrics.get("relay_store_operations_total"),
                  "relay_deltas": metrics.get("relay_deltas_total"),
                  "events_published": metrics.get("relay_events_published_total")}))
EOF
	tail -1 "$WORK/sessions.jsonl" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("[callgrind] %-16s %-8s run %d: %14s instructions  deltas scheduled %d sent %d acked %d delivered %d  store batches %s ops %s%s" % (
    r["label"], r["kind"], r["run"], format(r["instructions"], ","), r["scheduled"], r["sent"], r["acked"],
    r["delivered"], r["store_batches"], r["store_operations"],
    "" if r["valid"] else "  INVALID (a delta sent was refused, lost or not delivered)"))' >&2
	[ -n "${CG_OUT:-}" ] && tail -1 "$WORK/sessions.jsonl" >>"$CG_OUT"
	return 0
}

# ---------------------------------------------------------------- the runs, interleaved

log "workload: $INST installations, $RATE deltas/s for $SECONDS_ s ($((RATE * SECONDS_)) deltas), baseline one delta an installation; $RUNS runs per tree; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
	for i in "${!BINS[@]}"; do
		session "${LABELS[$i]}" "${BINS[$i]}" baseline "$run"
		session "${LABELS[$i]}" "${BINS[$i]}" measured "$run"
	done
done
log "done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
report "$WORK/sessions.jsonl"
functions "$WORK"

#!/usr/bin/env python3
"""Turns the raw results of bench/run.sh (bench/out/*.json[l]) into bench/RESULTS.md.

`report.py --sustained` reads one stream result on stdin and exits 0 when that
rate was sustained (used by the capacity ramp).
"""
import argparse
import json
import os
import statistics
import sys

# A rate is sustained when at least 99 % of the scheduled deltas were delivered
# inside the window, nothing acknowledged was lost, nothing was refused, and
# the end-to-end p99 stayed under 50 ms (a queue that keeps growing shows
# there long before the window ends).
SUSTAIN_FRACTION = 0.99
SUSTAIN_P99_US = 50_000
# Overload (issue 16): offered twice the sustained maximum, relayd delivers at least 90 % of that maximum
# and refuses the rest quickly: every refusal names Retry-After and is answered in p99 under 100 ms.
OVERLOAD_FRACTION = 0.90
SHED_P99_US = 100_000
# The WAL "stays bounded": the checkpointer restarts it past 64 MiB; a peak under twice that shows checkpoints
# keep up (at d701af1 it reached 430 MB).
WAL_BOUND_MIB = 128
# Issue 25's bars for the cluster phase: one node on PostgreSQL + Redis against the SQLite node, two nodes
# against one, and what relayd counts per delta (at 5 000/s) and per REST request on one node.
PG_STREAM_FRACTION = 0.80
PG_REST_FRACTION = 0.90
PG_P99_US = 50_000
ROUND_TRIPS_PER_DELTA = 0.05
BUS_CALLS_PER_DELTA = 0.1
BUS_CALLS_PER_REQUEST = 0.05


def sustained(d):
    if d.get("failed"):
        return False
    refused = d["non2xx"] + d["rate_limited"] + d["errors"]
    return (d["delivered_rate"] >= SUSTAIN_FRACTION * d["rate"] and d["lost"] <= 0 and refused == 0
            and d["e2e_p99_us"] < SUSTAIN_P99_US)


def load_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, unit="", digits=0):
    if v is None:
        return "—"
    if isinstance(v, float) and digits == 0:
        return f"{v:,.0f}{unit}".replace(",", " ")
    if isinstance(v, float):
        return f"{v:,.{digits}f}{unit}".replace(",", " ")
    return f"{v:,}{unit}".replace(",", " ")


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.{digits}f}×"


def verdict(ok):
    if ok is None:
        return "—"
    return "**holds**" if ok else "**does not hold**"


def rest_rate(d):
    return d["requests"] / d["duration_us"] * 1e6


def counter_median(counters, cfg, label, key):
    """The median over runs of a counter per delta (label "low") or per request ("rest"); "n/a" when relayd
    has no such metric, None when no run was counted."""
    runs = [d for d in counters if d["config"] == cfg and d["label"] == label]
    if not runs:
        return None
    per = "requests" if label == "rest" else "deltas"
    values = [d[key] / d[per] for d in runs if d.get(key) is not None and d.get(per)]
    return median(values) if values else "n/a"


def fmt_count(v):
    if v is None or v == "n/a":
        return "n/a" if v == "n/a" else "—"
    return f"{v:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--results")
    ap.add_argument("--sustained", action="store_true")
    args = ap.parse_args()
    if args.sustained:
        line = sys.stdin.read().strip().splitlines()[-1]
        sys.exit(0 if sustained(json.loads(line)) else 1)

    out = args.out
    machine = load(os.path.join(out, "machine.json"), {})
    rest = load_lines(os.path.join(out, "rest.jsonl")) + load_lines(os.path.join(out, "rest-held.jsonl"))
    stream = load_lines(os.path.join(out, "stream.jsonl"))
    scale = load(os.path.join(out, "scale.json"), {})
    store = load(os.path.join(out, "store.json"), {})
    dur_load = load_lines(os.path.join(out, "durability-load.jsonl"))
    dur = load_lines(os.path.join(out, "durability.jsonl"))
    storm = load(os.path.join(out, "storm.json"), {})
    crashes = load_lines(os.path.join(out, "crashes.jsonl"))
    scale_tls = load(os.path.join(out, "scale-tls.json"), {})
    overload = load_lines(os.path.join(out, "overload.jsonl"))
    overload_store = load(os.path.join(out, "overload-store.json"), {})
    c_rest = load_lines(os.path.join(out, "cluster-rest.jsonl"))
    c_stream = load_lines(os.path.join(out, "cluster-stream.jsonl"))
    c_scale = load_lines(os.path.join(out, "cluster-scale.jsonl"))
    c_counters = load_lines(os.path.join(out, "cluster-counters.jsonl"))
    cluster = load(os.path.join(out, "cluster.json"), {})
    phases = load_lines(os.path.join(out, "phases.jsonl"))

    def rest_median(label, target):
        rows = [rest_rate(d) for d in rest if d["label"] == label and d["target"] == target and d["non2xx"] == 0]
        return median(rows)

    def stream_rows(label, target):
        return [d for d in stream if d["label"] == label and d["target"] == target]

    def stream_median(label, target, key):
        return median([d.get(key) for d in stream_rows(label, target) if not d.get("failed")])

    def capacity(target):
        ok = [d["rate"] for d in stream_rows("ramp", target) if sustained(d)]
        return max(ok) if ok else 0.0

    rows = []
    # REST
    r_relay, r_nginx = rest_median("baseline", "relayd"), rest_median("baseline", "nginx")
    body = rest[0]["body_bytes"] if rest else None
    rows.append(("REST: GET /v1/me vs static file, req/s (wrk -t2 -c64)", fmt(r_relay), "nginx " + fmt(r_nginx),
                 ratio(r_relay, r_nginx), "≥ 0.80× nginx",
                 verdict(r_relay is not None and r_nginx and r_relay >= 0.8 * r_nginx)))
    # streaming at 5 000/s
    low_rate = stream_rows("low", "relayd")[0]["rate"] if stream_rows("low", "relayd") else 5000
    p50_r, p50_n = stream_median("low", "relayd", "e2e_p50_us"), stream_median("low", "nchan", "e2e_p50_us")
    p99_r, p99_n = stream_median("low", "relayd", "e2e_p99_us"), stream_median("low", "nchan", "e2e_p99_us")
    del_r, del_n = stream_median("low", "relayd", "delivered_rate"), stream_median("low", "nchan", "delivered_rate")
    low_ok = del_r is not None and del_r >= SUSTAIN_FRACTION * low_rate
    rows.append((f"Streaming: delivered at {fmt(low_rate)} deltas/s", fmt(del_r, "/s"), "nchan " + fmt(del_n, "/s"),
                 ratio(del_r, del_n), f"{fmt(low_rate)}/s delivered", verdict(low_ok)))
    rows.append((f"Streaming: end-to-end p50 at {fmt(low_rate)}/s", fmt(p50_r, " µs", 1), "nchan " + fmt(p50_n, " µs", 1),
                 ratio(p50_r, p50_n), "< 200 µs", verdict(p50_r is not None and low_ok and p50_r < 200)))
    rows.append((f"Streaming: end-to-end p99 at {fmt(low_rate)}/s", fmt(p99_r, " µs", 1), "nchan " + fmt(p99_n, " µs", 1),
                 ratio(p99_r, p99_n), "< 1 000 µs", verdict(p99_r is not None and low_ok and p99_r < 1000)))
    high = stream_rows("high", "relayd")
    high_rate = high[0]["rate"] if high else 50000
    hd_r, hd_n = stream_median("high", "relayd", "delivered_rate"), stream_median("high", "nchan", "delivered_rate")
    high_ok = bool(high) and sum(sustained(d) for d in high) * 2 > len(high)
    rows.append((f"Streaming: delivered at {fmt(high_rate)} deltas/s offered", fmt(hd_r, "/s"), "nchan " + fmt(hd_n, "/s"),
                 ratio(hd_r, hd_n), f"≥ {fmt(high_rate)}/s sustained", verdict(high_ok)))
    sv_r, sv_n = stream_median("high", "relayd", "served_rate"), stream_median("high", "nchan", "served_rate")
    if sv_r is not None:
        # Behind its schedule a server may work flat out and still deliver none of the deltas scheduled in the
        # window (they wait in the generator): what it did deliver meanwhile is its throughput.
        rows.append((f"Streaming: throughput at {fmt(high_rate)} deltas/s offered (read off the streams during the "
                     "window, whatever their schedule)", fmt(sv_r, "/s"), "nchan " + fmt(sv_n, "/s"),
                     ratio(sv_r, sv_n), "measured (the bar is the row above)", "—"))
    cap_r, cap_n = capacity("relayd"), capacity("nchan")
    rows.append(("Streaming: highest sustained rate in the ramp", fmt(cap_r, "/s"), "nchan " + fmt(cap_n, "/s"),
                 ratio(cap_r, cap_n), "ahead of nchan (≥ 1×)", verdict(cap_r >= cap_n and cap_r > 0)))
    ahead_lat = p50_r is not None and p50_n is not None and p50_r <= p50_n and p99_r <= p99_n and low_ok
    rows.append((f"Streaming: latency at {fmt(low_rate)}/s vs nchan (p50, p99)",
                 f"{fmt(p50_r, '', 1)} / {fmt(p99_r, '', 1)} µs", f"nchan {fmt(p50_n, '', 1)} / {fmt(p99_n, '', 1)} µs",
                 f"{ratio(p50_r, p50_n)} / {ratio(p99_r, p99_n)}", "ahead of nchan (≤ 1×)", verdict(ahead_lat)))
    # scale
    if storm:
        rows.append((f"Robustness: reconnect storm after a restart ({fmt(storm['sse'])} SSE + {fmt(storm['ws'])} "
                     f"WebSocket, 4 processes at once, up to {storm.get('planned', storm['rounds'])} rounds)",
                     f"survived {storm['rounds']}×" if storm["survived"] else f"**crashed** in round {storm['rounds']}",
                     "—", "—", "no crash (not a bar of the brief)", verdict(bool(storm["survived"]))))
    if scale:
        conns = scale["open"]["established"]
        per = (scale["rss_held_kib"] - scale["rss_before_kib"]) / conns if conns and scale["rss_held_kib"] else None
        want = scale["sse"] + scale["ws"]
        held_ok = conns == want and scale["close"].get("closed_by_server", 1) == 0 and scale.get("survived", 0) == 1
        rows.append((f"Scale: connections held ({fmt(scale['sse'])} SSE + {fmt(scale['ws'])} WebSocket)", fmt(conns),
                     "—", "—", fmt(want), verdict(held_ok)))
        rows.append(("Scale: resident memory per held connection",
                     fmt(per, " KiB", 1) if per is not None else "—", "—", "—", "< 25 KiB",
                     verdict(per is not None and per < 25 and conns == want)))
        h_relay, h_nginx = rest_median("held", "relayd"), rest_median("held", "nginx")
        rows.append(("Scale: REST while they are held, req/s", fmt(h_relay), "nginx " + fmt(h_nginx),
                     ratio(h_relay, h_nginx), "≥ 0.80× nginx",
                     verdict(h_relay is not None and h_nginx and h_relay >= 0.8 * h_nginx)))
    if scale_tls:
        conns = scale_tls["open"]["established"]
        want = scale_tls["sse"] + scale_tls["ws"]
        per = (scale_tls["rss_held_kib"] - scale_tls["rss_before_kib"]) / conns if conns and scale_tls["rss_held_kib"] else None
        rows.append((f"Scale over TLS: connections held ({fmt(scale_tls['sse'])} SSE + {fmt(scale_tls['ws'])} WebSocket)",
                     fmt(conns), "—", "—", fmt(want),
                     verdict(conns == want and scale_tls.get("survived") == 1 and scale_tls["close"].get("closed_by_server", 1) == 0)))
        rows.append(("Scale over TLS: resident memory per held connection",
                     fmt(per, " KiB", 1) if per is not None else "—", "—",
                     ratio(per, (scale["rss_held_kib"] - scale["rss_before_kib"]) / scale["open"]["established"])
                     + " of plain" if per is not None and scale and scale["open"]["established"] else "—",
                     "reported (< 25 KiB as for plain)", verdict(per is not None and per < 25 and conns == want)))
    # WAL
    peaks = [d.get("wal_peak_bytes") for d in (store, overload_store) if d and d.get("wal_peak_bytes") is not None]
    if peaks:
        peak = max(peaks)
        rows.append(("Store: WAL peak size during the streaming (and overload) runs, sampled every 100 ms",
                     f"{peak / 1048576:.1f} MiB", "—", "—", f"bounded: ≤ {WAL_BOUND_MIB} MiB (the checkpointer restarts it past 64 MiB)",
                     verdict(peak <= WAL_BOUND_MIB * 1048576)))
    # overload
    if overload:
        at_max = [d for d in overload if d["label"] == "max" and not d.get("failed")]
        twice = [d for d in overload if d["label"] == "twice" and not d.get("failed")]
        cap = at_max[0]["rate"] if at_max else None
        d_max = median([d["delivered_rate"] for d in at_max])
        d_twice = median([d["delivered_rate"] for d in twice])
        ok = d_max is not None and d_twice is not None and cap and d_twice >= OVERLOAD_FRACTION * cap
        rows.append((f"Overload: delivered when offered 2× the sustained maximum ({fmt(cap)}/s → {fmt(2 * cap if cap else None)}/s)",
                     fmt(d_twice, "/s"), f"at {fmt(cap)}/s offered: {fmt(d_max, '/s')}",
                     ratio(d_twice, cap), f"≥ {OVERLOAD_FRACTION:.0%} of the maximum", verdict(bool(ok))))
        refused = sum(d["non2xx"] + d["rate_limited"] for d in twice)
        with_ra = sum(d.get("retry_after", 0) for d in twice)
        shed_p99 = median([d.get("shed_p99_us") for d in twice if d.get("shed_count")])
        unsent = median([d["unsent"] for d in twice])
        e2e = median([d["e2e_p50_us"] for d in twice])
        if refused:
            note = (f"{fmt(refused)} refused ({fmt(sum(d.get('status_503', 0) for d in twice))} × 503, "
                    f"{fmt(sum(d['rate_limited'] for d in twice))} × 429), {with_ra / refused:.0%} with Retry-After, "
                    f"answered in p99 {fmt(shed_p99 / 1000 if shed_p99 is not None else None, ' ms', 1)}")
        else:
            svc = median([d.get("svc_p99_us") for d in twice if d.get("svc_count")])
            note = (f"none refused: relayd answered every delta (p99 {fmt(svc / 1000 if svc else None, ' ms', 1)} "
                    f"from its request) and the excess waited in the clients ({fmt(unsent)} deltas never sent; "
                    f"delivered deltas p50 {fmt(e2e / 1000 if e2e else None, ' ms', 1)} after their schedule)")
        shed_ok = refused > 0 and with_ra == refused and shed_p99 is not None and shed_p99 < SHED_P99_US
        carried = bool(twice) and sum(sustained(d) for d in twice) * 2 > len(twice)
        v = verdict(shed_ok)
        if carried:
            v = "— (2× was carried whole: the ramp's maximum was low in this run)"
        rows.append(("Overload: the rest shed at once with 429/503 and Retry-After", note, "—", "—",
                     f"every refusal with Retry-After, p99 < {SHED_P99_US // 1000} ms", v))
    # cluster (issue 13)
    if c_rest or c_stream or c_scale:
        def c_rest_med(cfg):
            return median([rest_rate(d) for d in c_rest if d["target"] == cfg and d["non2xx"] == 0])

        def c_cap(cfg):
            ok = [d["rate"] for d in c_stream if d["label"] == "ramp" and d["target"] == cfg and sustained(d)]
            return max(ok) if ok else 0.0
        def c_most(cfg):
            got = [d["delivered_rate"] for d in c_stream if d["label"] == "ramp" and d["target"] == cfg
                   and not d.get("failed")]
            return max(got) if got else 0.0
        def c_p99(cfg):
            return median([d["e2e_p99_us"] for d in c_stream if d["label"] == "low" and d["target"] == cfg
                           and not d.get("failed")])

        def at_least(a, b, fraction=1.0):
            return None if a is None or b is None or not b else a >= fraction * b

        rs, r1, r2, rr = c_rest_med("sqlite"), c_rest_med("pg1"), c_rest_med("pg2"), c_rest_med("pgr")
        caps, cap1, cap2, capr = c_cap("sqlite"), c_cap("pg1"), c_cap("pg2"), c_cap("pgr")
        m1, m2, mr = c_most("pg1"), c_most("pg2"), c_most("pgr")
        p99 = c_p99("pg1")
        rows.append(("Issue 25: REST on 1 node, PostgreSQL + Redis, vs the SQLite node", fmt(r1, " req/s"),
                     f"SQLite {fmt(rs, ' req/s')}", ratio(r1, rs), f"≥ {PG_REST_FRACTION:.2f}× SQLite",
                     verdict(at_least(r1, rs, PG_REST_FRACTION))))
        rows.append(("Issue 25: streaming on 1 node, PostgreSQL + Redis, vs the SQLite node: highest sustained in "
                     "the ramp", fmt(cap1, "/s"), f"SQLite {fmt(caps, '/s')}", ratio(cap1, caps),
                     f"≥ {PG_STREAM_FRACTION:.2f}× SQLite", verdict(at_least(cap1, caps, PG_STREAM_FRACTION))))
        rows.append(("Issue 25: p99 at 5 000 deltas/s on 1 node, PostgreSQL + Redis", fmt(p99 / 1000 if p99 else None,
                     " ms", 1), "—", "—", f"< {PG_P99_US // 1000} ms", verdict(None if p99 is None else p99 < PG_P99_US)))
        rows.append(("Issue 25: REST on 2 nodes vs 1 (PostgreSQL + Redis, same 2 cores)", fmt(r2, " req/s"),
                     f"1 node {fmt(r1, ' req/s')}", ratio(r2, r1), "≥ 1 node", verdict(at_least(r2, r1))))
        rows.append(("Issue 25: streaming on 2 nodes vs 1 (every delta crosses the bus): highest sustained",
                     fmt(cap2, "/s"), f"1 node {fmt(cap1, '/s')}", ratio(cap2, cap1), "≥ 1 node",
                     verdict(at_least(cap2, cap1))))
        rows.append(("Issue 25: streaming on 2 nodes vs 1: most delivered in the ramp", fmt(m2, "/s"),
                     f"1 node {fmt(m1, '/s')}", ratio(m2, m1), "≥ 1 node", verdict(at_least(m2, m1))))
        if rr is not None or capr:
            rows.append(("2 processes on one port (--reuse-port) vs 1 node: REST; highest sustained; most delivered",
                         f"{fmt(rr, ' req/s')}; {fmt(capr, '/s')}; {fmt(mr, '/s')}",
                         f"1 node {fmt(r1, ' req/s')}; {fmt(cap1, '/s')}; {fmt(m1, '/s')}",
                         f"{ratio(rr, r1)}; {ratio(capr, cap1)}; {ratio(mr, m1)}",
                         "measured (2 cores: no speed-up expected)", "—"))
        for label, what, key, bar in (
                ("low", "PostgreSQL round trips per delta at 5 000/s", "store_round_trips", ROUND_TRIPS_PER_DELTA),
                ("low", "Redis calls per delta at 5 000/s", "bus_calls", BUS_CALLS_PER_DELTA),
                ("rest", "Redis calls per REST request (GET /v1/me)", "bus_calls", BUS_CALLS_PER_REQUEST)):
            v = counter_median(c_counters, "pg1", label, key)
            rows.append((f"Issue 25: {what}, 1 node (relayd's metrics, fixed workload)", fmt_count(v), "—", "—",
                         f"≤ {bar}", verdict(None if v is None or v == "n/a" else v <= bar)))
    # durability
    if dur:
        last = dur[-1]
        acked = sum(d["acknowledged"] for d in dur_load)
        strict = max(d["missing"] + d["wrong_text"] + d["decisions_lost"] + d["not_idempotent"] + d["retry_failed"]
                     for d in dur)
        dups = max(d["duplicated"] for d in dur)
        rows.append((f"Durability: kill -9 × {len(dur)} under load; acknowledged writes lost (user messages, opened and "
                     "finalised messages with exact text, approvals, decisions, idempotency records)",
                     f"{strict} of {fmt(acked)} writes", "—", "—", "0",
                     verdict(strict == 0 and all(d.get("checked") for d in dur))))
        if "open_deltas_acked" in last:
            # Each round counts the losses of its own crash (in the window) once; a loss outside the
            # window is re-checked by every later round, so it is the largest count that matters.
            acked_open = sum(d.get("open_deltas_acked", 0) for d in dur)
            lost_w = sum(d.get("deltas_lost_in_window", 0) for d in dur)
            lost_o = max(d.get("deltas_lost_outside_window", 0) for d in dur)
            worst = max(d.get("max_lost_ms_before_kill", 0) for d in dur)
            note = (f"{lost_w + lost_o} of {fmt(acked_open)}; acknowledged at most {worst:.1f} ms before the kill"
                    if lost_w + lost_o else f"0 of {fmt(acked_open)}")
            v = verdict(lost_w + lost_o == 0)
            rows.append(("Durability: acknowledged deltas of still-open messages lost", note, "—", "—", "0", v))
        rows.append(("Durability: duplicated on replay or retry", str(dups), "—", "—", "0", verdict(dups == 0)))

    md = []
    md.append("# Benchmark results\n")
    md.append(f"Written by `make bench` (bench/run.sh) on {machine.get('date', '?')}. "
              f"Machine: {machine.get('nproc', '?')} × {machine.get('cpu', '?')}, Linux {machine.get('kernel', '?')}; "
              f"load average {machine.get('loadavg_start', '?')} at the start, {machine.get('loadavg_end', '?')} at the end "
              f"(a shared machine: other work runs beside the benchmark, so every comparison is interleaved "
              f"round by round and given as a ratio). relayd {machine.get('relayd_commit', '?')}, "
              f"nginx {machine.get('nginx', '?')}, nchan {machine.get('nchan', '?')}, wrk {machine.get('wrk', '?')}. "
              f"Whole run: {machine.get('seconds', '?')} s" + (" (BENCH_QUICK=1: reduced sizes)" if machine.get("quick") else "") + ".\n")
    if phases:
        md.append("Each part of the run, when it ran and the machine's load average (1, 5, 15 min) before and after "
                  "it (`bench/run.sh PHASE` reruns one part and rewrites this file):\n")
        md.append("| phase | date | seconds | load before | load after | relayd |")
        md.append("|---|---|---|---|---|---|")
        order = ["rest", "scale", "tls", "storm", "streaming", "overload", "cluster", "durability"]
        for ph in sorted(phases, key=lambda d: order.index(d["phase"]) if d["phase"] in order else 99):
            md.append(f"| {ph['phase']} | {ph['date']} | {ph['seconds']} | {ph['loadavg_start']} | {ph['loadavg_end']} | "
                      f"{ph.get('relayd_commit', '?')} |")
        md.append("")
    md.append("| figure | relayd | peer | ratio | bar | verdict |")
    md.append("|---|---|---|---|---|---|")
    for r in rows:
        md.append("| " + " | ".join(r) + " |")
    md.append("")
    if crashes:
        md.append("**relayd crashed during this run** and was restarted on the same folder:\n")
        for c in crashes:
            md.append(f"- during *{c['phase']}*: `{c['log']}`")
        md.append("")
    md.append("## How each figure is made\n")
    md.append(
        f"- **REST**: `wrk -t2 -c64 -d10s` with `bench/rest.lua`. relayd serves `GET /v1/me` for users that own nothing "
        f"({body} bytes of body; relayd's head is larger: it carries X-RateLimit-*, traceparent and X-Request-ID); "
        f"nginx serves a static file of exactly that size. Each user may make 10 requests/s (burst 30), so the "
        f"requests rotate over a pool of users large enough that none is refused (non-2xx are reported and a run "
        f"with any is discarded). Both servers run one event loop (nginx `worker_processes 1`) and no request log "
        f"(relayd `--log-level warn`, nginx `access_log off`). Median of the interleaved rounds.")
    md.append(
        "- **Streaming**: `relaybench stream` (bench/loadgen) posts `sendMessageDelta` on one keep-alive connection per installation, "
        "open loop at a fixed total rate, each delta carrying its *scheduled* send time (so queueing in front of a slow "
        "server counts), and reads `/v1/me/stream` on raw sockets; latency is scheduled-send → parsed off the stream, "
        "in a log-linear histogram (0.8 % buckets). nchan gets the very same 64-byte delta strings, posted to "
        "`/pub/<i>` and read from `/sub/<i>` (EventSource). The brief's bar is \"one bridge\"; one installation may "
        "post 100 deltas/s (burst 200), so the rate is spread over many installations at 50/s each "
        f"({stream_rows('low', 'relayd')[0]['installations'] if stream_rows('low', 'relayd') else '?'} for "
        f"{fmt(low_rate)}/s, {high[0]['installations'] if high else '?'} for {fmt(high_rate)}/s), each with its own "
        "user and its own subscriber; nchan gets one channel and one subscriber per installation. Each installation "
        f"has at most one delta in flight, as a bridge serialises a message's deltas. A rate is *sustained* when "
        f"≥ {SUSTAIN_FRACTION:.0%} of it is delivered within the window, none is lost or refused and p99 < "
        f"{SUSTAIN_P99_US // 1000} ms.")
    if storm:
        md.append(
            f"- **Reconnect storm**: relayd is stopped (SIGTERM) and started again on its folder, then four "
            f"`relaybench hold` processes open, all at once, {fmt(storm['sse'])} SSE streams (5 per user) and the "
            f"{fmt(storm['ws'])} bridge WebSockets of the same users — what every client does after a deploy. A new "
            "process knows no user yet, so each stream first writes its user (the store's asynchronous path), and "
            "each socket's connect publishes `agent_health_changed` into streams still opening. Up to three rounds; "
            "relayd must survive every one. This is a check of ours, not one of the brief's bars.")
    if scale:
        md.append(
            f"- **Scale**: four `relaybench hold` processes open {fmt(scale['sse'])} SSE streams (5 per user), then four "
            f"more open {fmt(scale['ws'])} bridge WebSockets (one per installation), from 400 loopback source "
            f"addresses; they answer pings and keep everything open; relayd's VmRSS is read before ({fmt(scale['rss_before_kib'])} KiB, after pairing and "
            f"the REST runs) and with all held ({fmt(scale['rss_held_kib'])} KiB). Per connection = difference / "
            f"connections. relayd held {fmt(scale['relayd_fds'])} descriptors (limit {fmt(scale['nofile'])}). "
            f"Opening took {scale['open'].get('seconds', '?')} s; the relay closed "
            f"{scale['close']['closed_by_server']} of them while held.")
    if scale_tls:
        md.append(
            "- **Scale over TLS**: relayd restarts on the same folder with `--tls-cert` (a P-256 certificate), and the "
            f"same {fmt(scale_tls['sse'])} streams and {fmt(scale_tls['ws'])} sockets are opened over TLS 1.3 "
            f"(HTTP/1.1, no ALPN) by the same eight `relaybench hold --tls 1` processes; VmRSS before "
            f"({fmt(scale_tls['rss_before_kib'])} KiB, users known) and with all held ({fmt(scale_tls['rss_held_kib'])} KiB). "
            f"Opening took {scale_tls['open'].get('seconds', '?')} s.")
    if overload:
        md.append(
            "- **Overload**: the highest rate relayd sustained in the ramp (when the machine's load left none under "
            "the 50 ms p99 rule, the most it delivered, rounded down to 500/s), then twice it, the same installations "
            "(at most one delta in flight each, as a bridge, each on its own connection), interleaved; relayd sheds with 429/503 "
            "when its loop lags or its store queue or delta backlog is long (`--store-queue-max`, "
            "`--delta-backlog-max`). A refused delta frees its installation for the next one at once; deltas that could "
            "not leave the generator because their installation waited for an answer are \"unsent\".")
    if dur:
        md.append(
            "- **Durability**: `relaybench durability` runs whole conversations from "
            f"{dur_load[0]['installations'] if dur_load else '?'} installations (user send, sendMessage, 6 deltas 40 ms "
            "apart as a model streams, sendMessageEnd with or without canonical text, requestApproval, the user's "
            "decision) and sends SIGKILL to relayd itself at a random moment with writes in flight; relayd restarts "
            "on the same folder and `relaybench verify` checks every acknowledged write through the API (exact "
            "texts, final states, one agent message per interaction, no repeated user text), replays acknowledged "
            "writes (must answer `idempotent: true` with the same ids; a contrary approval decision must get the "
            "stored one), retries the in-flight ones with their keys and checks they landed once. Each round "
            "re-checks every earlier round's journal. docs/api.md: a delta is answered once its batch (2 ms, or "
            "4 096 deltas) has committed, so every acknowledged delta of a still-open message must be there too; "
            "they are counted apart, with how long before the kill each lost one was acknowledged.")
    md.append("")
    md.append("## Streaming runs\n")
    md.append("| run | target | offered/s | delivered/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | refused | lost | "
              "unsent | generator CPU | server CPU | sustained |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in stream:
        if d.get("failed"):
            md.append(f"| {d['label']} | {d['target']} | {fmt(d['rate'])} | failed to start | | | | | | | | | | | no |")
            continue
        md.append("| " + " | ".join([
            d["label"], d["target"], fmt(d["rate"]), fmt(d["delivered_rate"]), fmt(d["e2e_p50_us"], "", 1),
            fmt(d["e2e_p90_us"], "", 1), fmt(d["e2e_p99_us"], "", 1), fmt(d["e2e_p999_us"], "", 1),
            fmt(d["e2e_max_us"], "", 1), str(d["non2xx"] + d["rate_limited"] + d["errors"]), str(d["lost"]),
            fmt(d["unsent"]), f"{d['gen_cpu'] * 100:.0f} %",
            f"{d['server_cpu'] * 100:.0f} %" if d["server_cpu"] >= 0 else "—",
            "yes" if sustained(d) else "no"]) + " |")
    md.append("")
    md.append("CPU columns are cores used during the window (100 % = one core). \"unsent\" counts deltas the schedule "
              "asked for that never left the generator because their installation's previous delta was still "
              "unanswered (the server fell behind).")
    if store:
        md.append(f"\nAfter the streaming runs relayd's data folder held `relay.db` = {fmt(store['db_bytes'])} bytes and "
                  f"`relay.db-wal` = {fmt(store['wal_bytes'])} bytes (see bench/PROFILE-NOTES.md).")
    if overload:
        md.append("\n## Overload runs\n")
        md.append("Each round runs relayd at the highest rate the ramp sustained (`max`), then at twice it (`twice`), "
                  "same installations and connections. \"refused/s\" counts refusals of deltas scheduled inside the "
                  "window; \"shed p50/p99\" is how long a refusal took to come back, from when its request was written.\n")
        md.append("| run | offered/s | delivered/s | refused/s | 503 | 429 | with Retry-After | shed p50 ms | shed p99 ms | "
                  "answered p50 ms | answered p99 ms | unsent | e2e p50 ms | e2e p99 ms | server CPU |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for d in overload:
            if d.get("failed"):
                md.append(f"| {d['label']} | {fmt(d['rate'])} | failed to start | | | | | | | | | | |")
                continue
            md.append("| " + " | ".join([
                d["label"], fmt(d["rate"]), fmt(d["delivered_rate"]), fmt(d.get("refused_rate")),
                fmt(d.get("status_503")), fmt(d["rate_limited"]), fmt(d.get("retry_after")),
                fmt(d.get("shed_p50_us", 0) / 1000, "", 2) if d.get("shed_count") else "—",
                fmt(d.get("shed_p99_us", 0) / 1000, "", 2) if d.get("shed_count") else "—",
                fmt(d.get("svc_p50_us", 0) / 1000, "", 2) if d.get("svc_count") else "—",
                fmt(d.get("svc_p99_us", 0) / 1000, "", 2) if d.get("svc_count") else "—",
                fmt(d["unsent"]), fmt(d["e2e_p50_us"] / 1000, "", 2), fmt(d["e2e_p99_us"] / 1000, "", 2),
                f"{d['server_cpu'] * 100:.0f} %" if d["server_cpu"] >= 0 else "—"]) + " |")
        md.append("\n\"answered\" is how long relayd took to answer an accepted delta, from when its request was "
                  "written: relayd's own queue. \"e2e\" runs from the delta's scheduled time, so it also counts the "
                  "wait in front of a bridge whose previous delta was not answered yet.")
        if overload_store:
            md.append(f"\nWAL peak during the overload runs: {overload_store['wal_peak_bytes'] / 1048576:.1f} MiB.")
    if c_rest or c_stream or c_scale:
        md.append("\n## Several nodes (issues 13 and 25): SQLite node, one node on PostgreSQL + Redis, two nodes on "
                  "them, two processes on one port\n")
        md.append(
            f"All of them run at once on this machine (PostgreSQL {cluster.get('postgres', '?')} with "
            f"{cluster.get('pg_settings', '?')}, on a Unix socket; Redis {cluster.get('redis', '?')} on a Unix "
            "socket, no persistence), and every measurement is taken round by round across them. REST: two wrk "
            "processes (-t1 -c32 each, half the users each) on every configuration; on two nodes each process talks to "
            "its own node, as a balancer would spread them. Streaming: on two nodes every delta is posted to node A "
            "and read from node B's stream, so each crosses the bus (a bridge on one node and its user on another). "
            "Idle scale: the same 15 000 SSE + 3 000 sockets, on two nodes half on each; memory is both nodes' "
            "resident memory together. Two nodes on 2 cores share the same cores, so they show what the shared path "
            "costs, not a speed-up. \"2 processes on one port\": two relayd processes with `--reuse-port on` on one "
            "port (and a database and Redis db of their own); the kernel spreads every connection, REST, publisher "
            "and stream alike, so about half the deltas cross the bus; no idle-scale run for them.\n")
        md.append("| configuration | REST req/s (median) | × SQLite | p50 µs at 5 000/s | p99 µs at 5 000/s | "
                  "highest sustained deltas/s (most delivered) | idle scale: held | KiB per connection |")
        md.append("|---|---|---|---|---|---|---|---|")
        names = {"sqlite": "1 node, SQLite (the default)", "pg1": "1 node, PostgreSQL + Redis",
                 "pg2": "2 nodes, PostgreSQL + Redis", "pgr": "2 processes on one port (SO_REUSEPORT), PostgreSQL + Redis"}
        sq = median([rest_rate(d) for d in c_rest if d["target"] == "sqlite" and d["non2xx"] == 0])
        configs = [cfg for cfg in ("sqlite", "pg1", "pg2", "pgr")
                   if cfg != "pgr" or any(d["target"] == "pgr" for d in c_rest + c_stream)]
        for cfg in configs:
            rr = median([rest_rate(d) for d in c_rest if d["target"] == cfg and d["non2xx"] == 0])
            low = [d for d in c_stream if d["label"] == "low" and d["target"] == cfg and not d.get("failed")]
            ok = [d["rate"] for d in c_stream if d["label"] == "ramp" and d["target"] == cfg and sustained(d)]
            sc = [d for d in c_scale if d["config"] == cfg]
            if cfg == "sqlite" and scale:
                sc = [{"open": scale["open"], "rss_held_kib": scale["rss_held_kib"], "rss_before_kib": scale["rss_before_kib"]}]
            held = sc[0]["open"]["established"] if sc else None
            per = (sc[0]["rss_held_kib"] - sc[0]["rss_before_kib"]) / held if sc and held else None
            md.append("| " + " | ".join([
                names[cfg], fmt(rr), ratio(rr, sq), fmt(median([d["e2e_p50_us"] for d in low]), "", 1),
                fmt(median([d["e2e_p99_us"] for d in low]), "", 1),
                f"{fmt(max(ok) if ok else 0.0)} ({fmt(max([d['delivered_rate'] for d in c_stream if d['label'] == 'ramp' and d['target'] == cfg and not d.get('failed')] or [0.0]))})",
                fmt(held), fmt(per, "", 1)]) + " |")
        if c_counters:
            md.append("\nCounted by relayd itself (its metrics, summed over the configuration's processes, read "
                      "before and after each run): PostgreSQL round trips (`relay_store_round_trips_total`) and "
                      "Redis calls (`relay_bus_calls_total`) per delta accepted (`relay_deltas_total`) in the "
                      "5 000/s runs, and per request answered (`relay_http_requests_total`) in the REST runs; the "
                      "median over the rounds. Each count includes what the processes did besides in that window "
                      "(timers, lease renewals, the streams' own requests): a few calls against tens of thousands "
                      "of deltas. \"n/a\": this relayd has no such metric. Issue 25's bars (1 node): "
                      f"≤ {ROUND_TRIPS_PER_DELTA} round trips and ≤ {BUS_CALLS_PER_DELTA} Redis calls per delta, "
                      f"≤ {BUS_CALLS_PER_REQUEST} Redis calls per request.\n")
            md.append("| configuration | PostgreSQL round trips per delta (5 000/s) | Redis calls per delta (5 000/s) | "
                      "Redis calls per REST request | deltas counted | requests counted |")
            md.append("|---|---|---|---|---|---|")
            for cfg in ("pg1", "pg2", "pgr"):
                runs = [d for d in c_counters if d["config"] == cfg]
                if not runs:
                    continue
                md.append("| " + " | ".join([
                    names[cfg], fmt_count(counter_median(c_counters, cfg, "low", "store_round_trips")),
                    fmt_count(counter_median(c_counters, cfg, "low", "bus_calls")),
                    fmt_count(counter_median(c_counters, cfg, "rest", "bus_calls")),
                    fmt(sum(d["deltas"] or 0 for d in runs if d["label"] == "low")),
                    fmt(sum(d["requests"] or 0 for d in runs if d["label"] == "rest"))]) + " |")
        md.append("\n| run | configuration | offered/s | delivered/s | p50 µs | p99 µs | max µs | refused | lost | unsent | "
                  "server CPU (all nodes) | sustained |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for d in c_stream:
            if d.get("failed"):
                md.append(f"| {d['label']} | {d['target']} | {fmt(d['rate'])} | failed to start | | | | | | | | no |")
                continue
            md.append("| " + " | ".join([
                d["label"], d["target"], fmt(d["rate"]), fmt(d["delivered_rate"]), fmt(d["e2e_p50_us"], "", 1),
                fmt(d["e2e_p99_us"], "", 1), fmt(d["e2e_max_us"], "", 1),
                str(d["non2xx"] + d["rate_limited"] + d["errors"]), str(d["lost"]), fmt(d["unsent"]),
                f"{d['server_cpu'] * 100:.0f} %" if d["server_cpu"] >= 0 else "—",
                "yes" if sustained(d) else "no"]) + " |")
        if c_rest:
            md.append("\n| REST round | configuration | req/s | non-2xx | p50 ms | p99 ms |")
            md.append("|---|---|---|---|---|---|")
            for i, d in enumerate(c_rest):
                md.append(f"| {i // len(configs) + 1} | {d['target']} | {fmt(rest_rate(d))} | {d['non2xx']} | "
                          f"{d['lat_p50_us'] / 1000:.2f} | {d['lat_p99_us'] / 1000:.2f} |")
    md.append("\n## REST runs\n")
    md.append("| phase | target | req/s | non-2xx | bytes/response | p50 ms | p99 ms |")
    md.append("|---|---|---|---|---|---|---|")
    for d in rest:
        md.append(f"| {d['label']} | {d['target']} | {fmt(rest_rate(d))} | {d['non2xx']} | "
                  f"{d['bytes'] / max(d['requests'], 1):.0f} | {d['lat_p50_us'] / 1000:.2f} | {d['lat_p99_us'] / 1000:.2f} |")
    if dur:
        md.append("\n## Durability rounds\n")
        md.append("| round | writes attempted | acknowledged | refused (of which 429) | in flight at the kill | checks | "
                  "missing | wrong text | duplicated | not idempotent | decisions lost | open-stream deltas lost in "
                  "this crash (≤ 100 ms / older) | replays | restart s |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for lo, d in zip(dur_load, dur):
            md.append(f"| {d['round']} | {fmt(lo['attempted'])} | {fmt(lo['acknowledged'])} | "
                      f"{lo['refused']} ({lo.get('refused_429', '?')}) | {lo['inflight_at_kill']} | "
                      f"{fmt(d['checked'])} | {d['missing']} | {d['wrong_text']} | {d['duplicated']} | "
                      f"{d['not_idempotent']} | {d['decisions_lost']} | "
                      f"{d.get('deltas_lost_in_window', '?')} / {d.get('deltas_lost_outside_window', '?')} | "
                      f"{fmt(d['retried'])} | {d['restart_seconds']} |")
    md.append("\nRaw results: bench/out/ (JSON lines, one per run). Profile: bench/PROFILE-NOTES.md.\n")
    # bench/syscalls.sh's section, from its last run: kept when run.sh writes the file again.
    section = os.path.join(args.out, "syscalls-section.md")
    if os.path.exists(section):
        with open(section) as f:
            md.append(f.read())
    with open(args.results, "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()

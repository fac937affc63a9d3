#!/usr/bin/env python3
"""Where relayd's event loop spends the time it is not running: an off-CPU profile from scheduler events.

    bench/offcpu.py SCRIPT THREADS LOOP_TID RUN_JSON CPU_BEFORE CPU_AFTER  > one JSON line

SCRIPT is `perf script -F comm,tid,cpu,time,event,trace,ip,sym` of a system-wide
`perf record -e sched:sched_switch/call-graph=.../ -e sched:sched_wakeup` (bench/syscalls.sh, the
tail stage); THREADS the TSV of relayd's threads (tid, role); RUN_JSON relaybench's line for the run;
CPU_BEFORE and CPU_AFTER each thread's CPU time in ns (tid, ns: /proc/PID/task/TID/schedstat) around it.

For the loop thread, every interval of the window is one of:
  on CPU        from a switch to it until the switch away from it (a "run");
  blocked       switched away asleep (S or D) until a wake-up names it; charged to what it slept in
                (the first kernel frame of its stack that says so: epoll_wait, a futex, a write, ...);
  runnable      woken but not yet running, or preempted (switched away in state R) until it runs
                again: the scheduling delay, charged to whoever held the CPU it waited for.
A delta that arrives while the loop is runnable, or on CPU with other work, waits for it: the runs and
the delays are what the loop adds to the tail. Prints the totals, the distributions and the top charges.
"""
import collections
import json
import re
import sys

EVENT = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<tid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<time>\d+\.\d+):\s+"
                   r"(?P<event>sched:sched_\w+):\s+(?P<trace>.*)$")
SWITCH = re.compile(r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>\d+) prev_prio=\d+ prev_state=(?P<ps>\S+) ==> "
                    r"next_comm=(?P<nc>.*?) next_pid=(?P<np>\d+)")
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(\S+)")
WAKE = re.compile(r"comm=(?P<c>.*?) pid=(?P<p>\d+) ")

# Kernel frames that name what a sleeping thread waits for, most specific first.
WAITS = [("do_epoll_wait", "epoll_wait (idle: nothing to do)"),
         ("futex_wait", "futex (a mutex or condition variable)"),
         ("balance_dirty_pages", "write throttled (dirty pages)"),
         ("folio_wait", "page cache (waiting on a page)"),
         ("wait_on_page", "page cache (waiting on a page)"),
         ("jbd2", "file system journal"),
         ("ext4_", "file system (ext4)"),
         ("btrfs_", "file system (btrfs)"),
         ("xfs_", "file system (xfs)"),
         ("__lock_sock", "socket lock"),
         ("sk_wait", "socket wait"),
         ("mutex_lock", "kernel mutex"),
         ("rwsem", "kernel rw-semaphore"),
         ("do_nanosleep", "sleep"),
         ("exit_to_user_mode", "preempted on return to user space"),
         ("irqentry_exit", "preempted in an interrupt")]


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def summary(values):
    us = [v * 1e6 for v in values]
    return {"count": len(us), "total_ms": round(sum(us) / 1000, 2), "p50_us": round(pct(us, 50) or 0, 1),
            "p99_us": round(pct(us, 99) or 0, 1), "max_us": round(max(us) if us else 0, 1)}


def classify(stack):
    for frame in stack:
        for needle, what in WAITS:
            if needle in frame:
                return what
    return "other: " + (stack[2] if len(stack) > 2 else stack[-1] if stack else "?")


def thread_cpu(before_tsv, after_tsv, roles, deltas):
    """µs of CPU per delta of each of relayd's threads over the run, by role."""
    def read(path):
        return {tid: int(ns) for tid, ns in (line.split() for line in open(path) if line.strip())}
    before, after = read(before_tsv), read(after_tsv)
    used = collections.Counter()
    for tid, ns in after.items():
        used[roles.get(tid, "thread " + tid)] += ns - before.get(tid, 0)
    if not deltas:
        return {}
    return {who: round(ns / 1000.0 / deltas, 2) for who, ns in used.most_common() if ns > 0}


def main():
    script, threads_tsv, loop, run_json, cpu_before, cpu_after = sys.argv[1:7]
    roles = dict(line.rstrip("\n").split("\t", 1) for line in open(threads_tsv) if "\t" in line)
    run = json.loads(open(run_json).read().splitlines()[-1])

    def who(comm, tid):
        return roles.get(tid) or ("relaybench" if comm.startswith("relaybench") else comm.split("/")[0])

    events = []  # (time, kind, fields, stack)
    cur = None
    lost = 0
    with open(script, errors="replace") as f:
        for line in f:
            if "PERF_RECORD_LOST" in line:
                lost += int(line.rsplit(None, 1)[-1]) if line.rsplit(None, 1)[-1].isdigit() else 1
                continue
            m = EVENT.match(line)
            if not m:
                frame = FRAME.match(line)
                if frame and cur is not None:
                    cur[3].append(frame[1])
                continue
            cur = (float(m["time"]), m["event"], m["trace"], [], m["cpu"])
            events.append(cur)

    state = None      # "on", "blocked", "runnable"
    since = None
    why = None
    runs, blocked, runnable = [], collections.defaultdict(list), []
    holders = collections.Counter()   # who took the loop's CPU when it was preempted
    busy = collections.Counter()      # who held the CPUs when the loop was woken and found none free
    on_cpu = {}                       # cpu -> who runs there now
    first = last = None
    for t, event, trace, stack, cpu in events:
        if event == "sched:sched_switch":
            m = SWITCH.search(trace)
            if not m:
                continue
            on_cpu[cpu] = None if m["np"] == "0" else who(m["nc"], m["np"])
            if m["pp"] == loop:
                first = first if first is not None else t
                if state == "on":
                    runs.append(t - since)
                if m["ps"].startswith("R"):
                    state, why = "runnable", "preempted by " + who(m["nc"], m["np"])
                    holders[who(m["nc"], m["np"])] += 1
                else:
                    state, why = "blocked", classify(stack)
                since = t
            elif m["np"] == loop:
                first = first if first is not None else t
                if state == "runnable":
                    runnable.append((t - since, why))
                elif state == "blocked":  # its wake-up fell outside what was recorded
                    blocked[why].append(t - since)
                state, since = "on", t
            last = t
        elif event == "sched:sched_wakeup":
            m = WAKE.search(trace)
            if m and m["p"] == loop and state == "blocked":
                blocked[why].append(t - since)
                for holder in {h for h in on_cpu.values() if h is not None}:
                    busy[holder] += 1
                state, since, why = "runnable", t, "woken, waiting for a CPU"

    window = (last - first) if first is not None and last is not None else 0
    served = round(run.get("served_rate", 0) * run.get("window_s", 0))
    delays = [d for d, _ in runnable]
    by_cause = collections.defaultdict(list)
    for d, w in runnable:
        by_cause["preempted" if w.startswith("preempted") else "woken, waiting for a CPU"].append(d)
    out = {
        "rate": run.get("rate"), "served": served, "window_s": round(window, 3),
        "e2e_p50_us": run.get("e2e_p50_us"), "e2e_p99_us": run.get("e2e_p99_us"),
        "ack_p50_us": run.get("ack_p50_us"), "ack_p99_us": run.get("ack_p99_us"),
        "on_cpu": summary(runs),
        "runnable": summary(delays),
        "runnable_by_cause": {k: summary(v) for k, v in by_cause.items()},
        "blocked": {k: summary(v) for k, v in sorted(blocked.items(), key=lambda kv: -sum(kv[1]))},
        "preempted_by": dict(holders.most_common(8)),
        "cpus_held_at_wakeup_by": dict(busy.most_common(8)),
        "cpu_us_per_delta": thread_cpu(cpu_before, cpu_after, roles, run.get("run_deltas")),
        "lost_events": lost,
        "long_runs_over_1ms": sum(1 for r in runs if r > 0.001),
        "long_delays_over_1ms": sum(1 for d in delays if d > 0.001),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Splits a relayd perf profile into components (reads `perf script` output on stdin).

Each sample goes to the innermost frame that belongs to a component: libc and
kernel frames are transparent (a write(2) is charged to whoever called it),
so a pwrite under SQLite counts as SQLite, a writev under h2o as h2o, a
malloc under jansson as JSON. SQLite is split further by what is on the
stack (commit / WAL append, file locks, statements).
"""
import collections
import re
import sys

TRANSPARENT_DSO = ("libc.so", "[kernel", "ld-linux", "[unknown]", "libm.so", "[vdso]", "inlined")

RELAYD_GROUPS = [
    ("relayd: event fan-out (publish, SSE queue)", ("rl_relay_publish", "rl_bus_", "rl_sse_", "flush", "on_proceed",
                                                   "rl_blob")),
    ("relayd: logging", ("rl_log", "rl__call_log")),
    ("relayd: rate limiting", ("rl_ratelimit",)),
    ("relayd: auth (token parse, hash compare)", ("rl_relay_authenticate", "rl_bridge_token", "rl_token_", "bearer",
                                                 "verify_user", "rl_jwt")),
    ("relayd: request validation", ("rl_validate", "validate_")),
    ("relayd: ids, trace headers", ("rl_rand", "rl_trace", "traceparent", "request_id")),
]


def relayd_group(sym):
    for name, prefixes in RELAYD_GROUPS:
        if any(sym.startswith(p) or p in sym for p in prefixes):
            return name
    return "relayd: other"


def categorize(frames):
    """frames: list of (sym, dso), leaf first."""
    syms = " ".join(s for s, _ in frames)
    for i, (sym, dso) in enumerate(frames):
        if any(t in dso for t in TRANSPARENT_DSO):
            continue
        if "libsqlite3" in dso:
            if "fcntl" in syms:
                return "SQLite: file locks (fcntl on the db and -shm: every transaction, reads included)"
            if "sqlite3WalFrames" in syms or "CommitPhase" in syms:
                if "[kernel" in frames[0][1]:
                    return "SQLite: commit, in the kernel (pwrite of WAL frames: page cache, ext4)"
                return "SQLite: commit, in user space (WAL frame checksums, page encoding)"
            if "sqlite3_exec" in syms:
                return "SQLite: exec_sql (BEGIN/SAVEPOINT/RELEASE/COMMIT parsing)"
            return "SQLite: statements (prepare, step, b-tree)"
        if "libcrypto" in dso:
            if "signature_verify" in syms or "rl_jwt_verify" in syms:
                return "OpenSSL: JWT signature verify"
            if "rl_token_hash" in syms or "EVP_Digest" in syms:
                return "OpenSSL: SHA-256 (token cache keys, bridge tokens, idempotency body hashes)"
            return "OpenSSL: other"
        if "libjansson" in dso:
            return "JSON (jansson)"
        if "libwslay" in dso:
            return "WebSocket (wslay)"
        if "libh2o" in dso:
            if "tcp_sendmsg" in syms or "writev" in syms:
                return "h2o: socket writes (kernel TCP send)"
            if "epoll_wait" in syms:
                return "h2o: epoll_wait"
            if re.search(r"\b(read|__libc_read|ksys_read|tcp_recvmsg)\b", syms):
                return "h2o: socket reads"
            return "h2o: HTTP parsing, buffers, timers"
        if "relayd" in dso:
            if "sqlite_" in sym or sym.startswith("row_object") or sym in ("prepare", "bind_text", "step_done",
                                                                           "write_begin", "write_end", "exec_sql",
                                                                           "complete", "idem_check", "idem_record"):
                return "relayd: store glue (rows to JSON, binds)"
            return relayd_group(sym)
        return "other: " + dso
    # only libc / kernel frames
    if "epoll_wait" in syms:
        return "kernel: epoll_wait"
    if "malloc" in syms or "free" in syms:
        return "libc: malloc/free"
    return "kernel/libc: other"


def main():
    counts = collections.Counter()
    frames = []
    total = 0
    header = re.compile(r"^\S.*\s\d+\.\d+:\s")
    frame = re.compile(r"^\s+[0-9a-f]+\s+(.+?)\s+\((.+)\)\s*$")
    for line in sys.stdin:
        if header.match(line):
            if frames:
                counts[categorize(frames)] += 1
                total += 1
            frames = []
            continue
        m = frame.match(line)
        if m:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            frames.append((sym, m.group(2)))
    if frames:
        counts[categorize(frames)] += 1
        total += 1
    print(f"{total} samples")
    for name, n in counts.most_common():
        print(f"{100.0 * n / total:6.1f} %  {name}")


if __name__ == "__main__":
    main()

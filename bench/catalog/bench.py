#!/usr/bin/env python3
"""Drives the catalog benchmark (see run.sh): starts catalogd and nginx on
loopback, loads them with wrk, and writes a Markdown report.

Both servers get one core's worth of work: catalogd is single-threaded and
nginx runs one worker; wrk runs one thread. Logs are off on both sides."""
import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TYPES = ["evals", "models", "tools", "leaderboards", "organizations", "people", "capabilities", "papers"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_ready(url, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited with %d" % proc.returncode)
        try:
            fetch(url, timeout=2)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("server not ready: " + url)


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_wrk(text):
    def latency(pct):
        m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % pct, text, re.M)
        return float(m.group(1)) * UNITS[m.group(2)]
    result = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
              "p50": latency(50), "p99": latency(99)}
    m = re.search(r"bench: requests=(\d+) non2xx=(\d+) socket_errors=(\d+)", text)
    if m:
        result["requests"], result["non2xx"], result["errors"] = map(int, m.groups())
    else:
        result["requests"] = int(re.search(r"(\d+) requests in", text).group(1))
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        result["non2xx"] = int(non2xx.group(1)) if non2xx else 0
        errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
        result["errors"] = sum(map(int, errors.groups())) if errors else 0
    if result["non2xx"] or result["errors"]:
        raise SystemExit("wrk saw failures:\n" + text)
    return result


def wrk(base, paths, connections, duration, tmp):
    paths_file = os.path.join(tmp, "paths-%d.txt" % random.randrange(1 << 30))
    with open(paths_file, "w") as f:
        f.write("\n".join(paths) + "\n")
    cmd = ["wrk", "-t1", "-c%d" % connections, "-d%ds" % duration, "--latency", "--timeout", "10s",
           "-s", os.path.join(HERE, "rotate.lua"), base]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60,
                         env=dict(os.environ, PATHS_FILE=paths_file))
    if out.returncode != 0:
        raise SystemExit("wrk failed: %s\n%s" % (out.stdout, out.stderr))
    return parse_wrk(out.stdout)


class Nginx:
    def __init__(self, root, tmp):
        self.port = free_port()
        self.prefix = os.path.join(tmp, "nginx")
        os.makedirs(os.path.join(self.prefix, "logs"), exist_ok=True)
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""%s
worker_processes 1;
pid %s/nginx.pid;
error_log %s/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path %s/body;
    proxy_temp_path %s/proxy;
    fastcgi_temp_path %s/fastcgi;
    uwsgi_temp_path %s/uwsgi;
    scgi_temp_path %s/scgi;
    default_type application/json;
    server {
        listen 127.0.0.1:%d;
        root %s;
        location / { add_header Cache-Control "public, max-age=3600"; }
    }
}
""" % ("user root;" if os.geteuid() == 0 else "", self.prefix, self.prefix, self.prefix, self.prefix,
                self.prefix, self.prefix, self.prefix, self.port, root))
        self.proc = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", conf, "-p", self.prefix,
                                      "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.base = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def queries_for(titles, rng, count):
    """Queries as people type them: a name, a name with its last word cut short, or a single word of it."""
    queries = []
    for title in rng.sample(titles, min(count, len(titles))):
        words = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9.\-']*", title)][:3]
        if not words:
            continue
        kind = rng.randrange(3)
        if kind == 0 or len(words) == 1:
            q = " ".join(words)
        elif kind == 1:
            q = " ".join(words[:-1] + [words[-1][: max(2, len(words[-1]) // 2)]])
        else:
            q = rng.choice(words)
        queries.append("/api/v1/search?q=" + urllib.parse.quote_plus(q))
    return queries


def measure(name, source, args, tmp, rng):
    data = os.path.join(tmp, "data-" + re.sub(r"\W+", "-", name))
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    started = time.monotonic()
    proc = subprocess.Popen([os.path.join(args.build, "catalogd"), "--listen", "127.0.0.1:%d" % port,
                             "--data", data, "--source", source, "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(base + "/api/v1", proc, 300)
        ready_s = time.monotonic() - started
        rss = rss_mib(proc.pid)
        index = json.loads(fetch(base + "/api/v1"))
        entities = [item["url"] for t in TYPES for item in json.loads(fetch(base + "/api/v1/" + t))["items"]]
        titles = [item["title"] for t in TYPES for item in json.loads(fetch(base + "/api/v1/" + t))["items"]]
        rng.shuffle(entities)
        entity_paths = entities[:5000]
        search_paths = queries_for(titles, rng, 300)
        entity_size = int(statistics.median(len(fetch(base + p)) for p in entity_paths[:300]))
        search_size = int(statistics.median(len(fetch(base + p)) for p in search_paths[:100]))
        print("%s: %d entities, ready in %.1f s, %.0f MiB; median entity %d B, search %d B"
              % (name, index["dataset"]["entities"], ready_s, rss, entity_size, search_size), file=sys.stderr)
        result = {"name": name, "entities": index["dataset"]["entities"], "ready_s": ready_s, "rss_mib": rss,
                  "entity_size": entity_size, "search_size": search_size}
        result["entity"] = wrk(base, entity_paths, args.connections, args.duration, tmp)
        result["search_c1"] = wrk(base, search_paths, 1, args.duration, tmp)
        result["search"] = wrk(base, search_paths, args.connections, args.duration, tmp)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    # nginx, in the same run, serving static files of the same sizes.
    root = os.path.join(tmp, "static-" + re.sub(r"\W+", "-", name))
    os.makedirs(root, exist_ok=True)
    for label, size in (("entity", entity_size), ("search", search_size)):
        body = ('{"padding":"' + "x" * max(0, size - 14) + '"}')[:size]
        with open(os.path.join(root, label + ".json"), "w") as f:
            f.write(body)
    nginx = Nginx(root, tmp)
    try:
        wait_ready(nginx.base + "/entity.json", nginx.proc, 30)
        result["nginx_entity"] = wrk(nginx.base, ["/entity.json"], args.connections, args.duration, tmp)
        result["nginx_search_c1"] = wrk(nginx.base, ["/search.json"], 1, args.duration, tmp)
        result["nginx_search"] = wrk(nginx.base, ["/search.json"], args.connections, args.duration, tmp)
    finally:
        nginx.stop()
    return result


def version_of(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(results, args):
    def row(label, r, size, peer=None):
        ratio = "%.2f" % (r["rps"] / peer["rps"]) if peer else ""
        return "| %s | %d | %.0f | %.3f | %.3f | %s |" % (label, size, r["rps"], r["p50"], r["p99"], ratio)

    lines = ["# Catalog benchmark", "",
             "Produced by `bench/catalog/run.sh` (`make bench-catalog`) on %s." % datetime.date.today().isoformat(),
             "", "- Machine: %s, %d cores; %s" % (cpu_model(), os.cpu_count() or 0, platform.platform()),
             "- Load: %s, one thread, %d connections (and 1 for single-client latency), %d s per run, "
             "keep-alive, no compression" % (version_of(["wrk", "--version"]), args.connections, args.duration),
             "- Reference: %s, one worker, access log off, serving a static file of the same size as the "
             "catalogd answer it stands next to" % version_of(["nginx", "-v"]),
             "- catalogd: single-threaded, log level warn, the catalog held in memory (build `%s`)" % os.path.relpath(args.build, REPO),
             "- Entity reads rotate over up to 5 000 entity URLs; searches over 300 queries made from entity names "
             "(a name, a name with its last word cut short, or one word of it), so that every request differs.",
             "", "Latencies in milliseconds. Ratio: catalogd requests per second over nginx's for the same size.", ""]
    for r in results:
        lines += ["## %s: %d entities" % (r["name"], r["entities"]), "",
                  "Loaded (import included) and ready in %.1f s; resident memory %.0f MiB after loading."
                  % (r["ready_s"], r["rss_mib"]), "",
                  "| workload | bytes | req/s | p50 | p99 | ratio |", "|---|---:|---:|---:|---:|---:|",
                  row("catalogd entity read, %d conns" % args.connections, r["entity"], r["entity_size"], r["nginx_entity"]),
                  row("nginx static file, %d conns" % args.connections, r["nginx_entity"], r["entity_size"]),
                  row("catalogd search, 1 conn", r["search_c1"], r["search_size"], r["nginx_search_c1"]),
                  row("nginx static file, 1 conn", r["nginx_search_c1"], r["search_size"]),
                  row("catalogd search, %d conns" % args.connections, r["search"], r["search_size"], r["nginx_search"]),
                  row("nginx static file, %d conns" % args.connections, r["nginx_search"], r["search_size"]), ""]
    lines += ["Raw figures: `bench/catalog/results.json`.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--entities", type=int, default=20000)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    rng = random.Random(42)
    tmp = tempfile.mkdtemp(prefix="catalog-bench-")
    try:
        generated = os.path.join(tmp, "generated")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_dataset.py"), generated, "--entities",
                        str(args.entities)], check=True, timeout=600)
        results = [measure("Bundled dataset", os.path.join(REPO, "catalog"), args, tmp, rng),
                   measure("Generated dataset", generated, args, tmp, rng)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(args.out, "w") as f:
        f.write(report(results, args))
    with open(os.path.join(os.path.dirname(args.out), "results.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print(open(args.out).read())


if __name__ == "__main__":
    main()

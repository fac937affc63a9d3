"""Several relayd nodes behind a real load balancer (Debian's nginx, round
robin, WebSocket and SSE proxied, nothing buffered), for the tests of a relay
that runs as several nodes.

A `Front` looks like a relaylib.Relay to the helpers of bridgelib (url, post,
request, pair, token), but its address is the balancer's, so every call and
every stream may land on any node. Nodes keep their port across restarts, so
the balancer's upstream list stays true.
"""
import os
import shutil
import signal
import subprocess
import time

import requests

from relaylib import Relay, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

NGINX_CONF = """
worker_processes 1;
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
user root root;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fastcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}
  upstream relay {{
{servers}
    keepalive 16;
  }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 26m;
    location / {{
      proxy_pass http://relay;
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
      proxy_next_upstream error timeout http_502;
      proxy_connect_timeout 2s;
    }}
  }}
}}
"""


class Balancer:
    """nginx on a loopback port, round robin over the given ports."""

    def __init__(self, workdir, ports):
        self.dir = os.path.join(str(workdir), "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.port = free_port()
        servers = "\n".join("    server 127.0.0.1:%d max_fails=0;" % p for p in ports)
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, servers=servers, port=self.port))
        self.proc = subprocess.Popen([NGINX, "-c", os.path.join(self.dir, "nginx.conf"), "-p", self.dir + "/"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "stderr"), "ab"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                requests.get("http://127.0.0.1:%d/healthz" % self.port, timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.05)
        raise AssertionError("nginx did not start: %s" % self.error_log())

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None


class Front:
    """The relay as clients and bridges see it: the balancer's address."""

    def __init__(self, cluster, balancer):
        self.cluster = cluster
        self.balancer = balancer
        self.scheme = "http"
        self.ca = None
        self.port = balancer.port
        self.data = cluster.nodes[0].data

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    # The request helpers of relaylib.Relay, on the balancer's address.
    request = Relay.request
    get = Relay.get
    post = Relay.post
    pairing_start = Relay.pairing_start
    poll = Relay.poll
    claim = Relay.claim
    pair = Relay.pair
    set_manifest = Relay.set_manifest

    def token(self, user, ttl=None):
        return self.cluster.nodes[0].token(user, ttl)

    def query(self, sql, params=()):
        return self.cluster.nodes[0].query(sql, params)


# The rows of src/relay/sweeps.c's table: one round of the sweeps finishes this many operations.
SWEEPS_PER_ROUND = 4


class Cluster:
    """n relayd nodes sharing a store, a bus and an attachments folder, behind a balancer."""

    def __init__(self, relayd, tmp_path, n, store, bus, extra=()):
        os.makedirs(str(tmp_path), exist_ok=True)
        self.files = os.path.join(str(tmp_path), "shared-files")
        self.nodes = []
        self.ports = []
        for _ in range(n):
            port, metrics_port = free_port(), free_port()
            # The store by `store=`: the node's query() and token() then use it too.
            node = relayd("--bus", bus, "--attachments", self.files,
                          "--metrics-listen", "127.0.0.1:%d" % metrics_port, *extra, start=False, store=store)
            node.fixed_port = port
            node.metrics_port = metrics_port
            node.start()
            self.nodes.append(node)
            self.ports.append(port)
        self.balancer = Balancer(tmp_path, self.ports)
        self.front = Front(self, self.balancer)

    def metric_of(self, node, name):
        """A counter of node's /metrics (0 when it is not there)."""
        text = requests.get("http://127.0.0.1:%d/metrics" % node.metrics_port, timeout=10).text
        return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))

    def wait_claim_rounds(self, rounds, timeout=30):
        """Waits until every node that is up has claimed lapsed presences `rounds` more times (instead of
        sleeping through a few renewal periods): what a test checks then was claimed over by rounds that found
        nothing more."""
        up = [n for n in self.nodes if n.proc is not None]
        start = {id(n): self.metric_of(n, "relay_presence_claims_total") for n in up}
        deadline = time.monotonic() + timeout
        for n in up:
            while self.metric_of(n, "relay_presence_claims_total") < start[id(n)] + rounds:
                assert time.monotonic() < deadline, "the nodes did not claim %d times in %d s" % (rounds, timeout)
                time.sleep(0.1)

    def sweeps_done(self):
        """The store sweeps finished so far by the nodes that are up (relay_sweeps_total)."""
        return sum(self.metric_of(node, "relay_sweeps_total") for node in self.nodes if node.proc is not None)

    def wait_sweep_rounds(self, rounds, timeout=30):
        """Waits until the sweeping node has run every sweep `rounds` more times (instead of sleeping through
        a few periods): what a test checks then was swept over by rounds that found nothing more."""
        start = self.sweeps_done()
        deadline = time.monotonic() + timeout
        while self.sweeps_done() < start + rounds * SWEEPS_PER_ROUND:
            assert time.monotonic() < deadline, "the sweeps did not run %d rounds in %d s" % (rounds, timeout)
            time.sleep(0.1)

    def node_of(self, port):
        return self.nodes[self.ports.index(port)]

    def stop(self):
        self.balancer.stop()

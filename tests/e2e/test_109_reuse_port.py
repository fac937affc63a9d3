"""Several relayd processes on one port (issue 25, "One machine, many cores"):
with --reuse-port on, each process's listener takes SO_REUSEPORT and the
kernel spreads new connections among them; they are nodes of one relay on one
PostgreSQL database and one Redis database, each with a data folder of its
own (docs/operations.md, "One process per core").

Which process a connection reaches is the kernel's choice, so the test finds
out from each process's own metrics (a --metrics-listen of its own) instead of
assuming it.
"""
import os

import pytest
import requests

from bridgelib import WAIT, Installation, Stream, key
from relaylib import HTTP_TIMEOUT, assert_ok, bearer, free_port, run_relayd, wait_until
from test_73_metrics import scrape, value

CONNECTIONS = 40  # each a new TCP connection: all on one process by chance is 2^-39


def total(samples, name):
    return sum(v for (n, _), v in samples.items() if n == name)


@pytest.fixture
def one_port(relayd, tmp_path, postgres, redis_bus):
    """Two relayd processes listening on one port, on a fresh database and Redis database."""
    store, bus = postgres.database(), redis_bus.url()
    files = os.path.join(str(tmp_path), "shared-files")
    port = free_port()
    procs = []
    for _ in range(2):
        metrics = free_port()
        node = relayd("--bus", bus, "--attachments", files, "--reuse-port", "on",
                      "--metrics-listen", "127.0.0.1:%d" % metrics, start=False, store=store)
        node.fixed_port = port
        node.metrics_port = metrics
        node.start()
        # Its /healthz may have been the other process's answer: ready is when its own metrics listener is.
        wait_until(lambda: metrics_up(metrics), WAIT, interval=0.05, what="the metrics of a process")
        procs.append(node)
    return procs


def metrics_up(port):
    try:
        return requests.get("http://127.0.0.1:%d/metrics" % port, timeout=HTTP_TIMEOUT).status_code == 200
    except requests.ConnectionError:
        return False


def test_two_processes_share_a_port_and_serve_as_one_relay(one_port):
    first, second = one_port
    assert first.port == second.port
    user = first.token("alice")

    # Both accept: new connections land on each process, by their own count of requests.
    before = [total(scrape(p.metrics_port), "relay_http_requests_total") for p in one_port]
    for _ in range(CONNECTIONS):
        with requests.Session() as s:
            assert s.get(first.url("/healthz"), timeout=HTTP_TIMEOUT).status_code == 200
    after = [total(scrape(p.metrics_port), "relay_http_requests_total") for p in one_port]
    served = [a - b for a, b in zip(after, before)]
    assert sum(served) == CONNECTIONS and min(served) > 0, served

    # A bridge paired and connected through the port; find which process holds its socket.
    inst = Installation(first, user)
    sock = inst.connect()

    def holders():
        return [value(scrape(p.metrics_port), "relay_bridge_sockets", health="healthy") for p in one_port]

    wait_until(lambda: sum(holders()) == 1, WAIT, interval=0.05, what="one process holding the bridge")
    holder = holders().index(1)

    # Event streams, until one is open on the process that does not hold the bridge.
    streams = []

    def open_elsewhere():
        streams.append(Stream(first, user))
        counts = [value(scrape(p.metrics_port), "relay_event_streams") for p in one_port]
        return counts[1 - holder] > 0

    wait_until(open_elsewhere, WAIT, interval=0, what="a stream on the other process")
    assert len(streams) < 30, len(streams)

    # A delta streamed by the bridge (its calls land on either process) reaches every stream.
    session = inst.create_session()
    interaction, _ = inst.send(session, "hello over one port")
    assert sock.next_update(WAIT)["type"] in ("session.started", "session.message")
    message_id = inst.open_message(session, interaction)
    assert_ok(inst.delta(message_id, "across processes", key()))
    for stream in streams:
        event = stream.wait_for("message_delta", lambda d: d["message_id"] == message_id, timeout=WAIT)
        assert event.data["delta"] == "across processes", event

    # One process killed: the port goes on serving new connections from the other.
    victim, survivor = one_port[holder], one_port[1 - holder]
    served_before = total(scrape(survivor.metrics_port), "relay_http_requests_total")
    victim.kill9()
    for _ in range(CONNECTIONS // 2):
        with requests.Session() as s:
            assert s.get(first.url("/healthz"), timeout=HTTP_TIMEOUT).status_code == 200
    assert total(scrape(survivor.metrics_port), "relay_http_requests_total") - served_before == CONNECTIONS // 2
    assert inst.health() == "offline" or inst.health() == "healthy"  # the API answers through the port
    for stream in streams:
        stream.close()
    sock.close()


def test_reuse_port_is_refused_without_a_shared_store_and_bus(tmp_path):
    data = str(tmp_path / "data")
    proc = run_relayd(["--listen", "127.0.0.1:0", "--data", data, "--reuse-port", "on"])
    assert proc.returncode != 0
    assert "--reuse-port needs --store postgres://" in proc.stderr and "data folder" in proc.stderr, proc.stderr
    proc = run_relayd(["--listen", "127.0.0.1:0", "--data", data, "--reuse-port", "on",
                       "--store", "postgres://relay@127.0.0.1/relay"])
    assert proc.returncode != 0
    assert "--reuse-port needs --bus redis://" in proc.stderr, proc.stderr
    proc = run_relayd(["--listen", "127.0.0.1:0", "--data", data, "--reuse-port", "yes"])
    assert proc.returncode != 0 and "--reuse-port must be on or off" in proc.stderr, proc.stderr

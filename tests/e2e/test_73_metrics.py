"""Prometheus metrics (issue 15): --metrics-listen serves the text exposition format at /metrics on a
listener of its own; the figures follow what the relay did (requests by route and status, latency
histograms, event streams, events, deltas, bridge sockets by health, rate-limit refusals, the store)."""
import re

import requests

from bridgelib import WAIT, Installation, Stream
from relaylib import HTTP_TIMEOUT, assert_error, assert_ok, bearer, free_port, wait_until
from test_70_service_basics import project_version

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? '
                    r'(-?[0-9.e+]+|\+Inf|NaN)$')


def scrape(port):
    """{(name, frozenset(labels)): value}, after checking every line of the exposition format."""
    r = requests.get("http://127.0.0.1:%d/metrics" % port, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
    samples, typed = {}, {}
    for line in r.text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram"), line
            typed[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        family = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
        assert m.group(1) in typed or family in typed, "sample before its TYPE: %r" % line
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_follow_what_the_relay_did(relayd):
    port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % port, "--sse-heartbeat", "300ms")
    assert "metrics listening" in relay.log_text()
    # Not on the public listener.
    assert relay.get("/metrics").status_code == 404

    user = relay.token("alice")
    for _ in range(3):
        assert_ok(relay.get("/v1/me", headers=bearer(user)))
    assert relay.get("/v1/me").status_code == 401
    inst = Installation(relay, user)
    stream = Stream(relay, user)
    sock = inst.connect()
    session = inst.create_session()
    interaction, _ = inst.send(session, "count")
    message_id = inst.open_message(session, interaction)
    for n in range(7):
        assert_ok(inst.delta(message_id, "w%d " % n))
    # The approval bucket refuses the eleventh quick request (test_36).
    refused = 0
    for _ in range(12):
        _, r = inst.request_approval(session, interaction)
        refused += r.status_code == 429
    assert refused >= 1

    samples = scrape(port)
    info = [dict(k[1]) for k, v in samples.items() if k[0] == "relay_build_info" and v == 1]
    assert info == [{"version": project_version()}], info
    assert value(samples, "relay_http_requests_total", method="GET", route="/v1/me", code="200") == 3
    assert value(samples, "relay_http_requests_total", method="GET", route="/v1/me", code="401") == 1
    assert value(samples, "relay_http_requests_total", method="GET", route="/metrics", code="404") == 0
    assert value(samples, "relay_http_requests_total", method="-", route="-", code="404") == 1
    assert value(samples, "relay_deltas_total") == 7
    assert value(samples, "relay_rate_limit_refusals_total", method="POST",
                 route="/v1/bridge/requestApproval") == refused
    assert value(samples, "relay_event_streams") == 1
    assert value(samples, "relay_bridge_sockets", health="healthy") == 1
    assert value(samples, "relay_bridge_sockets", health="degraded") == 0
    assert value(samples, "relay_events_published_total") >= 3  # session, message, deltas...
    assert value(samples, "relay_events_delivered_total") >= 3
    assert value(samples, "relay_store_batches_total") > 0
    assert value(samples, "relay_store_commit_duration_seconds_count") > 0
    assert value(samples, "relay_bus_info", backend="local" if relay.bus is None else "redis") == 1
    assert value(samples, "relay_http_requests_in_flight") >= 1  # the stream
    # A histogram: cumulative buckets ending in +Inf, which is its count.
    buckets = sorted(((float(dict(k[1])["le"]) if dict(k[1])["le"] != "+Inf" else float("inf")), v)
                     for k, v in samples.items()
                     if k[0] == "relay_http_request_duration_seconds_bucket" and dict(k[1]).get("route") == "/v1/me")
    assert buckets and buckets[-1][0] == float("inf")
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets
    assert buckets[-1][1] == value(samples, "relay_http_request_duration_seconds_count", method="GET",
                                   route="/v1/me") == 4

    # The figures move: the stream and the socket go, more answers come.
    stream.close()
    sock.close()
    assert_ok(relay.get("/v1/me", headers=bearer(user)))
    wait_until(lambda: value(scrape(port), "relay_event_streams") == 0, WAIT, what="the stream to be gone")
    wait_until(lambda: value(scrape(port), "relay_bridge_sockets", health="healthy") == 0, WAIT,
               what="the socket to be gone")
    assert value(scrape(port), "relay_http_requests_total", method="GET", route="/v1/me", code="200") == 4


def test_metrics_are_off_by_default_and_a_bad_address_is_refused(relayd):
    relay = relayd()
    assert "metrics listening" not in relay.log_text()
    bad = relayd("--metrics-listen", "nowhere", start=False)
    bad.start(expect_ready=False)
    assert bad.wait_exit(WAIT) == 2
    assert "--metrics-listen must be HOST:PORT" in bad.log_text()
    assert_error(relay.get("/metrics"), 404, "not_found")

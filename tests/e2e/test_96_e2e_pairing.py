"""The protocol authors' pairing (issue 26): start with connector_type_id and
an answer in their shape, then a long poll by code (GET, not blocking the
loop) that sees a claim made on any node and hands the token out once."""
import os
import threading
import time

from bridgelib import WAIT, Socket
from relaylib import assert_error, assert_ok, find_error, free_port, metric, validation_errors, wait_until

START = "/v1/pairing/start"


def _start(relay):
    before = time.time() * 1000
    r = assert_ok(relay.post(START, {"connector_type_id": "openclaw", "host_label": "mac"}))
    assert set(r) >= {"code", "expires_at", "poll_token", "browser_url", "install_command", "install_steps_md",
                      "connector"}, r
    # Milliseconds on the authors' wire.
    assert before + 110000 <= r["expires_at"] <= time.time() * 1000 + 130000, r
    assert r["browser_url"].endswith("/pair?code=" + r["code"]), r
    assert r["connector"] == {"id": "openclaw", "display_name": "openclaw"}, r
    return r


def _poll(relay, code, timeout):
    return relay.get("/v1/pairing/poll?code=%s&timeout=%s" % (code, timeout))


def test_start_variant_and_the_spec_shape_side_by_side(relay):
    _start(relay)
    spec = assert_ok(relay.post(START, {"connector_type": "exec", "host_label": "mac"}))
    assert set(spec) == {"code", "expires_at", "poll_token"} and spec["expires_at"] < 10 ** 11, spec
    r = relay.post(START, {"host_label": "mac"})
    assert find_error(validation_errors(r), "connector_type")["message"] == "Required", r.text


def test_long_poll_pending_claimed_once_then_expired(relay):
    started = _start(relay)
    code = started["code"]
    t0 = time.monotonic()
    assert assert_ok(_poll(relay, code, 1)) == {"status": "pending"}
    assert 0.9 <= time.monotonic() - t0 < 5
    # The loop is not blocked while a poll waits: other requests are served at once.
    answers = {}
    waiter = threading.Thread(target=lambda: answers.update(r=_poll(relay, code, 20)))
    waiter.start()
    time.sleep(0.3)
    t1 = time.monotonic()
    assert relay.get("/healthz").status_code == 200
    assert time.monotonic() - t1 < 1
    user = relay.token("alice")
    assert_ok(relay.claim(user, code))
    waiter.join(WAIT)
    claimed = assert_ok(answers["r"])
    assert claimed["status"] == "claimed", claimed
    assert claimed["bot_token"].startswith(claimed["installation_id"] + ":"), claimed
    assert claimed["sophon_ws_url"] == relay.url("/v1/bridge/ws").replace("http:", "ws:"), claimed
    # The token works: the bridge's socket opens with it.
    sock = Socket(relay, claimed["bot_token"])
    sock.expect_ready(claimed["installation_id"])
    sock.close()
    # Handed out once: the next poll says expired, as an unknown code does.
    assert assert_ok(_poll(relay, code, 0)) == {"status": "expired"}
    assert assert_ok(_poll(relay, "ZZZZZZZ", 0)) == {"status": "expired"}
    r = relay.get("/v1/pairing/poll?code=12")
    assert find_error(validation_errors(r), "code")["code"] == "invalid_string"
    r = relay.get("/v1/pairing/poll")
    assert find_error(validation_errors(r), "code")["message"] == "Required"
    r = relay.get("/v1/pairing/poll?code=%s&timeout=soon" % code)
    assert find_error(validation_errors(r), "timeout") is not None


def test_a_claim_on_another_node_reaches_the_poll(relayd):
    a = relayd()
    if a.store is None:
        # Two nodes on one SQLite file share a file of its own: a data folder's relay.db is its relayd's
        # alone while it runs (docs/internals/store.md, "The delta log").
        a.stop_ok()
        shared = "sqlite:%s" % os.path.join(str(a.data), "shared.db")
        a = relayd("--store", shared)
        b = relayd("--store", shared)
    else:
        b = relayd(store=a.store, bus=a.bus)
    code = _start(a)["code"]
    answers = {}
    waiter = threading.Thread(target=lambda: answers.update(r=_poll(a, code, 20)))
    waiter.start()
    time.sleep(0.3)
    assert_ok(b.claim(b.token("alice"), code))
    waiter.join(WAIT)
    assert assert_ok(answers["r"])["status"] == "claimed", answers["r"].text


def test_a_graceful_stop_answers_held_polls(relayd):
    metrics_port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % metrics_port)
    code = _start(relay)["code"]
    answers = {}
    waiter = threading.Thread(target=lambda: answers.update(r=_poll(relay, code, 25)))
    waiter.start()
    wait_until(lambda: metric(metrics_port, "relay_pairing_polls_waiting") == 1, WAIT, what="the poll held")
    t0 = time.monotonic()
    assert relay.stop() == 0
    waiter.join(WAIT)
    assert time.monotonic() - t0 < 10
    assert assert_ok(answers["r"]) == {"status": "pending"}

"""Web Push that one user cannot starve (issue 27, items 1 and 2): each
user's pushes wait in a queue of their own, served in turn, with a few in
flight at most, so that a user whose 20 endpoints accept connections and
never answer delays nobody else; an endpoint that keeps failing is skipped
for a back-off, then its subscription is dropped; and the address a push
connects to is checked after name resolution (docs/operations.md,
"Security": push endpoints).
"""
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bridgelib import WAIT, Turn
from relaylib import assert_ok, free_port, metric, mint_token, wait_until
from test_18_push import PushService, post_paced

BACKING_OFF = 'relay_push_skipped_total{reason="backing_off"}'


class Tarpit:
    """Accepts TCP connections on loopback and never answers; counts them."""

    def __init__(self, host="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.closed = True
        self.sock.close()
        for conn in self.held:
            conn.close()


class Failing:
    """An HTTP push service that answers every push 500; counts them."""

    def __init__(self):
        service = self
        self.posts = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                service.posts += 1
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def subscription(endpoint, template):
    return dict(template, endpoint=endpoint)


def test_a_user_whose_endpoints_hang_delays_nobody_else(relayd):
    relay = relayd("--push-endpoints", "any", "--push-subject", "mailto:ops@example.org")
    alice, mallory = mint_token(relay.data, "alice"), mint_token(relay.data, "mallory")
    service, tarpit = PushService(), Tarpit()
    service.vapid_key = assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"]
    try:
        keys = service.subscribe("template").json()
        for n in range(20):
            endpoint = "http://127.0.0.1:%d/push/m%d" % (tarpit.port, n)
            assert_ok(post_paced(relay, "/v1/me/push-subscriptions", subscription(endpoint, keys), mallory))
        phone = service.subscribe("alice")
        assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=alice))
        hostile, friendly = Turn(relay, mallory, stream=False), Turn(relay, alice, stream=False)
        # 5 approvals x 20 endpoints: more than mallory's share of the queue (64) and of the sender (32 at once).
        for _ in range(5):
            assert_ok(hostile.inst.request_approval(hostile.session, hostile.interaction)[1])
        wait_until(lambda: len(tarpit.held) >= 4, WAIT, what="mallory's pushes connecting to the tarpit")
        started = time.monotonic()
        assert_ok(friendly.inst.request_approval(friendly.session, friendly.interaction)[1])
        wait_until(lambda: phone.messages, 5, interval=0.02, what="alice's push")
        took = time.monotonic() - started
        assert took < 2, "alice's push took %.2f s behind mallory's hanging endpoints" % took
        assert service.failures == []
        # Mallory holds at most a few of the sender's connections, and loses the pushes past their share.
        time.sleep(0.3)
        assert len(tarpit.held) <= 4, len(tarpit.held)
        records = relay.log_records()
        assert any(r.get("msg") == "push dropped: this user has too many waiting" and r.get("user_id") == "mallory"
                   for r in records), relay.log_text()[-3000:]
        hostile.close()
        friendly.close()
    finally:
        service.close()
        tarpit.close()


def test_many_users_aiming_at_one_hanging_host_leave_room_for_others(relayd):
    # Five users, four endpoints each, all on one host that never answers: the host gets half the sender.
    relay = relayd("--push-endpoints", "any", "--push-subject", "mailto:ops@example.org")
    service, tarpit = PushService(), Tarpit()
    service.vapid_key = assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"]
    try:
        keys = service.subscribe("template").json()
        turns = []
        for u in range(5):
            token = mint_token(relay.data, "sybil%d" % u)
            for n in range(4):
                endpoint = "http://127.0.0.1:%d/push/s%d-%d" % (tarpit.port, u, n)
                assert_ok(post_paced(relay, "/v1/me/push-subscriptions", subscription(endpoint, keys), token))
            turns.append(Turn(relay, token, stream=False))
        alice = mint_token(relay.data, "alice")
        phone = service.subscribe("alice")
        assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=alice))
        friendly = Turn(relay, alice, stream=False)
        for t in turns:
            assert_ok(t.inst.request_approval(t.session, t.interaction)[1])
        wait_until(lambda: len(tarpit.held) >= 16, WAIT, what="the hanging host's share taken")
        started = time.monotonic()
        assert_ok(friendly.inst.request_approval(friendly.session, friendly.interaction)[1])
        wait_until(lambda: phone.messages, 5, interval=0.02, what="alice's push")
        assert time.monotonic() - started < 2
        assert service.failures == []
        time.sleep(0.3)
        assert len(tarpit.held) == 16, "one push service origin holds at most half of the sender"
        for t in turns + [friendly]:
            t.close()
    finally:
        service.close()
        tarpit.close()


def test_a_hanging_endpoint_times_out_and_backs_off(relayd):
    metrics_port = free_port()
    relay = relayd("--push-endpoints", "any", "--push-subject", "mailto:ops@example.org", "--push-timeout", "500ms",
                   "--push-backoff", "10s", "--metrics-listen", "127.0.0.1:%d" % metrics_port)
    mallory = mint_token(relay.data, "mallory")
    service, tarpit = PushService(), Tarpit()
    try:
        endpoint = "http://127.0.0.1:%d/push/slow" % tarpit.port
        assert_ok(relay.post("/v1/me/push-subscriptions", subscription(endpoint, service.subscribe("k").json()),
                             token=mallory))
        t = Turn(relay, mallory, stream=False)
        assert_ok(t.inst.request_approval(t.session, t.interaction)[1])
        wait_until(lambda: any(r.get("msg") == "push not accepted" and r.get("reason") == "no answer"
                               for r in relay.log_records()), 3, what="the push timing out after --push-timeout")
        # Backing off: the next approvals are not even tried.
        for _ in range(3):
            assert_ok(t.inst.request_approval(t.session, t.interaction)[1])
        wait_until(lambda: metric(metrics_port, BACKING_OFF) == 3, WAIT, what="three pushes skipped")
        assert len(tarpit.held) == 1, len(tarpit.held)
        assert relay.count("push_subscriptions") == 1
        t.close()
    finally:
        service.close()
        tarpit.close()


def test_an_endpoint_that_keeps_failing_is_dropped(relayd):
    # relayd-testclock: the back-off is waited out by moving relayd's clock, so that no pause of this machine
    # can end it early (a 10 s back-off here is never reached by real time within the test).
    relay = relayd("--push-endpoints", "any", "--push-subject", "mailto:ops@example.org", "--push-backoff", "10s",
                   "--push-failures-max", "3", testclock=True)
    token = mint_token(relay.data, "alice")
    failing, service = Failing(), PushService()
    try:
        endpoint = failing.origin + "/push/broken"
        assert_ok(relay.post("/v1/me/push-subscriptions", subscription(endpoint, service.subscribe("k").json()),
                             token=token))
        t = Turn(relay, token, stream=False)

        def approval():
            assert_ok(t.inst.request_approval(t.session, t.interaction)[1])

        def failures_noted():  # relayd logs each failure when it records it, and the back-off starts then
            return sum(1 for r in relay.log_records() if r.get("msg") == "push not accepted")

        approval()
        wait_until(lambda: failures_noted() == 1, WAIT, what="the first push failed")
        approval()  # inside the 10 s back-off: skipped
        wait_until(lambda: metric(relay.clock_port, BACKING_OFF) == 1, WAIT, what="the push skipped")
        assert failing.posts == 1
        relay.advance_clock(10100)
        approval()
        wait_until(lambda: failures_noted() == 2, WAIT, what="the second push failed, after the back-off")
        approval()  # the back-off doubled: 20 s
        wait_until(lambda: metric(relay.clock_port, BACKING_OFF) == 2, WAIT, what="the push skipped again")
        relay.advance_clock(20100)
        approval()
        wait_until(lambda: relay.count("push_subscriptions") == 0, WAIT, what="the subscription dropped")
        assert failing.posts == 3
        assert any(r.get("msg") == "push subscription dropped after failed pushes" for r in relay.log_records())
        assert endpoint not in relay.log_text(), "logs show a push service's origin only"
        t.close()
    finally:
        failing.close()
        service.close()


def loopback_name():
    """A name (not an IP literal, not localhost) that this machine resolves to loopback, or None."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 443, proto=socket.IPPROTO_TCP)}
    except OSError:
        return None
    if not addresses or not all(a.startswith("127.") or a == "::1" for a in addresses):
        return None
    return name


def test_the_address_connected_to_is_checked_after_resolution(relayd):
    name = loopback_name()
    if name is None:
        pytest.skip("this machine's host name does not resolve to loopback")
    service = PushService()
    keys = service.subscribe("k").json()
    try:
        # A name passes the subscription (no address to judge yet); it resolves to loopback when the sender connects.
        for networks, reached in [("192.0.2.0/24", False), ("127.0.0.0/8,::1", True)]:
            relay = relayd("--push-subject", "mailto:ops@example.org", "--push-networks", networks)
            token = mint_token(relay.data, "alice")
            tarpit = Tarpit()
            try:
                endpoint = "https://%s:%d/push/x" % (name, tarpit.port)
                assert_ok(relay.post("/v1/me/push-subscriptions", subscription(endpoint, keys), token=token))
                t = Turn(relay, token, stream=False)
                assert_ok(t.inst.request_approval(t.session, t.interaction)[1])
                if reached:
                    wait_until(lambda: tarpit.held, WAIT, what="the connection to an allowed network")
                else:
                    wait_until(lambda: any(r.get("msg") == "push not accepted" and "address not allowed" in
                                           r.get("reason", "") for r in relay.log_records()), WAIT,
                               what="the push refused at connect")
                    time.sleep(0.2)
                    assert tarpit.held == [], "relayd connected to a loopback address"
                t.close()
            finally:
                tarpit.close()
    finally:
        service.close()

"""Web Push from relayd (docs/web.md): subscriptions at
POST/DELETE /v1/me/push-subscriptions, a push for each approval request and
for an agent's finished reply when the user has no stream open, sent to a
local push service that checks the VAPID token (RFC 8292) and decrypts the
payload (RFC 8291, aes128gcm) with python3-cryptography, and the
subscription forgotten when the push service answers 410.
"""
import base64
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bridgelib import WAIT, Turn
from relaylib import (assert_error, assert_ok, bearer, find_error, free_port, metric, mint_token, run_relayd,
                      validation_errors, wait_until)


def b64u(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hkdf(salt, ikm, info, length):
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


class Subscription:
    def __init__(self, service, name):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public = self.key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        self.auth = os.urandom(16)
        self.id = name
        self.endpoint = "%s/push/%s" % (service.origin, name)
        self.status = 201
        self.requests = []
        self.messages = []

    def json(self):
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64u(self.public), "auth": b64u(self.auth)}}

    def decrypt(self, body):
        salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
        sender = body[21:21 + idlen]
        assert idlen == 65 and rs >= 18 and len(body) <= 4096, (idlen, rs, len(body))
        peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender)
        secret = self.key.exchange(ec.ECDH(), peer)
        ikm = hkdf(self.auth, secret, b"WebPush: info\x00" + self.public + sender, 32)
        cek = hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
        nonce = hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12)
        plain = AESGCM(cek).decrypt(nonce, body[21 + idlen:], None).rstrip(b"\x00")
        assert plain[-1:] == b"\x02", "last record delimiter"
        return json.loads(plain[:-1])


class PushService:
    """HTTP on loopback: POST /push/<name> checks and decrypts, answers 201 (or what a test sets)."""

    def __init__(self):
        service = self
        self.subscriptions = {}
        self.failures = []
        self.vapid_key = None

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sub = service.subscriptions.get(self.path.rsplit("/", 1)[-1])
                if sub is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                sub.requests.append(dict(self.headers))
                if sub.status == 201:
                    try:
                        service.check(self.headers)
                        sub.messages.append(dict(sub.decrypt(body), urgency=self.headers.get("Urgency"),
                                                 ttl=int(self.headers["TTL"])))
                    except Exception as err:  # reported by the test
                        service.failures.append(repr(err))
                        sub.status = 400
                self.send_response(sub.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def subscribe(self, name):
        sub = Subscription(self, name)
        self.subscriptions[name] = sub
        return sub

    def check(self, headers):
        assert headers["Content-Encoding"] == "aes128gcm", headers
        assert headers["TTL"].isdigit(), headers
        scheme, params = headers["Authorization"].split(" ", 1)
        assert scheme == "vapid", headers["Authorization"]
        fields = dict(p.strip().split("=", 1) for p in params.split(","))
        assert fields["k"] == self.vapid_key
        head, payload, sig = fields["t"].split(".")
        assert json.loads(unb64u(head)) == {"typ": "JWT", "alg": "ES256"}
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(fields["k"]))
        raw = unb64u(sig)
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        key.verify(der, ("%s.%s" % (head, payload)).encode(), ec.ECDSA(hashes.SHA256()))
        claims = json.loads(unb64u(payload))
        assert claims["aud"] == self.origin, claims
        assert time.time() < claims["exp"] <= time.time() + 24 * 3600 + 60, claims
        assert claims["sub"] == "mailto:ops@example.org", claims

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def push_relay(relayd, *extra):
    return relayd("--push-endpoints", "any", "--push-subject", "mailto:ops@example.org", *extra)


def test_subscriptions_are_validated(relay, user_token):
    service = PushService()
    try:
        good = service.subscribe("good").json()

        def post(body):
            return relay.post("/v1/me/push-subscriptions", body, token=user_token)

        # Without --push-endpoints any, only https push services.
        errors = validation_errors(post(good))
        assert find_error(errors, "endpoint")["code"] == "invalid_string"
        https = dict(good, endpoint="https://push.example.net/wpush/abc")
        assert assert_ok(post(https))["endpoint"] == https["endpoint"]
        cases = [
            ({"keys": good["keys"]}, "endpoint", "invalid_type"),
            (dict(https, endpoint="ftp://push.example.net/x"), "endpoint", "invalid_string"),
            (dict(https, endpoint="https://"), "endpoint", "invalid_string"),
            (dict(https, endpoint="https://x/" + "a" * 2100), "endpoint", "too_big"),
            ({"endpoint": https["endpoint"]}, "keys", "invalid_type"),
            (dict(https, keys={"p256dh": good["keys"]["p256dh"]}), "keys.auth", "invalid_type"),
            (dict(https, keys={"p256dh": good["keys"]["p256dh"][:-2] + "AA", "auth": good["keys"]["auth"]}),
             "keys.p256dh", "invalid_string"),
            (dict(https, keys={"p256dh": b64u(b"\x04" + b"\x00" * 64), "auth": good["keys"]["auth"]}),
             "keys.p256dh", "invalid_string"),
            (dict(https, keys={"p256dh": good["keys"]["p256dh"], "auth": b64u(os.urandom(15))}), "keys.auth",
             "invalid_string"),
        ]
        for body, path, code in cases:
            errors = validation_errors(post(body))
            assert find_error(errors, path)["code"] == code, (body, errors)
        assert relay.count("push_subscriptions") == 1
    finally:
        service.close()


def test_subscribe_unsubscribe_and_the_cap(relayd):
    relay = push_relay(relayd)
    alice, bob = mint_token(relay.data, "alice"), mint_token(relay.data, "bob")
    service = PushService()
    try:
        first = service.subscribe("first").json()
        assert_ok(relay.post("/v1/me/push-subscriptions", first, token=alice))
        assert_ok(relay.post("/v1/me/push-subscriptions", first, token=alice))
        assert relay.query("SELECT user_id FROM push_subscriptions") == [("alice",)]
        # Another user cannot remove it; the browser signed in as bob takes it over by subscribing.
        r = relay.request("DELETE", "/v1/me/push-subscriptions", json={"endpoint": first["endpoint"]}, headers=bearer(bob))
        assert assert_ok(r) == {"removed": False}
        assert relay.count("push_subscriptions") == 1
        assert_ok(relay.post("/v1/me/push-subscriptions", first, token=bob))
        assert relay.query("SELECT user_id FROM push_subscriptions") == [("bob",)]
        r = relay.request("DELETE", "/v1/me/push-subscriptions", json={"endpoint": first["endpoint"]}, headers=bearer(bob))
        assert assert_ok(r) == {"removed": True}
        r = relay.request("DELETE", "/v1/me/push-subscriptions", json={"endpoint": first["endpoint"]}, headers=bearer(bob))
        assert assert_ok(r) == {"removed": False}
        # 20 per user: the oldest goes.
        subs = [service.subscribe("s%d" % n).json() for n in range(21)]
        for sub in subs:
            assert_ok(relay.post("/v1/me/push-subscriptions", sub, token=alice))
        kept = {row[0] for row in relay.query("SELECT endpoint FROM push_subscriptions WHERE user_id = 'alice'")}
        assert kept == {s["endpoint"] for s in subs[1:]}
    finally:
        service.close()


def test_approvals_and_unwatched_replies_are_pushed(relayd):
    metrics_port = free_port()
    relay = push_relay(relayd, "--metrics-listen", "127.0.0.1:%d" % metrics_port)
    token = mint_token(relay.data, "alice")
    service = PushService()
    service.vapid_key = assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"]
    try:
        phone = service.subscribe("phone")
        assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=token))
        t = Turn(relay, token)  # with a stream open
        inst, s, i = t.inst, t.session, t.interaction
        body, r = inst.request_approval(s, i, command="rm -rf build", severity="high", title="Clean the build")
        expires_at = assert_ok(r)["expires_at"]
        wait_until(lambda: phone.messages, WAIT, what="the approval push")
        assert service.failures == []
        note = phone.messages[0]
        assert note == {"kind": "approval", "title": "Clean the build", "body": "rm -rf build", "severity": "high",
                        "session_id": s, "installation_id": inst.id, "approval_id": body["approval_id"],
                        "url": "/#/s/%s" % s,
                        "expires_at": expires_at, "urgency": "high", "ttl": note["ttl"]}
        assert 0 < note["ttl"] <= 300

        # A reply the user is watching: no push.
        message = inst.open_message(s, i)
        assert_ok(inst.end(message, text="watched"))
        t.stream.wait_for("message_finalized")

        # With no stream open, a finished reply is pushed (and it is the next push: the watched one had none).
        t.stream.close()
        wait_until(lambda: metric(metrics_port, "relay_event_streams") == 0, WAIT, what="the stream closed")
        i2, _ = inst.send(s, "again")
        t.sock.next_update(WAIT)
        message = inst.open_message(s, i2)
        assert_ok(inst.end(message, text="x" * 500))
        wait_until(lambda: len(phone.messages) >= 2, WAIT, what="the reply push")
        assert len(phone.messages) == 2, phone.messages
        reply = phone.messages[1]
        assert reply["kind"] == "reply" and reply["session_id"] == s and reply["message_id"] == message
        assert reply["body"] == "x" * 160 + "\u2026", "cut to 160 characters"
        assert reply["urgency"] == "normal" and reply["ttl"] == 86400

        # 410 from the push service: the subscription is forgotten.
        phone.status = 410
        inst.request_approval(s, i2)
        wait_until(lambda: relay.count("push_subscriptions") == 0, WAIT, what="the subscription forgotten")
        count = len(phone.requests)
        inst.request_approval(s, i2)
        time.sleep(0.5)
        assert len(phone.requests) == count
        assert "push subscription expired" in relay.log_text()
        assert phone.endpoint not in relay.log_text(), "endpoints are capabilities: logs show their origin only"
        t.sock.close()
    finally:
        service.close()


def test_an_unreachable_push_service_harms_nothing(relayd):
    relay = push_relay(relayd)
    token = mint_token(relay.data, "alice")
    service = PushService()
    sub = service.subscribe("gone").json()
    service.close()
    assert_ok(relay.post("/v1/me/push-subscriptions", sub, token=token))
    t = Turn(relay, token)
    body, r = t.inst.request_approval(t.session, t.interaction)
    assert_ok(r)
    wait_until(lambda: "push not accepted" in relay.log_text(), WAIT, what="the failed push logged")
    # Only a gone subscription (404, 410) is forgotten; a failure to connect is not.
    assert relay.count("push_subscriptions") == 1
    assert_ok(t.inst.decide(body["approval_id"], "approve"))
    t.close()


# Issue 27, item 2: push endpoints are URLs a user hands the relay, which then POSTs to them. By default only
# https on port 443 to public unicast addresses (docs/operations.md, "Security").
INWARD = [
    "https://127.0.0.1:9/push/x", "https://127.0.0.1/push/x", "https://localhost/push/x", "https://LOCALHOST./x",
    "https://push.localhost/x", "https://2130706433/x", "https://0x7f.1/x", "https://127.1/x", "https://0177.0.0.1/x",
    "https://169.254.169.254/latest/meta-data", "https://10.0.0.1:6379/x", "https://10.0.0.1/x",
    "https://192.168.1.1/x", "https://172.16.0.1/x", "https://100.64.0.1/x", "https://0.0.0.0/x",
    "https://224.0.0.1/x", "https://255.255.255.255/x", "https://[fd00::1]/x", "https://[::1]/x", "https://[::]/x",
    "https://[fe80::1]/x", "https://[::ffff:127.0.0.1]/x", "https://[::ffff:7f00:1]/x", "https://[64:ff9b::a00:1]/x",
    "https://[2001:db8::1]/x", "https://[2002:7f00:1::1]/x", "https://[ff02::1]/x",
    "https://user:secret@push.example.net/x", "https://push.example.net@127.0.0.1/x",
    "https://push.example.net\\@127.0.0.1/x", "https://push.example.net:8443/x", "https://push.example.net:0/x",
    "https://push.example.net:99999/x", "https://push.example.net:/x", "https://[fe80::1%25eth0]/x",
    "https://1.2.3.4.5/x", "https://0x100000000/x", "https://pu%73h.example.net/x", "https://push..example.net/x",
]
OUTWARD = [
    "https://push.example.net/wpush/abc", "https://fcm.googleapis.com/fcm/send/abc:def", "https://PUSH.example.net./x",
    "https://push.example.net:443/x", "https://8.8.8.8/x", "https://[2606:4700:4700::1111]/x",
    "https://[64:ff9b::808:808]/x", "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
]


def post_paced(relay, path, body, token):
    """A POST that waits out the user's rate bucket: these tests send more than its burst."""
    while True:
        r = relay.post(path, body, token=token)
        if r.status_code != 429:
            return r
        time.sleep(r.json()["error"]["retry_after_ms"] / 1000 + 0.01)


def test_endpoints_that_point_inward_are_refused(relay, user_token):
    body = {"keys": Subscription(PushServiceStub(), "x").json()["keys"]}
    for endpoint in INWARD:
        errors = validation_errors(post_paced(relay, "/v1/me/push-subscriptions", dict(body, endpoint=endpoint),
                                              user_token))
        assert find_error(errors, "endpoint")["code"] == "invalid_string", (endpoint, errors)
    assert relay.count("push_subscriptions") == 0
    for endpoint in OUTWARD:
        assert_ok(post_paced(relay, "/v1/me/push-subscriptions", dict(body, endpoint=endpoint), user_token))
    assert relay.count("push_subscriptions") == len(OUTWARD)


def test_an_operators_own_network_can_be_allowed(relayd, tmp_path):
    relay = relayd("--push-networks", "10.0.0.0/8,fd00::/8")
    token = mint_token(relay.data, "alice")
    body = Subscription(PushServiceStub(), "x").json()
    for endpoint, ok in [("https://10.0.0.1:6379/x", True), ("https://[fd00::1]:8443/x", True),
                         ("https://push.internal:8443/x", True), ("https://127.0.0.1/x", False),
                         ("https://192.168.1.1/x", False), ("http://10.0.0.1/x", False)]:
        r = relay.post("/v1/me/push-subscriptions", dict(body, endpoint=endpoint), token=token)
        if ok:
            assert_ok(r)
        else:
            assert find_error(validation_errors(r), "endpoint")["code"] == "invalid_string", endpoint
    proc = run_relayd(["--data", str(tmp_path / "bad"), "--push-networks", "10.0.0.0/33"])
    assert proc.returncode == 2 and "--push-networks" in proc.stderr


class PushServiceStub:
    origin = "https://push.example.net"


def test_another_users_endpoint_is_not_taken_with_other_keys(relayd):
    relay = push_relay(relayd)
    alice, bob = mint_token(relay.data, "alice"), mint_token(relay.data, "bob")
    service = PushService()
    try:
        phone = service.subscribe("phone").json()
        assert_ok(relay.post("/v1/me/push-subscriptions", phone, token=alice))
        # Bob knows the endpoint but not the browser's keys: refused, and alice keeps her notifications.
        forged = dict(phone, keys=service.subscribe("other").json()["keys"])
        assert_error(relay.post("/v1/me/push-subscriptions", forged, token=bob), 409, "conflict")
        assert relay.query("SELECT user_id FROM push_subscriptions") == [("alice",)]
        # The same browser signed in as bob (the same keys) takes it along, as before.
        assert_ok(relay.post("/v1/me/push-subscriptions", phone, token=bob))
        assert relay.query("SELECT user_id FROM push_subscriptions") == [("bob",)]
    finally:
        service.close()


def test_a_subscription_the_policy_no_longer_allows_is_dropped_unsent(relayd):
    # Subscribed under --push-endpoints any (or before the policy existed), then served with the default one.
    relay = push_relay(relayd)
    token = mint_token(relay.data, "alice")
    service = PushService()
    try:
        phone = service.subscribe("phone")
        assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=token))
        relay.stop()
        relay.args = ["--push-subject", "mailto:ops@example.org"]
        relay.start()
        t = Turn(relay, token, stream=False)
        assert_ok(t.inst.request_approval(t.session, t.interaction)[1])
        wait_until(lambda: relay.count("push_subscriptions") == 0, WAIT, what="the subscription dropped")
        assert phone.requests == [], "nothing is sent to an endpoint the policy refuses"
        assert any(r.get("msg") == "push subscription dropped: endpoint not allowed" for r in relay.log_records())
        t.close()
    finally:
        service.close()

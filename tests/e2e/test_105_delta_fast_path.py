"""sendMessageDelta's fast path (issue 24, docs/internals/http.md "The fast path of a delta").

A delta whose body is one flat object meeting every rule is read without jansson; every other body
takes the generic path (jansson and the validator), whose answers must not change. Each body below is
sent to a relayd on the fast path and to one with RELAY_GENERIC_BODIES=1 (every body through jansson,
as before the fast path): the answers must be the same, byte for byte in the body. The idempotency
hash of a delta stored by one path must be the hash the other computes (a replay after a restart,
across the switch, answers idempotent), and a loop that lags refuses deltas with 503 before reading
them.
"""
import base64
import hashlib
import json
import socket
import sqlite3
import time

from bridgelib import Turn, key
from e2elib import encrypted_session, seal
from relaylib import assert_error, assert_ok, find_error, mint_token, validation_errors

GENERIC = {"RELAY_GENERIC_BODIES": "1"}


def _post_raw(relay, token, data):
    return relay.post("/v1/bridge/sendMessageDelta", token=token, data=data,
                      headers={"Content-Type": "application/json"})


def _answer(r):
    """What must not differ between the paths: the status, the body, Retry-After."""
    return r.status_code, r.content, r.headers.get("Retry-After")


class _Side:
    """One relayd, a user with a bridge, an open message in a plain session."""

    def __init__(self, relayd, env=None):
        self.relay = relayd(env=env)
        self.turn = Turn(self.relay, mint_token(self.relay.data, "alice"))
        self.inst = self.turn.inst
        self.mid = self.inst.open_message(self.turn.session, self.turn.interaction)

    def send(self, template):
        """template: bytes with {mid} for the message id."""
        return _post_raw(self.relay, self.inst.token, template.replace(b"{mid}", self.mid.encode()))


# Bodies that leave the fast path, each for its own reason; {mid} is the side's message id.
FALLBACKS = {
    "nested value": b'{"message_id":"{mid}","delta":"x","idempotency_key":"k-nested","meta":{"a":[1]}}',
    "real number": b'{"message_id":"{mid}","delta":"x","idempotency_key":"k-real","n":1.5}',
    "invalid UTF-8": b'{"message_id":"{mid}","delta":"\xff\xfe","idempotency_key":"k-utf8"}',
    "lone surrogate": b'{"message_id":"{mid}","delta":"\\ud800","idempotency_key":"k-surrogate"}',
    "\\u0000": b'{"message_id":"{mid}","delta":"a\\u0000b","idempotency_key":"k-nul"}',
    "duplicate key": b'{"message_id":"{mid}","delta":"x","delta":"y","idempotency_key":"k-dup"}',
    "wrong type": b'{"message_id":"{mid}","delta":5,"idempotency_key":"k-type"}',
    "null delta": b'{"message_id":"{mid}","delta":null,"idempotency_key":"k-null"}',
    "missing key": b'{"message_id":"{mid}","delta":"x"}',
    "missing message": b'{"delta":"x","idempotency_key":"k-nomsg"}',
    "missing delta": b'{"message_id":"{mid}","idempotency_key":"k-nodelta"}',
    "too long": b'{"message_id":"{mid}","delta":"' + b"a" * 65537 + b'","idempotency_key":"k-long"}',
    "empty key": b'{"message_id":"{mid}","delta":"x","idempotency_key":""}',
    "unknown _ct": b'{"message_id":"{mid}","delta":"x","idempotency_key":"k-ct","note_ct":"AQ=="}',
    "delta_ct in a plain session": b'{"message_id":"{mid}","delta_ct":"' + base64.b64encode(b"\x01" + b"\x00" * 28) +
                                   b'","idempotency_key":"k-plainct"}',
    "trailing bytes": b'{"message_id":"{mid}","delta":"x","idempotency_key":"k-trail"} x',
    "not an object": b'["{mid}"]',
    "empty body": b"",
    "unknown message": b'{"message_id":"msg_nonexistent","delta":"x","idempotency_key":"k-unknown"}',
}


def test_every_fallback_answers_what_the_generic_path_answers(relayd):
    fast, generic = _Side(relayd), _Side(relayd, env=GENERIC)
    for name, template in FALLBACKS.items():
        ours, theirs = fast.send(template), generic.send(template)
        if name == "nested value" or name == "real number":
            assert ours.status_code == 200, (name, ours.text)
        else:
            assert 400 <= ours.status_code < 500, (name, ours.status_code, ours.text)
        if template.find(b"{mid}") >= 0 and ours.status_code == 200:
            # A success names the side's own message: compare with the ids swapped in.
            assert ours.json()["result"]["message_id"] == fast.mid and theirs.json()["result"]["message_id"] == \
                generic.mid, (name, ours.text, theirs.text)
            continue
        assert _answer(ours) == _answer(theirs), (name, ours.content[:400], theirs.content[:400])
    # The errors are the validator's own (a sample, so that both paths being wrong alike shows too).
    r = fast.send(FALLBACKS["wrong type"])
    assert find_error(validation_errors(r), "delta")["message"] == "Expected string, received number", r.text
    r = fast.send(FALLBACKS["unknown _ct"])
    assert find_error(validation_errors(r), "note_ct")["code"] == "unrecognized_keys", r.text
    r = fast.send(FALLBACKS["invalid UTF-8"])
    assert find_error(validation_errors(r), "")["code"] == "invalid_json", r.text
    r = fast.send(FALLBACKS["delta_ct in a plain session"])
    assert "not encrypted" in find_error(validation_errors(r), "delta_ct")["message"], r.text
    # The deltas that were taken are the two fallbacks that succeed, in order, and nothing else.
    assert fast.inst.message(fast.turn.session, fast.mid)["text"] == "xx"
    fast.turn.close()
    generic.turn.close()


def test_a_flat_delta_is_answered_and_published_as_before(relayd):
    fast, generic = _Side(relayd), _Side(relayd, env=GENERIC)
    # (U+2028 is left to the unit tests: the test's SSE reader, requests' iter_lines, splits lines on it.)
    text = 'quote " backslash \\ slash / nl \n tab \t ctl \x01\x1f é € 😀'
    for side in (fast, generic):
        body = {"message_id": side.mid, "delta": text, "idempotency_key": "k-flat"}
        first = side.relay.post("/v1/bridge/sendMessageDelta", body, token=side.inst.token)
        assert first.content == b'{"ok":true,"result":{"message_id":"%s"}}' % side.mid.encode(), first.content
        again = side.relay.post("/v1/bridge/sendMessageDelta", body, token=side.inst.token)
        assert again.content == b'{"ok":true,"result":{"message_id":"%s","idempotent":true}}' % side.mid.encode()
        assert_error(side.relay.post("/v1/bridge/sendMessageDelta", dict(body, delta="other"),
                                     token=side.inst.token), 409, "idempotency_conflict")
        side.inst.barrier(side.turn.stream, side.turn.session)
        events = side.turn.events(["message_delta"])
        assert [e.data["delta"] for e in events] == [text], events
        data = events[0].data
        assert list(data) == ["session_id", "message_id", "delta", "interaction_id", "ts"], data
        assert data["message_id"] == side.mid and data["session_id"] == side.turn.session, data
        assert data["interaction_id"] == side.turn.interaction, data
        side.turn.close()


def test_encrypted_session_plaintext_falls_back_to_the_same_refusal(relayd):
    answers = []
    for env in (None, GENERIC):
        relay = relayd(env=env)
        e, sock, stream, sid = encrypted_session(relay, mint_token(relay.data, "alice"))
        k, path = e.session_key, "messages/%s" % sid
        sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": seal(k, path, "q")}))
        mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": sent["interaction_id"],
                                                    "text_ct": seal(k, path, ""), "idempotency_key": key()}))[
            "message_id"]
        side = []
        for body in ({"message_id": mid, "delta": "plain", "idempotency_key": "k1"},
                     {"message_id": mid, "idempotency_key": "k2"},
                     {"message_id": mid, "delta": None, "delta_ct": "not an envelope", "idempotency_key": "k3"}):
            side.append(_answer(e.inst.post("sendMessageDelta", body)))
        ct = seal(k, path, "b")
        ok = e.inst.post("sendMessageDelta", {"message_id": mid, "delta_ct": ct, "idempotency_key": "k4"})
        assert ok.status_code == 200, ok.text
        event = stream.wait_for("message_delta", lambda d: d.get("delta_ct") == ct, timeout=10)
        assert event.data["delta"] is None and list(event.data)[-1] == "delta_ct", event.data
        answers.append(side)
        sock.close()
        stream.close()
    assert answers[0] == answers[1], answers
    assert answers[0][0][0] == 400 and b"end-to-end encrypted" in answers[0][0][1], answers[0][0]
    assert answers[0][1][0] == 400 and b"Required" in answers[0][1][1], answers[0][1]


def test_a_replay_across_a_restart_and_the_switch_is_idempotent(relayd):
    """The hash stored by the generic path (jansson's canonical dump) is the fast path's, and back."""
    relay = relayd(env=GENERIC)
    t = Turn(relay, mint_token(relay.data, "alice"))
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    # Keys out of order, escapes the writer must write as jansson does, an unknown flat member.
    before = ('{"idempotency_key":"k-old","delta":"\\u00e9\\ud83d\\ude00 \\"q\\" \\/ \\u001f\\n",'
              '"message_id":"%s","z":-12,"a":true}' % mid).encode()
    after = ('{"message_id":"%s","a":true,"idempotency_key":"k-new","delta":"\\t\\u0001 \\u20ac","z":null}'
             % mid).encode()
    assert _post_raw(relay, inst.token, before).status_code == 200
    t.close()
    relay.stop_ok()
    relay.env.pop("RELAY_GENERIC_BODIES")
    relay.start()
    # The same body again, now read flat: a replay of what jansson hashed.
    r = _post_raw(relay, inst.token, before)
    assert r.status_code == 200 and r.json()["result"] == {"message_id": mid, "idempotent": True}, r.text
    # The same members, another spelling (order, escapes, spaces): the same canonical body, the same hash.
    respelled = ('{ "message_id" : "%s", "a":true, "z":-12, "delta":"\\u00E9\\uD83D\\uDE00 \\"q\\" / \\u001F\\u000a",'
                 ' "idempotency_key":"k-old" }' % mid).encode()
    r = _post_raw(relay, inst.token, respelled)
    assert r.status_code == 200 and r.json()["result"].get("idempotent") is True, r.text
    assert_error(_post_raw(relay, inst.token, before.replace(b"-12", b"-13")), 409, "idempotency_conflict")
    # And the other way: stored by the fast path, replayed through jansson after a restart.
    assert _post_raw(relay, inst.token, after).status_code == 200
    relay.stop_ok()
    relay.env["RELAY_GENERIC_BODIES"] = "1"
    relay.start()
    r = _post_raw(relay, inst.token, after)
    assert r.status_code == 200 and r.json()["result"] == {"message_id": mid, "idempotent": True}, r.text
    assert inst.message(t.session, mid)["text"] == "\u00e9\U0001F600 \"q\" / \x1f\n\t\x01 \u20ac"


def _rewrite_store(relay, sql, params):
    if relay.store is None:
        conn = sqlite3.connect(relay.db_path())
        try:
            conn.execute(sql, params)
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg2
    conn = psycopg2.connect(relay.store)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(sql.replace("?", "%s"), params)
    finally:
        conn.close()


def test_a_key_stored_under_sha256_still_replays(relayd):
    """A delta's key keeps the BLAKE2b-256 of its canonical body; one stored before that holds the
    SHA-256 of the same bytes, and a replay across the upgrade is still a replay (and another body
    under it still a conflict)."""
    relay = relayd()
    t = Turn(relay, mint_token(relay.data, "alice"))
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    body = {"message_id": mid, "delta": "old words", "idempotency_key": "k-before"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert_ok(_post_raw(relay, inst.token, json.dumps(body).encode()))
    t.close()
    relay.stop_ok()
    b2 = hashlib.blake2b(canonical, digest_size=32).hexdigest()
    sha = hashlib.sha256(canonical).hexdigest()
    [(keys,)] = relay.query("SELECT keys FROM message_deltas WHERE message_id = ?", (mid,))
    assert json.loads(keys) == [["k-before", b2]], keys
    # As a relayd before BLAKE2b stored it.
    _rewrite_store(relay, "UPDATE message_deltas SET keys = ? WHERE message_id = ?",
                   (json.dumps([["k-before", sha]]), mid))
    relay.start()
    r = _post_raw(relay, inst.token, json.dumps(body).encode())
    assert r.status_code == 200 and r.json()["result"] == {"message_id": mid, "idempotent": True}, r.text
    r = relay.post("/v1/bridge/sendMessageDelta", token=inst.token, json=dict(body, delta="new words"))
    assert_error(r, 409, "idempotency_conflict")
    # Neither the replay nor the conflict wrote anything.
    assert inst.message(t.session, mid)["text"] == "old words"


def _burst(relay, token, mid, n):
    """n deltas on n connections, all written before any answer is read: one loop turn takes many of them."""
    socks = []
    for i in range(n):
        body = json.dumps({"message_id": mid, "delta": "b", "idempotency_key": key()}).encode()
        head = ("POST /v1/bridge/sendMessageDelta HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (token, len(body))).encode()
        s = socket.create_connection(("127.0.0.1", relay.port), timeout=30)
        socks.append((s, head + body))
    for s, request in socks:
        s.sendall(request)
    answers = []
    for s, _ in socks:
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        answers.append((int(lines[0].split()[1]), headers, body))
    return answers


def test_a_lagging_loop_refuses_deltas_before_reading_them(relayd):
    # 1 ms of lag: a turn that takes a burst of deltas passes it. The default (50ms) is in the docs.
    relay = relayd("--loop-lag-max", "1ms")
    t = Turn(relay, mint_token(relay.data, "alice"))
    mid = t.inst.open_message(t.session, t.interaction)
    shed = []
    deadline = time.monotonic() + 60
    while not shed and time.monotonic() < deadline:
        answers = _burst(relay, t.inst.token, mid, 150)
        shed = [a for a in answers if a[0] == 503]
    assert shed, "no delta was refused in 60 s of bursts"
    for status, headers, body in shed:
        assert headers.get("retry-after") == "1", headers
        error = json.loads(body)["error"]
        assert error == {"code": "temporarily_unavailable", "message": "the server is behind; retry", "retry_after_ms": 250}, body
        assert headers.get("x-request-id"), headers
    # Once the loop is idle again, a delta goes through: never a 503 again. The bursts may have
    # emptied the installation's delta bucket (burst 200), whose 429 names its wait.
    time.sleep(0.2)
    for _ in range(10):
        r = t.inst.delta(mid, "after")
        if r.status_code != 429:
            break
        time.sleep(r.json()["error"]["retry_after_ms"] / 1000.0 + 0.05)
    assert_ok(r)
    t.close()


def test_the_default_lag_threshold_sheds_nothing_at_a_gentle_pace(relayd):
    relay = relayd()
    t = Turn(relay, mint_token(relay.data, "alice"))
    mid = t.inst.open_message(t.session, t.interaction)
    statuses = [t.inst.delta(mid, "x").status_code for _ in range(20)]
    assert statuses == [200] * 20, statuses
    t.close()

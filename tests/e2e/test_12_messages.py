"""Client API: sending messages (durable, message_added, session.message for the bridge)
and the paged history of a session."""
import json
import re

from relaylib import assert_error, assert_ok, find_error, validation_errors
from streams import BridgeSocket
from test_10_me_installations import (
    WAIT, Watch, call, close_stream, create_session, drop_bridge, now_ms, open_stream,
)

MESSAGE_KEYS = {"message_id", "session_id", "interaction_id", "role", "text", "attachments", "reply_to",
                "usage", "finish_reason", "state", "created_at", "finalized_at"}
INT_RE = re.compile(r"^int_[0-9A-Za-z]+$")
MSG_RE = re.compile(r"^msg_[0-9A-Za-z]+$")
ISO_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def send(relay, token, sid, body):
    return call(relay, "POST", "/v1/me/sessions/%s/send" % sid, token, body)


def history(relay, token, sid, query=""):
    return call(relay, "GET", "/v1/me/sessions/%s/messages%s" % (sid, query), token)


def message_updates(relay, inst):
    rows = relay.query("SELECT type, session_id, interaction_id, payload FROM updates "
                       "WHERE installation_id = ? AND type = 'session.message' ORDER BY update_id", (inst,))
    return [(t, s, i, json.loads(p)) for t, s, i, p in rows]


def setup_session(relay, token, title="chat"):
    inst, bridge_token, _ = relay.pair(token)
    sid = create_session(relay, token, inst, title)["session_id"]
    return inst, bridge_token, sid


# -- send -----------------------------------------------------------------------------------

def test_send_message(relay, user_token):
    inst, _, sid = setup_session(relay, user_token, "Trip")
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        text = "Book a table for two\nat 8 pm \u2713 \U0001F37D\ufe0f \"quoted\""
        t0 = now_ms()
        r = send(relay, user_token, sid, {"text": text})
        result = assert_ok(r)
        assert set(result) == {"interaction_id", "message_id"}, result
        assert INT_RE.match(result["interaction_id"]), result
        assert MSG_RE.match(result["message_id"]), result
        # Durable before the answer: the row is there the moment the call returned.
        rows = relay.query("SELECT session_id, interaction_id, role, text, state FROM messages WHERE id = ?",
                           (result["message_id"],))
        assert rows == [(sid, result["interaction_id"], "user", text, "final")], rows

        event = watch.expect("message_added")[0]
        record = event.data
        assert set(record) == MESSAGE_KEYS, record
        assert record["message_id"] == result["message_id"]
        assert record["session_id"] == sid
        assert record["interaction_id"] == result["interaction_id"]
        assert record["role"] == "user"
        assert record["text"] == text
        assert record["attachments"] == []
        assert record["reply_to"] is None
        assert record["usage"] is None and record["finish_reason"] is None
        assert record["state"] == "final"
        assert isinstance(record["created_at"], int) and t0 - 5000 <= record["created_at"] <= now_ms() + 5000
        assert isinstance(record["finalized_at"], int) and record["finalized_at"] >= record["created_at"]

        page = assert_ok(history(relay, user_token, sid))
        assert set(page) == {"messages", "has_more", "next_cursor"}, page
        assert page["messages"] == [record]
        assert page["has_more"] is False and page["next_cursor"] is None

        # The bridge update is queued with the documented payload.
        ups = message_updates(relay, inst)
        assert len(ups) == 1, ups
        _, usid, uiid, payload = ups[0]
        assert (usid, uiid) == (sid, result["interaction_id"])
        assert set(payload) == {"session", "message"}, payload
        assert payload["session"] == {"id": sid, "title": "Trip", "encrypted": False, "agent": None, "project": None, "resume": None}
        msg = payload["message"]
        assert set(msg) == {"message_id", "text", "attachments", "reply_to", "thought_level"}, msg
        assert msg["message_id"] == result["message_id"]
        assert msg["text"] == text
        assert msg["attachments"] == [] and msg["reply_to"] is None
        assert msg["thought_level"] in ("default", None), msg  # not given
    finally:
        close_stream(stream)


def test_each_send_is_a_new_interaction(relay, user_token):
    _, _, sid = setup_session(relay, user_token)
    results = [assert_ok(send(relay, user_token, sid, {"text": "m%d" % i})) for i in range(3)]
    assert len({r["interaction_id"] for r in results}) == 3
    assert len({r["message_id"] for r in results}) == 3


def test_a_send_again_with_its_idempotency_key_is_answered_not_sent_twice(relay, user_token):
    """Ours: a client that lost the answer (an outbox sending again after an outage) sends the same key."""
    inst, _, sid = setup_session(relay, user_token)
    other = create_session(relay, user_token, inst, "other")["session_id"]
    body = {"text": "kept once", "idempotency_key": "outbox-1"}
    first = assert_ok(send(relay, user_token, sid, body))
    again = assert_ok(send(relay, user_token, sid, body))
    assert again == dict(first, idempotent=True), (first, again)
    assert_error(send(relay, user_token, sid, {"text": "another text", "idempotency_key": "outbox-1"}),
                 409, "idempotency_conflict")
    # The key is per session, and a send without one is always new.
    elsewhere = assert_ok(send(relay, user_token, other, body))
    assert "idempotent" not in elsewhere and elsewhere["message_id"] != first["message_id"], elsewhere
    assert_ok(send(relay, user_token, sid, {"text": "kept once"}))
    texts = [m["text"] for m in assert_ok(history(relay, user_token, sid))["messages"]]
    assert texts == ["kept once", "kept once"], texts
    assert len(message_updates(relay, inst)) == 3
    errors = validation_errors(send(relay, user_token, sid, {"text": "x", "idempotency_key": ""}))
    assert [e["path"] for e in errors] == ["idempotency_key"], errors


def test_send_reaches_a_connected_bridge(relay, user_token):
    inst, bridge_token, sid = setup_session(relay, user_token, "Live")
    sock = BridgeSocket(relay, bridge_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        started = sock.next_update(WAIT)
        assert started["type"] == "session.started"
        sock.ack(started["update_id"])
        result = assert_ok(send(relay, user_token, sid, {"text": "do it", "thought_level": "max"}))
        update = sock.next_update(WAIT)
        assert update["type"] == "session.message", update
        assert re.match(r"^\d+$", update["update_id"]) and int(update["update_id"]) > int(started["update_id"])
        assert update["session_id"] == sid
        assert update["interaction_id"] == result["interaction_id"]
        assert update["installation_id"] == inst
        assert ISO_RE.match(update["created_at"]), update["created_at"]
        assert update["payload"] == {
            "session": {"id": sid, "title": "Live", "encrypted": False, "agent": None, "project": None, "resume": None},
            "message": {"message_id": result["message_id"], "text": "do it", "attachments": [],
                        "reply_to": None, "thought_level": "max"},
        }
    finally:
        drop_bridge(sock)


def test_send_while_offline_is_queued_then_delivered(relay, user_token):
    inst, bridge_token, sid = setup_session(relay, user_token)
    result = assert_ok(send(relay, user_token, sid, {"text": "while you were away"}))
    assert len(message_updates(relay, inst)) == 1
    sock = BridgeSocket(relay, bridge_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        got = [sock.next_update(WAIT) for _ in range(2)]
        assert [u["type"] for u in got] == ["session.started", "session.message"], got
        assert got[1]["interaction_id"] == result["interaction_id"]
        assert got[1]["payload"]["message"]["text"] == "while you were away"
    finally:
        drop_bridge(sock)


def test_thought_levels(relay, user_token):
    inst, _, sid = setup_session(relay, user_token)
    for level in ("default", "extended", "max"):
        result = assert_ok(send(relay, user_token, sid, {"text": "t", "thought_level": level}))
        payload = message_updates(relay, inst)[-1][3]
        assert payload["message"]["message_id"] == result["message_id"]
        assert payload["message"]["thought_level"] == level
    before = relay.count("messages")
    for bad in ("high", "", "MAX"):
        errors = validation_errors(send(relay, user_token, sid, {"text": "t", "thought_level": bad}))
        assert find_error(errors, "thought_level")["code"] == "invalid_enum_value", (bad, errors)
    errors = validation_errors(send(relay, user_token, sid, {"text": "t", "thought_level": 2}))
    assert find_error(errors, "thought_level")["code"] in ("invalid_type", "invalid_enum_value"), errors
    assert relay.count("messages") == before


def test_send_validation(relay, user_token):
    inst, _, sid = setup_session(relay, user_token)
    other_sid = create_session(relay, user_token, inst)["session_id"]
    other_msg = assert_ok(send(relay, user_token, other_sid, {"text": "elsewhere"}))["message_id"]
    bob = relay.token("bob")
    _, _, bob_sid = setup_session(relay, bob)
    bob_msg = assert_ok(send(relay, bob, bob_sid, {"text": "bob's"}))["message_id"]
    messages_before = relay.count("messages")
    updates_before = relay.count("updates")
    interactions_before = relay.count("interactions")

    errors = validation_errors(send(relay, user_token, sid, {"text": ""}))
    assert find_error(errors, "text")["code"] == "too_small", errors
    errors = validation_errors(send(relay, user_token, sid, {"text": "", "attachments": []}))
    assert find_error(errors, "text")["code"] == "too_small", errors
    errors = validation_errors(send(relay, user_token, sid, {}))
    find_error(errors, "text")
    errors = validation_errors(send(relay, user_token, sid, {"text": 5}))
    assert find_error(errors, "text")["code"] == "invalid_type", errors
    errors = validation_errors(send(relay, user_token, sid, {"text": "x", "attachments": "no"}))
    assert find_error(errors, "attachments")["code"] == "invalid_type", errors
    for reply_to in ("msg_doesnotexist0000000", other_msg, bob_msg):
        errors = validation_errors(send(relay, user_token, sid, {"text": "x", "reply_to": reply_to}))
        find_error(errors, "reply_to")
    errors = validation_errors(send(relay, user_token, sid, {"text": "x", "reply_to": 12}))
    assert find_error(errors, "reply_to")["code"] == "invalid_type", errors

    # Nothing of the failures was stored or queued.
    assert relay.count("messages") == messages_before
    assert relay.count("updates") == updates_before
    assert relay.count("interactions") == interactions_before

    # A reply to a message of the same session works.
    first = assert_ok(send(relay, user_token, sid, {"text": "first"}))["message_id"]
    reply = assert_ok(send(relay, user_token, sid, {"text": "second", "reply_to": first}))
    newest = assert_ok(history(relay, user_token, sid, "?limit=1"))["messages"][0]
    assert newest["message_id"] == reply["message_id"] and newest["reply_to"] == first
    assert message_updates(relay, inst)[-1][3]["message"]["reply_to"] == first


def test_send_to_a_revoked_installation(relay, user_token):
    inst, _, sid = setup_session(relay, user_token)
    assert_ok(call(relay, "DELETE", "/v1/me/installations/%s" % inst, user_token))
    before = relay.count("messages")
    assert_error(send(relay, user_token, sid, {"text": "anyone there?"}), 403, "installation_revoked")
    assert relay.count("messages") == before
    assert message_updates(relay, inst) == []


def test_sent_message_survives_kill9(relayd, tmp_path):
    relay = relayd(data=tmp_path / "store")
    token = relay.token("alice")
    _, _, sid = setup_session(relay, token)
    result = assert_ok(send(relay, token, sid, {"text": "durable"}))
    relay.kill9()
    relay.start()
    page = assert_ok(history(relay, token, sid))
    assert [(m["message_id"], m["interaction_id"], m["text"]) for m in page["messages"]] == \
        [(result["message_id"], result["interaction_id"], "durable")]


# -- history --------------------------------------------------------------------------------

def test_history_pages_newest_first(relay, user_token):
    _, _, sid = setup_session(relay, user_token)
    sent = []
    for i in range(55):
        sent.append(assert_ok(send(relay, user_token, sid, {"text": "n%02d" % i}))["message_id"])
    newest_first = list(reversed(sent))

    page = assert_ok(history(relay, user_token, sid))  # default limit 50
    assert [m["message_id"] for m in page["messages"]] == newest_first[:50]
    assert page["has_more"] is True
    assert isinstance(page["next_cursor"], str) and page["next_cursor"]
    for m in page["messages"]:
        assert set(m) == MESSAGE_KEYS
    rest = assert_ok(history(relay, user_token, sid, "?before=%s" % page["next_cursor"]))
    assert [m["message_id"] for m in rest["messages"]] == newest_first[50:]
    assert rest["has_more"] is False and rest["next_cursor"] is None

    everything = assert_ok(history(relay, user_token, sid, "?limit=100"))
    assert [m["message_id"] for m in everything["messages"]] == newest_first
    assert [m["text"] for m in everything["messages"]] == ["n%02d" % i for i in reversed(range(55))]
    assert everything["has_more"] is False and everything["next_cursor"] is None

    # Paging with the cursor visits each message once, in order.
    seen, cursor = [], None
    for _ in range(10):
        q = "?limit=20" + ("&before=%s" % cursor if cursor else "")
        page = assert_ok(history(relay, user_token, sid, q))
        assert len(page["messages"]) <= 20
        seen += [m["message_id"] for m in page["messages"]]
        if not page["has_more"]:
            assert page["next_cursor"] is None
            break
        cursor = page["next_cursor"]
    assert seen == newest_first

    # before=<message_id> gives the ones older than that message.
    page = assert_ok(history(relay, user_token, sid, "?limit=3&before=%s" % sent[10]))
    assert [m["message_id"] for m in page["messages"]] == [sent[9], sent[8], sent[7]]
    assert page["has_more"] is True
    page = assert_ok(history(relay, user_token, sid, "?limit=1&before=%s" % sent[0]))
    assert page == {"messages": [], "has_more": False, "next_cursor": None}
    page = assert_ok(history(relay, user_token, sid, "?limit=1"))
    assert [m["message_id"] for m in page["messages"]] == [sent[-1]] and page["has_more"] is True


def test_history_of_an_empty_session(relay, user_token):
    _, _, sid = setup_session(relay, user_token)
    assert assert_ok(history(relay, user_token, sid)) == {"messages": [], "has_more": False, "next_cursor": None}


def test_history_query_validation(relay, user_token):
    inst, _, sid = setup_session(relay, user_token)
    assert_ok(send(relay, user_token, sid, {"text": "one"}))
    other_sid = create_session(relay, user_token, inst)["session_id"]
    other_msg = assert_ok(send(relay, user_token, other_sid, {"text": "two"}))["message_id"]

    # A number of any length is a number (too big or too small), not a malformed value (issue 34).
    for query, code in (("?limit=0", "too_small"), ("?limit=101", "too_big"), ("?limit=abc", "invalid_type"),
                        ("?limit=-1", "too_small"), ("?limit=" + "9" * 23, "too_big"),
                        ("?limit=" + "9" * 120, "too_big"), ("?limit=-" + "9" * 30, "too_small"),
                        ("?limit=1.5", "invalid_type"), ("?limit=", "invalid_type"), ("?limit=" + "9" * 90 + "x",
                                                                                   "invalid_type")):
        errors = validation_errors(history(relay, user_token, sid, query))
        assert find_error(errors, "limit")["code"] == code, (query, errors)
    assert len(assert_ok(history(relay, user_token, sid, "?limit=100"))["messages"]) == 1
    assert len(assert_ok(history(relay, user_token, sid, "?limit=1"))["messages"]) == 1
    for cursor in ("msg_doesnotexist0000000", other_msg, "garbage"):
        errors = validation_errors(history(relay, user_token, sid, "?before=%s" % cursor))
        find_error(errors, "before")
    assert_error(history(relay, user_token, "ses_doesnotexist00000000"), 404, "session_not_found")

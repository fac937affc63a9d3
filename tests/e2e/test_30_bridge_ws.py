"""Bridge WebSocket: upgrade, ready, update frames, ack, replay, replacement, revoke."""
import time
from datetime import datetime, timezone

import requests

from bridgelib import (
    ISO_MS_Z, WAIT, Installation, Socket, handshake_status, raw_upgrade, wait_for_health,
)
from relaylib import assert_error, assert_ok, fake_bridge_token, wait_until


def _created_at_ms(update):
    assert ISO_MS_Z.match(update["created_at"]), update["created_at"]
    dt = datetime.strptime(update["created_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return dt.timestamp() * 1000


def _refused(relay, token):
    sock = Socket(relay, token)
    assert not sock.connected
    assert handshake_status(sock) == 401, repr(sock.handshake_error)
    assert_error(raw_upgrade(relay, token), 401, "invalid_token")


def test_upgrade_refused_with_401_for_unknown_malformed_and_wrong_tokens(relay, user_token):
    inst = Installation(relay, user_token)
    _refused(relay, fake_bridge_token())
    _refused(relay, "not-a-token")
    # the real installation id with a secret it was never given
    _refused(relay, fake_bridge_token(inst=inst.id))
    # and the real token still works
    sock = inst.connect()
    sock.close()


def test_ready_then_session_started_and_session_message_updates(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    t0 = time.time() * 1000
    session = assert_ok(inst.client("POST", "/v1/me/sessions",
                                    {"installation_id": inst.id, "title": "Plans"}))["session_id"]
    started = sock.next_update()
    assert set(started) == {"update_id", "type", "session_id", "interaction_id", "installation_id",
                            "created_at", "payload"}, started
    assert started["update_id"] == "1"
    assert started["type"] == "session.started"
    assert started["session_id"] == session
    assert started["interaction_id"] is None
    assert started["installation_id"] == inst.id
    assert t0 - 2000 <= _created_at_ms(started) <= time.time() * 1000 + 2000, started
    assert started["payload"] == {"session": {"id": session, "title": "Plans", "encrypted": False, "agent": None, "project": None, "resume": None}}, started

    interaction, message_id = inst.send(session, "first")
    update = sock.next_update()
    assert update["update_id"] == "2"
    assert update["type"] == "session.message"
    assert update["session_id"] == session
    assert update["interaction_id"] == interaction
    assert update["installation_id"] == inst.id
    assert _created_at_ms(update) >= _created_at_ms(started)
    assert update["payload"] == {
        "session": {"id": session, "title": "Plans", "encrypted": False, "agent": None, "project": None, "resume": None},
        "message": {"message_id": message_id, "text": "first", "attachments": [], "reply_to": None,
                    "thought_level": "default"},
    }, update

    interaction2, message_id2 = inst.send(session, "second", reply_to=message_id, thought_level="max")
    assert interaction2 != interaction and message_id2 != message_id
    update = sock.next_update()
    assert update["update_id"] == "3"
    assert update["interaction_id"] == interaction2
    assert update["payload"]["message"] == {"message_id": message_id2, "text": "second", "attachments": [],
                                            "reply_to": message_id, "thought_level": "max"}, update
    sock.close()


def test_session_message_update_carries_hydrated_attachments(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    session = inst.create_session()
    sock.next_update()
    data = b"\x89PNG fake image bytes"
    r = relay.request("POST", "/v1/me/attachments?name=cat.png", data=data,
                      headers={"Authorization": "Bearer " + user_token, "Content-Type": "image/png"})
    uploaded = assert_ok(r)
    interaction, _ = inst.send(session, "look", attachments=[{"key": uploaded["key"]}])
    update = sock.next_update()
    assert update["interaction_id"] == interaction, update
    attachments = update["payload"]["message"]["attachments"]
    assert len(attachments) == 1, update
    att = attachments[0]
    assert att["key"] == uploaded["key"] and att["mime"] == "image/png", att
    assert att["size"] == len(data) and att["name"] == "cat.png", att
    url = att["url"] if att["url"].startswith("http") else relay.url(att["url"])
    got = requests.get(url, timeout=WAIT)
    assert got.status_code == 200 and got.content == data, got.status_code
    sock.close()


def test_cancel_reaches_the_bridge_as_session_cancelled(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    session = inst.create_session()
    sock.next_update()
    interaction, _ = inst.send(session)
    sock.next_update()
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/cancel" % session, {"interaction_id": interaction}))
    update = sock.next_update()
    assert update["type"] == "session.cancelled", update
    assert update["update_id"] == "3"
    assert update["session_id"] == session
    assert update["interaction_id"] == interaction
    assert update["payload"] == {"interaction_id": interaction}, update
    sock.close()


def _update_rows(relay, inst_id):
    return [row[0] for row in relay.query(
        "SELECT update_id FROM updates WHERE installation_id = ? ORDER BY update_id", (inst_id,))]


def test_ack_drops_updates_durably_and_reconnect_replays_only_unacked(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    session = inst.create_session()
    sent = [inst.send(session, "m%d" % i) for i in range(3)]
    got = sock.updates(4)
    assert [u["update_id"] for u in got] == ["1", "2", "3", "4"], got
    assert [u["payload"]["message"]["text"] for u in got[1:]] == ["m0", "m1", "m2"]
    assert _update_rows(relay, inst.id) == [1, 2, 3, 4]

    sock.ack("2")
    wait_until(lambda: _update_rows(relay, inst.id) == [3, 4], WAIT, what="acked rows to be dropped")
    sock.close()

    sock = inst.connect()
    replayed = sock.updates(2)
    assert [u["update_id"] for u in replayed] == ["3", "4"], replayed
    assert replayed == got[2:], (replayed, got[2:])
    # then live: the next update is the new one, nothing else in between
    interaction, _ = inst.send(session, "live")
    live = sock.next_update()
    assert live["update_id"] == "5" and live["interaction_id"] == interaction, live
    assert live["payload"]["message"]["text"] == "live"
    assert sent[2][0] == replayed[1]["interaction_id"]
    sock.close()


def test_fully_acked_installation_replays_nothing_and_ids_keep_counting(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    session = inst.create_session()
    inst.send(session, "a")
    inst.send(session, "b")
    got = sock.updates(3)
    sock.ack(got[-1]["update_id"])
    wait_until(lambda: _update_rows(relay, inst.id) == [], WAIT, what="all rows dropped")
    sock.close()

    sock = inst.connect()
    interaction, _ = inst.send(session, "c")
    update = sock.next_update()
    assert update["update_id"] == "4", update
    assert update["interaction_id"] == interaction
    sock.close()

    # the ack survives a restart too
    relay.restart()
    sock = inst.connect()
    interaction, _ = inst.send(session, "d")
    first = sock.next_update()
    # "4" was never acked, so it is replayed first, then the new one.
    assert first["update_id"] == "4", first
    update = sock.next_update()
    assert update["update_id"] == "5" and update["interaction_id"] == interaction, update
    sock.close()


def test_offline_installation_send_is_accepted_and_replayed_on_connect(relay, user_token):
    inst = Installation(relay, user_token)
    assert inst.health() == "offline"
    session = inst.create_session(title="offline chat")
    interaction, message_id = inst.send(session, "are you there?")
    sock = inst.connect()
    started, message = sock.updates(2)
    assert started["type"] == "session.started" and started["update_id"] == "1", started
    assert message["type"] == "session.message" and message["update_id"] == "2", message
    assert message["interaction_id"] == interaction
    assert message["payload"]["message"]["message_id"] == message_id
    assert message["payload"]["message"]["text"] == "are you there?"
    sock.close()


def test_unacked_updates_older_than_the_replay_window_are_not_replayed(relayd):
    relay = relayd("--replay-window", "2s", testclock=True)
    user_token = relay.token("alice")
    inst = Installation(relay, user_token)
    session = inst.create_session()
    inst.send(session, "old news")
    relay.advance_clock(2500)
    sock = inst.connect()
    # The two old updates are not replayed: the first update is the live one.
    interaction, _ = inst.send(session, "fresh")
    update = sock.next_update()
    assert update["type"] == "session.message", update
    assert update["interaction_id"] == interaction, update
    assert update["update_id"] == "3", update
    sock.close()


def test_second_socket_replaces_the_first(relay, user_token):
    inst = Installation(relay, user_token)
    stream = inst.stream()
    first = inst.connect()
    stream.wait_for("agent_health_changed", lambda d: d["status"] == "healthy", timeout=WAIT)
    second = inst.connect()
    assert first.wait_closed(WAIT) == 1000
    assert "replaced" in (first.close_reason or ""), first.close_reason

    session = inst.create_session()
    update = second.next_update()
    assert update["type"] == "session.started" and update["session_id"] == session, update
    assert inst.health() == "healthy"
    inst.barrier(stream, session)
    statuses = [e.data["status"] for e in stream.events
                if e.name == "agent_health_changed" and e.data["installation_id"] == inst.id]
    assert "offline" not in statuses, statuses

    second.close()
    stream.wait_for("agent_health_changed", lambda d: d["status"] == "offline", timeout=WAIT)
    assert inst.health() == "offline"
    stream.close()


def test_revoke_closes_4401_then_upgrade_401_then_rest_410(relay, user_token):
    inst = Installation(relay, user_token)
    session = inst.create_session()
    interaction, _ = inst.send(session)
    sock = inst.connect()
    sock.updates(2)

    assert_ok(inst.client("DELETE", "/v1/me/installations/%s" % inst.id))
    assert sock.wait_closed(WAIT) == 4401

    again = Socket(relay, inst.token)
    assert handshake_status(again) == 401, repr(again.handshake_error)
    assert_error(raw_upgrade(relay, inst.token), 401, "invalid_token")

    assert_error(inst.post("sendMessage", {"session_id": session, "interaction_id": interaction,
                                           "text": "late", "idempotency_key": "k"}),
                 410, "installation_revoked")
    assert_error(inst.post("setManifest", {"tools": []}), 410, "installation_revoked")
    # a token that never existed is 401, not 410
    assert_error(inst.post("setManifest", {"tools": []}, token=fake_bridge_token()), 401, "invalid_token")
    wait_for_health(inst, "offline")

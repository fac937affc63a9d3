"""Device capability requests through relay-bridge's jsonl protocol (ours,
issue 28; docs/bridge.md): the agent's capability_request line reaches the
user as device_capability_request, and the user's answer, refusal or the
request's expiry comes back to the agent as a capability line."""
import os
import re

from relaylib import assert_ok, bearer, mint_token
from streams import EventStream
from test_50_bridge_support import PYTHON, WAIT, paired

AGENT = "jsonl:%s %s" % (PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "capability_agent.py"))
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _requested(user, stream, session, text):
    interaction = user.send(session, text)
    event = stream.wait_for("device_capability_request", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
    assert event.data["reason"] == "because you asked: " + text, event.data
    return interaction, event.data


def _answer(user, request_id, body):
    return assert_ok(user.call("POST", "/v1/me/capabilities/%s" % request_id, body))


def test_location_and_photo_reach_the_agent_and_a_refusal_too(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(AGENT)
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        interaction, request = _requested(user, stream, session, "where am I?")
        assert request["capability"] == "location", request
        _answer(user, request["request_id"], {"location": {"latitude": 48.8584, "longitude": 2.2945,
                                                            "accuracy": 12}})
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == "%s answered: you are at 48.858, 2.295 (±12 m)" % request["request_id"], reply
        # what the agent wrote before its request stays above it; the answer's text is a new message below
        assert user.shown_texts(session, interaction) == ["asking your phone... ", reply["text"]]

        interaction, request = _requested(user, stream, session, "photo of the shelf")
        assert request["capability"] == "camera", request
        r = relay.request("POST", "/v1/me/attachments", data=PNG,
                          headers=dict(bearer(user_token), **{"Content-Type": "image/png"}))
        key = assert_ok(r)["key"]
        _answer(user, request["request_id"], {"attachment_key": key})
        reply = user.wait_reply(session, interaction)
        assert re.fullmatch(r"%s answered: a photo of %d bytes \(image/png\) at "
                            r"https?://[^ ]+/v1/files/%s" % (request["request_id"], len(PNG), key),
                            reply["text"]), reply

        interaction, request = _requested(user, stream, session, "where now?")
        _answer(user, request["request_id"], {"refused": True})
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == "%s refused" % request["request_id"], reply
    finally:
        stream.close()
        assert bridge.stop() == 0


def test_an_expired_request_reaches_the_agent(relayd, tmp_path):
    relay = relayd("--capability-ttl", "1s")
    token = mint_token(relay.data, "alice")
    bridge, user = paired(relay, token, tmp_path)
    bridge.start(AGENT)
    try:
        session = user.create_session()
        interaction = user.send(session, "where am I?")
        reply = user.wait_reply(session, interaction, timeout=WAIT)
        assert re.fullmatch(r"dcr_\w+ expired", reply["text"]), reply
        snapshot = assert_ok(user.call("GET", "/v1/me/snapshot"))
        assert snapshot["pending_capability_requests"] == [], snapshot
    finally:
        assert bridge.stop() == 0


def test_a_request_the_relay_refuses_is_failed_to_the_agent(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(AGENT)
    try:
        session = user.create_session()
        # "photo" with a reason past 500 characters: the relay answers 400 and the agent hears why.
        interaction = user.send(session, "photo " + "x" * 600)
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == "- failed: invalid_request", reply
    finally:
        assert bridge.stop() == 0

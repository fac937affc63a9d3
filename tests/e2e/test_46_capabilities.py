"""Device capability requests (ours, issue 28; docs/api.md "Device
capabilities"): the bridge's request, the device_capability_request event,
the snapshot's pending entry, the user's answer (a location, a photo, or a
refusal), the first answer winning, other users, bad inputs, and expiry;
each ends in a device_capability.result update for the bridge."""
import time
import uuid

import requests

from bridgelib import WAIT, Stream, Turn, assert_rate_headers
from relaylib import SLOW, assert_error, assert_ok, bearer

PENDING_FIELDS = {"request_id", "installation_id", "agent_id", "session_id", "interaction_id", "capability",
                  "reason", "expires_at", "ts"}
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


def request(t, capability="location", reason="to find cafés near you", **extra):
    body = {"session_id": t.session, "interaction_id": t.interaction, "capability": capability, "reason": reason,
            "idempotency_key": uuid.uuid4().hex}
    body.update(extra)
    return body, t.inst.post("requestDeviceCapability", body)


def answer(t, request_id, body, token=None):
    return t.inst.client("POST", "/v1/me/capabilities/%s" % request_id, body, token=token)


def upload(relay, token, data, mime):
    headers = dict(bearer(token))
    headers["Content-Type"] = mime
    return assert_ok(relay.request("POST", "/v1/me/attachments", data=data, headers=headers))["key"]


def test_location_request_snapshot_answer_and_update(relay, user_token):
    t = Turn(relay, user_token)
    before = time.time() * 1000
    body, r = request(t)
    result = assert_ok(r)
    assert_rate_headers(r, "approval", 10)
    assert set(result) == {"request_id", "capability", "status", "expires_at"}, result
    assert result["request_id"].startswith("dcr_") and result["status"] == "pending", result
    assert result["capability"] == "location", result
    # The default --capability-ttl is two minutes.
    assert before + 120000 - 5000 <= result["expires_at"] <= time.time() * 1000 + 120000 + 5000, result
    rid = result["request_id"]

    event = t.stream.wait_for("device_capability_request", timeout=WAIT)
    assert set(event.data) == PENDING_FIELDS, event
    expected = {"request_id": rid, "installation_id": t.inst.id, "agent_id": None, "session_id": t.session,
                "interaction_id": t.interaction, "capability": "location", "reason": body["reason"],
                "expires_at": result["expires_at"]}
    assert {k: event.data[k] for k in expected} == expected, event

    snap = t.inst.snapshot()
    assert snap["pending_approvals"] == [], snap
    assert snap["pending_capability_requests"] == [event.data], snap

    where = {"latitude": 52.52, "longitude": 13.405, "accuracy": 35.5}
    answered = assert_ok(answer(t, rid, {"location": where}))
    assert answered == {"request_id": rid, "session_id": t.session, "interaction_id": t.interaction,
                        "capability": "location", "status": "answered"}, answered
    resolved = t.stream.wait_for("device_capability_resolved", timeout=WAIT)
    assert resolved.data == answered, resolved
    update = t.sock.next_update()
    assert update["type"] == "device_capability.result", update
    assert update["session_id"] == t.session and update["interaction_id"] == t.interaction, update
    assert update["payload"] == {"request_id": rid, "capability": "location", "status": "answered",
                                 "location": where}, update
    assert t.inst.snapshot()["pending_capability_requests"] == []

    # The first answer wins: a later one (even a refusal) gets it back, and nobody is told twice.
    again = assert_ok(answer(t, rid, {"refused": True}))
    assert again == dict(answered, idempotent=True), again
    t.inst.barrier(t.stream, t.session)
    assert len(t.events(["device_capability_resolved"])) == 1
    marker = t.inst.update_barrier(t.sock, t.session)
    assert marker["type"] == "session.cancelled", marker

    # The bridge's retry with the same key and body is the same request, not a second one.
    replay = assert_ok(t.inst.post("requestDeviceCapability", body))
    assert replay["request_id"] == rid, replay
    t.close()


def test_camera_answered_with_an_uploaded_photo(relay, user_token):
    t = Turn(relay, user_token)
    result = assert_ok(request(t, "camera", "to read the label on the box")[1])
    rid = result["request_id"]
    t.stream.wait_for("device_capability_request", timeout=WAIT)

    # A camera request takes a photo, and only an image the user uploaded.
    assert_error(answer(t, rid, {"location": {"latitude": 1, "longitude": 2, "accuracy": 3}}), 400,
                 "invalid_request")
    text_key = upload(relay, user_token, b"not a photo", "text/plain")
    err = assert_error(answer(t, rid, {"attachment_key": text_key}), 400, "invalid_request")
    assert err["errors"][0]["path"] == "attachment_key", err
    mallory = relay.token("mallory")
    mallory_key = upload(relay, mallory, PNG, "image/png")
    err = assert_error(answer(t, rid, {"attachment_key": mallory_key}), 400, "invalid_request")
    assert err["errors"][0]["path"] == "attachment_key", err

    key = upload(relay, user_token, PNG, "image/png")
    answered = assert_ok(answer(t, rid, {"attachment_key": key}))
    assert answered["status"] == "answered" and answered["capability"] == "camera", answered
    update = t.sock.next_update()
    assert update["type"] == "device_capability.result", update
    payload = update["payload"]
    assert payload["status"] == "answered" and payload["capability"] == "camera", payload
    [photo] = payload["attachments"]
    assert photo["key"] == key and photo["mime"] == "image/png" and photo["size"] == len(PNG), photo
    # The bridge fetches it by its signed link, as a message's attachments.
    got = requests.get(photo["url"], timeout=10)
    assert got.status_code == 200 and got.content == PNG, got.status_code
    t.close()


def test_refusal(relay, user_token):
    t = Turn(relay, user_token)
    rid = assert_ok(request(t, "camera", "to see the plant")[1])["request_id"]
    refused = assert_ok(answer(t, rid, {"refused": True}))
    assert refused["status"] == "refused", refused
    assert t.stream.wait_for("device_capability_resolved", timeout=WAIT).data == refused
    update = t.sock.next_update()
    assert update["payload"] == {"request_id": rid, "capability": "camera", "status": "refused"}, update
    assert assert_ok(answer(t, rid, {"attachment_key": "att_whatever"}))["status"] == "refused"
    t.close()


def test_bad_inputs_are_400_with_errors(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    cases = [({"capability": "calendar"}, "capability"), ({"reason": ""}, "reason"),
             ({"reason": "x" * 501}, "reason"), ({"capability": None}, "capability")]
    for extra, path in cases:
        err = assert_error(request(t, **extra)[1], 400, "invalid_request")
        assert path in [e["path"] for e in err["errors"]], (extra, err)
    body = {"session_id": t.session, "interaction_id": t.interaction, "capability": "camera",
            "idempotency_key": uuid.uuid4().hex}
    err = assert_error(t.inst.post("requestDeviceCapability", body), 400, "invalid_request")
    assert [e["path"] for e in err["errors"]] == ["reason"], err

    rid = assert_ok(request(t)[1])["request_id"]
    answers = [({}, ""), ({"refused": True, "attachment_key": "att_x"}, ""), ({"refused": False}, ""),
               ({"location": {"latitude": 91, "longitude": 0, "accuracy": 1}}, "location.latitude"),
               ({"location": {"latitude": 0, "longitude": -181, "accuracy": 1}}, "location.longitude"),
               ({"location": {"latitude": 0, "longitude": 0, "accuracy": -1}}, "location.accuracy"),
               ({"location": {"latitude": "north", "longitude": 0, "accuracy": 1}}, "location.latitude"),
               ({"location": {"latitude": 0, "longitude": 0}}, "location.accuracy"),
               ({"attachment_key": 7}, "attachment_key"),
               ({"attachment_key": "att_x"}, "attachment_key")]
    for bad, path in answers:
        err = assert_error(answer(t, rid, bad), 400, "invalid_request")
        assert err["errors"] and err["errors"][0]["path"] == path, (bad, err)
    assert [p["request_id"] for p in t.inst.snapshot()["pending_capability_requests"]] == [rid]
    t.close()


def test_other_users_get_404_and_never_see_it(relay, user_token):
    t = Turn(relay, user_token)
    mallory = relay.token("mallory")
    theirs = Stream(relay, mallory)
    rid = assert_ok(request(t)[1])["request_id"]
    t.stream.wait_for("device_capability_request", timeout=WAIT)
    assert_error(answer(t, rid, {"refused": True}, token=mallory), 404, "capability_request_not_found")
    assert_error(answer(t, "dcr_doesnotexist", {"refused": True}), 404, "capability_request_not_found")
    assert assert_ok(t.inst.client("GET", "/v1/me/snapshot", token=mallory))["pending_capability_requests"] == []
    assert [p["request_id"] for p in t.inst.snapshot()["pending_capability_requests"]] == [rid]
    assert_ok(answer(t, rid, {"refused": True}))
    t.stream.wait_for("device_capability_resolved", timeout=WAIT)
    # mallory's stream, open all along, hears of none of it.
    time.sleep(0.5 * SLOW)
    assert not [e for e in theirs.events if e.name.startswith("device_capability")], theirs.events
    theirs.close()
    t.close()


def test_pending_request_expires(relayd):
    relay = relayd("--capability-ttl", "1s")
    t = Turn(relay, relay.token("alice"))
    result = assert_ok(request(t)[1])
    rid = result["request_id"]
    assert abs(result["expires_at"] - (time.time() * 1000 + 1000)) < 2000 * SLOW, result
    event = t.stream.wait_for("device_capability_resolved", timeout=WAIT)
    assert event.data == {"request_id": rid, "session_id": t.session, "interaction_id": t.interaction,
                          "capability": "location", "status": "expired"}, event
    update = t.sock.next_update()
    assert update["type"] == "device_capability.result", update
    assert update["payload"] == {"request_id": rid, "capability": "location", "status": "expired"}, update
    assert t.inst.snapshot()["pending_capability_requests"] == []
    assert_error(answer(t, rid, {"refused": True}), 410, "capability_request_expired")
    t.close()

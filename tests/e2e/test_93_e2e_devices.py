"""End-to-end encryption (issue 26): devices, the SAS confirmation, wrapped
session keys, bridge-made sessions, and their errors."""
import os
import time

from bridgelib import WAIT, Installation
from e2elib import E2E, encrypted_session, pubkey, seal, wrap
from relaylib import assert_error, assert_ok, find_error, validation_errors


def test_bridge_device_is_one_per_installation_and_a_new_key_says_so(relay, user_token):
    inst = Installation(relay, user_token)
    pub = pubkey()
    first = assert_ok(inst.post("devices", {"pubkey": pub, "label": "laptop"}))
    assert first["device_id"].startswith("dev_") and first["pubkey_changed"] is False, first
    again = assert_ok(inst.post("devices", {"pubkey": pub}))
    assert again["device_id"] == first["device_id"] and again["pubkey_changed"] is False, again
    changed = assert_ok(inst.post("devices", {"pubkey": pubkey()}))
    assert changed["device_id"] == first["device_id"] and changed["pubkey_changed"] is True, changed
    r = inst.post("devices", {"pubkey": "AB" * 32})
    assert find_error(validation_errors(r), "pubkey")["code"] == "invalid_string"


def test_client_device_pending_confirm_added_list_and_revoke(relay, user_token):
    e = E2E(relay, user_token, confirm=False)
    sock = e.inst.connect()
    stream = e.inst.stream()
    # Registered before the bridge connected: the pending notice waits in the queue.
    pending = sock.next_update(WAIT)
    assert pending["type"] == "device_pending", pending
    assert pending["payload"] == {"device_id": e.phone, "pubkey": e.phone_pub, "label": "phone",
                                  "platform": "web", "installation_id": None}, pending
    # The same key again is the same device.
    again = assert_ok(e.me("POST", "/v1/me/devices", {"pubkey": e.phone_pub, "label": "phone", "platform": "web"}))
    assert again["device_id"] == e.phone and again["created"] is False, again
    assert_error(e.me("POST", "/v1/me/devices", {"pubkey": pubkey(), "platform": "bridge"}), 400, "invalid_request")

    listed = assert_ok(e.me("GET", "/v1/me/devices", device=e.phone))["devices"]
    by_id = {d["device_id"]: d for d in listed}
    assert by_id[e.bridge_device]["installation_id"] == e.inst.id, listed
    assert by_id[e.bridge_device]["confirmed_by_me"] is False, listed
    assert by_id[e.phone]["platform"] == "web" and "confirmed_by_me" not in by_id[e.phone], listed

    # Only the device itself confirms, and only a bridge device.
    path = "/v1/me/devices/%s/confirm" % e.phone
    assert_error(e.me("POST", path, {"bridge_device_id": e.bridge_device}), 409, "device_mismatch")
    assert_error(e.me("POST", path, {"bridge_device_id": e.phone}, device=e.phone), 409, "device_mismatch")
    assert_error(e.me("POST", path, {"bridge_device_id": "dev_nope"}, device=e.phone), 404, "device_not_found")
    ok = assert_ok(e.me("POST", path, {"bridge_device_id": e.bridge_device}, device=e.phone))
    assert ok == {"device_id": e.phone, "bridge_device_id": e.bridge_device, "confirmed": True}, ok
    added = sock.next_update(WAIT)
    assert added["type"] == "device_added", added
    assert added["payload"]["device_id"] == e.phone and added["payload"]["pubkey"] == e.phone_pub, added
    listed = assert_ok(e.me("GET", "/v1/me/devices", device=e.phone))["devices"]
    assert [d["confirmed_by_me"] for d in listed if d["device_id"] == e.bridge_device] == [True], listed

    # Another user sees none of it.
    other = relay.token("someone-else")
    assert_error(e.me("DELETE", "/v1/me/devices/%s" % e.phone, token=other), 404, "device_not_found")
    assert assert_ok(e.me("GET", "/v1/me/devices", token=other))["devices"] == []

    revoked = assert_ok(e.me("DELETE", "/v1/me/devices/%s" % e.phone))
    assert revoked["device_id"] == e.phone, revoked
    update = sock.next_update(WAIT)
    assert update["type"] == "device_revoked" and update["payload"] == {"device_id": e.phone}, update
    stream.wait_for("device_revoked", lambda d: d.get("device_id") == e.phone, timeout=WAIT)
    assert e.phone not in [d["device_id"] for d in assert_ok(e.me("GET", "/v1/me/devices"))["devices"]]
    assert_error(e.me("DELETE", "/v1/me/devices/%s" % e.phone), 404, "device_not_found")
    sock.close()
    stream.close()


def test_recipients_keys_and_their_refusals(relay, user_token):
    e = E2E(relay, user_token, confirm=False)
    sock = e.inst.connect()
    assert sock.next_update(WAIT)["type"] == "device_pending"
    stream = e.inst.stream()
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))
    assert plain["session"]["encrypted"] is False, plain
    assert sock.next_update(WAIT)["type"] == "session.started"
    created = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id, "encrypted": True}))
    sid = created["session_id"]
    assert created["session"]["encrypted"] is True, created
    assert sock.next_update(WAIT)["type"] == "session.started"
    grant = {"recipients": [{"device_id": e.phone, "wrapped_session_key": wrap()}]}
    # Unconfirmed: no key for the phone.
    assert_error(e.me("POST", "/v1/me/sessions/%s/recipients" % sid, grant), 409, "device_unconfirmed")
    assert_error(e.me("POST", "/v1/me/sessions/%s/recipients" % plain["session_id"], grant), 409,
                 "session_not_encrypted")
    bad = {"recipients": [{"device_id": e.phone, "wrapped_session_key": "AQID"}]}
    r = e.me("POST", "/v1/me/sessions/%s/recipients" % sid, bad)
    assert find_error(validation_errors(r), "recipients.0.wrapped_session_key") is not None, r.text
    unknown = {"recipients": [{"device_id": "dev_unknown", "wrapped_session_key": wrap()}]}
    assert_error(e.me("POST", "/v1/me/sessions/%s/recipients" % sid, unknown), 404, "device_not_found")

    assert_ok(e.me("POST", "/v1/me/devices/%s/confirm" % e.phone, {"bridge_device_id": e.bridge_device},
                   device=e.phone))
    assert sock.next_update(WAIT)["type"] == "device_added"
    since = int(time.time() * 1000) - 1000
    phone_wrap, bridge_wrap = wrap(), wrap()
    ok = assert_ok(e.me("POST", "/v1/me/sessions/%s/recipients" % sid,
                        {"recipients": [{"device_id": e.phone, "wrapped_session_key": phone_wrap},
                                        {"device_id": e.bridge_device, "wrapped_session_key": bridge_wrap}],
                         "wrapped_by_device_id": e.phone}))
    assert ok["granted"] == [e.phone, e.bridge_device], ok
    update = sock.next_update(WAIT)
    assert update["type"] == "session_key_granted", update
    assert update["payload"] == {"session_id": sid, "device_id": e.bridge_device,
                                 "wrapped_session_key": bridge_wrap, "wrapped_by_device_id": e.phone}, update
    event = stream.wait_for("session_key_granted", timeout=WAIT)
    assert event.data["device_id"] == e.phone and event.data["wrapped_session_key"] == phone_wrap, event
    keys = assert_ok(e.me("GET", "/v1/me/devices/%s/keys?since=%d" % (e.phone, since)))["keys"]
    assert [(k["session_id"], k["wrapped_session_key"], k["wrapped_by_device_id"]) for k in keys] == \
        [(sid, phone_wrap, e.phone)], keys
    # grant_sig (ours, docs/api.md "Signed grants"): relayd cannot check it; the bridge gets it as given.
    signed = {"recipients": [{"device_id": e.bridge_device, "wrapped_session_key": bridge_wrap,
                              "grant_sig": "c2lnbmVkIGJ5IHRoZSBwaG9uZQ=="}], "wrapped_by_device_id": e.phone}
    assert_ok(e.me("POST", "/v1/me/sessions/%s/recipients" % sid, signed))
    update = sock.next_update(WAIT)
    assert update["type"] == "session_key_granted", update
    assert update["payload"]["grant_sig"] == "c2lnbmVkIGJ5IHRoZSBwaG9uZQ==", update
    too_long = {"recipients": [{"device_id": e.bridge_device, "wrapped_session_key": bridge_wrap,
                                "grant_sig": "x" * 129}]}
    r = e.me("POST", "/v1/me/sessions/%s/recipients" % sid, too_long)
    assert find_error(validation_errors(r), "recipients.0.grant_sig") is not None, r.text
    assert assert_ok(e.me("GET", "/v1/me/devices/%s/keys?since=%d" % (e.phone, 2 ** 50)))["keys"] == []
    assert_error(e.me("GET", "/v1/me/devices/%s/keys?since=x" % e.phone), 400, "invalid_request")
    # A number of any length is a number: later than every wrap (it gave a 400 without errors[] past 23 digits).
    assert assert_ok(e.me("GET", "/v1/me/devices/%s/keys?since=%s" % (e.phone, "9" * 40)))["keys"] == []
    r = e.me("GET", "/v1/me/devices/%s/keys?since=-5" % e.phone)
    assert r.status_code == 400 and r.json()["error"]["errors"][0]["path"] == "since", r.text

    # The bridge's side: a wrap for the phone, from the bridge's own route.
    again = wrap()
    assert_ok(e.inst.post("sessions/%s/recipients" % sid,
                          {"recipients": [{"device_id": e.phone, "wrapped_session_key": again}],
                           "wrapped_by_device_id": e.bridge_device}))
    event = stream.wait_for("session_key_granted", lambda d: d["wrapped_session_key"] == again, timeout=WAIT)
    assert event.data["wrapped_by_device_id"] == e.bridge_device, event
    keys = assert_ok(e.me("GET", "/v1/me/devices/%s/keys" % e.phone))["keys"]
    assert [k["wrapped_session_key"] for k in keys] == [again], keys

    # A revoked device keeps no wrap, and gets none.
    assert_ok(e.me("DELETE", "/v1/me/devices/%s" % e.phone))
    assert_error(e.me("GET", "/v1/me/devices/%s/keys" % e.phone), 404, "device_not_found")
    assert relay.count("session_recipients") == 1
    assert_error(e.inst.post("sessions/%s/recipients" % sid,
                             {"recipients": [{"device_id": e.phone, "wrapped_session_key": wrap()}]}),
                 404, "device_not_found")
    sock.close()
    stream.close()


def test_bridge_made_session_is_encrypted_and_reaches_the_clients(relay, user_token):
    e = E2E(relay, user_token)
    stream = e.inst.stream()
    title_ct = seal(os.urandom(32), "session_meta/new", "Nightly routine")
    r = assert_ok(e.inst.post("createSession", {"source": "cron", "title_ct": title_ct}))
    sid = r["session_id"]
    assert r["session"]["encrypted"] is True and r["session"]["title"] is None, r
    assert r["session"]["title_ct"] == title_ct, r
    event = stream.wait_for("session_created", lambda d: d["session_id"] == sid, timeout=WAIT)
    assert event.data["session"]["encrypted"] is True, event
    me = assert_ok(e.me("GET", "/v1/me"))
    session = [s for s in me["sessions"] if s["id"] == sid][0]
    assert session["encrypted"] is True and session["title_ct"] == title_ct, session
    r = e.inst.post("createSession", {"title_ct": "not base64"})
    assert find_error(validation_errors(r), "title_ct")["code"] == "invalid_string"
    stream.close()


def test_bridge_new_key_drops_confirmations_and_wraps(relay, user_token):
    e = E2E(relay, user_token)
    sid = e.encrypted_session()
    assert relay.count("session_recipients") == 2
    changed = assert_ok(e.inst.post("devices", {"pubkey": pubkey()}))
    assert changed["pubkey_changed"] is True
    assert relay.count("session_recipients") == 1
    assert_error(e.me("POST", "/v1/me/sessions/%s/recipients" % sid,
                      {"recipients": [{"device_id": e.phone, "wrapped_session_key": wrap()}]}),
                 409, "device_unconfirmed")


def test_session_model_and_sealed_title_changes(relay, user_token):
    e, sock, stream, sid = encrypted_session(relay, user_token)
    path = "/v1/me/sessions/%s" % sid
    r = assert_ok(e.me("PATCH", path, {"model": "gpt-5"}))
    assert r["session"]["model"] == "gpt-5", r
    update = sock.next_update(WAIT)
    assert update["type"] == "session.model.changed", update
    assert update["payload"] == {"session": {"id": sid, "model": "gpt-5"}, "model": "gpt-5"}, update
    assert_ok(e.me("PATCH", path, {"model": "gpt-5"}))  # the same: nothing told
    title_ct = seal(e.session_key, "session_meta/" + sid, "Taxes 2026")
    r = assert_ok(e.me("PATCH", path, {"title_ct": title_ct}))
    assert r["session"]["title_ct"] == title_ct and r["session"]["title"] is None, r
    renamed = stream.wait_for("session_renamed", timeout=WAIT)
    assert renamed.data["title_ct"] == title_ct, renamed
    r = e.me("PATCH", path, {"title": "Taxes 2026"})
    assert find_error(validation_errors(r), "title") is not None, r.text
    assert_error(e.me("PATCH", path, {}), 400, "invalid_request")
    # The model rides on each session.message; null clears it (and is told too).
    assert_ok(e.me("POST", path + "/send", {"text_ct": seal(e.session_key, "messages/" + sid, "hi")}))
    update = sock.next_update(WAIT)
    assert update["type"] == "session.message" and update["payload"]["session"]["model"] == "gpt-5", update
    assert update["payload"]["session"]["title_ct"] == title_ct, update
    assert_ok(e.me("PATCH", path, {"model": None}))
    update = sock.next_update(WAIT)
    assert update["type"] == "session.model.changed" and update["payload"]["model"] is None, update
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    r = e.me("PATCH", "/v1/me/sessions/%s" % plain, {"title_ct": title_ct})
    assert find_error(validation_errors(r), "title_ct") is not None, r.text
    sock.close()
    stream.close()


def test_a_revoked_installation_takes_its_bridge_device_along(relay, user_token):
    e = E2E(relay, user_token)
    e.encrypted_session()
    assert_ok(e.me("DELETE", "/v1/me/installations/%s" % e.inst.id))
    devices = assert_ok(e.me("GET", "/v1/me/devices"))["devices"]
    assert [d["device_id"] for d in devices] == [e.phone], devices
    assert relay.count("session_recipients") == 1

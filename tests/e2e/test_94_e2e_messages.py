"""End-to-end encryption (issue 26): an encrypted turn's messages and deltas
go through relayd as the ciphertext they came in, on every read, event and
update; plaintext where ciphertext belongs (and the reverse) is refused by
name; idempotency and the size cap work on the ciphertext; and no word of
the turn is anywhere in the store or the log."""
import glob
import hashlib
import json
import os
import uuid

import requests

from bridgelib import WAIT, key
from e2elib import encrypted_session, open_, open_bytes, seal, seal_bytes
from relaylib import assert_error, assert_ok, bearer, find_error, validation_errors


def test_an_encrypted_turn_carries_only_ciphertext(relay, user_token):
    e, sock, stream, sid = encrypted_session(relay, user_token)
    k, path = e.session_key, "messages/%s" % sid
    marker = "zebra" + uuid.uuid4().hex[:8]
    words = {w: marker + w for w in ("ask", "hello", "delta1", "delta2", "final")}

    # The phone sends its question as text_ct; the bridge gets it as the authors' bridge reads it.
    ask = seal(k, path, "please %s" % words["ask"])
    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": ask}))
    update = sock.next_update(WAIT)
    assert update["type"] == "session.message", update
    message = update["payload"]["message"]
    assert message["text_ct"] == ask and message["text"] is None, update
    assert message["id"] == sent["message_id"], update
    assert update["payload"]["session"]["encrypted"] is True, update
    assert words["ask"] in open_(k, path, message["text_ct"])
    added = stream.wait_for("message_added", lambda d: d["message_id"] == sent["message_id"], timeout=WAIT)
    assert added.data["text_ct"] == ask and added.data["text"] is None, added

    # The agent streams: start, two deltas, an end with the whole text.
    interaction = sent["interaction_id"]
    start = seal(k, path, "")
    mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": interaction, "text_ct": start,
                                                "idempotency_key": key()}))["message_id"]
    d1, d2 = seal(k, path, words["delta1"]), seal(k, path, words["delta2"])
    assert_ok(e.inst.post("sendMessageDelta", {"message_id": mid, "delta_ct": d1, "idempotency_key": key()}))
    assert_ok(e.inst.post("sendMessageDelta", {"message_id": mid, "delta_ct": d2, "idempotency_key": key()}))
    event = stream.wait_for("message_delta", lambda d: d.get("delta_ct") == d2, timeout=WAIT)
    assert event.data["delta"] is None, event
    history = assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % sid))["messages"]
    open_msg = [m for m in history if m["message_id"] == mid][0]
    assert open_msg["text_ct"] == start and open_msg["deltas_ct"] == [d1, d2] and open_msg["text"] is None, open_msg
    timeline = assert_ok(e.me("GET", "/v1/me/sessions/%s/timeline" % sid))["items"]
    in_timeline = [i["message"] for i in timeline if i["type"] == "message" and i["message"]["message_id"] == mid]
    assert in_timeline[0]["deltas_ct"] == [d1, d2], in_timeline

    final = seal(k, path, "%s %s %s" % (words["hello"], words["delta1"], words["final"]))
    assert_ok(e.inst.post("sendMessageEnd", {"message_id": mid, "text_ct": final, "idempotency_key": key()}))
    done = stream.wait_for("message_finalized", lambda d: d["message_id"] == mid, timeout=WAIT)
    assert done.data["text_ct"] == final and "deltas_ct" not in done.data, done
    history = assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % sid))["messages"]
    by_id = {m["message_id"]: m for m in history}
    assert by_id[mid]["text_ct"] == final and by_id[mid]["state"] == "final", by_id[mid]
    assert by_id[sent["message_id"]]["text_ct"] == ask, by_id
    assert words["final"] in open_(k, path, by_id[mid]["text_ct"])

    # A message ended without a final text keeps its envelopes, in order.
    mid2 = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": interaction,
                                                 "text_ct": start, "idempotency_key": key()}))["message_id"]
    assert_ok(e.inst.post("sendMessageDelta", {"message_id": mid2, "delta_ct": d1, "idempotency_key": key()}))
    assert_ok(e.inst.post("sendMessageEnd", {"message_id": mid2, "idempotency_key": key()}))
    kept = [m for m in assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % sid))["messages"]
            if m["message_id"] == mid2][0]
    assert kept["text_ct"] == start and kept["deltas_ct"] == [d1], kept

    # No word of the turn is in the store or the log.
    relay.stop_ok()
    for where, data in relay.store_dump().items():
        assert marker.encode() not in data, where
    assert marker not in relay.log_text()
    sock.close()
    stream.close()


def test_plaintext_and_ciphertext_each_in_their_place(relay, user_token):
    e, sock, stream, sid = encrypted_session(relay, user_token)
    k, path = e.session_key, "messages/%s" % sid
    ct = seal(k, path, "x")

    def refused(r, field):
        problem = find_error(validation_errors(r), field)
        assert problem is not None, r.text
        return problem

    # Encrypted session: plaintext refused by name, the ciphertext field required.
    assert "text_ct" in refused(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text": "hi"}), "text")["message"]
    assert refused(e.me("POST", "/v1/me/sessions/%s/send" % sid, {}), "text_ct")["message"] == "Required"
    r = e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": "not an envelope"})
    assert refused(r, "text_ct")["code"] == "invalid_string"
    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": ct}))
    i = sent["interaction_id"]
    refused(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "text": "hi",
                                        "idempotency_key": key()}), "text")
    refused(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "idempotency_key": key()}),
            "text_ct")
    mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "text_ct": ct,
                                                "idempotency_key": key()}))["message_id"]
    refused(e.inst.post("sendMessageDelta", {"message_id": mid, "delta": "x", "idempotency_key": key()}), "delta")
    refused(e.inst.post("sendMessageDelta", {"message_id": mid, "idempotency_key": key()}), "delta_ct")
    refused(e.inst.post("sendMessageEnd", {"message_id": mid, "text": "x", "idempotency_key": key()}), "text")
    assert e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id, "encrypted": True,
                                            "title": "plain"}).status_code == 400

    # Plain session: every *_ct refused by name.
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    refused(e.me("POST", "/v1/me/sessions/%s/send" % plain, {"text": "hi", "text_ct": ct}), "text_ct")
    pi = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % plain, {"text": "hi"}))["interaction_id"]
    refused(e.inst.post("sendMessage", {"session_id": plain, "interaction_id": pi, "text": "a", "text_ct": ct,
                                        "idempotency_key": key()}), "text_ct")
    pm = e.inst.open_message(plain, pi, "a")
    refused(e.inst.post("sendMessageDelta", {"message_id": pm, "delta": "b", "delta_ct": ct,
                                             "idempotency_key": key()}), "delta_ct")
    refused(e.inst.post("sendMessageEnd", {"message_id": pm, "text_ct": ct, "idempotency_key": key()}), "text_ct")
    refused(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id, "title_ct": ct}), "title_ct")
    sock.close()
    stream.close()


def test_idempotency_and_the_cap_work_on_ciphertext(relayd):
    relay = relayd("--max-message-bytes", "200")
    from relaylib import mint_token
    e, sock, stream, sid = encrypted_session(relay, mint_token(relay.data, "alice"))
    k, path = e.session_key, "messages/%s" % sid
    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": seal(k, path, "q")}))
    body = {"session_id": sid, "interaction_id": sent["interaction_id"], "text_ct": seal(k, path, "a"),
            "idempotency_key": key()}
    mid = assert_ok(e.inst.post("sendMessage", body))["message_id"]
    again = assert_ok(e.inst.post("sendMessage", body))
    assert again["message_id"] == mid and again["idempotent"] is True, again
    # The same key with another envelope of the same text is another body.
    assert_error(e.inst.post("sendMessage", dict(body, text_ct=seal(k, path, "a"))), 409, "idempotency_conflict")
    delta = {"message_id": mid, "delta_ct": seal(k, path, "b"), "idempotency_key": key()}
    assert_ok(e.inst.post("sendMessageDelta", delta))
    assert assert_ok(e.inst.post("sendMessageDelta", delta))["idempotent"] is True
    assert_error(e.inst.post("sendMessageDelta", dict(delta, delta_ct=seal(k, path, "b"))), 409,
                 "idempotency_conflict")
    # 200 bytes of envelopes: a few short deltas pass, then the cap (on ciphertext bytes) refuses one.
    statuses = [e.inst.post("sendMessageDelta", {"message_id": mid, "delta_ct": seal(k, path, "c"),
                                                 "idempotency_key": key()}).status_code for _ in range(6)]
    assert 413 in statuses and statuses[0] == 200, statuses
    assert_error(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": seal(k, path, "y" * 200)}), 413,
                 "message_too_large")
    sock.close()
    stream.close()


def _upload(e, data, mime="application/octet-stream", name=None):
    headers = dict(bearer(e.user))
    headers["Content-Type"] = mime
    path = "/v1/me/attachments" + ("?name=" + name if name else "")
    return assert_ok(e.relay.request("POST", path, data=data, headers=headers))["key"]


def test_an_encrypted_attachment_goes_through_sealed(relay, user_token):
    """A user's attachment in an encrypted session (api.md "Encrypted sessions", attachments):
    the bytes are sealed before upload (application/octet-stream, no name), the message's entry
    carries meta_ct {name, mime, size, sha256}; the bridge gets both as given and opens them."""
    e, sock, stream, sid = encrypted_session(relay, user_token)
    k, path = e.session_key, "attachments/%s" % sid
    marker = "okapi" + uuid.uuid4().hex[:8]
    plain = ("secret notes: " + marker + "\n").encode() * 50
    sealed = seal_bytes(k, path, plain)
    meta = seal(k, path, json.dumps({"name": marker + ".txt", "mime": "text/plain", "size": len(plain),
                                     "sha256": hashlib.sha256(plain).hexdigest()}))
    key_sealed = _upload(e, sealed)
    text = seal(k, "messages/" + sid, "see attached")

    # What would say something in clear is refused, by name. (An upload does not name its session:
    # what a client uploads in clear by mistake is kept as any upload is, hence other words here.)
    leaky = _upload(e, b"clear bytes", mime="text/plain")
    for item, why in (({"key": leaky, "meta_ct": meta}, "application/octet-stream"),
                      ({"key": _upload(e, sealed, name="clear-name"), "meta_ct": meta}, "no name"),
                      ({"key": key_sealed, "meta_ct": meta, "name": "x.txt"}, "not name"),
                      ({"key": key_sealed, "meta_ct": meta, "mime": "text/plain"}, "not mime"),
                      ({"key": key_sealed}, "meta_ct")):
        r = e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": text, "attachments": [item]})
        assert why in find_error(validation_errors(r), "attachments")["message"], (item, r.text)
    r = e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": text, "attachments": [{"key": key_sealed,
                                                                                         "meta_ct": "%%"}]})
    assert validation_errors(r), r.text

    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid,
                          {"text_ct": text, "attachments": [{"key": key_sealed, "meta_ct": meta}]}))
    update = sock.next_update(WAIT)
    assert update["type"] == "session.message", update
    item = update["payload"]["message"]["attachments"][0]
    assert item["meta_ct"] == meta and item["mime"] == "application/octet-stream" and item["name"] is None, item
    got = requests.get(item["url"], timeout=WAIT)
    assert got.status_code == 200 and got.content == sealed
    assert open_bytes(k, path, got.content) == plain
    history = assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % sid))["messages"]
    kept = [m for m in history if m["message_id"] == sent["message_id"]][0]["attachments"][0]
    assert kept["meta_ct"] == meta, kept

    # The bridge's own sendMessage obeys the same rule.
    r = e.inst.post("sendMessage", {"session_id": sid, "interaction_id": sent["interaction_id"], "text_ct": text,
                                    "attachments": [{"key": key_sealed}], "idempotency_key": key()})
    assert "meta_ct" in find_error(validation_errors(r), "attachments")["message"], r.text

    relay.stop_ok()
    for where, data in relay.store_dump().items():
        assert marker.encode() not in data, where
    assert marker not in relay.log_text()
    sealed_file = [p for p in glob.glob(os.path.join(str(relay.data), "attachments", "**"), recursive=True)
                   if os.path.isfile(p) and open(p, "rb").read() == sealed]
    assert sealed_file, "the sealed upload is stored as sent"
    sock.close()
    stream.close()


def test_meta_ct_refused_in_a_plain_session(relay, user_token):
    from bridgelib import Installation
    inst = Installation(relay, user_token)
    sid = inst.create_session()
    e = type("U", (), {"user": user_token, "relay": relay})()
    k = _upload(e, b"hello")
    r = relay.request("POST", "/v1/me/sessions/%s/send" % sid, headers=bearer(user_token),
                      json={"text": "hi", "attachments": [{"key": k, "meta_ct": seal(os.urandom(32), "x", "y")}]})
    assert "not encrypted" in find_error(validation_errors(r), "attachments")["message"], r.text
    assert_ok(relay.request("POST", "/v1/me/sessions/%s/send" % sid, headers=bearer(user_token),
                            json={"text": "hi", "attachments": [{"key": k}]}))

"""End-to-end encryption (issue 26): Web Push of an encrypted session carries
only the envelope (never cut: left out when it does not fit), and no word of
the turn, which the test's push service decrypts and searches."""
import json
import time
import uuid

from bridgelib import WAIT, key
from e2elib import E2E, seal
from relaylib import assert_ok, mint_token, wait_until
from test_18_push import PushService, push_relay


def test_pushes_of_an_encrypted_session_carry_only_ciphertext(relayd):
    relay = push_relay(relayd)
    token = mint_token(relay.data, "alice")
    service = PushService()
    service.vapid_key = assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"]
    marker = "quokka" + uuid.uuid4().hex[:8]
    try:
        phone = service.subscribe("phone")
        assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=token))
        e = E2E(relay, token)
        sock = e.inst.connect()
        sid = e.encrypted_session()
        k = e.session_key
        i = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid,
                           {"text_ct": seal(k, "messages/" + sid, "ask " + marker)}))["interaction_id"]
        details = seal(k, "approvals/" + sid, json.dumps({"title": "Delete " + marker, "command": "rm " + marker}))
        approval_id = "apr_" + uuid.uuid4().hex
        assert_ok(e.inst.post("requestApproval", {"session_id": sid, "interaction_id": i, "approval_id": approval_id,
                                                  "action": "exec", "severity": "high", "details_ct": details,
                                                  "idempotency_key": key()}))
        wait_until(lambda: phone.messages, WAIT, what="the approval push")
        note = phone.messages[0]
        assert note["kind"] == "approval" and note["title"] == "Approval needed" and note["body"] == "", note
        assert note["details_ct"] == details and note["encrypted"] is True, note
        # What the service worker needs to answer it from the notification (docs/web.md).
        assert note["installation_id"] == e.inst.id and note["approval_id"] == approval_id, note
        assert note["session_id"] == sid and note["severity"] == "high", note

        text_ct = seal(k, "messages/" + sid, "reply " + marker)
        mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "text_ct": text_ct,
                                                    "idempotency_key": key()}))["message_id"]
        assert_ok(e.inst.post("sendMessageEnd", {"message_id": mid, "idempotency_key": key()}))
        wait_until(lambda: len(phone.messages) == 2, WAIT, what="the reply push")
        reply = phone.messages[1]
        assert reply["kind"] == "reply" and reply["title"] == "New message" and reply["text_ct"] == text_ct, reply

        # An envelope too big for a push is left out, not cut.
        big = seal(k, "messages/" + sid, "y" * 4000)
        mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "text_ct": big,
                                                    "idempotency_key": key()}))["message_id"]
        assert_ok(e.inst.post("sendMessageEnd", {"message_id": mid, "idempotency_key": key()}))
        wait_until(lambda: len(phone.messages) == 3, WAIT, what="the third push")
        assert "text_ct" not in phone.messages[2] and phone.messages[2]["message_id"] == mid, phone.messages[2]
        for n in phone.messages:
            assert marker not in json.dumps(n), n
        sock.close()
        relay.stop_ok()
        for where, data in relay.store_dump().items():
            assert marker.encode() not in data, where
        assert marker not in relay.log_text()
    finally:
        service.close()

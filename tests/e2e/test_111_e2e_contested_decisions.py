"""Decisions on an encrypted session's approvals (issue 34, finding 5; docs/api.md "Approval
decisions: what is signed"), with the REAL relay-bridge and the terminal's real device key:

- a decision without decision_sig and device_id, or with a malformed one, or naming a device that
  is not a live client device of the user, is refused (400, errors[] naming the field) and leaves
  the approval pending: the terminal's signed decision then reaches the agent;
- a decision whose signature does not verify, sent first, is taken (relayd cannot tell) and the
  bridge drops it; the same one again is a retry (idempotent); the user's signed decision that
  comes after it is not answered with the first but forwarded to the bridge, which acts on it;
- a plain session keeps the spec's "first decision wins" (test_34 has the rest).
"""
import base64
import hashlib
import hmac
import json
import os

from bridgelib import Turn
from relaylib import assert_ok, bearer, find_error, paced, validation_errors
from test_100_e2e_relay_cli import confirm_bridge
from test_101_e2e_signed_grants import beforenm, hkdf
from test_60_relay_cli import WAIT, Cli
from test_63_relay_with_bridge import ECHO_AGENT, pair_real_bridge


def decision_sig(device_sec, bridge_pub, approval_id, session_id, decision, scope, device_id):
    """docs/api.md, "Approval decisions: what is signed"."""
    k = hkdf(beforenm(bridge_pub, device_sec), b"relay/v1/decision")
    parts = ["relay/v1/decision", approval_id, session_id, decision, scope or "", device_id]
    return base64.b64encode(hmac.new(k, b"\xff".join(p.encode() for p in parts), hashlib.sha256).digest()).decode()


def _asked(cli, ses, word):
    send = cli.start("send", ses, "run echo " + word)
    return send, send.wait_for("approval_requested")["data"]["approval_id"]


def _ran(send, word):
    assert send.finish() == 0, (send.lines, "".join(send.stderr))
    text = send.events("done")[0]["data"]["text"]
    assert text.startswith("allow-once: ran `echo %s`" % word), text


def test_an_unsigned_decision_is_refused_and_a_forged_first_one_does_not_block(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        devices = cli.json("devices")["devices"]
        bridge_pub = bytes.fromhex([d for d in devices if d["device_id"] == bridge_dev][0]["pubkey"])
        with open(cli.config / "client-device.json") as f:
            device_sec = bytes.fromhex(json.load(f)["secret_key"])
        ses = cli.json("new", "--installation", inst, "--title", "decisions", "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))

        def post(approval_id, body):
            # Paced: these calls share the user's buckets with the terminal's own.
            return paced(lambda: relay.request("POST", "/v1/me/approvals/%s" % approval_id, json=body,
                                               headers=bearer(token)))

        # Unsigned, malformed, or signed by no live client device of the user: 400, the approval still pending.
        send, aid = _asked(cli, ses, "okapi")
        good_shape = base64.b64encode(os.urandom(32)).decode()
        r = post(aid, {"decision": "approve"})
        errors = validation_errors(r)
        assert find_error(errors, "decision_sig")["message"] == "Required", r.text
        assert find_error(errors, "device_id")["message"] == "Required", r.text
        r = post(aid, {"decision": "approve", "device_id": me, "decision_sig": "c2lnbmF0dXJl"})
        assert find_error(validation_errors(r), "decision_sig")["code"] == "invalid_string", r.text
        for device in ("dev_00000000000000000000", bridge_dev):
            r = post(aid, {"decision": "approve", "device_id": device, "decision_sig": good_shape})
            assert find_error(validation_errors(r), "device_id")["code"] == "invalid_string", r.text
        pending = assert_ok(paced(lambda: relay.get("/v1/me/snapshot", headers=bearer(token))))["pending_approvals"]
        assert [p["approval_id"] for p in pending] == [aid], pending
        # The terminal signs: the agent runs it.
        decided = cli.json("approve", aid)
        assert decided["decision"] == "approve" and decided.get("idempotent") is not True, decided
        _ran(send, "okapi")

        # A signature that does not verify, first: relayd takes it (it cannot tell), the bridge drops it.
        send, aid = _asked(cli, ses, "tapir")
        forged = {"decision": "deny", "device_id": me, "decision_sig": good_shape}
        first = assert_ok(post(aid, forged))
        assert first["decision"] == "deny" and first.get("idempotent") is not True, first
        bridge.wait_log("approval %s in encrypted session %s: decision refused, the agent is not told: "
                        "decision_sig does not verify" % (aid, ses))
        # The same decision again is a retry: answered with the stored one, not sent again.
        again = assert_ok(post(aid, forged))
        assert again["idempotent"] is True and again["decision"] == "deny", again
        # The user's signed decision is not answered with the forged one: it goes to the bridge, which acts on it.
        real = {"decision": "approve", "device_id": me,
                "decision_sig": decision_sig(device_sec, bridge_pub, aid, ses, "approve", None, me)}
        answered = assert_ok(post(aid, real))
        assert answered["forwarded"] is True and answered["decision"] == "approve", answered
        assert answered["decision_sig"] == real["decision_sig"] and answered.get("idempotent") is not True, answered
        _ran(send, "tapir")
        assert bridge.log_text().count("approval %s in encrypted session" % aid) == 1, bridge.log_text()
        # One more, validly signed: forwarded too, and the bridge, which already answered the agent, ignores it.
        late = {"decision": "deny", "device_id": me,
                "decision_sig": decision_sig(device_sec, bridge_pub, aid, ses, "deny", None, me)}
        assert assert_ok(post(aid, late))["forwarded"] is True
        bridge.wait_log("approval %s in encrypted session %s: already decided; this decision changes nothing"
                        % (aid, ses))
        # The record keeps the first decision: relayd cannot know which one the bridge took.
        items = cli.json("history", ses)["items"]
        assert [i["approval"]["decision"] for i in items
                if i["type"] == "approval" and i["approval"]["approval_id"] == aid] == ["deny"], items
    finally:
        assert bridge.stop() == 0


def test_a_plain_session_keeps_first_decision_wins(relay, user_token):
    t = Turn(relay, user_token)
    sock = t.sock
    body, r = t.inst.request_approval(t.session, t.interaction)
    aid = assert_ok(r)["approval_id"]
    first = assert_ok(t.inst.decide(aid, "approve"))
    assert first.get("idempotent") is not True and "forwarded" not in first, first
    # Unsigned is fine here, and a later decision, signed or not, gets the first back and goes nowhere.
    second = assert_ok(t.inst.decide(aid, "deny", decision_sig=base64.b64encode(os.urandom(32)).decode(),
                                     device_id="dev_00000000000000000000"))
    assert second["idempotent"] is True and second["decision"] == "approve" and "forwarded" not in second, second
    resolved = [u for u in _updates(sock) if u["type"] == "approval.resolved"]
    assert [u["payload"]["decision"] for u in resolved] == ["approve"], resolved
    t.close()


def _updates(sock):
    """The updates the socket has been sent so far (a bounded wait for the last)."""
    out = []
    try:
        while True:
            out.append(sock.next_update(1))
    except AssertionError:
        pass
    return out

"""relay-bridge accepts a device only on evidence the relay cannot make (issue 34, finding 1).

Played from the attacker's side against the real relayd, the real relay-bridge
and the real `relay` (the user's own terminal, confirmed with a code from
`relay-bridge devices add`):

- the relay's operator, holding the data folder, mints the user's token
  (`relayd token`, as mint_token does) — the same as a stolen user token —
  registers a device key of its own and "confirms" the bridge through the
  API: without a proof, with a made-up one, with one from a code it guessed,
  and with the proof the user's real device would send (which the relay
  sees) replayed for its own key. The bridge shares no key with any of them
  (the keys route has nothing the attacker can unwrap) and refuses the
  decision the attacker signs with its own key: the agent is not told, and
  the user's own signed decision, sent after it, still reaches the agent;
- the owner's own word on the machine (`relay-bridge devices confirm`) lets a
  real terminal in while the bridge runs, with the key of the chat it began
  while it waited (held by the bridge until then), and `relay-bridge devices
  revoke` shuts a device out even though the relay never says device_revoked.
"""
import base64
import hashlib
import hmac
import json
import os

from relaylib import assert_ok, bearer, mint_token, paced
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import ECHO_AGENT, pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge
from test_101_e2e_signed_grants import beforenm, hkdf, keypair

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def enrol_proof(code, bridge_device_id, device_id, pubkey_hex):
    """docs/api.md, "A device the machine accepted"."""
    norm = "".join(c for c in code.upper() if c not in "- \t\r\n")
    k = hkdf(norm.encode(), b"relay/v1/enrol")
    msg = b"\xff".join(p.encode() for p in ["relay/v1/enrol", bridge_device_id, device_id, pubkey_hex])
    return base64.b64encode(hmac.new(k, msg, hashlib.sha256).digest()).decode()


def test_the_proof_matches_the_shared_vector():
    # The vector of tests/unit/e2e/test_e2e.c and of the web client's unit test.
    assert enrol_proof("ABCD-EFGH-JKLM-NPQR-ST23", "dev_BRIDGE0000000000000", "dev_PHONE00000000000000",
                       "11" * 32) == "TBQSpeUbhle8y0ZdY6Lc4i9JROohoQzGxa64frFmlMM="


def decision_sig(my_sec, their_pub, approval_id, session_id, decision, scope, device_id):
    """docs/api.md, "Approval decisions: what is signed"."""
    k = hkdf(beforenm(their_pub, my_sec), b"relay/v1/decision")
    parts = ["relay/v1/decision", approval_id, session_id, decision, scope or "", device_id]
    return base64.b64encode(hmac.new(k, b"\xff".join(p.encode() for p in parts), hashlib.sha256).digest()).decode()


def attacker_device(relay, token, bridge_dev, proof):
    """A device key the attacker holds, registered and "confirmed" through the API alone."""
    sec, pub = keypair()
    made = assert_ok(paced(lambda: relay.post("/v1/me/devices", {"pubkey": pub.hex(), "platform": "ios",
                                                                  "label": "iPhone"}, token=token)))
    dev = made["device_id"]
    body = {"bridge_device_id": bridge_dev}
    if proof is not None:
        body["enrol_proof"] = proof
    confirmed = assert_ok(paced(lambda: relay.request("POST", "/v1/me/devices/%s/confirm" % dev, json=body,
                                                      headers=dict(bearer(token), **{"X-Relay-Device": dev}))))
    assert confirmed["confirmed"] is True
    return dev, sec, pub


def wraps_for(relay, token, dev):
    return assert_ok(paced(lambda: relay.request("GET", "/v1/me/devices/%s/keys" % dev,
                                                 headers=dict(bearer(token), **{"X-Relay-Device": dev}))))["keys"]


def test_a_user_token_or_the_data_folder_alone_reads_nothing_and_decides_nothing(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))
        send = cli.start("send", ses, "hello, my bank pin is 4321")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))

        # The operator's token, minted from the data folder (relayd token alice): the same as a stolen one.
        stolen = mint_token(relay.data, "alice")
        my_pub = [d for d in cli.json("devices")["devices"] if d["device_id"] == me][0]["pubkey"]
        spare = bridge.enrol_code()  # a live code the attacker does not hold
        codes_before = json.loads(bridge.command("devices", "--json").stdout)["codes"]
        guessed = "-".join("".join(ALPHABET[b & 31] for b in os.urandom(4)) for _ in range(5))
        attempts = {
            "no proof": None,
            "made up": base64.b64encode(os.urandom(32)).decode(),
            "a guessed code": None,  # filled per device below: it binds the device's own id and key
            "the real device's proof, replayed": enrol_proof(spare, bridge_dev, me, my_pub),
        }
        attackers = []
        for what, proof in attempts.items():
            if what == "a guessed code":
                sec, pub = keypair()
                made = assert_ok(paced(lambda: relay.post("/v1/me/devices", {"pubkey": pub.hex(), "platform": "ios",
                                                                              "label": "iPhone"}, token=stolen)))
                dev = made["device_id"]
                proof = enrol_proof(guessed, bridge_dev, dev, pub.hex())
                assert_ok(paced(lambda: relay.request("POST", "/v1/me/devices/%s/confirm" % dev,
                                                      json={"bridge_device_id": bridge_dev, "enrol_proof": proof},
                                                      headers=dict(bearer(stolen), **{"X-Relay-Device": dev}))))
            else:
                dev, sec, pub = attacker_device(relay, stolen, bridge_dev, proof)
            # The bridge heard the relay's word and says it is not enough.
            bridge.wait_log("device_added %s (" % dev)
            attackers.append((what, dev, sec, pub))
        # The code the attacker replayed a proof of was not spent by it: the user can still use it.
        listed = bridge.command("devices", "--json")
        assert listed.returncode == 0, listed.stderr
        shown = json.loads(listed.stdout)
        assert shown["codes"] == codes_before, shown
        waiting = {d["device_id"]: d for d in shown["devices"] if d["state"] == "waiting"}
        for what, dev, _, _ in attackers:
            assert waiting[dev]["phone_confirmed"] is True, (what, waiting[dev])

        # A new session after the attack: the bridge wraps its key for the real device only.
        ses2 = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses2, me))
        send = cli.start("send", ses2, "second secret: 8765")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        for what, dev, _, _ in attackers:
            assert wraps_for(relay, stolen, dev) == [], what
            assert " %s (iPhone) accepted" % dev not in bridge.log_text(), what

        # The attacker's decision, signed with its own key as a confirmed device would: refused by the bridge.
        what, dev, sec, _ = attackers[0]
        bridge_pub = bytes.fromhex([d for d in cli.json("devices")["devices"]
                                    if d["device_id"] == bridge_dev][0]["pubkey"])
        send = cli.start("send", ses, "run echo exfiltrate")
        asked = send.wait_for("approval_requested")["data"]
        sig = decision_sig(sec, bridge_pub, asked["approval_id"], ses, "approve", None, dev)
        assert_ok(paced(lambda: relay.request("POST", "/v1/me/approvals/%s" % asked["approval_id"],
                                              json={"decision": "approve", "device_id": dev, "decision_sig": sig},
                                              headers=bearer(stolen))))
        bridge.wait_log("approval %s in encrypted session %s: decision refused, the agent is not told: signed by a "
                        "device this bridge has not accepted" % (asked["approval_id"], ses))
        assert send.events("task_started") == [], send.lines
        # The attacker got in first, yet the user's own signed decision still reaches the agent (finding 5).
        decided = cli.json("approve", asked["approval_id"], "--session", ses)
        assert decided.get("forwarded") is True, decided
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert "ran `echo exfiltrate`" in send.events("done")[0]["data"]["text"], send.lines
    finally:
        assert bridge.stop() == 0


def test_the_owner_confirms_and_revokes_on_the_machine(relay, tmp_path):
    cli = Cli(tmp_path / "one")
    cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        # The terminal confirms without a code and begins a chat at once: its key waits with the device.
        devices = cli.json("devices")
        me = devices["this_device_id"]
        bridge_dev = [d for d in devices["devices"] if d["platform"] == "bridge"][0]["device_id"]
        bridge.wait_log("device %s (" % me)
        cli.json("devices", "confirm", bridge_dev, "--yes")
        bridge.wait_log("device_added %s (" % me)
        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session_key_granted for %s by %s: the device waits for this machine's word" % (ses, me))
        assert "session %s: key received" % ses not in bridge.log_text()
        # The owner's word, said while the bridge runs: it takes it at once (no restart), with the held key.
        assert bridge.confirm_device(me) == {"device_id": me, "state": "confirmed"}
        bridge.wait_log("session %s: key received from device %s" % (ses, me))
        bridge.wait_log("device %s confirmed on this machine: shared the keys" % me)
        send = cli.start("send", ses, "hello after the owner's word")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert send.events("done")[0]["data"]["text"] == "hello after the owner's word", send.lines
        # A confirmation typed for a device the bridge never heard of changes nothing.
        proc = bridge.command("devices", "confirm", "dev_NOSUCHDEVICE000000", "--yes")
        assert proc.returncode == 1 and "no device dev_NOSUCHDEVICE000000" in proc.stderr, (proc.stdout,
                                                                                           proc.stderr)
        # Off a terminal and without --yes the owner is asked to compare first.
        two = Cli(tmp_path / "two")
        two.login(relay)
        other = two.json("devices")["this_device_id"]
        bridge.wait_log("device %s (" % other)
        proc = bridge.command("devices", "confirm", other)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        # The owner revokes the first terminal on the machine: the relay never says device_revoked, yet its
        # signed decision no longer counts.
        proc = bridge.command("devices", "revoke", me, "--json")
        assert proc.returncode == 0, proc.stderr
        bridge.wait_log("device %s revoked on this machine" % me)
        send = cli.start("send", ses, "run echo after-revoke")
        asked = send.wait_for("approval_requested")["data"]
        cli.json("approve", asked["approval_id"])
        bridge.wait_log("approval %s in encrypted session %s: decision refused" % (asked["approval_id"], ses))
        send.proc.terminate()
        send.proc.wait(30)
    finally:
        assert bridge.stop() == 0

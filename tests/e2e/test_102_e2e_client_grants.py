"""A session key slipped to a client device by the relay is refused (issue 26, "Signed grants" in docs/api.md).

The other direction of test_101: here the test plays the relay against the
terminal client `relay`. It wraps a key of its own for the terminal and posts
it straight to the API for a session the terminal holds, in the bridge's name
without `grant_sig`, and with a `grant_sig` made under a key of its own. The
terminal refuses both (a note on stderr), keeps its key store as it was, and
its next send still opens with the real key and not with the injected one.
The grants relay-bridge makes for a client device are signed: a second
terminal that confirms the bridge gets the session's key from it, and when
the first terminal rotates the key (a revoke), the bridge's signed grant of
the new key becomes the key the second one seals with.
"""
import json
import os

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from e2elib import open_
from relaylib import assert_ok, bearer, paced
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import ECHO_AGENT, pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge
from test_101_e2e_signed_grants import beforenm, grant_sig, keypair, sealed_box


def device_of(cli):
    with open(cli.config / "client-device.json") as f:
        sec = bytes.fromhex(json.load(f)["secret_key"])
    pub = X25519PrivateKey.from_private_bytes(sec).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return sec, pub


def keys_of(cli, ses):
    with open(cli.config / "client-session-keys.json") as f:
        return [bytes.fromhex(k) for k in json.load(f)["sessions"].get(ses, [])]


def user_cts(relay, token, ses):
    # Paced: the test's reads share the user's bucket with the terminals it drives.
    raw = paced(lambda: relay.request("GET", "/v1/me/sessions/%s/messages" % ses, headers=bearer(token))).json()
    return {m["text_ct"] for m in raw["result"]["messages"] if m.get("role") == "user" and m.get("text_ct")}


def send_and_open(cli, relay, token, ses, text):
    """Sends text from cli; answers the text_ct the relay holds for it, and what cli wrote on stderr."""
    before = user_cts(relay, token, ses)
    send = cli.start("send", ses, text)
    assert send.finish() == 0, (send.lines, "".join(send.stderr))
    new = user_cts(relay, token, ses) - before
    assert len(new) == 1, new
    return new.pop(), "".join(send.stderr)


def does_not_open(key, path, ct):
    try:
        open_(key, path, ct)
    except Exception:  # noqa: BLE001 - cryptography's InvalidTag: the point is that it does not open
        return True
    return False


def test_the_client_takes_only_signed_grants_as_its_sealing_key(relay, tmp_path):
    cli = Cli(tmp_path / "one")
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        ses = cli.json("new", "--installation", inst, "--title", "client grants", "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))
        real = keys_of(cli, ses)
        assert len(real) == 1
        my_sec, my_pub = device_of(cli)
        path = "messages/" + ses

        # The terminal's own wrap is signed by itself: fetched back, it verifies (docs/api.md, "Signed grants").
        own = assert_ok(paced(lambda: relay.request("GET", "/v1/me/devices/%s/keys" % me,
                                                    headers=dict(bearer(token), **{"X-Relay-Device": me}))))
        own = [k for k in own["keys"] if k["session_id"] == ses]
        assert len(own) == 1 and own[0]["wrapped_by_device_id"] == me, own
        assert own[0]["grant_sig"] == grant_sig(my_sec, my_pub, ses, own[0]["wrapped_session_key"], me)

        # The relay's move: keys of its own for the terminal, in the bridge's name, unsigned and forged.
        relay_sec, _ = keypair()
        injected = []
        for signed in (False, True):
            key = os.urandom(32)
            injected.append(key)
            wrapped = sealed_box(my_pub, key)
            recipient = {"device_id": me, "wrapped_session_key": wrapped}
            if signed:
                recipient["grant_sig"] = grant_sig(relay_sec, my_pub, ses, wrapped, bridge_dev)
            assert_ok(paced(lambda: relay.post("/v1/me/sessions/%s/recipients" % ses,
                                               {"recipients": [recipient], "wrapped_by_device_id": bridge_dev},
                                               token=token)))
            ct, stderr = send_and_open(cli, relay, token, ses, "after injection %d: okapi" % len(injected))
            assert "was refused" in stderr, stderr
            assert keys_of(cli, ses) == real, "the key store is unchanged"
            assert open_(real[0], path, ct) == "after injection %d: okapi" % len(injected)
            assert all(does_not_open(k, path, ct) for k in injected)
        # A check that the wraps were good ones: the same construction under the bridge's real key verifies.
        assert beforenm(my_pub, relay_sec) != beforenm(my_pub, my_sec)

        # A second terminal confirms the bridge: the bridge's signed grant gives it the session's key.
        two = Cli(tmp_path / "two")
        two.login(relay)
        other, _, _ = confirm_bridge(two, bridge)
        two_sec, two_pub = device_of(two)
        ct, stderr = send_and_open(two, relay, token, ses, "from the second terminal: quokka")
        assert keys_of(two, ses) == real, stderr
        assert open_(real[0], path, ct) == "from the second terminal: quokka"
        wraps = assert_ok(paced(lambda: relay.request("GET", "/v1/me/devices/%s/keys" % other,
                                                      headers=dict(bearer(token), **{"X-Relay-Device": other}))))["keys"]
        bridge_pub = bytes.fromhex([d for d in cli.json("devices")["devices"] if d["device_id"] == bridge_dev][0]["pubkey"])
        grant = [k for k in wraps if k["session_id"] == ses][0]
        assert grant["wrapped_by_device_id"] == bridge_dev
        assert grant["grant_sig"] == grant_sig(two_sec, bridge_pub, ses, grant["wrapped_session_key"], bridge_dev)

        # A rotation: the first terminal revokes a lost phone; the bridge shares the new key, signed, with the
        # second terminal, which now seals with it.
        _, lost_pub = keypair()
        lost = assert_ok(paced(lambda: relay.post("/v1/me/devices", {"pubkey": lost_pub.hex(), "label": "lost",
                                                                      "platform": "ios"}, token=token)))
        lost = lost.get("device_id") or lost["device"]["device_id"]
        assert_ok(paced(lambda: relay.request("POST", "/v1/me/devices/%s/confirm" % lost,
                                              json={"bridge_device_id": bridge_dev},
                                              headers=dict(bearer(token), **{"X-Relay-Device": lost}))))
        assert cli.json("devices", "revoke", lost)["rotated_sessions"] == 1
        bridge.wait_log("session %s: key received from device %s" % (ses, me), count=2)
        rotated = keys_of(cli, ses)[0]
        assert rotated != real[0]
        ct, stderr = send_and_open(two, relay, token, ses, "after the rotation: wombat")
        assert keys_of(two, ses)[0] == rotated, stderr
        assert open_(rotated, path, ct) == "after the rotation: wombat"
    finally:
        assert bridge.stop() == 0

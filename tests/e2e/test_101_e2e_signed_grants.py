"""A session key slipped to the bridge by the relay is refused (issue 26, "Signed grants" in docs/api.md).

A wrap is a sealed box: anyone with the bridge's public key can make one, and
`wrapped_by_device_id` is only a claim. Here the test plays the relay: it
wraps a key of its own for the real relay-bridge and posts it straight to the
API under the name of the terminal the bridge accepted, without `grant_sig`
and with one it made with a key of its own. relayd carries both (it cannot
tell); the bridge refuses both with a log line saying why, keeps sealing
under the terminal's key, and does not open a message sealed under the
injected key. The terminal's own signed grant is taken, and so is the same
kind of wrap made here once it is signed with the terminal's device key (so
the refusals were the signature's, not a malformed wrap).

The sealed box is built here from python3-cryptography (X25519, HKDF,
AES-GCM) and a few lines of HSalsa20 (crypto_box_beforenm's second half),
which Debian's python3-cryptography does not have.
"""
import base64
import hashlib
import hmac
import json
import os
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from e2elib import open_, seal
from relaylib import assert_ok, bearer
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import ECHO_AGENT, pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge

MASK = 0xFFFFFFFF


def _rotl(v, c):
    v &= MASK
    return ((v << c) & MASK) | (v >> (32 - c))


def hsalsa20(key, nonce):
    """HSalsa20 (the core of NaCl's crypto_box_beforenm), 32-byte key, 16-byte nonce."""
    c = struct.unpack("<4I", b"expand 32-byte k")
    k = struct.unpack("<8I", key)
    n = struct.unpack("<4I", nonce)
    x = [c[0], k[0], k[1], k[2], k[3], c[1], n[0], n[1], n[2], n[3], c[2], k[4], k[5], k[6], k[7], c[3]]

    def quarter(a, b, cc, d):
        x[b] ^= _rotl(x[a] + x[d], 7)
        x[cc] ^= _rotl(x[b] + x[a], 9)
        x[d] ^= _rotl(x[cc] + x[b], 13)
        x[a] ^= _rotl(x[d] + x[cc], 18)

    for _ in range(10):
        quarter(0, 4, 8, 12)
        quarter(5, 9, 13, 1)
        quarter(10, 14, 2, 6)
        quarter(15, 3, 7, 11)
        quarter(0, 1, 2, 3)
        quarter(5, 6, 7, 4)
        quarter(10, 11, 8, 9)
        quarter(15, 12, 13, 14)
    return struct.pack("<8I", x[0], x[5], x[10], x[15], x[6], x[7], x[8], x[9])


def beforenm(their_pub, my_sec):
    shared = X25519PrivateKey.from_private_bytes(my_sec).exchange(X25519PublicKey.from_public_bytes(their_pub))
    return hsalsa20(shared, bytes(16))


def keypair():
    sec = X25519PrivateKey.generate()
    return (sec.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()),
            sec.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def hkdf(ikm, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(ikm)


def sealed_box(recipient_pub, plain):
    """The authors' wrap: 0x02, an ephemeral public key, an envelope under HKDF(beforenm, sealed-box)."""
    eph_sec, eph_pub = keypair()
    nonce = os.urandom(12)
    ct = AESGCM(hkdf(beforenm(recipient_pub, eph_sec), b"sophon/v1/sealed-box")).encrypt(nonce, plain, None)
    return base64.b64encode(b"\x02" + eph_pub + b"\x01" + nonce + ct).decode()


def grant_sig(my_sec, their_pub, session_id, wrapped, device_id):
    """docs/api.md, "Signed grants"."""
    k = hkdf(beforenm(their_pub, my_sec), b"relay/v1/grant")
    msg = b"\xff".join(p.encode() for p in ["relay/v1/grant", session_id, wrapped, device_id])
    return base64.b64encode(hmac.new(k, msg, hashlib.sha256).digest()).decode()


def test_the_construction_matches_the_shared_vector():
    # The vector tests/unit/e2e and tests/browser/unit/crypto.test.js pin (fixed secrets 0x22.., 0x11..).
    bridge_pub = bytes.fromhex("7b4e909bbe7ffe44c465a220037d608ee35897d31ef972f07f74892cb0f73f13")
    assert grant_sig(b"\x22" * 32, bridge_pub, "ses_1", "AhEiM0RVZneImaq7zN3u/w==", "dev_1") == \
        "oLfyUC6L3kYta5DwGjLhnRIh8lnAUuyDQN6vcP9AQNk="


def test_a_grant_the_device_did_not_sign_is_refused_by_the_bridge(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        bridge_pub = bytes.fromhex(
            [d for d in cli.json("devices")["devices"] if d["device_id"] == bridge_dev][0]["pubkey"])

        # The terminal's grant is signed: the bridge takes it.
        ses = cli.json("new", "--installation", inst, "--title", "signed grants", "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))
        with open(cli.config / "client-session-keys.json") as f:
            key = bytes.fromhex(json.load(f)["sessions"][ses][0])

        # The relay's move: a key of its own, sealed to the bridge, in the terminal's name.
        injected = os.urandom(32)
        wrapped = sealed_box(bridge_pub, injected)
        relay_sec, _ = keypair()
        attempts = [(None, "no grant_sig"),
                    (grant_sig(relay_sec, bridge_pub, ses, wrapped, me), "grant_sig does not verify")]
        for sig, why in attempts:
            recipient = {"device_id": bridge_dev, "wrapped_session_key": wrapped}
            if sig is not None:
                recipient["grant_sig"] = sig
            granted = assert_ok(relay.post("/v1/me/sessions/%s/recipients" % ses,
                                           {"recipients": [recipient], "wrapped_by_device_id": me}, token=token))
            assert granted["granted"] == [bridge_dev], granted
            bridge.wait_log("session_key_granted for %s by %s refused: %s (the key is not taken)" % (ses, me, why))
        assert bridge.log_text().count("session %s: key received from device" % ses) == 1

        # The bridge still seals under the terminal's key: the reply reads in clear, and nothing opens with the
        # injected key.
        send = cli.start("send", ses, "after the injection: okapi")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert send.events("done")[0]["data"]["text"] == "after the injection: okapi"
        raw = relay.request("GET", "/v1/me/sessions/%s/messages" % ses, headers=bearer(token)).json()
        sealed = [m["text_ct"] for m in raw["result"]["messages"] if m.get("text_ct")]
        assert len(sealed) >= 2, raw
        path = "messages/" + ses
        assert [open_(key, path, ct) for ct in sealed][-2:] == ["after the injection: okapi"] * 2
        for ct in sealed:
            try:
                open_(injected, path, ct)
            except Exception:  # noqa: BLE001 - cryptography's InvalidTag: the point is that it does not open
                continue
            raise AssertionError("a reply opened with the injected key")

        # A message the relay seals under its key is not opened: the agent never sees it.
        before = len(raw["result"]["messages"])
        assert_ok(relay.post("/v1/me/sessions/%s/send" % ses,
                             {"text_ct": seal(injected, path, "injected narwhal")}, token=token))
        bridge.wait_log("the message's text_ct does not open with this session's keys")
        # The bridge takes a session's messages in order: once the next one is answered, anything the injected
        # one caused would be in the timeline before that answer.
        send = cli.start("send", ses, "after the narwhal: ibis")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert send.events("done")[0]["data"]["text"] == "after the narwhal: ibis"
        raw = relay.request("GET", "/v1/me/sessions/%s/messages" % ses, headers=bearer(token)).json()
        after = list(reversed(raw["result"]["messages"]))[before:]  # the page is newest first
        assert [m["role"] for m in after] == ["user", "user", "agent"], raw  # the injected message has no reply
        assert [open_(key, path, m["text_ct"]) for m in after[1:]] == ["after the narwhal: ibis"] * 2, after
        assert "narwhal" not in bridge.log_text().replace("after the narwhal: ibis", "")

        # The same kind of wrap, signed with the terminal's device key, is taken: the refusals were the signature's.
        with open(cli.config / "client-device.json") as f:
            device_sec = bytes.fromhex(json.load(f)["secret_key"])
        recipient = {"device_id": bridge_dev, "wrapped_session_key": wrapped,
                     "grant_sig": grant_sig(device_sec, bridge_pub, ses, wrapped, me)}
        assert_ok(relay.post("/v1/me/sessions/%s/recipients" % ses,
                             {"recipients": [recipient], "wrapped_by_device_id": me}, token=token))
        bridge.wait_log("session %s: key received from device %s" % (ses, me), count=2)
    finally:
        assert bridge.stop() == 0

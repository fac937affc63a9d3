"""Helpers of the end-to-end encryption tests (test_93_* to test_96_*).

The client side of the authors' wire, as far as the relay tests need it:
envelopes (AES-256-GCM under an HKDF-SHA256 blob key), wraps with the right
shape (0x02, a 32-byte key, an envelope) and device public keys.  relayd
never opens any of them; the tests open them to show what went through is
what came back.  Only python3-cryptography (Debian) is used.
"""
import base64
import json
import os
import uuid

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bridgelib import WAIT, Installation, key
from relaylib import assert_ok, bearer


def blob_key(session_key, path):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"sophon/v1/blob/" + path.encode()).derive(session_key)


def seal(session_key, path, text):
    """The authors' envelope of text, base64."""
    if text == "":
        return base64.b64encode(b"\x00").decode()
    nonce = os.urandom(12)
    ct = AESGCM(blob_key(session_key, path)).encrypt(nonce, text.encode(), None)
    return base64.b64encode(b"\x01" + nonce + ct).decode()


def open_(session_key, path, envelope):
    raw = base64.b64decode(envelope)
    if raw == b"\x00":
        return ""
    assert raw[0] == 1, raw[:1]
    return AESGCM(blob_key(session_key, path)).decrypt(raw[1:13], raw[13:], None).decode()


def seal_bytes(session_key, path, data):
    """The raw envelope of data (0x01, nonce, ciphertext, tag): how a sealed attachment is uploaded."""
    nonce = os.urandom(12)
    return b"\x01" + nonce + AESGCM(blob_key(session_key, path)).encrypt(nonce, data, None)


def open_bytes(session_key, path, raw):
    assert raw[0] == 1, raw[:1]
    return AESGCM(blob_key(session_key, path)).decrypt(raw[1:13], raw[13:], None)


def pubkey():
    return os.urandom(32).hex()


def wrap():
    """A wrap with the authors' shape (relayd checks only that)."""
    return base64.b64encode(b"\x02" + os.urandom(32) + b"\x01" + os.urandom(12 + 32 + 16)).decode()


class E2E:
    """One user with one paired bridge, its bridge device and one confirmed client device."""

    def __init__(self, relay, user_token, confirm=True):
        self.relay = relay
        self.inst = Installation(relay, user_token)
        self.user = user_token
        self.bridge_pub = pubkey()
        r = assert_ok(self.inst.post("devices", {"pubkey": self.bridge_pub, "label": "laptop"}))
        self.bridge_device = r["device_id"]
        self.phone_pub = pubkey()
        r = assert_ok(self.me("POST", "/v1/me/devices", {"pubkey": self.phone_pub, "label": "phone",
                                                          "platform": "web"}))
        self.phone = r["device_id"]
        if confirm:
            assert_ok(self.me("POST", "/v1/me/devices/%s/confirm" % self.phone,
                              {"bridge_device_id": self.bridge_device}, device=self.phone))

    def me(self, method, path, body=None, device=None, token=None):
        headers = bearer(token or self.user)
        if device is not None:
            headers["X-Relay-Device"] = device
        kw = {"headers": headers}
        if body is not None:
            kw["json"] = body
        return self.relay.request(method, path, **kw)

    def encrypted_session(self):
        """A session made by the client, encrypted, its key granted to the bridge and the phone."""
        self.session_key = os.urandom(32)
        r = assert_ok(self.me("POST", "/v1/me/sessions", {"installation_id": self.inst.id, "encrypted": True}))
        sid = r["session_id"]
        assert_ok(self.me("POST", "/v1/me/sessions/%s/recipients" % sid,
                          {"recipients": [{"device_id": self.bridge_device, "wrapped_session_key": wrap()},
                                          {"device_id": self.phone, "wrapped_session_key": wrap()}],
                           "wrapped_by_device_id": self.phone}))
        return sid


def encrypted_session(relay, user_token):
    """A phone confirmed for a bridge, the bridge's socket (its device_pending and device_added
    read), the user's stream, and an encrypted session whose key the bridge was granted:
    (E2E, socket, stream, session id)."""
    e = E2E(relay, user_token)
    sock = e.inst.connect()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["device_pending", "device_added"]
    stream = e.inst.stream()
    sid = e.encrypted_session()
    assert sock.next_update(WAIT)["type"] == "session.started"
    assert sock.next_update(WAIT)["type"] == "session_key_granted"
    return e, sock, stream, sid

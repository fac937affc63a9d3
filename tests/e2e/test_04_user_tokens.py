"""User tokens: the embedded issuer, an external issuer from a JWKS file or URL."""
import base64
import hashlib
import hmac
import http.server
import json
import threading
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from relaylib import (
    SLOW, START_TIMEOUT, assert_error, assert_ok, b64url, free_port, mint_token, run_relayd,
    wait_until,
)

ISSUER = "https://idp.test"
AUDIENCE = "relay-test"


# -- keys and JWS -----------------------------------------------------------------

def _int_bytes(n, length=None):
    length = length or (n.bit_length() + 7) // 8
    return n.to_bytes(length, "big")


class Key:
    def __init__(self, alg, kid, private):
        self.alg = alg
        self.kid = kid
        self.private = private

    def jwk(self):
        pub = self.private.public_key()
        if self.alg == "RS256":
            nums = pub.public_numbers()
            return {"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig",
                    "n": b64url(_int_bytes(nums.n)), "e": b64url(_int_bytes(nums.e))}
        if self.alg == "ES256":
            nums = pub.public_numbers()
            return {"kty": "EC", "kid": self.kid, "alg": "ES256", "use": "sig", "crv": "P-256",
                    "x": b64url(_int_bytes(nums.x, 32)), "y": b64url(_int_bytes(nums.y, 32))}
        raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "kid": self.kid, "alg": "EdDSA", "use": "sig", "crv": "Ed25519",
                "x": b64url(raw)}

    def public_pem(self):
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, data):
        if self.alg == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        if self.alg == "ES256":
            r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
            return _int_bytes(r, 32) + _int_bytes(s, 32)
        return self.private.sign(data)

    def token(self, sub="dave", header=None, omit=(), **claims):
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600}
        payload.update(claims)
        for name in omit:
            payload.pop(name, None)
        head = {"alg": self.alg, "typ": "JWT", "kid": self.kid}
        head.update(header or {})
        signing_input = _segment(head) + "." + _segment(payload)
        return signing_input + "." + b64url(self.sign(signing_input.encode("ascii")))


def _segment(obj):
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


@pytest.fixture(scope="module")
def keys():
    return {
        "RS256": Key("RS256", "rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "ES256": Key("ES256", "ec-1", ec.generate_private_key(ec.SECP256R1())),
        "EdDSA": Key("EdDSA", "ed-1", ed25519.Ed25519PrivateKey.generate()),
    }


@pytest.fixture(scope="module")
def stranger():
    """A key that is in no JWKS."""
    return Key("RS256", "rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def _write_jwks(path, keys):
    path.write_text(json.dumps({"keys": [k.jwk() for k in keys]}))
    return path


@pytest.fixture
def external(relayd, tmp_path, keys):
    jwks = _write_jwks(tmp_path / "jwks.json", keys.values())
    return relayd("--jwks-file", str(jwks), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)


def _auth_passes(relay, token):
    """A claim with a code nobody issued: 404 proves authentication passed."""
    r = relay.claim(token, "ZZZZZZZ")
    if r.status_code == 404:
        assert_error(r, 404, "pairing_not_found")
        return True
    assert_error(r, 401, "invalid_token")
    return False


# -- embedded issuer ---------------------------------------------------------------------

def test_embedded_issuer_token_works(relay):
    token = mint_token(relay.data, "alice")
    assert _auth_passes(relay, token)


def test_embedded_token_minted_before_start_works(relayd, tmp_path):
    data = tmp_path / "early"
    token = mint_token(data, "erin")
    relay = relayd(data=data)
    assert _auth_passes(relay, token)
    assert _auth_passes(relay, relay.token("frank"))


def test_embedded_token_with_ttl(relay):
    assert _auth_passes(relay, relay.token("alice", ttl="1h"))


def test_embedded_token_from_another_data_folder_is_refused(relay, tmp_path):
    other = mint_token(tmp_path / "elsewhere", "alice")
    assert not _auth_passes(relay, other)


def test_tampered_embedded_token_is_refused(relay):
    token = relay.token("alice")
    head, payload, sig = token.split(".")
    claims = json.loads(_b64decode(payload))
    claims["sub"] = "mallory"
    assert not _auth_passes(relay, head + "." + _segment(claims) + "." + sig)


def _b64decode(seg):
    return base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4))


# -- external issuer, JWKS file ------------------------------------------------------------

@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_external_token_of_each_alg_is_accepted(external, keys, alg):
    assert _auth_passes(external, keys[alg].token(sub="dave-" + alg))


def test_external_aud_array_containing_audience_is_accepted(external, keys):
    assert _auth_passes(external, keys["ES256"].token(aud=["other", AUDIENCE]))


def test_external_nbf_in_the_past_is_accepted(external, keys):
    assert _auth_passes(external, keys["RS256"].token(nbf=int(time.time()) - 60))


@pytest.mark.parametrize("case", [
    "expired", "not_yet_valid", "wrong_iss", "wrong_aud", "aud_array_without",
    "missing_sub", "empty_sub", "missing_exp", "bad_signature", "alg_none",
    "alg_none_signed", "hs256_with_public_key", "unknown_kid", "stranger_key",
    "alg_mismatch", "exp_string", "two_segments",
])
def test_external_bad_tokens_are_refused(external, keys, stranger, case):
    rsa_key, ec_key = keys["RS256"], keys["ES256"]
    now = int(time.time())
    if case == "expired":
        token = rsa_key.token(exp=now - 120)
    elif case == "not_yet_valid":
        token = ec_key.token(nbf=now + 300)
    elif case == "wrong_iss":
        token = rsa_key.token(iss="https://evil.test")
    elif case == "wrong_aud":
        token = rsa_key.token(aud="someone-else")
    elif case == "aud_array_without":
        token = rsa_key.token(aud=["a", "b"])
    elif case == "missing_sub":
        token = rsa_key.token(omit=("sub",))
    elif case == "empty_sub":
        token = rsa_key.token(sub="")
    elif case == "missing_exp":
        token = keys["EdDSA"].token(omit=("exp",))
    elif case == "bad_signature":
        head, payload, sig = rsa_key.token().split(".")
        pos = len(sig) // 2
        sig = sig[:pos] + ("A" if sig[pos] != "A" else "B") + sig[pos + 1:]
        token = ".".join((head, payload, sig))
    elif case in ("alg_none", "alg_none_signed"):
        good = rsa_key.token()
        head, payload, sig = good.split(".")
        head = _segment({"alg": "none", "typ": "JWT", "kid": rsa_key.kid})
        token = head + "." + payload + "." + (sig if case == "alg_none_signed" else "")
    elif case == "hs256_with_public_key":
        head = _segment({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid})
        payload = _segment({"iss": ISSUER, "aud": AUDIENCE, "sub": "dave", "iat": now, "exp": now + 600})
        mac = hmac.new(rsa_key.public_pem(), (head + "." + payload).encode(), hashlib.sha256).digest()
        token = head + "." + payload + "." + b64url(mac)
    elif case == "unknown_kid":
        token = rsa_key.token(header={"kid": "no-such-kid"})
    elif case == "stranger_key":
        token = stranger.token()  # same kid as the real RSA key, different key
    elif case == "alg_mismatch":
        token = ec_key.token(header={"kid": rsa_key.kid})  # ES256 signature on an RSA kid
    elif case == "exp_string":
        token = rsa_key.token(exp=str(now + 600))
    elif case == "two_segments":
        token = ".".join(rsa_key.token().split(".")[:2])
    else:
        raise AssertionError(case)
    assert_error(external.claim(token, "ZZZZZZZ"), 401, "invalid_token")


def test_external_mode_refuses_embedded_tokens(external):
    assert_error(external.claim(external.token("alice"), "ZZZZZZZ"), 401, "invalid_token")


def test_users_are_created_on_first_sight(external, keys):
    assert external.query("SELECT id FROM users WHERE id = 'carol'") == []
    token = keys["EdDSA"].token(sub="carol")
    started = external.pairing_start()
    claimed = assert_ok(external.claim(token, started["code"]))
    assert external.query("SELECT id FROM users WHERE id = 'carol'") == [("carol",)]
    rows = external.query("SELECT user_id FROM installations WHERE id = ?", (claimed["installation_id"],))
    assert rows == [("carol",)]
    # Seen again: still one row.
    started = external.pairing_start()
    assert_ok(external.claim(keys["RS256"].token(sub="carol"), started["code"]))
    assert external.query("SELECT COUNT(*) FROM users WHERE id = 'carol'") == [(1,)]


def test_external_mode_requires_issuer_and_audience(tmp_path, keys):
    jwks = _write_jwks(tmp_path / "jwks.json", keys.values())
    port = free_port()
    for extra in (["--jwt-issuer", ISSUER], ["--jwt-audience", AUDIENCE], []):
        proc = run_relayd(["--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path / "d"),
                           "--jwks-file", str(jwks)] + extra)
        assert proc.returncode == 2, (extra, proc.returncode, proc.stderr)
        assert proc.stderr.strip(), "no message for a missing setting"


def test_unreadable_jwks_file_fails_start(relayd, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "missing.json"):
        relay = relayd("--jwks-file", str(path), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE,
                       start=False)
        relay.start(expect_ready=False)
        rc = relay.wait_exit(START_TIMEOUT)
        assert rc != 0
        assert any(rec.get("level") == "error" for rec in relay.log_records()), relay.log_text()


# -- external issuer, JWKS URL ------------------------------------------------------------------

class _JwksServer:
    def __init__(self):
        self.body = b'{"keys":[]}'
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                body = outer.body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/jwks.json" % self.httpd.server_address[1]

    def serve(self, keys):
        self.body = json.dumps({"keys": [k.jwk() for k in keys]}).encode()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def jwks_server():
    server = _JwksServer()
    yield server
    server.close()


def test_jwks_url_rotation(relayd, jwks_server, keys):
    key_a, key_b = keys["RS256"], keys["ES256"]
    jwks_server.serve([key_a])
    relay = relayd("--jwks-url", jwks_server.url, "--jwks-refresh", "1s",
                   "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    assert jwks_server.hits >= 1
    assert _auth_passes(relay, key_a.token(sub="rot-a0"))
    assert not _auth_passes(relay, key_b.token(sub="rot-b0"))

    jwks_server.serve([key_b])
    attempt = [0]

    def rotated():
        attempt[0] += 1
        # A fresh user each attempt so the per-user claim bucket never interferes.
        b_ok = _auth_passes(relay, key_b.token(sub="rot-b%d" % attempt[0]))
        a_ok = _auth_passes(relay, key_a.token(sub="rot-a%d" % attempt[0]))
        return b_ok and not a_ok

    wait_until(rotated, timeout=10 * SLOW, interval=0.25, what="the JWKS rotation to be picked up")


def test_jwks_url_unreachable_at_start_fails(relayd):
    dead = "http://127.0.0.1:%d/jwks.json" % free_port()
    relay = relayd("--jwks-url", dead, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, start=False)
    relay.start(expect_ready=False)
    rc = relay.wait_exit(START_TIMEOUT)
    assert rc != 0, "relayd started without its JWKS"
    assert any(rec.get("level") == "error" for rec in relay.log_records()), relay.log_text()

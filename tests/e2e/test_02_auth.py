"""Authentication: tokens in URLs, user routes, bridge routes, rate-limit headers."""
import base64
import json
import re
import time

import pytest

from relaylib import (
    assert_correlation_headers, assert_error, assert_ok, bearer, fake_bridge_token,
    random_base62,
)

CLAIM = "/v1/me/pairing/claim"
MANIFEST = "/v1/bridge/setManifest"
MANIFEST_BODY = {"agent": {"name": "a", "version": "1"}, "tools": [{"name": "bash"}]}

FAKE_JWT = ".".join([
    base64.urlsafe_b64encode(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()).rstrip(b"=").decode(),
    base64.urlsafe_b64encode(json.dumps({"sub": "x"}).encode()).rstrip(b"=").decode(),
    "c2lnbmF0dXJl",
])


# -- tokens in URLs -------------------------------------------------------------------

# Fixed so that test ids are stable from run to run.
URL_TOKEN = "inst_3KmKimw0Cu6F9k6o:s_live_7Bi2x7pYMehdYZCFWYdVJl1Vr3MYSdPqbBNVCH1w"


def _url_token_cases():
    token = URL_TOKEN
    inst, secret = token.split(":")
    cases = [
        ("bridge-token-in-path", "GET", "/v1/pairing/" + token),
        ("bridge-token-mid-path", "GET", "/v1/bridge/" + token + "/ws"),
        ("bridge-token-in-path-post", "POST", "/v1/pairing/" + token),
        ("percent-encoded-colon", "GET", "/v1/pairing/%s%%3A%s" % (inst, secret)),
        ("percent-encoded-colon-lower", "GET", "/v1/pairing/%s%%3a%s" % (inst, secret)),
        ("query-token", "GET", "/v1/nope?token=" + token),
        ("query-access-token", "GET", "/v1/nope?access_token=" + token),
        ("query-access-token-among-others", "GET", "/v1/nope?a=1&access_token=" + token + "&b=2"),
        ("query-token-percent-encoded", "GET", "/v1/nope?token=%s%%3A%s" % (inst, secret)),
        ("query-token-on-known-route", "POST", "/v1/pairing/start?token=" + token),
        ("query-token-before-405", "GET", "/v1/pairing/start?token=" + token),
        ("jwt-in-query-access-token", "POST", CLAIM + "?access_token=" + FAKE_JWT),
        ("jwt-in-query-other-name", "GET", "/v1/me?jwt=" + FAKE_JWT),
        ("jwt-in-query-token", "GET", "/v1/nope?token=" + FAKE_JWT),
    ]
    return [pytest.param(method, path, id=name) for name, method, path in cases]


@pytest.mark.parametrize("method,path", _url_token_cases())
def test_token_in_url_is_invalid_token_location(relay, method, path):
    before = relay.count("pairings")
    r = relay.request(method, path, json={"connector_type": "x", "host_label": "h"})
    assert_error(r, 400, "invalid_token_location")
    assert_correlation_headers(r)
    assert relay.count("pairings") == before


def test_real_tokens_in_url_are_refused(relay, user_token):
    inst, token, _ = relay.pair(user_token)
    r = relay.get("/v1/me?access_token=" + user_token)
    assert_error(r, 400, "invalid_token_location")
    r = relay.post(MANIFEST + "?token=" + token, MANIFEST_BODY, token=token)
    assert_error(r, 400, "invalid_token_location")
    r = relay.post(CLAIM + "?token=" + user_token, {"code": "ABCDEFG"}, token=user_token)
    assert_error(r, 400, "invalid_token_location")


def test_jwt_in_path_is_invalid_token_location(relay):
    # spec Authentication 3: a token in the URL *path* or query string.
    assert_error(relay.get("/v1/tokens/" + FAKE_JWT), 400, "invalid_token_location")


def test_token_location_check_applies_under_v1_only(relay):
    r = relay.get("/healthz?token=" + fake_bridge_token())
    assert_ok(r)


def test_ordinary_query_strings_are_not_tokens(relay):
    assert_error(relay.get("/v1/nope?limit=10&before=msg_abc"), 404, "not_found")


# -- user routes ---------------------------------------------------------------------

@pytest.mark.parametrize("headers", [
    pytest.param({}, id="none"),
    pytest.param({"Authorization": "Basic YWxpY2U6cGFzc3dvcmQ="}, id="basic"),
    pytest.param({"Authorization": "Bearer garbage"}, id="bearer-garbage"),
    pytest.param({"Authorization": "Bearer "}, id="bearer-empty"),
    pytest.param({"Authorization": "Bearer"}, id="bearer-alone"),
    pytest.param({"Authorization": "Bearer " + FAKE_JWT}, id="bearer-unsigned-jwt"),
    pytest.param({"Authorization": "Token abc"}, id="other-scheme"),
])
def test_user_route_refuses_missing_or_bad_token(relay, headers):
    r = relay.post(CLAIM, {"code": "ABCDEFG"}, headers=headers)
    assert_error(r, 401, "invalid_token")
    assert_correlation_headers(r)


def test_user_route_refuses_before_validating_the_body(relay):
    assert_error(relay.post(CLAIM, {"code": 5}), 401, "invalid_token")


def test_user_route_refuses_a_bridge_token_with_403(relay, user_token):
    _, token, _ = relay.pair(user_token)
    r = relay.post(CLAIM, {"code": "ABCDEFG"}, token=token)
    assert_error(r, 403, "permission_denied")


def test_user_route_refuses_an_unknown_bridge_token_with_401(relay):
    r = relay.post(CLAIM, {"code": "ABCDEFG"}, token=fake_bridge_token())
    assert_error(r, 401, "invalid_token")


def test_user_route_accepts_an_embedded_user_token(relay, user_token):
    # A wrong code gets past authentication and fails in the handler.
    assert_error(relay.claim(user_token, "ABCDEFG"), 404, "pairing_not_found")


# -- bridge routes --------------------------------------------------------------------

def test_bridge_route_without_token_is_401(relay):
    assert_error(relay.post(MANIFEST, MANIFEST_BODY), 401, "invalid_token")


@pytest.mark.parametrize("token", [
    pytest.param("garbage", id="garbage"),
    pytest.param("inst_short:s_live_" + "a" * 40, id="short-installation"),
    pytest.param("inst_" + "a" * 16, id="no-secret"),
    pytest.param("inst_" + "a" * 16 + ":", id="empty-secret"),
    pytest.param("inst_" + "a" * 16 + ":s_live_short", id="short-secret"),
    pytest.param("inst_" + "a" * 16 + ":s_prod_" + "b" * 40, id="unknown-env"),
    pytest.param("inst_" + "a" * 16 + ":s_live_" + "b" * 39 + "!", id="non-base62"),
    pytest.param("inst_" + "a" * 16 + "s_live_" + "b" * 40, id="no-colon"),
])
def test_bridge_route_with_malformed_token_is_401(relay, token):
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=token), 401, "invalid_token")


def test_bridge_route_with_unknown_installation_is_401(relay):
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=fake_bridge_token()), 401, "invalid_token")


def test_bridge_route_with_wrong_secret_is_401(relay, user_token):
    inst, token, _ = relay.pair(user_token)
    secret = token.split(":s_live_")[1]
    wrong = fake_bridge_token(inst=inst, secret=random_base62(len(secret)))
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=wrong), 401, "invalid_token")
    # Same secret with one character changed, and a truncated one.
    flipped = secret[:-1] + ("a" if secret[-1] != "a" else "b")
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=inst + ":s_live_" + flipped), 401, "invalid_token")
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=inst + ":s_live_" + secret[:-1]), 401, "invalid_token")
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=inst + ":s_test_" + secret), 401, "invalid_token")
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=token + "x"), 401, "invalid_token")
    # The right one still works.
    assert assert_ok(relay.post(MANIFEST, MANIFEST_BODY, token=token)) == {"tools": 1}


def test_bridge_route_refuses_a_user_token_with_403(relay, user_token):
    assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=user_token), 403, "permission_denied")


def test_bridge_route_refuses_basic_scheme(relay, user_token):
    _, token, _ = relay.pair(user_token)
    r = relay.post(MANIFEST, MANIFEST_BODY, headers={"Authorization": "Basic " + token})
    assert_error(r, 401, "invalid_token")


def test_bridge_route_accepts_its_token(relay, user_token):
    _, token, _ = relay.pair(user_token)
    r = relay.post(MANIFEST, MANIFEST_BODY, token=token)
    assert assert_ok(r) == {"tools": 1}
    assert_correlation_headers(r)
    body = {"tools": [{"name": "bash", "description": "run"}, {"name": "read"}, {"name": "write"}]}
    assert assert_ok(relay.post(MANIFEST, body, token=token)) == {"tools": 3}


def test_bridge_route_validates_after_auth(relay, user_token):
    _, token, _ = relay.pair(user_token)
    r = relay.post(MANIFEST, {"tools": "bash"}, token=token)
    err = assert_error(r, 400, "invalid_request")
    assert any(e["path"] == "tools" and e["code"] == "invalid_type" for e in err["errors"]), err
    r = relay.post(MANIFEST, {"tools": [{"description": "no name"}]}, token=token)
    err = assert_error(r, 400, "invalid_request")
    assert any(e["path"] == "tools.0.name" for e in err["errors"]), err


# -- rate-limit headers ------------------------------------------------------------------

def _rate_headers(r):
    h = r.headers
    for name in ("Limit", "Remaining", "Reset", "Reset-After", "Bucket", "Scope"):
        assert "X-RateLimit-" + name in h, "missing X-RateLimit-%s: %r" % (name, dict(h))
    assert re.match(r"^\d+$", h["X-RateLimit-Limit"]), h["X-RateLimit-Limit"]
    assert re.match(r"^\d+$", h["X-RateLimit-Remaining"]), h["X-RateLimit-Remaining"]
    assert re.match(r"^\d+$", h["X-RateLimit-Reset"]), h["X-RateLimit-Reset"]
    assert re.match(r"^\d+(\.\d+)?$", h["X-RateLimit-Reset-After"]), h["X-RateLimit-Reset-After"]
    return h


def test_bridge_call_carries_rate_limit_headers(relay, user_token):
    _, token, _ = relay.pair(user_token)
    before = time.time()
    r = relay.post(MANIFEST, MANIFEST_BODY, token=token)
    after = time.time()
    assert_ok(r)
    h = _rate_headers(r)
    assert h["X-RateLimit-Bucket"] == "default"
    assert h["X-RateLimit-Scope"] == "installation"
    assert h["X-RateLimit-Limit"] == "30"
    assert int(h["X-RateLimit-Remaining"]) == 29
    reset_after = float(h["X-RateLimit-Reset-After"])
    # one token spent, refill 10/s
    assert 0 < reset_after <= 0.1 + 0.001, reset_after
    # epoch seconds at which the bucket is full again: not before now + Reset-After
    reset = int(h["X-RateLimit-Reset"])
    assert before + reset_after - 0.001 <= reset <= after + reset_after + 1, (before, reset, reset_after)
    assert "Retry-After" not in h


def test_user_call_carries_rate_limit_headers(relay, user_token):
    r = relay.claim(user_token, "ABCDEFG")
    assert_error(r, 404, "pairing_not_found")
    h = _rate_headers(r)
    assert h["X-RateLimit-Bucket"] == "claim"
    assert h["X-RateLimit-Scope"] == "user"
    assert h["X-RateLimit-Limit"] == "5"
    assert h["X-RateLimit-Remaining"] == "4"


def test_installations_do_not_share_a_bucket(relay, user_token):
    _, token_a, _ = relay.pair(user_token)
    _, token_b, _ = relay.pair(user_token)
    for _ in range(5):
        assert_ok(relay.post(MANIFEST, MANIFEST_BODY, token=token_a))
    r = relay.post(MANIFEST, MANIFEST_BODY, token=token_b)
    assert_ok(r)
    assert r.headers["X-RateLimit-Remaining"] == "29"


def test_bridge_default_bucket_runs_out(relay, user_token):
    _, token, _ = relay.pair(user_token)
    _, other, _ = relay.pair(user_token)
    start = time.monotonic()
    limited = None
    for i in range(200):
        r = relay.post(MANIFEST, MANIFEST_BODY, token=token)
        if r.status_code == 429:
            limited = (i, r)
            break
        assert_ok(r)
    elapsed = time.monotonic() - start
    assert limited is not None, "no 429 after 200 rapid calls"
    i, r = limited
    # capacity 30, refill 10/s
    assert 30 <= i <= 30 + int(elapsed * 10) + 1, (i, elapsed)
    err = assert_error(r, 429, "rate_limited")
    assert isinstance(err.get("retry_after_ms"), int) and err["retry_after_ms"] > 0, err
    assert re.match(r"^\d+$", r.headers.get("Retry-After", "")), r.headers
    assert int(r.headers["Retry-After"]) >= 1
    h = _rate_headers(r)
    assert h["X-RateLimit-Bucket"] == "default"
    assert h["X-RateLimit-Scope"] == "installation"
    assert h["X-RateLimit-Remaining"] == "0"
    assert_correlation_headers(r)
    # Another installation of the same user is not affected.
    assert_ok(relay.post(MANIFEST, MANIFEST_BODY, token=other))


def test_failed_auth_uses_no_bridge_bucket(relay, user_token):
    inst, token, _ = relay.pair(user_token)
    wrong = fake_bridge_token(inst=inst)
    for _ in range(35):
        assert_error(relay.post(MANIFEST, MANIFEST_BODY, token=wrong), 401, "invalid_token")
    r = relay.post(MANIFEST, MANIFEST_BODY, token=token)
    assert_ok(r)
    assert int(r.headers["X-RateLimit-Remaining"]) >= 28


def test_authorization_header_is_not_leaked_to_the_log(relay, user_token):
    relay.post(CLAIM, {"code": "ABCDEFG"}, headers=bearer(user_token))
    assert user_token not in relay.log_text()
    assert user_token.split(".")[2] not in relay.log_text()

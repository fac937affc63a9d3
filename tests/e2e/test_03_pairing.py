"""Pairing: start, poll, claim, expiry, per-IP and per-user limits, secrecy."""
import os
import re
import time

import pytest

from relaylib import (
    BRIDGE_TOKEN_RE, CODE_RE, assert_correlation_headers, assert_error, assert_ok,
    find_error, mint_token, session_from, validation_errors,
)

START = "/v1/pairing/start"
POLL = "/v1/pairing/poll"
CLAIM = "/v1/me/pairing/claim"


def test_start_returns_code_expiry_and_poll_token(relay):
    before = time.time()
    r = relay.post(START, {"connector_type": "claude-code", "host_label": "laptop"})
    result = assert_ok(r)
    assert set(result) == {"code", "expires_at", "poll_token"}, result
    assert CODE_RE.match(result["code"]), result["code"]
    assert isinstance(result["expires_at"], int)
    # epoch seconds, 120 s ahead by default
    assert before + 118 <= result["expires_at"] <= time.time() + 122, (before, result["expires_at"])
    assert re.match(r"^p_[0-9A-Za-z_-]{16,}$", result["poll_token"]), result["poll_token"]
    assert_correlation_headers(r)


def test_codes_and_poll_tokens_are_unique(relay):
    results = [relay.pairing_start() for _ in range(10)]
    assert len({r["code"] for r in results}) == 10
    assert len({r["poll_token"] for r in results}) == 10


def test_full_pairing_flow(relay, user_token):
    started = relay.pairing_start("claude-code", "work laptop")
    r = relay.poll(started["poll_token"])
    assert assert_ok(r) == {"status": "pending"}

    t0 = time.time()
    r = relay.claim(user_token, started["code"])
    claimed = assert_ok(r)
    assert set(claimed) == {"installation_id", "installation"}, claimed
    inst_id = claimed["installation_id"]
    assert re.match(r"^inst_[0-9A-Za-z]{16}$", inst_id), inst_id
    inst = claimed["installation"]
    assert inst["id"] == inst_id
    assert inst["custom_display_name"] is None
    assert inst["custom_emoji"] is None
    assert inst["connector_type"] == "claude-code"
    assert inst["host_label"] == "work laptop"
    assert inst["state"] == "live"
    assert isinstance(inst["created_at"], int)
    assert (t0 - 5) * 1000 <= inst["created_at"] <= (time.time() + 5) * 1000, inst["created_at"]

    r = relay.poll(started["poll_token"])
    paired = assert_ok(r)
    assert set(paired) == {"status", "installation_id", "token"}, paired
    assert paired["status"] == "paired"
    assert paired["installation_id"] == inst_id
    token = paired["token"]
    m = BRIDGE_TOKEN_RE.match(token)
    assert m, token
    assert len(token) >= 50
    assert m.group(1) == inst_id

    r = relay.set_manifest(token)
    assert assert_ok(r) == {"tools": 1}

    # The token is handed out once.
    assert_error(relay.poll(started["poll_token"]), 404, "pairing_not_found")
    assert_error(relay.poll(started["poll_token"]), 404, "pairing_not_found")
    # and still works afterwards
    assert_ok(relay.set_manifest(token))


def test_installation_row_belongs_to_the_claimer(relay, user_token):
    inst, _, _ = relay.pair(user_token, "cli", "box")
    rows = relay.query("SELECT user_id, connector_type, host_label, state FROM installations WHERE id = ?", (inst,))
    assert rows == [("alice", "cli", "box", "live")]


@pytest.mark.parametrize("typed", [
    lambda c: c.lower(),
    lambda c: c[:3].lower() + "-" + c[3:].lower(),
    lambda c: c[:3] + " " + c[3:],
    lambda c: " " + c[:2] + "-" + c[2:5] + " " + c[5:] + " ",
])
def test_code_may_be_typed_loosely(relay, user_token, typed):
    started = relay.pairing_start()
    r = relay.claim(user_token, typed(started["code"]))
    assert_ok(r)
    assert assert_ok(relay.poll(started["poll_token"]))["status"] == "paired"


def test_double_claim_is_pairing_not_found(relay, user_token):
    started = relay.pairing_start()
    assert_ok(relay.claim(user_token, started["code"]))
    assert_error(relay.claim(user_token, started["code"]), 404, "pairing_not_found")
    bob = mint_token(relay.data, "bob")
    assert_error(relay.claim(bob, started["code"]), 404, "pairing_not_found")
    # Exactly one installation came of it.
    assert relay.count("installations") == 1


def test_wrong_code_is_pairing_not_found(relay, user_token):
    started = relay.pairing_start()
    wrong = "".join("A" if ch != "A" else "B" for ch in started["code"])
    assert_error(relay.claim(user_token, wrong), 404, "pairing_not_found")
    assert assert_ok(relay.poll(started["poll_token"])) == {"status": "pending"}
    assert relay.count("installations") == 0


@pytest.mark.parametrize("code", ["ABC", "ABCDEFGH", "ABC1EFG", "ABCDEF!", "ABCDEF\u00c9"])
def test_malformed_code_is_invalid_request(relay, user_token, code):
    errors = validation_errors(relay.claim(user_token, code))
    assert find_error(errors, "code")["code"] == "invalid_string", errors


def test_empty_code_is_invalid_request(relay, user_token):
    errors = validation_errors(relay.claim(user_token, ""))
    assert find_error(errors, "code")["code"] in ("invalid_string", "too_small"), errors


def test_claim_with_wrong_type_code(relay, user_token):
    errors = validation_errors(relay.post(CLAIM, {"code": 1234567}, token=user_token))
    assert find_error(errors, "code")["code"] == "invalid_type"
    errors = validation_errors(relay.post(CLAIM, {}, token=user_token))
    assert find_error(errors, "code")["message"] == "Required"


def test_unknown_poll_token_is_pairing_not_found(relay):
    assert_error(relay.poll("p_nope"), 404, "pairing_not_found")
    assert_error(relay.poll("p_" + "A" * 32), 404, "pairing_not_found")


@pytest.mark.parametrize("poll_token", ["nope", "q_abcdef", "", "P_abc"])
def test_poll_token_without_prefix_is_invalid_request(relay, poll_token):
    errors = validation_errors(relay.poll(poll_token))
    assert find_error(errors, "poll_token")["code"] in ("invalid_string", "too_small"), errors


def test_poll_token_wrong_type(relay):
    errors = validation_errors(relay.post(POLL, {"poll_token": 7}))
    assert find_error(errors, "poll_token")["code"] == "invalid_type"


def test_expired_code(relayd):
    relay = relayd("--pairing-ttl", "2s")
    user = relay.token("alice")
    before = time.time()
    started = relay.pairing_start()
    assert before + 1 <= started["expires_at"] <= time.time() + 3, started
    # A second pairing that is claimed before expiry but polled after it.
    claimed_in_time = relay.pairing_start()
    assert_ok(relay.claim(user, claimed_in_time["code"]))

    # Wait until the announced expiry has passed (epoch seconds, so one more second).
    while time.time() < started["expires_at"] + 1.2:
        time.sleep(0.2)

    assert_error(relay.poll(started["poll_token"]), 410, "pairing_expired")
    assert_error(relay.claim(user, started["code"]), 404, "pairing_not_found")
    assert_error(relay.poll(started["poll_token"]), 410, "pairing_expired")
    assert relay.count("installations") == 1
    # A code claimed in time still hands out its token.
    assert assert_ok(relay.poll(claimed_in_time["poll_token"]))["status"] == "paired"


def _start_until_limited(relay, session=None, limit=60):
    t0 = time.monotonic()
    for i in range(limit):
        r = relay.post(START, {"connector_type": "x", "host_label": "h"}, session=session)
        if r.status_code == 429:
            return i, r, time.monotonic() - t0
        assert_ok(r)
        assert r.headers["X-RateLimit-Bucket"] == "pairing"
        assert r.headers["X-RateLimit-Scope"] == "ip"
        assert r.headers["X-RateLimit-Limit"] == "20"
    raise AssertionError("no 429 after %d starts" % limit)


def test_pairing_bucket_is_per_ip(relay):
    before_rows = relay.count("pairings")
    i, r, elapsed = _start_until_limited(relay)
    # capacity 20, refill 1/s
    assert 20 <= i <= 20 + int(elapsed) + 1, (i, elapsed)
    err = assert_error(r, 429, "rate_limited")
    assert isinstance(err.get("retry_after_ms"), int) and err["retry_after_ms"] > 0, err
    assert err["retry_after_ms"] <= 1000 * 3, err
    assert re.match(r"^\d+$", r.headers.get("Retry-After", "")), r.headers
    assert 1 <= int(r.headers["Retry-After"]) <= 2
    assert r.headers["X-RateLimit-Bucket"] == "pairing"
    assert r.headers["X-RateLimit-Scope"] == "ip"
    assert r.headers["X-RateLimit-Remaining"] == "0"
    assert r.headers["X-RateLimit-Limit"] == "20"
    assert_correlation_headers(r)
    # Refused starts leave no rows.
    assert relay.count("pairings") == before_rows + i

    # Polls share the bucket.
    r = relay.poll("p_nope")
    assert_error(r, 429, "rate_limited")

    # Another source address has its own bucket.
    other = session_from("127.0.0.2")
    try:
        r = relay.post(START, {"connector_type": "x", "host_label": "h"}, session=other)
        assert_ok(r)
        assert r.headers["X-RateLimit-Scope"] == "ip"
        assert int(r.headers["X-RateLimit-Remaining"]) == 19
    finally:
        other.close()

    # The bucket refills at 1/s: after Retry-After a start succeeds again.
    wait = int(r.headers.get("Retry-After", "1"))
    deadline = time.monotonic() + wait + 5
    while True:
        r = relay.post(START, {"connector_type": "x", "host_label": "h"})
        if r.status_code == 200:
            break
        assert r.status_code == 429, r.text
        assert time.monotonic() < deadline, "bucket never refilled"
        time.sleep(0.25)


def test_claim_bucket_is_per_user(relay, user_token):
    t0 = time.monotonic()
    statuses = []
    last = None
    for _ in range(6):
        last = relay.claim(user_token, "ABCDEFG")
        statuses.append(last.status_code)
    assert time.monotonic() - t0 < 9, "too slow to test a 0.1/s refill"
    assert statuses == [404] * 5 + [429], statuses
    err = assert_error(last, 429, "rate_limited")
    assert err["retry_after_ms"] > 0
    assert last.headers["X-RateLimit-Bucket"] == "claim"
    assert last.headers["X-RateLimit-Remaining"] == "0"
    assert int(last.headers["Retry-After"]) >= 1

    # A valid code is refused too while the bucket is empty; nothing is consumed.
    started = relay.pairing_start()
    assert_error(relay.claim(user_token, started["code"]), 429, "rate_limited")
    assert assert_ok(relay.poll(started["poll_token"])) == {"status": "pending"}

    # A different user is not affected.
    bob = mint_token(relay.data, "bob")
    assert_ok(relay.claim(bob, started["code"]))


def test_secrets_are_neither_logged_nor_stored(relayd):
    relay = relayd("--log-level", "debug")
    user = relay.token("alice")
    started = relay.pairing_start()
    assert_ok(relay.poll(started["poll_token"]))
    assert_ok(relay.claim(user, started["code"].lower()))
    r = relay.poll(started["poll_token"])
    paired = assert_ok(r)
    token = paired["token"]
    assert_ok(relay.set_manifest(token))
    relay.post("/v1/bridge/setManifest", {"tools": []}, token=token[:-1] + "x")

    secret = token.split(":", 1)[1]
    secret_random = secret[len("s_live_"):]
    needles = {
        "bridge secret": secret.encode(),
        "bridge secret body": secret_random.encode(),
        "poll token": started["poll_token"].encode(),
        "poll token body": started["poll_token"][2:].encode(),
        "code": started["code"].encode(),
        "code (lower)": started["code"].lower().encode(),
    }

    def check(when):
        blobs = {"stderr log": relay.log_text().encode()}
        for root, _dirs, files in os.walk(str(relay.data)):
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    blobs[path] = f.read()
        stored = relay.store_dump()
        assert stored, "the store holds nothing"
        blobs.update(stored)
        for where, blob in blobs.items():
            for what, needle in needles.items():
                assert needle not in blob, "%s found in %s (%s)" % (what, where, when)

    check("while running")
    relay.stop_ok()
    check("after shutdown")

"""Sign-in links for the web client (docs/web.md): `relayd login-link USER`
works beside a running relayd, the code travels in the link's fragment, is
exchanged once at POST /v1/login/exchange for a user token, and is stored
only as its SHA-256.
"""
import hashlib
import os
import re
import subprocess
import time

from relaylib import RELAYD, SLOW, assert_error, assert_ok, bearer, clean_env, find_error, validation_errors

LINK_RE = re.compile(r"^(http://127\.0\.0\.1:\d+)/login#code=([0-9A-Za-z]{32})$")


def login_link(relay, user="alice", *extra, check=True):
    argv = [RELAYD, "login-link", user, "--data", str(relay.data), "--public-url", relay.url("")] + list(extra)
    if relay.store is not None:
        argv += ["--store", relay.store]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=15 * SLOW, env=clean_env())
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def code_of(proc):
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    m = LINK_RE.match(lines[-1])
    assert m, proc.stdout
    return m.group(2)


def test_a_link_signs_in_once(relay):
    proc = login_link(relay, "alice")
    assert proc.stdout.count("\n") == 1, "only the link when stdout is not a terminal: %r" % proc.stdout
    code = code_of(proc)
    r = relay.post("/v1/login/exchange", {"code": code})
    result = assert_ok(r)
    assert r.headers["X-RateLimit-Bucket"] == "login"
    assert r.headers["X-RateLimit-Scope"] == "ip"
    assert result["user_id"] == "alice"
    # --web-token-ttl: 30 days by default.
    assert abs(result["expires_at"] - (time.time() + 30 * 86400) * 1000) < 60000
    me = assert_ok(relay.get("/v1/me", headers=bearer(result["token"])))
    assert me["user"]["id"] == "alice"
    # Spent: the same code again is refused like any unknown one.
    err = assert_error(relay.post("/v1/login/exchange", {"code": code}), 401, "invalid_token")
    assert "ask for a new one" in err["message"]
    assert relay.count("login_codes") == 0


def test_only_a_hash_of_the_code_is_kept_and_nothing_is_logged(relay):
    code = code_of(login_link(relay, "bob"))
    rows = relay.query("SELECT code_hash, user_id, expires_at - created_at FROM login_codes")
    assert rows == [(hashlib.sha256(code.encode()).hexdigest(), "bob", 600000)]
    assert_ok(relay.post("/v1/login/exchange", {"code": code}))
    assert code not in relay.log_text()


def test_expired_unknown_and_malformed_codes(relay):
    code = code_of(login_link(relay, "carol", "--ttl", "1s"))
    time.sleep(1.3)
    assert_error(relay.post("/v1/login/exchange", {"code": code}), 401, "invalid_token")
    # An expired code is spent by the attempt too.
    assert relay.count("login_codes") == 0
    assert_error(relay.post("/v1/login/exchange", {"code": "A" * 32}), 401, "invalid_token")
    errors = validation_errors(relay.post("/v1/login/exchange", {"code": "abc def!"}))
    assert find_error(errors, "code")["code"] == "invalid_string"
    errors = validation_errors(relay.post("/v1/login/exchange", {}))
    assert find_error(errors, "code")["code"] == "invalid_type"
    errors = validation_errors(relay.post("/v1/login/exchange", {"code": "x" * 65}))
    assert find_error(errors, "code")["code"] == "too_big"
    assert relay.count("login_codes") == 0


def test_the_command_refuses_bad_arguments(relay):
    for extra, message in ((["--ttl", "2d"], "--ttl"), (["--ttl", "soon"], "--ttl"),
                           (["--public-url", "ftp://x"], "--public-url")):
        proc = login_link(relay, "dave", *extra, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (extra, proc.stderr)
    proc = login_link(relay, "with space", check=False)
    assert proc.returncode == 2 and "printable ASCII" in proc.stderr
    proc = subprocess.run([RELAYD, "login-link"], capture_output=True, text=True, timeout=15, env=clean_env())
    assert proc.returncode == 2 and "usage" in proc.stderr
    assert relay.count("login_codes") == 0


def test_links_are_rate_limited_per_address(relay):
    statuses = [relay.post("/v1/login/exchange", {"code": "B" * 32}).status_code for _ in range(12)]
    assert statuses[:10] == [401] * 10, statuses
    assert 429 in statuses[10:], statuses


def test_the_link_uses_the_public_url_or_the_listen_address(relay, tmp_path):
    env = clean_env({"RELAY_LISTEN": "127.0.0.1:9999"})
    proc = subprocess.run([RELAYD, "login-link", "erin", "--data", str(relay.data)], capture_output=True, text=True,
                          timeout=15, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("http://127.0.0.1:9999/login#code=")
    env = clean_env({"RELAY_PUBLIC_URL": "https://relay.example.org/"})
    proc = subprocess.run([RELAYD, "login-link", "erin", "--data", str(relay.data)], capture_output=True, text=True,
                          timeout=15, env=env)
    assert proc.stdout.strip().startswith("https://relay.example.org/login#code="), proc.stdout
    assert os.path.exists(os.path.join(str(relay.data), "relay.db"))


def test_a_link_made_for_a_shared_store_works_on_any_node(relayd, tmp_path):
    store = "sqlite:%s" % os.path.join(str(tmp_path), "shared.db")
    a = relayd("--store", store)
    b = relayd("--store", store)
    proc = subprocess.run([RELAYD, "login-link", "frank", "--data", str(a.data), "--store", store, "--public-url",
                           a.url("")], capture_output=True, text=True, timeout=15 * SLOW, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    result = assert_ok(b.post("/v1/login/exchange", {"code": code_of(proc)}))
    assert assert_ok(a.get("/v1/me", headers=bearer(result["token"])))["user"]["id"] == "frank"

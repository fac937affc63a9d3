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


def test_expired_unknown_and_malformed_codes(relayd):
    relay = relayd(testclock=True)
    code = code_of(login_link(relay, "carol", "--ttl", "1s"))
    relay.advance_clock(1300)
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


def _link(data, *extra, env=None):
    proc = subprocess.run([RELAYD, "login-link", "erin", "--data", str(data)] + list(extra), capture_output=True,
                          text=True, timeout=15 * SLOW, env=clean_env(env))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split("/login#code=")[0]


def test_beside_a_running_relayd_the_link_names_the_address_it_serves(relay):
    """Issue 35, item 4: the README's `relayd login-link local`, run in another terminal than make run's
    (no RELAY_LISTEN there, or another relay's), names the address the relayd on that data folder
    listens on: it writes it to DATA/relayd.url once it listens. What the command is told wins."""
    served = relay.url("")
    with open(os.path.join(str(relay.data), "relayd.url")) as f:
        assert f.read() == served + "\n"
    assert (os.stat(os.path.join(str(relay.data), "relayd.url")).st_mode & 0o777) == 0o600
    assert _link(relay.data) == served
    assert _link(relay.data, env={"RELAY_LISTEN": "127.0.0.1:9999"}) == served
    assert _link(relay.data, "--listen", "127.0.0.1:9998") == "http://127.0.0.1:9998"
    assert _link(relay.data, "--public-url", "https://relay.example.org/") == "https://relay.example.org"
    assert _link(relay.data, "--listen", "127.0.0.1:9998", "--public-url", "https://a.example") == "https://a.example"


def test_the_running_relayd_s_public_url_and_tls_reach_the_link(relayd, tmp_path):
    relay = relayd("--public-url", "https://relay.example.org/base/")
    assert _link(relay.data) == "https://relay.example.org/base"
    # Stopped, it leaves its last address: the best guess for the link until it starts again.
    relay.stop()
    assert _link(relay.data) == "https://relay.example.org/base"


def test_without_a_relayd_on_the_folder_the_environment_or_the_default(tmp_path):
    data = tmp_path / "fresh"
    assert _link(data, env={"RELAY_LISTEN": "127.0.0.1:9999"}) == "http://127.0.0.1:9999"
    assert _link(data, env={"RELAY_PUBLIC_URL": "https://relay.example.org/",
                            "RELAY_LISTEN": "127.0.0.1:9999"}) == "https://relay.example.org"
    assert _link(data) == "http://127.0.0.1:8080"
    assert os.path.exists(os.path.join(str(data), "relay.db"))
    assert not os.path.exists(os.path.join(str(data), "relayd.url"))


def test_a_link_made_for_a_shared_store_works_on_any_node(relayd, tmp_path):
    store = "sqlite:%s" % os.path.join(str(tmp_path), "shared.db")
    a = relayd("--store", store)
    b = relayd("--store", store)
    proc = subprocess.run([RELAYD, "login-link", "frank", "--data", str(a.data), "--store", store, "--public-url",
                           a.url("")], capture_output=True, text=True, timeout=15 * SLOW, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    result = assert_ok(b.post("/v1/login/exchange", {"code": code_of(proc)}))
    assert assert_ok(a.get("/v1/me", headers=bearer(result["token"])))["user"]["id"] == "frank"

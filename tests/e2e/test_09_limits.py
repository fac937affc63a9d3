"""Hardening (issue 11): descriptors, connections and per-address limits.

Items 2 and 7: relayd must not spin when it runs out of descriptors, one
address must not take every connection, and per-address buckets must hold
with many accounts, with IPv6 and behind trusted proxies."""
import os
import resource
import socket
import time

import pytest

import relaylib
from relaylib import HTTP_TIMEOUT, SLOW, assert_error, bearer, run_relayd, session_from, wait_until

START = "/v1/pairing/start"
START_BODY = {"connector_type": "test-connector", "host_label": "laptop"}


def _cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _records(relay, msg):
    return [r for r in relay.log_records() if r.get("msg", "").startswith(msg)]


def _get(port, source="127.0.0.1", timeout=HTTP_TIMEOUT):
    """GET /healthz on a new connection; returns (socket, response or None when closed unanswered)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return sock, relaylib._read_response(sock, timeout)
    except (ConnectionResetError, BrokenPipeError):
        return sock, None


# -- item 2: the descriptor limit -------------------------------------------------------------

def test_the_descriptor_limit_is_raised_to_the_hard_limit(relayd):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        relay = relayd()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    now_soft, now_hard = resource.prlimit(relay.proc.pid, resource.RLIMIT_NOFILE)
    assert now_soft == now_hard == hard
    record = _records(relay, "descriptor limit")
    assert record and record[0]["nofile"] == hard, relay.log_text()[-2000:]


def test_out_of_descriptors_pauses_accepting_instead_of_spinning(relayd):
    relay = relayd("--request-timeout", "60s", "--max-connections-per-address", "100000")
    pid = relay.proc.pid
    spare = 6
    limit = len(os.listdir("/proc/%d/fd" % pid)) + spare
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    clients = []
    try:
        # More connections than descriptors left: the kernel queues the rest, accept() fails with EMFILE.
        for _ in range(spare + 30):
            clients.append(socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT))
        time.sleep(0.5 * SLOW)
        cpu, wall = _cpu_seconds(pid), time.monotonic()
        time.sleep(2)
        used, elapsed = _cpu_seconds(pid) - cpu, time.monotonic() - wall
        assert used < 0.2 * elapsed, "relayd used %.2fs of CPU in %.2fs while out of descriptors" % (used, elapsed)
        warnings = wait_until(lambda: _records(relay, "out of file descriptors"), 5 * SLOW, what="the warning")
        assert len(warnings) == 1, warnings
        assert warnings[0]["level"] == "warn" and warnings[0]["nofile"] == limit, warnings
    finally:
        for sock in clients:
            sock.close()
    # Once the clients are gone their descriptors come back, and so does the relay.
    def served():
        try:
            sock, r = _get(relay.port, timeout=2)
            sock.close()
            return r is not None and r.status_code == 200
        except OSError:
            return False
    wait_until(served, 10 * SLOW, what="the relay to accept again")
    # Short of descriptors again and again within one episode: still one line.
    assert len(_records(relay, "out of file descriptors")) == 1


# -- item 2: connections per address ----------------------------------------------------------

def test_one_address_cannot_hold_every_connection(relayd):
    relay = relayd("--max-connections-per-address", "4", "--request-timeout", "30s")
    held = []
    try:
        for _ in range(4):
            sock, r = _get(relay.port)
            held.append(sock)
            assert r is not None and r.status_code == 200
        sock, r = _get(relay.port)
        sock.close()
        assert r is None, "a fifth connection from the same address must be closed unanswered"
        # Another address is not affected.
        sock, r = _get(relay.port, source="127.0.0.2")
        sock.close()
        assert r is not None and r.status_code == 200
        refused = _records(relay, "connection refused")
        assert len(refused) == 1 and refused[0]["address"] == "127.0.0.1" and refused[0]["limit"] == 4, refused
        # A connection that closes gives its place back.
        held.pop().close()

        def fifth_fits():
            sock, r = _get(relay.port)
            if r is None:
                sock.close()
                return False
            held.append(sock)
            return True
        wait_until(fifth_fits, 5 * SLOW, what="the freed place")
    finally:
        for sock in held:
            sock.close()


def test_trusted_proxies_are_not_capped(relayd):
    relay = relayd("--max-connections-per-address", "2", "--trusted-proxies", "127.0.0.1")
    held = []
    try:
        for _ in range(6):
            sock, r = _get(relay.port)
            held.append(sock)
            assert r is not None and r.status_code == 200
    finally:
        for sock in held:
            sock.close()


# -- item 7: per-address buckets ------------------------------------------------------------------

def _claim(relay, token, session=None):
    r = relay.post("/v1/me/pairing/claim", {"code": "ZZZZZZZ"}, token=token, session=session)
    assert r.status_code in (404, 429), r.text
    return r


def test_the_claim_route_is_limited_per_address_too(relay):
    tokens = [relay.token("guesser%d" % i) for i in range(4)]
    answers = []
    for _ in range(3):
        for token in tokens:
            answers.append(_claim(relay, token))
    refused = [r for r in answers if r.status_code == 429]
    assert len(refused) >= 1, "12 guesses from one address with 4 accounts all went through"
    assert len(answers) - len(refused) <= 11
    for r in refused:
        err = assert_error(r, 429, "rate_limited")
        assert r.headers["X-RateLimit-Scope"] == "ip" and r.headers["X-RateLimit-Bucket"] == "claim"
        assert err["retry_after_ms"] > 0 and int(r.headers["Retry-After"]) >= 1
    # Another address, another bucket; and each account still has its own.
    other = session_from("127.0.0.3")
    r = _claim(relay, relay.token("neighbour"), session=other)
    assert_error(r, 404, "pairing_not_found")


def _start(relay, headers=None, session=None):
    r = relay.post(START, START_BODY, headers=headers, session=session)
    assert r.status_code in (200, 429), r.text
    return r.status_code


def _exhaust(relay, headers=None, session=None):
    """Starts pairings until the per-address bucket refuses (it refills one a second)."""
    for _ in range(40):
        if _start(relay, headers, session) == 429:
            return
    raise AssertionError("the pairing bucket never ran out")


def test_forwarded_for_names_the_client_behind_a_trusted_proxy(relayd):
    relay = relayd("--trusted-proxies", "127.0.0.1/32, 10.0.0.0/8")
    alice = {"X-Forwarded-For": "198.51.100.7"}
    _exhaust(relay, alice)
    # A client cannot move itself into another bucket by writing the left part of the header.
    assert _start(relay, {"X-Forwarded-For": "203.0.113.9, 198.51.100.7"}) == 429
    assert _start(relay, {"X-Forwarded-For": "203.0.113.9, 198.51.100.7, 10.1.2.3"}) == 429
    # Another client behind the same proxy has its own bucket.
    assert _start(relay, {"X-Forwarded-For": "198.51.100.8"}) == 200
    # A peer that is not a trusted proxy is counted by its own address, whatever it writes.
    assert _start(relay, {"X-Forwarded-For": "198.51.100.7"}, session=session_from("127.0.0.2")) == 200
    logged = [r for r in relay.log_records() if r.get("msg") == "request" and r.get("peer") == "198.51.100.8"]
    assert logged and logged[0]["via"] == "127.0.0.1", relay.log_text()[-2000:]


def test_without_trusted_proxies_forwarding_headers_are_ignored(relay):
    for i in range(40):
        if _start(relay, {"X-Forwarded-For": "198.51.100.%d" % i}) == 429:
            break
    else:
        raise AssertionError("a client escaped the per-address bucket with X-Forwarded-For")
    logged = [r for r in relay.log_records() if r.get("msg") == "request" and r.get("route") == START]
    assert logged and all(r["peer"] == "127.0.0.1" and "via" not in r for r in logged)


def test_ipv6_clients_are_counted_by_their_64(relayd):
    relay = relayd("--trusted-proxies", "127.0.0.1")
    _exhaust(relay, {"X-Forwarded-For": "2001:db8:1:2::1"})
    assert _start(relay, {"X-Forwarded-For": "2001:db8:1:2:ffff:ffff:ffff:9"}) == 429
    assert _start(relay, {"X-Forwarded-For": "[2001:db8:1:2::77]:4711"}) == 429
    assert _start(relay, {"X-Forwarded-For": "2001:db8:1:3::1"}) == 200


def test_the_forwarded_header_when_chosen(relayd):
    relay = relayd("--trusted-proxies", "127.0.0.1", "--forwarded-header", "forwarded")
    client = {"Forwarded": 'for="[2001:db8::1]:4711";proto=https, for=198.51.100.7;by=10.0.0.1'}
    _exhaust(relay, client)
    assert _start(relay, {"Forwarded": "for=203.0.113.5, for=198.51.100.7"}) == 429
    assert _start(relay, {"Forwarded": "for=198.51.100.8"}) == 200
    # In this mode X-Forwarded-For is just a header.
    assert _start(relay, {"Forwarded": "for=198.51.100.7", "X-Forwarded-For": "198.51.100.9"}) == 429


def test_an_unreadable_forwarding_header_keeps_the_proxy_address(relayd):
    relay = relayd("--trusted-proxies", "127.0.0.1")
    _start(relay, {"X-Forwarded-For": "unknown"})
    _start(relay, {"X-Forwarded-For": "198.51.100.7, garbage"})
    logged = [r for r in relay.log_records() if r.get("msg") == "request" and r.get("route") == START]
    assert len(logged) == 2 and all(r["peer"] == "127.0.0.1" and "via" not in r for r in logged), logged


@pytest.mark.parametrize("argv", [
    ["--trusted-proxies", "10.0.0.0/33"],
    ["--trusted-proxies", "10.0.0.1/8"],
    ["--trusted-proxies", "proxy.example"],
    ["--trusted-proxies", "10.0.0.0/8,,2001:db8::/129"],
    ["--forwarded-header", "x-real-ip"],
    ["--max-connections-per-address", "0"],
])
def test_bad_limit_settings_exit_2(tmp_path, argv):
    proc = run_relayd(["--data", str(tmp_path / "d")] + argv)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert argv[0] in proc.stderr
    assert not (tmp_path / "d").exists()

"""Who redeems a pairing (issue 34, finding 3): the code alone never takes a
bridge's token. A spec start is redeemed by its poll token only, and the
code's long poll tells nothing about it; an authors' start is bound by its
first poll (its address); an unknown code, an expired one and another's look
alike; one address holds at most 4 long polls; a poller that hangs up gives
its place back at once; a full node says so in its own words."""
import json
import socket
import subprocess
import threading
import time

from relaylib import HTTP_TIMEOUT, SLOW, assert_error, assert_ok, free_port, metric, mint_token, session_from, wait_until
from test_50_bridge_support import BRIDGE, WAIT, RelayBridge

START = "/v1/pairing/start"


def _poll(relay, code, timeout, source=None):
    path = "/v1/pairing/poll?code=%s&timeout=%s" % (code, timeout)
    if source is None:
        return relay.get(path)
    return relay.get(path, session=session_from(source))


def _authors_start(relay, source=None):
    kw = {} if source is None else {"session": session_from(source)}
    return assert_ok(relay.post(START, {"connector_type_id": "openclaw", "host_label": "mac"}, **kw))


def _unknown_code(*live):
    code = "QZXWVUT"
    assert code not in live
    return code


def test_the_code_poll_cannot_take_the_real_bridges_token(relay, user_token, tmp_path):
    """relay-bridge pair polls with its poll token; a thief long-polls the code from two addresses."""
    bridge = RelayBridge(relay, tmp_path)
    proc = subprocess.Popen([BRIDGE, "pair", "--server", relay.url(""), "--name", "victim", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bridge.env())
    stolen, answers, tries, stop = [], [], [], threading.Event()

    def thief(source):
        while not stop.is_set():
            tries.append(source)
            r = _poll(relay, code, 20, source)
            answers.append((source, r.status_code, r.text))
            if r.status_code == 200 and r.json()["result"].get("bot_token"):
                stolen.append(r.json()["result"])
            time.sleep(0.3)

    try:
        first = json.loads(proc.stdout.readline())
        code = first["code"]
        thieves = [threading.Thread(target=thief, args=(ip,)) for ip in ("127.0.0.8", "127.0.0.9", "127.0.0.12", "127.0.0.13")]
        for t in thieves:
            t.start()
        # The thieves are long-polling (or trying to) when the user claims.
        wait_until(lambda: len(set(tries)) == 4, WAIT, what="the thieves' polls")
        time.sleep(0.5)
        # Nor does the code tell a poller that a pairing waits on it.
        assert assert_ok(_poll(relay, code, 1, "127.0.0.11")) == {"status": "expired"}
        assert_ok(relay.claim(user_token, code))
        out, err = proc.communicate(timeout=WAIT)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for t in thieves:
        t.join(WAIT)
    assert proc.returncode == 0, (out, err)
    assert json.loads(out.strip().splitlines()[-1])["status"] == "paired", out
    assert stolen == [], stolen
    # Every answer the thieves had is the unknown code's, whatever the pairing's state.
    unknown = _poll(relay, _unknown_code(code), 5, "127.0.0.10")
    assert unknown.status_code == 200 and unknown.json()["result"] == {"status": "expired"}, unknown.text
    assert any(status == 200 for _, status, _ in answers), answers
    for source, status, text in answers:
        # The pairing bucket may slow a thief down (429); it never tells more.
        assert (status == 200 and json.loads(text)["result"] == {"status": "expired"}) or \
            (status == 429 and json.loads(text)["error"]["code"] == "rate_limited"), (source, status, text)
    # The real bridge's token is the one that works.
    r = relay.post("/v1/bridge/setManifest", {"tools": []}, token=bridge.token())
    assert r.status_code == 200, r.text


def test_a_spec_pairings_code_says_nothing_to_a_code_poller(relay, user_token):
    started = relay.pairing_start()
    unknown = _unknown_code(started["code"])
    for phase in ("pending", "claimed"):
        t0 = time.monotonic()
        mine = _poll(relay, started["code"], 3)
        took = time.monotonic() - t0
        other = _poll(relay, unknown, 3)
        # Same status, same body, no wait: as a code that never existed.
        assert (mine.status_code, mine.json()) == (other.status_code, other.json()), (phase, mine.text, other.text)
        assert mine.json()["result"] == {"status": "expired"} and took < 2, (phase, took)
        if phase == "pending":
            assert_ok(relay.claim(user_token, started["code"]))
    # The poll token still redeems it, once.
    r = assert_ok(relay.poll(started["poll_token"]))
    assert r["status"] == "paired", r


def test_an_authors_pairing_is_bound_to_its_first_pollers_address(relay, user_token):
    started = _authors_start(relay)
    code = started["code"]
    assert assert_ok(_poll(relay, code, 0, "127.0.0.1")) == {"status": "pending"}
    # Another address: expired at once, as an unknown code, while pending.
    t0 = time.monotonic()
    assert assert_ok(_poll(relay, code, 3, "127.0.0.7")) == {"status": "expired"}
    assert time.monotonic() - t0 < 2
    # The thief waits on the code while the user claims: it gets nothing; the bridge's address does.
    answers = {}
    thief = threading.Thread(target=lambda: answers.update(thief=_poll(relay, code, 10, "127.0.0.7")))
    bridge = threading.Thread(target=lambda: answers.update(bridge=_poll(relay, code, 10, "127.0.0.1")))
    thief.start()
    bridge.start()
    time.sleep(0.3)
    assert_ok(relay.claim(user_token, code))
    thief.join(WAIT)
    bridge.join(WAIT)
    assert assert_ok(answers["thief"]) == {"status": "expired"}, answers["thief"].text
    claimed = assert_ok(answers["bridge"])
    assert claimed["status"] == "claimed" and claimed["bot_token"].startswith(claimed["installation_id"] + ":")
    assert assert_ok(_poll(relay, code, 0, "127.0.0.7")) == {"status": "expired"}


def test_an_authors_pairing_polled_by_its_poll_token_shuts_the_code_out(relay, user_token):
    started = _authors_start(relay)
    assert assert_ok(relay.poll(started["poll_token"])) == {"status": "pending"}
    assert assert_ok(_poll(relay, started["code"], 0)) == {"status": "expired"}
    assert_ok(relay.claim(user_token, started["code"]))
    assert assert_ok(_poll(relay, started["code"], 0)) == {"status": "expired"}
    assert assert_ok(relay.poll(started["poll_token"]))["status"] == "paired"


def test_the_poll_token_redeems_an_authors_pairing_bound_to_an_address(relay, user_token):
    started = _authors_start(relay)
    assert assert_ok(_poll(relay, started["code"], 0, "127.0.0.1")) == {"status": "pending"}
    assert_ok(relay.claim(user_token, started["code"]))
    assert assert_ok(relay.poll(started["poll_token"]))["status"] == "paired"
    assert assert_ok(_poll(relay, started["code"], 0, "127.0.0.1")) == {"status": "expired"}


def _hold(relay, code, source, seconds=20):
    """A long poll on a raw connection, left open; returns the socket."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT, source_address=(source, 0))
    sock.sendall(("GET /v1/pairing/poll?code=%s&timeout=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (code, seconds)).encode())
    return sock


def test_one_address_holds_at_most_four_polls_and_a_hung_up_poll_frees_its_place(relay):
    code = _authors_start(relay, "127.0.0.5")["code"]
    held = [_hold(relay, code, "127.0.0.5") for _ in range(4)]
    try:
        # The four are held (each answers after its 20 s): a fifth is refused. Few requests here: the
        # address's pairing bucket (20, then one a second) must not be what refuses.
        time.sleep(0.5 * SLOW)
        r = _poll(relay, code, 0, "127.0.0.5")
        assert_error(r, 429, "rate_limited")
        assert r.headers["Retry-After"] == "2" and r.json()["error"]["retry_after_ms"] == 2000, r.headers
        assert "from this address" in r.json()["error"]["message"], r.text
        # Another address is not held back by them.
        other = _authors_start(relay, "127.0.0.6")["code"]
        assert assert_ok(_poll(relay, other, 0, "127.0.0.6")) == {"status": "pending"}
    finally:
        for sock in held:
            sock.close()
    # Hung up: the places come back at once, not at the polls' 20 s timeout.
    t0 = time.monotonic()
    wait_until(lambda: _poll(relay, code, 0, "127.0.0.5").status_code == 200, 3 * SLOW, interval=0.5,
               what="the places back")
    assert time.monotonic() - t0 < 3 * SLOW
    held = [_hold(relay, code, "127.0.0.5") for _ in range(4)]
    try:
        for sock in held:
            sock.settimeout(1)
            try:
                data = sock.recv(100)
            except socket.timeout:
                data = b""
            assert data == b"", data  # held, not answered 429
    finally:
        for sock in held:
            sock.close()


def test_a_full_node_says_pairing_polls_fill_it(relay):
    """1024 polls from 256 addresses (4 each) fill the node: the next one gets the node's own 503."""
    held = []
    sources = ["127.1.%d.%d" % (i // 200, i % 200 + 1) for i in range(256)]
    try:
        for source in sources:
            code = _authors_start(relay, source)["code"]
            held += [_hold(relay, code, source, 25) for _ in range(4)]
        code = _authors_start(relay, "127.2.0.1")["code"]
        wait_until(lambda: _poll(relay, code, 0, "127.2.0.1").status_code == 503, WAIT, interval=0.5,
                   what="the node's cap")
        r = _poll(relay, code, 0, "127.2.0.1")
        assert_error(r, 503, "temporarily_unavailable")
        assert r.json()["error"]["message"] == "too many pairing polls wait on this node; retry later", r.text
        assert "PostgreSQL" not in r.text and r.headers["Retry-After"] == "1", r.headers
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: _poll(relay, code, 0, "127.2.0.1").status_code == 200, 5 * SLOW, interval=0.5,
               what="the node's places back")


def test_a_timeout_of_any_length_is_clamped_and_a_non_number_refused(relayd):
    """issue 34: a 23-digit timeout was 400; any whole number is taken, clamped to 0-25."""
    metrics_port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % metrics_port)
    user_token = mint_token(relay.data, "alice")
    unknown = _unknown_code()
    for timeout in ("9" * 23, "9" * 200, "-" + "9" * 23, "%2B25", "%32%35"):
        assert assert_ok(_poll(relay, unknown, timeout)) == {"status": "expired"}, timeout
    for timeout in ("soon", "1.5", "", "2x", "9" * 200 + "x", "-"):
        r = _poll(relay, unknown, timeout)
        assert_error(r, 400, "invalid_request")
        assert [e["path"] for e in r.json()["error"]["errors"]] == ["timeout"], (timeout, r.text)
    r = relay.get("/v1/pairing/poll?code=%s&timeout=1&timeout=2" % unknown)
    assert r.json()["error"]["errors"][0]["message"] == "Given more than once", r.text
    # A live code with a 23-digit timeout is held (for 25 s at most) until the claim answers it.
    code = _authors_start(relay)["code"]
    answers = {}
    waiter = threading.Thread(target=lambda: answers.update(r=_poll(relay, code, "9" * 23)))
    t0 = time.monotonic()
    waiter.start()
    # Held: the node counts it among its waiting polls, and it has not answered.
    wait_until(lambda: metric(metrics_port, "relay_pairing_polls_waiting") == 1, WAIT, what="the poll held")
    assert "r" not in answers, answers["r"].text
    assert_ok(relay.claim(user_token, code))
    waiter.join(WAIT)
    assert assert_ok(answers["r"])["status"] == "claimed" and time.monotonic() - t0 < 25

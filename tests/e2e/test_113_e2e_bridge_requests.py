"""relayd's requests to a bridge (file.read.req, models.list.req) hardened (issue 34, finding 4;
docs/api.md "The bridge's socket"):

- a file of 1.5 MiB, the most relay-bridge sends, read through the REAL relay-bridge reaches the
  client whole (and a larger one as its first 1.5 MiB, `truncated`, with its own size) (the socket takes frames up to 3 MiB while an answer is awaited; it took 64 KiB and
  closed with 1009), on one node and across two nodes on one store and a Redis bus (the answer
  then crosses Redis);
- a frame over 64 KiB that answers nothing awaited still closes the socket with 1009;
- an answer counts only from the installation asked: another user's bridge sending the first
  user's req_id is dropped, and the right bridge's answer still goes through;
- caps per installation (16) and per user (64) on a node: past them 429 bridge_busy naming the
  cap, with Retry-After, and another user's bridge is still asked.
"""
import base64
import json
import threading
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bridgelib import WAIT, Installation
from e2elib import blob_key
from relaylib import STORE, assert_error, assert_ok, bearer, mint_token, wait_until
from test_100_e2e_relay_cli import ACP_AGENT, confirm_bridge
from test_50_bridge_support import PYTHON
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import pair_real_bridge
from test_97_e2e_files_requests import _ask_in_thread, _notify, _setup

BIG = 1536 * 1024  # relay-bridge's FILE_READ_MAX


def _big_file(path):
    """1.5 MiB of UTF-8 text (the agent reads it through fs/read_text_file), not all alike."""
    line = b"".join(b"%06d the okapi crossed the river at dawn\n" % i for i in range(BIG // 40 + 1))
    data = line[:BIG - 1] + b"\n"
    assert len(data) == BIG
    path.write_bytes(data)
    return data


def _read_big_through_the_real_bridge(client_relay, bridge_relay, tmp_path):
    """The real bridge paired on bridge_relay reads the file for an ACP agent; the client asks
    client_relay for it and opens it with the terminal's session key."""
    cli = Cli(tmp_path)
    token = cli.login(bridge_relay)
    bridge, inst = pair_real_bridge(cli, bridge_relay, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    data = _big_file(work / "big.txt")
    agent = "acp:%s %s --state %s --log %s" % (PYTHON, ACP_AGENT, tmp_path / "agent-state", tmp_path / "agent.log")
    bridge.start(agent, "--cwd", str(work))
    try:
        bridge.wait_log("device key registered as")
        confirm_bridge(cli, bridge)
        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received" % ses)
        send = cli.start("send", ses, "peek %s" % (work / "big.txt"))
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert send.events("done")[0]["data"]["text"] == "read %d characters" % BIG
        with open(cli.config / "client-session-keys.json") as f:
            key = bytes.fromhex(json.load(f)["sessions"][ses][0])
        files = wait_until(lambda: assert_ok(client_relay.get("/v1/me/sessions/%s/files" % ses,
                                                              headers=bearer(token)))["files"],
                           WAIT, what="the file the agent read")
        idx = files[0]["path_blind_idx"]
        r = client_relay.request("GET", "/v1/me/sessions/%s/files/%s" % (ses, idx), headers=bearer(token))
        got = assert_ok(r)
        assert got["encrypted"] is True and got["size_bytes"] == BIG, {k: v for k, v in got.items() if k != "base64"}
        raw = base64.b64decode(got["base64"])
        blob = "agent_files/%s/%s" % (ses, idx)
        assert AESGCM(blob_key(key, blob)).decrypt(raw[1:13], raw[13:], None) == data
        assert got["truncated"] is False
        # Grown past the cap: its first 1.5 MiB, marked truncated, with the file's own size (docs/bridge.md).
        with open(work / "big.txt", "ab") as f:
            f.write(b"one more line past the cap\n" * 100)
        got = assert_ok(client_relay.request("GET", "/v1/me/sessions/%s/files/%s" % (ses, idx), headers=bearer(token)))
        assert got["truncated"] is True and got["size_bytes"] == BIG + 2700, {k: v for k, v in got.items() if k != "base64"}
        raw = base64.b64decode(got["base64"])
        assert AESGCM(blob_key(key, blob)).decrypt(raw[1:13], raw[13:], None) == data
        # The socket is still the one that answered (not closed with 1009 and reconnected).
        assert "1009" not in bridge.log_text() and bridge.log_text().count("connected as") == 1, bridge.log_text()
        # Idle again: a large frame is no longer taken (the bridge answers a small one fine).
        assert assert_ok(client_relay.get("/v1/me/installations/%s/models" % inst, headers=bearer(token))) == {
            "models": []}
    finally:
        assert bridge.stop() == 0


def test_a_big_file_through_the_real_bridge_reaches_the_client_whole(relay, tmp_path):
    _read_big_through_the_real_bridge(relay, relay, tmp_path)


def test_a_big_file_crosses_the_redis_bus_between_two_nodes(relayd, redis_bus, tmp_path):
    bus = redis_bus.url()
    if STORE == "postgres":
        a = relayd("--bus", bus)
        b = relayd("--bus", bus, store=a.store)
    else:
        store = "sqlite:%s" % (tmp_path / "shared.db")
        a = relayd("--store", store, "--bus", bus)
        b = relayd("--store", store, "--bus", bus)
    wait_until(lambda: b.get("/v1/me", headers=bearer(a.token("alice"))).status_code == 200, WAIT, what="node b")
    # The bridge holds its socket on a; the client asks b: the request and the 2 MiB answer cross Redis.
    _read_big_through_the_real_bridge(b, a, tmp_path)
    # The answer went to b's "rpc:" topic, published but not kept in the topic's log (docs/internals/bus.md).
    logs = [k for k in redis_bus.cli(bus, "KEYS", "relay:sig:log:rpc:*").split()]
    assert logs, "no signal was logged on an rpc topic (the models answer is small, and logged)"
    for k in logs:
        sizes = [len(item) for item in redis_bus.cli(bus, "LRANGE", k, 0, -1).splitlines()]
        assert max(sizes) < 64 * 1024, (k, sizes)


def test_a_large_frame_answering_nothing_closes_the_socket(relay, user_token):
    # Idle: the cap is 64 KiB.
    inst = Installation(relay, user_token)
    sock = inst.connect()
    sock.send({"type": "file.read.resp", "req_id": "rq_nobody.x", "base64": "A" * (100 * 1024)})
    assert sock.wait_closed(WAIT) == 1009
    # A request waits, so the socket takes large frames: but only as that request's answer.
    sock = inst.connect()
    box = {}
    t = threading.Thread(target=lambda: box.update(r=_models(relay, user_token, inst.id)), daemon=True)
    t.start()
    req = sock.next(WAIT)
    assert req["type"] == "models.list.req", req
    sock.send({"type": "pong", "padding": "A" * (100 * 1024)})
    assert sock.wait_closed(WAIT) == 1009
    wait_until(lambda: "answers nothing it was asked" in relay.log_text(), WAIT, what="the log line")
    # The request it did not answer times out.
    t.join(WAIT)
    assert_error(box["r"], 504, "bridge_timeout")


def test_an_answer_counts_only_from_the_installation_asked(relay, user_token):
    e, sock, sid = _setup(relay, user_token)
    body, _ = _notify(e, sid)
    bob = Installation(relay, mint_token(relay.data, "bob"))
    bob_sock = bob.connect()
    t, box = _ask_in_thread(e, "/v1/me/sessions/%s/files/%s" % (sid, body["path_blind_idx"]))
    req = sock.next(WAIT)
    assert req["type"] == "file.read.req", req
    forged = base64.b64encode(b"bob's content").decode()
    bob_sock.send({"type": "file.read.resp", "req_id": req["req_id"], "mime_type": "text/plain", "size_bytes": 13,
                   "base64": forged, "encrypted": True})
    wait_until(lambda: "a request it was not sent" in relay.log_text(), WAIT, what="the foreign answer's log line")
    assert t.is_alive(), "the client was answered with the other bridge's frame: %s" % box
    mine = base64.b64encode(b"alice's content").decode()
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "mime_type": "text/plain", "size_bytes": 15,
               "base64": mine, "encrypted": True})
    t.join(WAIT)
    assert assert_ok(box["r"])["base64"] == mine
    # A second answer with the same req_id, now from the right bridge, is no longer awaited either.
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "base64": forged})
    wait_until(lambda: relay.log_text().count("a request it was not sent") >= 2, WAIT, what="the late answer's log")
    bob_sock.close()
    sock.close()


def _models(relay, token, inst_id):
    """GET models, waiting out the user's rate bucket (a 429 rate_limited is not what is tested)."""
    while True:
        r = relay.request("GET", "/v1/me/installations/%s/models" % inst_id, headers=bearer(token), timeout=WAIT)
        if r.status_code == 429 and r.json()["error"]["code"] == "rate_limited":
            time.sleep(0.2)
            continue
        return r


def _hold(relay, token, inst_id, count):
    """count requests to an installation whose bridge never answers, each left waiting (10 s)."""
    threads = []
    for _ in range(count):
        t = threading.Thread(target=_models, args=(relay, token, inst_id), daemon=True)
        t.start()
        threads.append(t)
    return threads


def test_caps_per_installation_and_per_user_leave_other_users_served(relay, user_token):
    bob_token = mint_token(relay.data, "bob")
    bob = [Installation(relay, bob_token) for _ in range(5)]
    socks = [inst.connect() for inst in bob]
    alice = Installation(relay, user_token)
    alice_sock = alice.connect()
    started = time.monotonic()

    # 16 waiting for one of bob's bridges: the 17th is refused at once, naming the installation's cap.
    held = _hold(relay, bob_token, bob[0].id, 16)
    for _ in range(16):
        assert socks[0].next(WAIT)["type"] == "models.list.req"
    r = _models(relay, bob_token, bob[0].id)
    err = assert_error(r, 429, "bridge_busy")
    assert r.json()["error"]["details"] == {"cap": "installation", "limit": 16}, r.text
    assert 1 <= int(r.headers["Retry-After"]) <= 11 and r.json()["error"]["retry_after_ms"] >= 1000, r.headers
    assert "installation" in err["message"], err

    # 64 waiting for bob's bridges in all: a fifth installation is refused, naming the user's cap.
    for i in (1, 2, 3):
        held += _hold(relay, bob_token, bob[i].id, 16)
        for _ in range(16):
            assert socks[i].next(WAIT)["type"] == "models.list.req"
    r = _models(relay, bob_token, bob[4].id)
    assert_error(r, 429, "bridge_busy")
    assert r.json()["error"]["details"] == {"cap": "user", "limit": 64}, r.text
    assert time.monotonic() - started < 9, "the held requests timed out before the caps were reached"

    # Alice's bridge is still asked, and answers.
    box = {}
    t = threading.Thread(target=lambda: box.update(r=_models(relay, user_token, alice.id)))
    t.start()
    req = alice_sock.next(WAIT)
    assert req["type"] == "models.list.req", req
    alice_sock.send({"type": "models.list.resp", "req_id": req["req_id"], "models": ["m"]})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"models": ["m"]}

    # Once bob's requests time out (504), his bridges are asked again.
    for t in held:
        t.join(WAIT)
    box = {}
    t = threading.Thread(target=lambda: box.update(r=_models(relay, bob_token, bob[4].id)))
    t.start()
    req = socks[4].next(WAIT)
    socks[4].send({"type": "models.list.resp", "req_id": req["req_id"], "models": []})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"models": []}
    for s in socks + [alice_sock]:
        s.close()

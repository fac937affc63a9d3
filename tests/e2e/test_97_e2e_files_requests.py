"""End-to-end encryption (issue 26): files an agent touched (by blind index,
their paths sealed), and relayd's requests to a bridge over its socket
(file.read.req, models.list.req) answered by req_id, from any node; the
bridge's hello {version}."""
import base64
import threading
import time

from bridgelib import WAIT, Installation, Socket
from e2elib import E2E, seal
from relaylib import assert_error, assert_ok, find_error, validation_errors, wait_until


def _setup(relay, user_token):
    e = E2E(relay, user_token)
    sock = e.inst.connect()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["device_pending", "device_added"]
    sid = e.encrypted_session()
    assert sock.next_update(WAIT)["type"] == "session.started"
    assert sock.next_update(WAIT)["type"] == "session_key_granted"
    return e, sock, sid


def _notify(e, sid, idx="aGVsbG8td29ybGQ", tool="read"):
    k = e.session_key
    body = {"session_id": sid, "tool": tool, "size_bytes": 12, "mime": "text/plain",
            "path_ct": seal(k, "agent_files/%s/%s" % (sid, idx), "/home/me/secret.txt"),
            "display_name_ct": seal(k, "agent_files/%s/%s" % (sid, idx), "secret.txt"), "path_blind_idx": idx}
    return body, e.inst.post("notifyToolFile", body)


def _ask_in_thread(e, path, device=None):
    box = {}
    t = threading.Thread(target=lambda: box.update(r=e.me("GET", path)))
    t.start()
    return t, box


def test_files_are_listed_by_blind_index_with_their_sealed_names(relay, user_token):
    e, sock, sid = _setup(relay, user_token)
    body, r = _notify(e, sid)
    assert assert_ok(r) == {"session_id": sid, "path_blind_idx": body["path_blind_idx"]}
    _notify(e, sid, tool="edit")  # the same file again: one row, the latest tool
    other, r = _notify(e, sid, idx="b3RoZXI")
    assert_ok(r)
    files = assert_ok(e.me("GET", "/v1/me/sessions/%s/files" % sid))["files"]
    by_idx = {f["path_blind_idx"]: f for f in files}
    assert set(by_idx) == {"aGVsbG8td29ybGQ", "b3RoZXI"}, files
    assert by_idx["aGVsbG8td29ybGQ"]["tool"] == "edit" and by_idx["aGVsbG8td29ybGQ"]["size_bytes"] == 12, files
    assert by_idx["b3RoZXI"]["path_ct"] == other["path_ct"], files
    assert by_idx["b3RoZXI"]["display_name_ct"] == other["display_name_ct"], files
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    _, r = _notify(e, plain)  # sealed fields in a plain session: refused by name (test_115 has the plain form)
    assert find_error(validation_errors(r), "path_ct")["message"] == "This session is not encrypted: path_ct is refused"
    _, r = _notify(e, sid, idx="not+base64url")
    assert find_error(validation_errors(r), "path_blind_idx") is not None, r.text
    r = e.inst.post("notifyToolFile", dict(body, path="/home/me/secret.txt", path_ct=None))
    assert validation_errors(r), r.text
    assert assert_ok(e.me("GET", "/v1/me/sessions/%s/files" % plain)) == {"files": []}
    assert_error(e.me("GET", "/v1/me/sessions/ses_nope/files"), 404, "session_not_found")
    assert_error(e.me("GET", "/v1/me/sessions/%s/files" % sid, token=relay.token("bob")), 404, "session_not_found")
    sock.close()


def test_file_read_and_models_go_to_the_bridge_and_back(relay, user_token):
    e, sock, sid = _setup(relay, user_token)
    body, _ = _notify(e, sid)
    idx = body["path_blind_idx"]
    t, box = _ask_in_thread(e, "/v1/me/sessions/%s/files/%s" % (sid, idx))
    req = sock.next(WAIT)
    assert req["type"] == "file.read.req" and req["req_id"].startswith("rq_"), req
    assert (req["session_id"], req["blind_idx"], req["path_ct"]) == (sid, idx, body["path_ct"]), req
    content = base64.b64encode(b"sealed bytes").decode()
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "mime_type": "text/plain", "size_bytes": 12,
               "base64": content, "encrypted": True})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"mime_type": "text/plain", "size_bytes": 12, "base64": content,
                                   "encrypted": True}
    # The bridge's own error comes back as such.
    t, box = _ask_in_thread(e, "/v1/me/sessions/%s/files/%s" % (sid, idx))
    req = sock.next(WAIT)
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "error": {"code": "no_session_key"}})
    t.join(WAIT)
    err = assert_error(box["r"], 502, "upstream_error")
    assert box["r"].json()["error"]["details"]["bridge_error"] == {"code": "no_session_key"}, box["r"].text
    # A late or unknown answer is dropped; a file the agent never touched is not asked for.
    sock.send({"type": "file.read.resp", "req_id": "rq_nobody.x", "base64": ""})
    assert_error(e.me("GET", "/v1/me/sessions/%s/files/b3RoZXI" % sid), 404, "file_not_found")

    t, box = _ask_in_thread(e, "/v1/me/installations/%s/models" % e.inst.id)
    req = sock.next(WAIT)
    assert req["type"] == "models.list.req", req
    sock.send({"type": "models.list.resp", "req_id": req["req_id"], "models": [{"id": "m1"}]})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"models": [{"id": "m1"}]}
    assert_error(e.me("GET", "/v1/me/installations/inst_0000000000000000/models"), 404, "installation_not_found")

    # A bridge that does not answer: 504 after 10 s.
    t0 = time.monotonic()
    t, box = _ask_in_thread(e, "/v1/me/installations/%s/models" % e.inst.id)
    assert sock.next(WAIT)["type"] == "models.list.req"
    t.join(WAIT)
    assert_error(box["r"], 504, "bridge_timeout")
    assert 9 <= time.monotonic() - t0 < 14
    sock.close()
    # No socket anywhere: 503 at once.
    wait_until(lambda: e.inst.health() == "offline", WAIT, what="offline")
    assert_error(e.me("GET", "/v1/me/installations/%s/models" % e.inst.id), 503, "bridge_offline")


def test_hello_version_is_the_installation_bridge_version(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    sock.send({"type": "hello", "version": "0.13.7"})
    sock.send({"type": "something-new", "x": 1})

    def version():
        me = assert_ok(inst.client("GET", "/v1/me"))
        return [i["bridge_version"] for i in me["installations"] if i["id"] == inst.id][0]
    wait_until(lambda: version() == "0.13.7", WAIT, what="bridge_version")
    sock.send({"type": "hello", "version": "bad\nversion"})
    sock.send({"type": "hello", "version": "0.14.0"})
    wait_until(lambda: version() == "0.14.0", WAIT, what="bridge_version")
    sock.close()


def test_a_request_reaches_the_bridge_on_another_node(relayd, redis_bus, tmp_path):
    store = "sqlite:%s" % (tmp_path / "shared.db")
    bus = redis_bus.url()
    a = relayd("--store", store, "--bus", bus)
    b = relayd("--store", store, "--bus", bus)
    e, sock, sid = _setup(a, a.token("alice"))
    e2 = E2E.__new__(E2E)
    e2.__dict__.update(e.__dict__)
    e2.relay = b
    wait_until(lambda: e2.me("GET", "/v1/me").status_code == 200, WAIT, what="node b")
    t, box = _ask_in_thread(e2, "/v1/me/installations/%s/models" % e.inst.id)
    req = sock.next(WAIT)
    assert req["type"] == "models.list.req", req
    sock.send({"type": "models.list.resp", "req_id": req["req_id"], "models": ["x"]})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"models": ["x"]}
    sock.close()

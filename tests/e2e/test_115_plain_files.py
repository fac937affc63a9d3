"""Files the agent touched in a PLAIN session (issue 40, item 2; docs/api.md "Files the agent
touched"): the bridge reports them in clear (`path`, `display_name`), a client reads one by its path
(`POST /v1/me/sessions/:id/files/read {path}`), relayd forwards `file.read.req {path}` to the bridge.

- relayd validates the plain fields (lengths, no NUL, no control characters), refuses the plain form
  in an encrypted session and the sealed form in a plain one by name, keeps nothing it refused,
  and answers another user 404;
- the real relay-bridge reports a plain session's file in clear and reads it back inside --cwd
  (whole, or its first 1.5 MiB marked truncated), refuses a file that became a link out of it, and,
  started again, reads in clear only once a message has told it the session is plain.
"""
import base64
import os
import threading

from bridgelib import WAIT, Installation
from relaylib import assert_error, assert_ok, bearer, find_error, mint_token, validation_errors, wait_until
from test_97_e2e_files_requests import _notify, _setup
from test_100_e2e_relay_cli import ACP_AGENT
from test_50_bridge_support import PYTHON
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import pair_real_bridge

BIG = 1536 * 1024  # relay-bridge's FILE_READ_MAX


def _plain(e, path="/home/me/notes.txt", name="notes.txt", tool="edit", **extra):
    body = dict({"session_id": e.plain, "tool": tool, "size_bytes": 33, "mime": "text/plain", "path": path,
                 "display_name": name}, **extra)
    return e.inst.post("notifyToolFile", body)


def _files(e, sid):
    return assert_ok(e.me("GET", "/v1/me/sessions/%s/files" % sid))["files"]


def _read_in_thread(e, sid, path):
    box = {}
    t = threading.Thread(target=lambda: box.update(r=e.me("POST", "/v1/me/sessions/%s/files/read" % sid,
                                                          {"path": path})))
    t.start()
    return t, box


def _setup_both(relay, user_token):
    e, sock, sid = _setup(relay, user_token)
    e.plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    started = sock.next_update(WAIT)
    assert started["type"] == "session.started" and started["payload"]["session"]["encrypted"] is False, started
    return e, sock, sid


def test_plain_reports_are_kept_in_clear_and_refused_in_the_other_kind(relay, user_token):
    e, sock, sid = _setup_both(relay, user_token)
    assert assert_ok(_plain(e, tool="read")) == {"session_id": e.plain, "path": "/home/me/notes.txt"}
    assert_ok(_plain(e))  # the same file again: one row, the latest tool
    assert_ok(_plain(e, path="/home/me/b.bin", name="b.bin", tool="write", size_bytes=None, mime=None))
    files = {f["path"]: f for f in _files(e, e.plain)}
    assert set(files) == {"/home/me/notes.txt", "/home/me/b.bin"}, files
    f = files["/home/me/notes.txt"]
    assert set(f) == {"tool", "size_bytes", "mime", "path", "display_name", "updated_at"}, f
    assert (f["tool"], f["size_bytes"], f["mime"], f["display_name"]) == ("edit", 33, "text/plain", "notes.txt"), f
    assert files["/home/me/b.bin"]["size_bytes"] is None and files["/home/me/b.bin"]["mime"] is None
    before = _files(e, e.plain)

    # Lengths, control characters, NUL: refused at the field.
    r = _plain(e, path="/" + "a" * 4096)
    assert find_error(validation_errors(r), "path")["code"] == "too_big", r.text
    r = _plain(e, name="x" * 1025)
    assert find_error(validation_errors(r), "display_name")["code"] == "too_big", r.text
    r = _plain(e, path="")
    assert find_error(validation_errors(r), "path")["code"] == "too_small", r.text
    r = _plain(e, path="/home/me/a\nb")
    assert find_error(validation_errors(r), "path")["message"] == "Expected text without control characters"
    r = _plain(e, name="bad\x1bname")
    assert find_error(validation_errors(r), "display_name") is not None, r.text
    r = e.relay.request("POST", "/v1/bridge/notifyToolFile", headers=dict(bearer(e.inst.token), **{
        "Content-Type": "application/json"}),
        data=('{"session_id": "%s", "tool": "read", "path": "/a\\u0000b", "display_name": "b"}' % e.plain).encode())
    assert "\\u0000" in validation_errors(r)[0]["message"], r.text
    # The plain form lacking a field, or carrying sealed ones: refused by name.
    r = e.inst.post("notifyToolFile", {"session_id": e.plain, "tool": "read", "path": "/home/me/x"})
    err = find_error(validation_errors(r), "display_name")
    assert err["message"] == "Required (the session is not encrypted)", err
    r = _plain(e, path_blind_idx="aGVsbG8td29ybGQ")
    assert find_error(validation_errors(r), "path_blind_idx")["message"] == \
        "This session is not encrypted: path_blind_idx is refused", r.text
    body, _ = _notify(e, sid)
    r = _plain(e, path_ct=body["path_ct"])
    assert find_error(validation_errors(r), "path_ct") is not None, r.text

    # An encrypted session refuses the plain form, even beside the sealed one: a path never rests there in clear.
    r = e.inst.post("notifyToolFile", {"session_id": sid, "tool": "read", "path": "/home/me/secret.txt",
                                       "display_name": "secret.txt"})
    assert find_error(validation_errors(r), "path")["message"] == \
        "This session is end-to-end encrypted: path is refused", r.text
    r = e.inst.post("notifyToolFile", dict(body, display_name="secret.txt"))
    assert find_error(validation_errors(r), "display_name") is not None, r.text
    r = e.inst.post("notifyToolFile", {"session_id": sid, "tool": "read", "path_ct": body["path_ct"],
                                       "display_name_ct": body["display_name_ct"]})
    assert find_error(validation_errors(r), "path_blind_idx")["message"] == \
        "Required (the session is end-to-end encrypted)", r.text
    assert [f["path_blind_idx"] for f in _files(e, sid)] == [body["path_blind_idx"]]
    assert "secret.txt" not in str(_files(e, sid))
    assert _files(e, e.plain) == before  # nothing kept of any refusal

    # Another user's bridge and another user: 404, and nothing kept.
    bob = Installation(relay, mint_token(relay.data, "bob"))
    r = bob.post("notifyToolFile", {"session_id": e.plain, "tool": "read", "path": "/etc/passwd",
                                    "display_name": "passwd"})
    assert_error(r, 404, "session_not_found")
    assert_error(e.me("GET", "/v1/me/sessions/%s/files" % e.plain, token=relay.token("bob")), 404, "session_not_found")
    assert _files(e, e.plain) == before
    sock.close()


def test_a_plain_read_goes_to_the_bridge_by_path_and_the_kinds_do_not_mix(relay, user_token):
    e, sock, sid = _setup_both(relay, user_token)
    assert_ok(_plain(e))
    t, box = _read_in_thread(e, e.plain, "/home/me/notes.txt")
    req = sock.next(WAIT)
    assert req["type"] == "file.read.req" and req["req_id"].startswith("rq_"), req
    assert {k: v for k, v in req.items() if k != "req_id"} == {"type": "file.read.req", "session_id": e.plain,
                                                               "path": "/home/me/notes.txt"}, req
    content = base64.b64encode(b"the notes\n").decode()
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "mime_type": "text/plain", "size_bytes": 10,
               "base64": content, "encrypted": False})
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"mime_type": "text/plain", "size_bytes": 10, "base64": content,
                                   "encrypted": False}

    path = "/v1/me/sessions/%s/files/read" % e.plain
    # A path the bridge never reported in that session is not asked for.
    assert_error(e.me("POST", path, {"path": "/home/me/other.txt"}), 404, "file_not_found")
    assert_error(e.me("POST", "/v1/me/sessions/%s/files/read" % sid, {"path": "/home/me/notes.txt"}), 409,
                 "session_encrypted")
    # Validated as the report is.
    assert find_error(validation_errors(e.me("POST", path, {"path": "/" + "a" * 4096})), "path")["code"] == "too_big"
    assert find_error(validation_errors(e.me("POST", path, {"path": "/a\tb"})), "path") is not None
    assert find_error(validation_errors(e.me("POST", path, {})), "path")["message"] == "Required"
    r = e.relay.request("POST", path, headers=dict(bearer(e.user), **{"Content-Type": "application/json"}),
                        data=b'{"path": "/home/me/notes.txt\\u0000"}')
    assert "\\u0000" in validation_errors(r)[0]["message"], r.text
    # The sealed form in a plain session, and either in another user's session.
    key = "aGVsbG8td29ybGQ"
    assert_error(e.me("GET", "/v1/me/sessions/%s/files/%s" % (e.plain, key)), 409, "session_not_encrypted")
    assert_error(e.me("POST", path, {"path": "/home/me/notes.txt"}, token=relay.token("bob")), 404,
                 "session_not_found")
    assert_error(e.me("POST", "/v1/me/sessions/ses_nope/files/read", {"path": "/x"}), 404, "session_not_found")
    # None of those reached the bridge: the next frame it gets is the next request.
    t, box = _read_in_thread(e, e.plain, "/home/me/notes.txt")
    req = sock.next(WAIT)
    assert req.get("path") == "/home/me/notes.txt", req
    sock.send({"type": "file.read.resp", "req_id": req["req_id"], "error": {"code": "forbidden"}})
    t.join(WAIT)
    assert_error(box["r"], 502, "upstream_error")
    assert box["r"].json()["error"]["details"]["bridge_error"] == {"code": "forbidden"}
    sock.close()


def test_the_real_bridge_reports_and_reads_a_plain_sessions_file_inside_its_folder(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    text = b"the treasure is under the gazebo\n"
    (work / "notes.txt").write_bytes(text)
    (tmp_path / "outside.txt").write_text("not the agent's\n")
    agent = "acp:%s %s --state %s --log %s" % (PYTHON, ACP_AGENT, tmp_path / "agent-state", tmp_path / "agent.log")
    bridge.start(agent, "--cwd", str(work))
    try:
        bridge.wait_log("device key registered as")  # it holds keys: still, a plain session is reported in clear
        ses = cli.json("new", "--installation", inst)["session_id"]
        send = cli.start("send", ses, "read %s" % (work / "notes.txt"))
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert "gazebo" in send.events("done")[0]["data"]["text"]

        real = os.path.realpath(str(work / "notes.txt"))
        files = wait_until(lambda: assert_ok(relay.get("/v1/me/sessions/%s/files" % ses, headers=bearer(token)))["files"],
                           WAIT, what="the file the agent read")
        assert len(files) == 1, files
        assert (files[0]["path"], files[0]["display_name"], files[0]["tool"], files[0]["size_bytes"]) == \
            (real, "notes.txt", "read", len(text)), files

        def read():
            return relay.request("POST", "/v1/me/sessions/%s/files/read" % ses, headers=bearer(token),
                                 json={"path": real})
        got = assert_ok(read())
        assert got["encrypted"] is False and got["truncated"] is False and got["size_bytes"] == len(text), got
        assert base64.b64decode(got["base64"]) == text
        # Grown past the cap: its first 1.5 MiB, marked truncated, with the file's own size.
        with open(work / "notes.txt", "ab") as f:
            f.write(b"x" * BIG)
        got = assert_ok(read())
        assert got["truncated"] is True and got["size_bytes"] == len(text) + BIG, \
            {k: v for k, v in got.items() if k != "base64"}
        assert base64.b64decode(got["base64"]) == (text + b"x" * BIG)[:BIG]
        # Started again, the bridge has not been told the session is plain (holding no key for it proves
        # nothing): no read in clear until a message of the session says so.
        (work / "notes.txt").write_bytes(text)
        assert bridge.stop() == 0
        bridge.start(agent, "--cwd", str(work), wait_connected=False)
        bridge.wait_log("connected as", count=2)
        r = read()
        assert_error(r, 502, "upstream_error")
        assert r.json()["error"]["details"]["bridge_error"] == {"code": "session_not_plain"}, r.text
        send = cli.start("send", ses, "read %s" % (work / "notes.txt"))
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        got = assert_ok(read())
        assert base64.b64decode(got["base64"]) == text and got["encrypted"] is False, got
        # The file became a link out of the folder: refused, nothing of the outside file sent.
        os.unlink(work / "notes.txt")
        os.symlink(tmp_path / "outside.txt", work / "notes.txt")
        r = read()
        assert_error(r, 502, "upstream_error")
        assert r.json()["error"]["details"]["bridge_error"] == {"code": "forbidden"}, r.text
        assert "not the agent" not in r.text
        # Gone: not_found.
        os.unlink(work / "notes.txt")
        r = read()
        assert r.json()["error"]["details"]["bridge_error"] == {"code": "not_found"}, r.text
    finally:
        assert bridge.stop() == 0

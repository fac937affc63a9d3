"""The `relay` CLI's side of issue 36 (README, docs/api.md "Agents and projects"):

- `relay new --agent --project [--worktree] [--resume]` starts a plain session with them, or an
  encrypted one whose project goes sealed as project_ct (session_meta/project, with the key the
  CLI made); --worktree without --project is a usage error; an undeclared agent is relayd's 422;
- `relay projects` and `relay agent-sessions` ask the bridge (a scripted one here) through relayd
  and print its lists, readable on a terminal and as JSON; once this terminal confirmed the
  bridge, it names its device and opens the list the bridge sealed to it (NaCl box, libsodium
  through ctypes here); a list sealed to another device, or one it cannot open, is shown sealed.
"""
import base64
import ctypes
import ctypes.util
import json
import os
import threading

from bridgelib import WAIT, Installation
from e2elib import open_
from relaylib import assert_ok
from test_60_relay_cli import Cli, on_terminal

SODIUM = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
assert SODIUM.sodium_init() >= 0

AGENTS = [{"name": "claude", "kind": "acp", "default": True, "supports": {"session_list": True}},
          {"name": "codex", "kind": "acp", "supports": {}}]
PROJECTS = {"projects": [{"id": "p_AbCdEfGhIjKlMnOpQrStUv", "name": "relay", "path": "/src/relay", "branch": "main",
                          "agents_used": ["claude", "codex"]}]}
SESSIONS = {"sessions": [{"agent_session_id": "0199-a", "title": "Fix the login", "cwd": "/src/relay",
                          "updated_at": "2026-11-28T10:00:00Z", "bound_session_id": "ses_abc"}]}


def keypair():
    pk, sk = ctypes.create_string_buffer(32), ctypes.create_string_buffer(32)
    assert SODIUM.crypto_box_keypair(pk, sk) == 0
    return pk.raw, sk.raw


def box(plain, their_pk, my_sk):
    nonce = os.urandom(24)
    out = ctypes.create_string_buffer(len(plain) + 16)
    assert SODIUM.crypto_box_easy(out, plain, ctypes.c_ulonglong(len(plain)), nonce, their_pk, my_sk) == 0
    return base64.b64encode(nonce + out.raw).decode()


class Responder:
    """Answers the bridge requests the socket gets, with answer(req) -> fields; skips updates."""

    def __init__(self, sock, answer):
        self.sock, self.answer, self.requests = sock, answer, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                frame = self.sock.next(0.2)
            except AssertionError:
                continue
            if frame.get("type", "").endswith(".req"):
                self.requests.append(frame)
                self.sock.send(dict({"type": frame["type"][:-4] + ".resp", "req_id": frame["req_id"]},
                                    **self.answer(frame)))

    def close(self):
        self.stop.set()
        self.thread.join(WAIT)


def _setup(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    inst = Installation(relay, token)
    assert_ok(inst.post("setManifest", {"agents": AGENTS}))
    return cli, token, inst, inst.connect()


def test_lists_in_clear_are_printed_for_people_and_scripts(relay, tmp_path):
    cli, token, inst, sock = _setup(relay, tmp_path)
    answers = {"projects.list.req": PROJECTS, "agent_sessions.list.req": SESSIONS}
    r = Responder(sock, lambda req: answers[req["type"]])
    try:
        assert cli.json("projects", inst.id, "--json") == PROJECTS
        assert r.requests[-1] == {"type": "projects.list.req", "req_id": r.requests[-1]["req_id"]}
        status, out = on_terminal(cli, "projects", inst.id)
        assert status == 0, out
        assert "p_AbCdEfGhIjKlMnOpQrStUv  relay  /src/relay  on main  agents: claude, codex" in out, out
        got = cli.json("agent-sessions", inst.id, "--agent", "codex", "--project", "p 1&x", "--json")
        assert got == SESSIONS
        req = r.requests[-1]
        assert (req["agent"], req["project_id"], "device_id" in req) == ("codex", "p 1&x", False), req
        status, out = on_terminal(cli, "agent-sessions", inst.id, "--agent", "claude", "--project", "p_1")
        assert status == 0 and "0199-a  Fix the login  2026-11-28T10:00:00Z  in ses_abc" in out, out
        # Usage and relayd's refusals.
        assert cli.run("agent-sessions", inst.id, "--agent", "claude").returncode == 2
        proc = cli.run("agent-sessions", inst.id, "--agent", "gemini", "--project", "p", "--json")
        assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "agent_not_declared", proc.stdout
        answers["projects.list.req"] = {"error": {"code": "device_required", "message": "name a device"}}
        proc = cli.run("projects", inst.id, "--json")
        assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "upstream_error", proc.stdout
    finally:
        r.close()
        sock.close()


def test_new_names_the_agent_project_and_resume(relay, tmp_path):
    cli, token, inst, sock = _setup(relay, tmp_path)
    out = cli.json("new", "--installation", inst.id, "--agent", "codex", "--project", "p_1", "--worktree",
                   "fix/login", "--resume", "0199-a", "--title", "t")
    session = out["session"]
    assert (session["agent"], session["project"], session["resume"]) == \
        ("codex", {"id": "p_1", "worktree_branch": "fix/login"}, {"agent_session_id": "0199-a"}), session
    started = sock.next_update(WAIT)
    assert started["payload"]["session"]["project"] == {"id": "p_1", "worktree_branch": "fix/login"}, started
    status, text = on_terminal(cli, "new", "--installation", inst.id, "--agent", "claude")
    assert status == 0 and ", agent claude" in text, text
    proc = cli.run("new", "--installation", inst.id, "--worktree", "x")
    assert proc.returncode == 2 and "--worktree needs --project" in proc.stdout, proc.stdout
    proc = cli.run("new", "--installation", inst.id, "--agent", "nope", "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "agent_not_declared", proc.stdout
    sock.close()


def test_a_confirmed_terminal_opens_the_list_sealed_to_it(relay, tmp_path):
    cli, token, inst, sock = _setup(relay, tmp_path)
    bridge_pk, bridge_sk = keypair()
    bridge_dev = assert_ok(inst.post("devices", {"pubkey": bridge_pk.hex(), "label": "laptop"}))["device_id"]
    assert cli.run("devices", "confirm", bridge_dev, "--yes").returncode == 0
    devices = assert_ok(relay.request("GET", "/v1/me/devices", headers={"Authorization": "Bearer " + token}))
    mine = [d for d in devices["devices"] if d["platform"] == "cli"][0]
    mine_pk = bytes.fromhex(mine["pubkey"])
    other_pk, _ = keypair()
    mode = {"to": mine["device_id"], "pk": mine_pk, "forged": False}

    def answer(req):
        plain = json.dumps(PROJECTS if req["type"] == "projects.list.req" else SESSIONS).encode()
        sealed = box(plain, mode["pk"], bridge_sk)
        if mode["forged"]:
            raw = bytearray(base64.b64decode(sealed))
            raw[-1] ^= 1
            sealed = base64.b64encode(bytes(raw)).decode()
        return {"sealed": sealed, "to_device_id": mode["to"], "from_device_id": bridge_dev}

    r = Responder(sock, answer)
    try:
        assert cli.json("projects", inst.id, "--json") == PROJECTS
        assert r.requests[-1]["device_id"] == mine["device_id"], r.requests[-1]
        assert cli.json("agent-sessions", inst.id, "--agent", "claude", "--project", "p_1", "--json") == SESSIONS
        assert r.requests[-1]["device_id"] == mine["device_id"]
        # Sealed to another device: shown as such, in JSON as given.
        mode.update(to="dev_phone", pk=other_pk)
        got = cli.json("projects", inst.id, "--json")
        assert set(got) == {"sealed", "to_device_id", "from_device_id"} and got["to_device_id"] == "dev_phone", got
        status, out = on_terminal(cli, "projects", inst.id)
        assert status == 0 and "sealed to device dev_phone (this terminal cannot open it)" in out, out
        # Altered on the way: not opened, shown sealed.
        mode.update(to=mine["device_id"], pk=mine_pk, forged=True)
        got = cli.json("projects", inst.id, "--json")
        assert "sealed" in got and "projects" not in got, got

        # An encrypted session's project goes sealed under session_meta/project with the session's key.
        mode["forged"] = False
        out = cli.json("new", "--installation", inst.id, "--agent", "claude", "--project", "p_1", "--worktree", "b")
        session = out["session"]
        assert session["encrypted"] is True and session["project"] is None and session["agent"] == "claude", session
        with open(cli.config / "client-session-keys.json") as f:
            k = bytes.fromhex(json.load(f)["sessions"][session["id"]][0])
        assert json.loads(open_(k, "session_meta/project", session["project_ct"])) == \
            {"id": "p_1", "worktree_branch": "b"}
    finally:
        r.close()
        sock.close()

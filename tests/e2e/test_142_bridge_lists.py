"""The bridge's projects and the agent's own sessions, asked live (issue 36; docs/api.md "The
bridge's socket"): GET /v1/me/installations/:id/projects and /agent-sessions go to the bridge as
projects.list.req and agent_sessions.list.req through the same requests as models.list (req_id,
caps, timeout), and the answer comes back as the bridge gave it, plain or sealed; relayd checks the
agent against the manifest (422 agent_not_declared) and the parameters (400) before asking.
"""
import base64
import os
import threading
import time

from bridgelib import WAIT, Installation
from relaylib import assert_error, assert_ok, bearer, mint_token, wait_until

AGENTS = [{"name": "claude", "kind": "acp", "default": True, "supports": {"session_list": True}},
          {"name": "codex", "kind": "acp", "supports": {}}]
PROJECTS = {"projects": [{"id": "p_AbCdEfGhIjKlMnOpQrStUv", "name": "relay", "path": "/src/relay", "branch": "main",
                          "agents_used": ["claude"]}]}


def _get(relay, token, path):
    return relay.request("GET", path, headers=bearer(token))


def _ask(relay, token, path):
    box = {}
    t = threading.Thread(target=lambda: box.update(r=_get(relay, token, path)), daemon=True)
    t.start()
    return t, box


def _setup(relay, user_token):
    inst = Installation(relay, user_token)
    assert_ok(inst.post("setManifest", {"agents": AGENTS}))
    return inst, inst.connect()


def _answer(sock, expect_type, **fields):
    req = sock.next(WAIT)
    assert req["type"] == expect_type and req["req_id"].startswith("rq_"), req
    sock.send(dict({"type": expect_type.replace(".req", ".resp"), "req_id": req["req_id"]}, **fields))
    return req


def test_projects_go_to_the_bridge_and_come_back_as_given(relay, user_token):
    inst, sock = _setup(relay, user_token)
    base = "/v1/me/installations/%s/projects" % inst.id
    t, box = _ask(relay, user_token, base)
    req = _answer(sock, "projects.list.req", **PROJECTS)
    assert set(req) == {"type", "req_id"}, req
    t.join(WAIT)
    assert assert_ok(box["r"]) == PROJECTS
    # Sealed to a device: passed on untouched (relayd can neither read nor forge it).
    sealed = {"sealed": base64.b64encode(os.urandom(80)).decode(), "to_device_id": "dev_phone",
              "from_device_id": "dev_laptop"}
    t, box = _ask(relay, user_token, base + "?device_id=dev_phone")
    req = _answer(sock, "projects.list.req", **sealed)
    assert req["device_id"] == "dev_phone", req
    t.join(WAIT)
    assert assert_ok(box["r"]) == sealed
    # The bridge's refusal: 502 with its error.
    t, box = _ask(relay, user_token, base)
    _answer(sock, "projects.list.req", error={"code": "device_required", "message": "name a device"})
    t.join(WAIT)
    assert_error(box["r"], 502, "upstream_error")
    assert box["r"].json()["error"]["details"]["bridge_error"]["code"] == "device_required", box["r"].text
    # Bad parameters, another user's installation, an unknown one: refused before the bridge is asked.
    for query in ("?device_id=", "?device_id=" + "d" * 65, "?device_id=a%01b", "?device_id=a&device_id=b"):
        r = _get(relay, user_token, base + query)
        assert_error(r, 400, "invalid_request")
        assert r.json()["error"]["errors"][0]["path"] == "device_id", (query, r.text)
    assert_error(_get(relay, mint_token(relay.data, "bob"), base), 404, "installation_not_found")
    assert_error(_get(relay, user_token, "/v1/me/installations/inst_0000000000000000/projects"), 404,
                 "installation_not_found")
    # Nothing of those reached the bridge: the next request it sees is this one.
    t, box = _ask(relay, user_token, base)
    _answer(sock, "projects.list.req", projects=[])
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"projects": []}
    sock.close()
    wait_until(lambda: inst.health() == "offline", WAIT, what="offline")
    assert_error(_get(relay, user_token, base), 503, "bridge_offline")


def test_agent_sessions_are_checked_then_asked(relay, user_token):
    inst, sock = _setup(relay, user_token)
    base = "/v1/me/installations/%s/agent-sessions" % inst.id
    listed = {"sessions": [{"agent_session_id": "0199-a", "title": "Fix the login", "cwd": "/src/relay",
                            "updated_at": "2026-11-28T10:00:00Z", "bound_session_id": None}]}
    t, box = _ask(relay, user_token, base + "?agent=claude&project_id=p_1&device_id=dev_phone")
    req = _answer(sock, "agent_sessions.list.req", **listed)
    assert (req["agent"], req["project_id"], req["device_id"]) == ("claude", "p_1", "dev_phone"), req
    t.join(WAIT)
    assert assert_ok(box["r"]) == listed
    t, box = _ask(relay, user_token, base + "?agent=codex&project_id=p%202")
    req = _answer(sock, "agent_sessions.list.req", sessions=[])
    assert (req["agent"], req["project_id"], "device_id" in req) == ("codex", "p 2", False), req
    t.join(WAIT)
    assert assert_ok(box["r"]) == {"sessions": []}

    r = _get(relay, user_token, base + "?agent=gemini&project_id=p_1")
    assert_error(r, 422, "agent_not_declared")
    assert r.json()["error"]["errors"][0]["path"] == "agent", r.text
    for query, path in [("?project_id=p_1", "agent"), ("?agent=claude", "project_id"),
                        ("?agent=claude&project_id=", "project_id"),
                        ("?agent=claude&project_id=" + "p" * 65, "project_id"),
                        ("?agent=claude&project_id=a%0Ab", "project_id"),
                        ("?agent=" + "a" * 33 + "&project_id=p", "agent"),
                        ("?agent=claude&project_id=p&device_id=", "device_id")]:
        r = _get(relay, user_token, base + query)
        assert_error(r, 400, "invalid_request")
        assert r.json()["error"]["errors"][0]["path"] == path, (query, r.text)
    assert_error(_get(relay, mint_token(relay.data, "bob"), base + "?agent=claude&project_id=p"), 404,
                 "installation_not_found")
    # An installation whose bridge declared no agents: every agent is undeclared.
    bare = Installation(relay, user_token)
    assert_error(_get(relay, user_token, "/v1/me/installations/%s/agent-sessions?agent=claude&project_id=p"
                      % bare.id), 422, "agent_not_declared")
    # A bridge that does not answer: 504 after 10 s.
    t0 = time.monotonic()
    t, box = _ask(relay, user_token, base + "?agent=claude&project_id=p_1")
    assert sock.next(WAIT)["type"] == "agent_sessions.list.req"
    t.join(WAIT)
    assert_error(box["r"], 504, "bridge_timeout")
    assert 9 <= time.monotonic() - t0 < 14
    sock.close()


def test_the_installation_cap_counts_these_requests_too(relay, user_token):
    inst, sock = _setup(relay, user_token)
    held = [_ask(relay, user_token, "/v1/me/installations/%s/projects" % inst.id) for _ in range(16)]
    reqs = [sock.next(WAIT) for _ in range(16)]
    assert {r["type"] for r in reqs} == {"projects.list.req"}
    r = _get(relay, user_token, "/v1/me/installations/%s/agent-sessions?agent=claude&project_id=p" % inst.id)
    assert_error(r, 429, "bridge_busy")
    assert r.json()["error"]["details"] == {"cap": "installation", "limit": 16}, r.text
    for req in reqs:
        sock.send({"type": "projects.list.resp", "req_id": req["req_id"], "projects": []})
    for t, box in held:
        t.join(WAIT)
        assert assert_ok(box["r"]) == {"projects": []}
    sock.close()

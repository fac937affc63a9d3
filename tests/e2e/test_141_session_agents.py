"""A session's agent, project and resumed agent session (issue 36 items 1-3; docs/api.md "Routes",
"Bridge REST", "Sessions, keys and recipients", "The bridge's socket"):

- setManifest's `agents` is validated, kept and shown as the Installation view's `agents`;
- POST /v1/me/sessions takes `agent` (one the manifest declares, else 422 agent_not_declared),
  `project` (plain) or `project_ct` (encrypted), each kind refusing the other's by name, and
  `resume`; all are kept, shown in every Session view and carried by session.started and
  session.message; nothing is kept of a refusal;
- POST /v1/bridge/sessions/:id/state keeps the agent's state (a post without usage keeps the
  stored usage), shows it as the Session view's agent_state and tells clients session_state;
  refusals (bad body, oversize, a project in clear in an encrypted session, another
  installation's session, a deleted one) keep nothing;
- POST /v1/me/sessions/:id/config answers 202 and queues session.config (an encrypted session's
  change must carry device_id, config_sig and ts, carried as given); archiving and deleting queue
  session.closed, unarchiving and restoring do not.
"""
import os

from bridgelib import WAIT, Installation
from e2elib import E2E, seal
from relaylib import assert_error, assert_ok, find_error, mint_token, validation_errors, wait_until

AGENTS = [
    {"name": "claude", "kind": "acp", "default": True,
     "supports": {"modes": True, "config": True, "session_list": True, "session_resume": True,
                  "session_load": False, "session_close": True, "terminal_output": True}},
    {"name": "codex", "kind": "acp", "supports": {"modes": True, "config": True}},
    {"name": "echo_1", "kind": "exec", "supports": {}},
]


def _manifest(inst, agents=AGENTS, **extra):
    return inst.post("setManifest", dict({"agents": agents}, **extra))


def _installation(inst):
    me = assert_ok(inst.client("GET", "/v1/me"))
    return [i for i in me["installations"] if i["id"] == inst.id][0]


def _sessions(inst):
    return assert_ok(inst.client("GET", "/v1/me/sessions"))["sessions"]


def _start(inst, **body):
    return inst.client("POST", "/v1/me/sessions", dict({"installation_id": inst.id}, **body))


def test_manifest_agents_are_validated_kept_and_shown(relay, user_token):
    inst = Installation(relay, user_token)
    assert _installation(inst)["agents"] == []
    stream = inst.stream()
    assert assert_ok(_manifest(inst)) == {"tools": 0}
    ev = stream.wait_for("installation_updated", timeout=WAIT)
    assert ev.data["installation"]["agents"] == AGENTS, ev.data
    assert _installation(inst)["agents"] == AGENTS
    # Other parts leave agents alone; the old agent stays for old clients.
    assert_ok(inst.post("setManifest", {"agent": {"name": "claude", "version": "2"}, "commands": []}))
    got = _installation(inst)
    assert got["agents"] == AGENTS and got["agent"]["name"] == "claude", got

    bad = [
        ([dict(AGENTS[0], name="Claude")], "agents.0.name"),
        ([dict(AGENTS[0], name="")], "agents.0.name"),
        ([dict(AGENTS[0], name="a" * 33)], "agents.0.name"),
        ([dict(AGENTS[0], kind="docker")], "agents.0.kind"),
        ([dict(AGENTS[0], supports={"modes": "yes"})], "agents.0.supports.modes"),
        ([{"name": "x", "kind": "acp"}], "agents.0.supports"),
        ([dict(AGENTS[0], default="true")], "agents.0.default"),
        ([AGENTS[0], dict(AGENTS[1], default=True)], "agents"),
        ([AGENTS[0], dict(AGENTS[1], name="claude")], "agents"),
        ([dict(AGENTS[2], name="a%d" % i) for i in range(17)], "agents"),
    ]
    for agents, path in bad:
        r = _manifest(inst, agents)
        assert find_error(validation_errors(r), path) is not None, (path, r.text)
    assert _installation(inst)["agents"] == AGENTS  # nothing kept of a refusal
    # Unknown supports keys are kept as sent (a newer bridge's); [] clears.
    newer = [dict(AGENTS[2], supports={"teleport": True})]
    assert_ok(_manifest(inst, newer))
    assert _installation(inst)["agents"] == newer
    assert_ok(_manifest(inst, []))
    assert _installation(inst)["agents"] == []
    stream.close()


def test_a_plain_session_keeps_its_agent_project_and_resume(relay, user_token):
    inst = Installation(relay, user_token)
    assert_ok(_manifest(inst))
    sock = inst.connect()
    stream = inst.stream()
    project = {"id": "p_AbCdEfGhIjKlMnOpQrStUv", "worktree_branch": "feature/login"}
    r = assert_ok(_start(inst, title="t", agent="codex", project=dict(project, extra="dropped"),
                         resume={"agent_session_id": "0199-abc"}))
    sid, view = r["session_id"], r["session"]
    assert (view["agent"], view["project"], view["resume"]) == ("codex", project, {"agent_session_id": "0199-abc"})
    assert "project_ct" not in view
    ev = stream.wait_for("session_created", timeout=WAIT)
    assert ev.data["session"] == view
    started = sock.next_update(WAIT)
    assert started["type"] == "session.started", started
    part = started["payload"]["session"]
    assert (part["agent"], part["project"], part["resume"]) == ("codex", project, {"agent_session_id": "0199-abc"})
    assert part["encrypted"] is False and "project_ct" not in part, part
    # Every view: /v1/me, the list, a transition's event; the bridge's session.message.
    me = assert_ok(inst.client("GET", "/v1/me"))
    assert [s for s in me["sessions"] if s["id"] == sid][0] == view
    assert [s for s in _sessions(inst) if s["id"] == sid][0]["project"] == project
    inst.send(sid, "hi")
    msg = sock.next_update(WAIT)
    assert msg["type"] == "session.message" and msg["payload"]["session"]["agent"] == "codex", msg
    assert msg["payload"]["session"]["project"] == project
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/archive" % sid))
    ev = stream.wait_for("session_updated", lambda d: d["session_id"] == sid, timeout=WAIT)
    assert ev.data["session"]["agent"] == "codex" and ev.data["session"]["resume"] == {"agent_session_id": "0199-abc"}
    closed = sock.next_update(WAIT)
    assert closed["type"] == "session.closed", closed

    # Absent: the default agent, no project, no resume (null, in views and updates).
    r = assert_ok(_start(inst))
    assert (r["session"]["agent"], r["session"]["project"], r["session"]["resume"]) == (None, None, None)
    started = sock.next_update(WAIT)
    assert started["type"] == "session.started", started
    part = started["payload"]["session"]
    assert (part["agent"], part["project"], part["resume"]) == (None, None, None), part
    sock.close()
    stream.close()


def test_refusals_leave_no_session(relay, user_token):
    inst = Installation(relay, user_token)
    assert_ok(_manifest(inst))
    before = len(_sessions(inst))
    r = _start(inst, agent="gemini")
    assert_error(r, 422, "agent_not_declared")
    assert r.json()["error"]["errors"][0]["path"] == "agent", r.text
    for body, path in [
        ({"agent": ""}, "agent"),
        ({"agent": 3}, "agent"),
        ({"project": {"worktree_branch": "x"}}, "project.id"),
        ({"project": {"id": ""}}, "project.id"),
        ({"project": {"id": "p" * 65}}, "project.id"),
        ({"project": {"id": "p\x01"}}, "project.id"),
        ({"project": {"id": "p", "worktree_branch": "b" * 101}}, "project.worktree_branch"),
        ({"project": "p_1"}, "project"),
        ({"project_ct": seal(os.urandom(32), "project", "{}")}, "project_ct"),
        ({"resume": {"agent_session_id": "x" * 257}}, "resume.agent_session_id"),
        ({"resume": {}}, "resume.agent_session_id"),
        ({"resume": "abc"}, "resume"),
    ]:
        r = _start(inst, **body)
        assert find_error(validation_errors(r), path) is not None, (body, r.text)
    # An installation without agents declares none.
    bare = Installation(relay, user_token)
    assert_error(_start(bare, agent="claude"), 422, "agent_not_declared")
    # Another user's installation: 404 whatever the agent.
    bob = mint_token(relay.data, "bob")
    r = inst.client("POST", "/v1/me/sessions", {"installation_id": inst.id, "agent": "claude"}, token=bob)
    assert_error(r, 404, "installation_not_found")
    assert len(_sessions(inst)) == before


def test_an_encrypted_session_keeps_its_project_sealed(relay, user_token):
    e = E2E(relay, user_token)
    assert_ok(_manifest(e.inst))
    sock = e.inst.connect()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["device_pending", "device_added"]
    k = os.urandom(32)
    ct = seal(k, "project", '{"id": "p_1", "name": "secret-project", "path": "/home/me/secret"}')
    start = {"installation_id": e.inst.id, "encrypted": True, "agent": "claude"}
    # The plain project is refused by name, beside the sealed one too; a too large envelope too.
    r = e.me("POST", "/v1/me/sessions", dict(start, project={"id": "p_1"}))
    assert find_error(validation_errors(r), "project")["message"] == \
        "This session is end-to-end encrypted: send project_ct (a base64 envelope), not project", r.text
    r = e.me("POST", "/v1/me/sessions", dict(start, project={"id": "p_1"}, project_ct=ct))
    assert find_error(validation_errors(r), "project") is not None, r.text
    r = e.me("POST", "/v1/me/sessions", dict(start, project_ct=seal(k, "project", "x" * 6200)))
    assert find_error(validation_errors(r), "project_ct")["code"] == "too_big", r.text
    r = e.me("POST", "/v1/me/sessions", dict(start, project_ct="not an envelope"))
    assert find_error(validation_errors(r), "project_ct") is not None, r.text
    assert assert_ok(e.me("GET", "/v1/me/sessions"))["sessions"] == []

    view = assert_ok(e.me("POST", "/v1/me/sessions", dict(start, project_ct=ct,
                                                           resume={"agent_session_id": "s-1"})))["session"]
    assert (view["agent"], view["project"], view["project_ct"], view["resume"]) == \
        ("claude", None, ct, {"agent_session_id": "s-1"}), view
    part = sock.next_update(WAIT)["payload"]["session"]
    assert part["project_ct"] == ct and "project" not in part and part["agent"] == "claude", part
    sock.close()


STATE = {
    "state": "ready", "mode": "default", "model": "sonnet", "effort": "high",
    "options": [
        {"id": "mode", "name": "Mode", "kind": "mode", "value": "default",
         "values": [{"value": "default", "name": "Default"},
                    {"value": "bypassPermissions", "name": "Bypass", "description": "No questions", "risk": "high"}]},
        {"id": "thinking", "name": "Thinking", "kind": "toggle", "value": True},
    ],
    "usage": {"context_used": 1200, "context_size": 200000, "cost": {"amount": 0.25, "currency": "USD"}},
}


def _state(inst, sid, body):
    return inst.post("sessions/%s/state" % sid, body)


def _view(inst, sid):
    return [s for s in _sessions(inst) if s["id"] == sid][0]


def test_the_bridge_posts_the_agent_state_and_clients_hear_it(relay, user_token):
    inst = Installation(relay, user_token)
    sid = inst.create_session("s")
    assert _view(inst, sid)["agent_state"] is None
    stream = inst.stream()
    got = assert_ok(_state(inst, sid, dict(STATE, unknown="dropped")))
    assert got == {"session_id": sid, "agent_state": STATE}, got
    ev = stream.wait_for("session_state", timeout=WAIT)
    assert ev.data == {"session_id": sid, "agent_state": STATE}, ev.data
    assert _view(inst, sid)["agent_state"] == STATE
    me = assert_ok(inst.client("GET", "/v1/me"))
    assert [s for s in me["sessions"] if s["id"] == sid][0]["agent_state"] == STATE

    # A mode change without usage keeps the meter; the rest is replaced.
    changed = {"state": "ready", "mode": "plan"}
    got = assert_ok(_state(inst, sid, changed))["agent_state"]
    assert got == dict(changed, usage=STATE["usage"]), got
    ev = stream.wait_for("session_state", lambda d: d["agent_state"].get("mode") == "plan", timeout=WAIT)
    assert ev.data["agent_state"]["usage"] == STATE["usage"]
    # A new reading replaces it; a refusal with its error.
    got = assert_ok(_state(inst, sid, {"state": "refused", "usage": {"context_used": 5},
                                       "error": {"code": "folder_outside_roots", "message": "no"},
                                       "project": {"id": "p_1", "name": "relay", "path": "/src/relay",
                                                   "branch": "main"}}))["agent_state"]
    assert got["usage"] == {"context_used": 5} and got["error"]["code"] == "folder_outside_roots", got
    assert got["project"]["path"] == "/src/relay"
    assert _view(inst, sid)["agent_state"] == got
    stream.close()


def test_bad_states_are_refused_and_keep_nothing(relay, user_token):
    inst = Installation(relay, user_token)
    sid = inst.create_session("s")
    assert_ok(_state(inst, sid, STATE))
    opt = STATE["options"][0]
    bad = [
        ({}, "state"),
        ({"state": "thinking"}, "state"),
        ({"state": "ready", "mode": "m" * 129}, "mode"),
        ({"state": "ready", "options": [dict(opt, value=3)]}, "options.0.value"),
        ({"state": "ready", "options": [dict(opt, value="v" * 129)]}, "options.0.value"),
        ({"state": "ready", "options": [dict(opt, kind="slider")]}, "options.0.kind"),
        ({"state": "ready", "options": [dict(opt, id="o%d" % i) for i in range(33)]}, "options"),
        ({"state": "ready", "options": [dict(opt, values=[{"value": "v", "name": "n"}] * 65)]}, "options.0.values"),
        ({"state": "ready", "options": [dict(opt, values=[{"value": "v", "name": "n", "risk": "low"}])]},
         "options.0.values.0.risk"),
        ({"state": "ready", "options": [dict(opt, values=[{"value": "v", "name": "n", "description": "d" * 1025}])]},
         "options.0.values.0.description"),
        ({"state": "ready", "usage": {"context_used": -1}}, "usage.context_used"),
        ({"state": "ready", "usage": {"cost": {"amount": "1"}}}, "usage.cost.amount"),
        ({"state": "ended", "error": {"message": "x"}}, "error.code"),
        ({"state": "ended", "error": {"code": "x", "message": "m" * 1025}}, "error.message"),
        ({"state": "ready", "project": {"id": "p", "path": "/" * 1025}}, "project.path"),
        ({"state": "ready", "project_ct": "c2VhbGVk"}, "project_ct"),
    ]
    for body, path in bad:
        r = _state(inst, sid, body)
        assert find_error(validation_errors(r), path) is not None, (path, r.text)
    # The whole body is at most 32 KiB.
    big = {"state": "ready", "options": [dict(opt, name="n" * 100, values=[
        {"value": "v" * 100, "name": "n" * 100, "description": "d" * 300}] * 60)]}
    assert_error(_state(inst, sid, big), 413, "payload_too_large")
    # Another user's bridge, a session that is not there, a deleted session.
    bob = Installation(relay, mint_token(relay.data, "bob"))
    assert_error(_state(bob, sid, {"state": "ready"}), 404, "session_not_found")
    other = Installation(relay, user_token)
    assert_error(_state(other, sid, {"state": "ready"}), 404, "session_not_found")
    assert_error(_state(inst, "ses_nope", {"state": "ready"}), 404, "session_not_found")
    assert_error(inst.client("POST", "/v1/me/sessions/%s/state" % sid, {"state": "ready"}), 404, "not_found")
    assert _view(inst, sid)["agent_state"] == STATE
    assert_ok(inst.client("DELETE", "/v1/me/sessions/%s" % sid))
    assert_error(_state(inst, sid, {"state": "ended"}), 410, "session_deleted")
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/restore" % sid))
    assert _view(inst, sid)["agent_state"] == STATE


def test_an_encrypted_session_refuses_a_project_in_clear(relay, user_token):
    e = E2E(relay, user_token)
    sid = e.encrypted_session()
    r = e.inst.post("sessions/%s/state" % sid, {"state": "ready", "project": {"id": "p_1", "path": "/home/me/x"}})
    assert find_error(validation_errors(r), "project")["message"] == \
        "This session is end-to-end encrypted: send project_ct (a base64 envelope), not project", r.text
    ct = seal(os.urandom(32), "project", '{"path": "/home/me/x"}')
    got = assert_ok(e.inst.post("sessions/%s/state" % sid, {"state": "ready", "project_ct": ct}))["agent_state"]
    assert got == {"state": "ready", "project_ct": ct}, got
    view = [s for s in assert_ok(e.me("GET", "/v1/me/sessions"))["sessions"] if s["id"] == sid][0]
    assert view["agent_state"] == got


def _config(inst, sid, body, token=None):
    return inst.client("POST", "/v1/me/sessions/%s/config" % sid, body, token=token)


def test_config_reaches_the_bridge_as_session_config(relay, user_token):
    inst = Installation(relay, user_token)
    sock = inst.connect()
    sid = inst.create_session("s")
    assert sock.next_update(WAIT)["type"] == "session.started"
    r = _config(inst, sid, {"option": {"id": "mode", "value": "plan"}})
    assert r.status_code == 202, r.text
    got = r.json()["result"]
    assert got["session_id"] == sid and got["request_id"].startswith("cfg_"), got
    update = sock.next_update(WAIT)
    assert update["type"] == "session.config" and update["session_id"] == sid, update
    assert update["payload"] == {"request_id": got["request_id"], "option": {"id": "mode", "value": "plan"}}
    # A plain session's change may carry a signature too: carried as given.
    r = _config(inst, sid, {"option": {"id": "model", "value": "opus"}, "device_id": "dev_x", "config_sig": "c2ln",
                            "ts": 1700000000000})
    assert r.status_code == 202, r.text
    payload = sock.next_update(WAIT)["payload"]
    assert (payload["device_id"], payload["config_sig"], payload["ts"]) == ("dev_x", "c2ln", 1700000000000), payload

    for body, path in [
        ({}, "option"),
        ({"option": {"id": "mode"}}, "option.value"),
        ({"option": {"id": "", "value": "x"}}, "option.id"),
        ({"option": {"id": "m", "value": "v" * 129}}, "option.value"),
        ({"option": {"id": "m", "value": True}}, "option.value"),
        ({"option": {"id": "m", "value": "x"}, "ts": "now"}, "ts"),
        ({"option": {"id": "m", "value": "x"}, "ts": 1.5}, "ts"),
        ({"option": {"id": "m", "value": "x"}, "config_sig": "s" * 129}, "config_sig"),
    ]:
        r = _config(inst, sid, body)
        assert find_error(validation_errors(r), path) is not None, (body, r.text)
    assert_error(_config(inst, sid, {"option": {"id": "m", "value": "x"}}, token=mint_token(relay.data, "bob")),
                 404, "session_not_found")
    assert_error(_config(inst, "ses_nope", {"option": {"id": "m", "value": "x"}}), 404, "session_not_found")
    # Nothing was queued by any refusal: the next update is the archive's session.closed.
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/archive" % sid))
    closed = sock.next_update(WAIT)
    assert closed["type"] == "session.closed" and closed["payload"] == {"session": {"id": sid}, "reason": "archived"}
    # Archiving again, unarchiving: nothing; deleting: session.closed "deleted"; restoring: nothing.
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/archive" % sid))
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/unarchive" % sid))
    assert_ok(inst.client("DELETE", "/v1/me/sessions/%s" % sid))
    closed = sock.next_update(WAIT)
    assert closed["type"] == "session.closed" and closed["payload"] == {"session": {"id": sid}, "reason": "deleted"}
    assert_error(_config(inst, sid, {"option": {"id": "m", "value": "x"}}), 404, "session_not_found")
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/restore" % sid))
    marker = inst.update_barrier(sock, sid)
    assert marker["type"] == "session.cancelled", marker
    sock.close()


def test_an_encrypted_session_config_needs_its_signature(relay, user_token):
    e = E2E(relay, user_token)
    sock = e.inst.connect()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["device_pending", "device_added"]
    sid = e.encrypted_session()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["session.started", "session_key_granted"]
    option = {"id": "mode", "value": "bypassPermissions"}
    r = e.me("POST", "/v1/me/sessions/%s/config" % sid, {"option": option})
    errors = validation_errors(r)
    assert {x["path"] for x in errors} == {"device_id", "config_sig", "ts"}, errors
    assert all(x["message"] == "Required (the session is end-to-end encrypted)" for x in errors), errors
    r = e.me("POST", "/v1/me/sessions/%s/config" % sid, {"option": option, "device_id": e.phone, "config_sig": None,
                                                         "ts": 1})
    assert [x["path"] for x in validation_errors(r)] == ["config_sig"], r.text
    body = {"option": option, "device_id": e.phone, "config_sig": "A" * 44, "ts": 1795900000000}
    r = e.me("POST", "/v1/me/sessions/%s/config" % sid, body)
    assert r.status_code == 202, r.text
    update = sock.next_update(WAIT)
    assert update["type"] == "session.config", update
    assert update["payload"] == dict(body, request_id=r.json()["result"]["request_id"]), update
    sock.close()

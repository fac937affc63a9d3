"""Steering an ACP agent's session from a client, and continuing the agent's own sessions (issue 36 items
2 and 3; docs/bridge.md "Steering" and "The agent's sessions"), with the real relay-bridge and our ACP
test agent (tests/e2e/acp_agent.py):

- the agent's settings come back as the session's agent_state; a mode set from the client reaches the
  agent (session/set_config_option) and is in force for the next prompt; a value it does not offer is
  refused and the agent is not asked;
- an agent with only modes and models gets session/set_mode and session/set_model; the older PATCH
  {model} reaches it too;
- a send's thought_level sets the effort option before its prompt;
- in an encrypted session a change must be signed by an accepted device with a fresh, newer ts: a bad
  signature, a stale ts and a replay are refused and the agent is not told; a signed one is made;
- an agent session begun outside the relay is listed (bound_session_id null) and continued by a relay
  session started with resume (session/resume; or session/load, whose history comes first, marked);
- archiving a session closes its agent session; `relay-bridge sessions` names the desk command.
"""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import time

from relaylib import assert_ok, bearer, paced, wait_until
from test_50_bridge_support import BRIDGE, WAIT
from test_90_bridge_acp import Acp, AGENT, PYTHON


def session_view(call, session):
    sessions = assert_ok(call("GET", "/v1/me/sessions"))["sessions"]
    return [s for s in sessions if s.get("id", s.get("session_id")) == session][0]


def agent_state(acp, session):
    return session_view(acp.user.call, session).get("agent_state")


def wait_state(acp, session, check, what):
    found = {}

    def seen():
        found["s"] = agent_state(acp, session)
        return found["s"] is not None and check(found["s"])
    wait_until(seen, WAIT, interval=0.1, what=what)
    return found["s"]


def set_option(acp, session, option_id, value, **extra):
    body = {"option": {"id": option_id, "value": value}}
    body.update(extra)
    return acp.user.call("POST", "/v1/me/sessions/%s/config" % session, body)


def test_a_mode_set_from_the_client_is_in_force_and_comes_back_as_state(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--config")
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "settings")
        assert replies[-1]["text"] == "mode=ask model=model-a effort=medium", replies
        state = wait_state(acp, session, lambda s: s.get("mode") == "ask", "the session's state")
        assert state["state"] == "ready" and state["model"] == "model-a" and state["effort"] == "medium", state
        options = {o["id"]: o for o in state["options"]}
        assert [o["kind"] for o in state["options"]] == ["mode", "model", "effort"], state
        modes = {v["value"]: v for v in options["mode"]["values"]}
        assert modes["bypassPermissions"].get("risk") == "high" and "risk" not in modes["plan"], modes
        assert modes["plan"]["name"] == "Plan" and modes["plan"]["description"] == "the Plan mode", modes

        accepted = assert_ok(set_option(acp, session, "mode", "plan"), 202)
        assert accepted["session_id"] == session and accepted["request_id"], accepted
        acp.stream.wait_for("session_state", lambda d: d.get("session_id") == session
                            and d["agent_state"].get("mode") == "plan", timeout=WAIT)
        sets = acp.agent_log("set_config")
        assert [(e["key"], e["value"]) for e in sets] == [("mode", "plan")], sets
        _, replies = acp.turn(session, "settings")
        assert replies[-1]["text"] == "mode=plan model=model-a effort=medium", replies

        # A value the option does not offer: refused, the agent not asked, the mode in force stays.
        assert_ok(set_option(acp, session, "mode", "chaos"), 202)
        state = wait_state(acp, session, lambda s: (s.get("error") or {}).get("code") == "config_invalid",
                           "config_invalid")
        assert state["mode"] == "plan", state
        assert len(acp.agent_log("set_config")) == 1
        # A send's thought_level: "max" takes the highest effort the agent offers, before the prompt.
        r = assert_ok(acp.user.call("POST", "/v1/me/sessions/%s/send" % session,
                                    {"text": "settings", "thought_level": "max"}))
        acp.wait_turn(session, r["interaction_id"])
        assert acp.user.replies(session, r["interaction_id"])[-1]["text"] == "mode=plan model=model-a effort=high"
        assert [(e["key"], e["value"]) for e in acp.agent_log("set_config")][-1] == ("effort", "high")
        wait_state(acp, session, lambda s: s.get("effort") == "high" and "error" not in s, "effort high")
    finally:
        assert acp.close() == 0


def test_an_agent_with_modes_and_models_gets_the_older_methods(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        acp.turn(session, "settings")
        state = wait_state(acp, session, lambda s: s.get("model") == "model-a", "the session's state")
        assert [o["id"] for o in state["options"]] == ["mode", "model"], state
        assert_ok(set_option(acp, session, "mode", "code"), 202)
        wait_state(acp, session, lambda s: s.get("mode") == "code", "mode code")
        assert [(e["key"], e["value"]) for e in acp.agent_log("set_mode")] == [("mode", "code")]
        # The older PATCH {model} is the model option: session/set_model, and the next request has it.
        assert_ok(acp.user.call("PATCH", "/v1/me/sessions/%s" % session, {"model": "model-b"}))
        wait_state(acp, session, lambda s: s.get("model") == "model-b", "model-b")
        assert [(e["key"], e["value"]) for e in acp.agent_log("set_model")] == [("model", "model-b")]
        _, replies = acp.turn(session, "settings")
        assert replies[-1]["text"] == "mode=code model=model-b effort=medium", replies
        assert acp.agent_log("set_config") == []
    finally:
        assert acp.close() == 0


def write_desk_session(acp, sid, title, history):
    """A session the agent began at the desk, outside the relay: the test agent keeps its sessions in
    --state (tests/e2e/acp_agent.py)."""
    acp.state.mkdir(parents=True, exist_ok=True)
    with open(acp.state / (sid + ".json"), "w") as f:
        json.dump({"history": history, "cwd": str(acp.cwd), "title": title}, f)


def list_agent_sessions(acp):
    path = "/v1/me/installations/%s/agent-sessions?agent=default&project_id=p_here" % acp.user.installation_id
    return assert_ok(acp.user.call("GET", path))["sessions"]


def test_a_session_begun_at_the_desk_is_listed_and_continued(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--sessions", bridge_flags=["--no-e2e"])
    try:
        write_desk_session(acp, "sess_desk0001", "fix the parser", [["user", "fix the parser"],
                                                                   ["agent", "done at the desk"]])
        listed = list_agent_sessions(acp)
        assert listed == [{"agent_session_id": "sess_desk0001", "title": "fix the parser", "cwd": str(acp.cwd),
                           "updated_at": listed[0]["updated_at"], "bound_session_id": None}], listed
        assert acp.agent_log("session_list")[0]["cwd"] == str(acp.cwd)

        session = assert_ok(acp.user.call("POST", "/v1/me/sessions", {
            "installation_id": acp.user.installation_id, "resume": {"agent_session_id": "sess_desk0001"}}))["session_id"]
        _, replies = acp.turn(session, "whoami")
        assert replies[-1]["text"] == "session sess_desk0001", replies
        assert [e["session"] for e in acp.agent_log("session_resume")] == ["sess_desk0001"]
        assert acp.agent_log("session_new") == [] and acp.agent_log("session_load") == []
        # Now it is bound, and the list says to which relay session.
        assert [s["bound_session_id"] for s in list_agent_sessions(acp)] == [session]
        wait_state(acp, session, lambda s: s.get("state") == "ready", "ready")

        # relay-bridge sessions names it (the test agent has no desk command).
        out = subprocess.run([BRIDGE, "sessions", "--json"], env=acp.bridge.env(), capture_output=True,
                             text=True, timeout=WAIT)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)["sessions"]
        assert {"session_id": session, "agent": "default", "agent_session_id": "sess_desk0001", "cwd": str(acp.cwd),
                "command": None} in rows, rows

        # Archiving it closes the agent's session.
        assert_ok(acp.user.call("POST", "/v1/me/sessions/%s/archive" % session, {}))
        wait_until(lambda: acp.agent_log("session_close"), WAIT, what="session/close")
        assert acp.agent_log("session_close")[0]["session"] == "sess_desk0001"
        wait_state(acp, session, lambda s: s.get("state") == "ended", "ended")
    finally:
        assert acp.close() == 0


def test_without_resume_a_load_puts_the_history_first_marked_earlier(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--sessions --no-resume", bridge_flags=["--no-e2e"])
    try:
        write_desk_session(acp, "sess_desk0002", "tests", [["user", "run the tests\nall of them"],
                                                           ["agent", "they pass"]])
        session = assert_ok(acp.user.call("POST", "/v1/me/sessions", {
            "installation_id": acp.user.installation_id, "resume": {"agent_session_id": "sess_desk0002"}}))["session_id"]
        interaction = acp.user.send(session, "whoami")
        acp.wait_turn(session, interaction)
        texts = acp.user.shown_texts(session, interaction)
        assert texts == ["[Earlier in this session, before it was continued here]\n\n"
                         "> run the tests\n> all of them\n\nthey pass", "session sess_desk0002"], texts
        assert [e["session"] for e in acp.agent_log("session_load")] == ["sess_desk0002"]
    finally:
        assert acp.close() == 0


def test_a_session_the_agent_cannot_continue_is_refused_and_runs_nothing(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--sessions", bridge_flags=["--no-e2e"])
    try:
        session = assert_ok(acp.user.call("POST", "/v1/me/sessions", {
            "installation_id": acp.user.installation_id, "resume": {"agent_session_id": "sess_nowhere"}}))["session_id"]
        interaction = acp.user.send(session, "whoami")
        reply = acp.user.wait_reply(session, interaction)
        assert reply["finish_reason"] == "error" and "could not continue its session" in reply["text"], reply
        state = wait_state(acp, session, lambda s: s.get("state") == "refused", "refused")
        assert state["error"]["code"] == "resume_failed", state
        assert acp.agent_log("prompt") == [] and acp.agent_log("session_new") == []
    finally:
        assert acp.close() == 0


def config_sig(device_sec, bridge_pub, session_id, option_id, value, ts, device_id):
    """docs/api.md, "Session settings: what is signed"."""
    from test_101_e2e_signed_grants import beforenm, hkdf
    k = hkdf(beforenm(bridge_pub, device_sec), b"relay/v1/config")
    parts = ["relay/v1/config", session_id, option_id, value, str(ts), device_id]
    return base64.b64encode(hmac.new(k, b"\xff".join(p.encode() for p in parts), hashlib.sha256).digest()).decode()


def test_in_an_encrypted_session_only_a_fresh_signed_change_reaches_the_agent(relay, tmp_path):
    from test_100_e2e_relay_cli import confirm_bridge
    from test_60_relay_cli import Cli
    from test_63_relay_with_bridge import pair_real_bridge

    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    log_path = tmp_path / "agent.log"
    bridge.start("acp:%s %s --state %s --log %s --config" % (PYTHON, AGENT, tmp_path / "state", log_path),
                 "--cwd", str(work))

    def agent_log(event):
        with open(log_path) as f:
            return [e for e in (json.loads(line) for line in f if line.strip()) if e["event"] == event]
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        devices = cli.json("devices")["devices"]
        bridge_pub = bytes.fromhex([d for d in devices if d["device_id"] == bridge_dev][0]["pubkey"])
        with open(cli.config / "client-device.json") as f:
            device_sec = bytes.fromhex(json.load(f)["secret_key"])
        ses = cli.json("new", "--installation", inst, "--title", "steer", "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))

        def post(body):
            return paced(lambda: relay.request("POST", "/v1/me/sessions/%s/config" % ses, json=body,
                                               headers=bearer(token)))

        def state():
            return session_view(lambda method, path: paced(lambda: relay.request(method, path, headers=bearer(token))),
                                ses)["agent_state"]

        def change(value, ts, sig=None, device=me):
            return {"option": {"id": "mode", "value": value}, "device_id": device, "ts": ts,
                    "config_sig": sig or config_sig(device_sec, bridge_pub, ses, "mode", value, ts, device)}

        # A signature that does not verify (relayd cannot tell): the bridge refuses, the agent is not told.
        now = int(time.time() * 1000)
        assert_ok(post(change("bypassPermissions", now, sig=base64.b64encode(os.urandom(32)).decode())), 202)
        bridge.wait_log("session %s: a setting refused, the agent is not told: config_sig does not verify" % ses)
        wait_until(lambda: ((state() or {}).get("error") or {}).get("code") == "config_refused", WAIT,
                   what="config_refused")
        # Signed, but stale: refused too.
        stale = now - 10 * 60 * 1000
        assert_ok(post(change("bypassPermissions", stale)), 202)
        bridge.wait_log("session %s: a setting refused, the agent is not told: ts is more than 5 minutes off" % ses)
        assert not os.path.exists(log_path) or agent_log("set_config") == []
        # Signed and fresh: the agent gets it.
        fresh = change("plan", int(time.time() * 1000))
        assert_ok(post(fresh), 202)
        wait_until(lambda: (state() or {}).get("mode") == "plan", WAIT, what="mode plan")
        assert [(e["key"], e["value"]) for e in agent_log("set_config")] == [("mode", "plan")]
        assert "error" not in state(), state()
        # The same signed change again (a replay by the relay): refused, the agent is not told twice.
        assert_ok(post(fresh), 202)
        bridge.wait_log("session %s: a setting refused, the agent is not told: ts is not newer" % ses)
        assert len(agent_log("set_config")) == 1
    finally:
        assert bridge.stop() == 0

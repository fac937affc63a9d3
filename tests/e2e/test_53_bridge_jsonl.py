"""relay-bridge run --agent jsonl:COMMAND with examples/echo_agent.py: a turn,
the manifest, tasks, approvals with each decision mapped to the gateway's
word, and cancel."""
import os

from relaylib import wait_until
from streams import EventStream
from test_50_bridge_support import EXAMPLES, PYTHON, WAIT, paired

ECHO = "jsonl:%s %s" % (PYTHON, os.path.join(EXAMPLES, "echo_agent.py"))


def test_a_turn_streams_deltas_in_order_with_usage(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(ECHO)
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        text = " ".join("w%d" % n for n in range(40))
        interaction = user.send(session, text)
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == text and reply["finish_reason"] == "stop", reply
        assert reply["usage"]["model"] == "echo" and reply["usage"]["output_tokens"] == 40, reply
        stream.wait_for("message_finalized", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        deltas = [e.data["delta"] for e in stream.events
                  if e.name == "message_delta" and e.data["interaction_id"] == interaction]
        assert "".join(deltas) == text, deltas
    finally:
        stream.close()
        assert bridge.stop() == 0


def _approval_turn(user, stream, session, command):
    interaction = user.send(session, "run " + command)
    event = stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
    assert event.data["command"] == command and event.data["action"] == "exec", event.data
    return interaction, event.data["approval_id"]


def test_approvals_map_each_decision_to_the_gateway_word(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(ECHO)
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        for decision, word in (("approve", "allow-once"), ("deny", "deny"), ("approve_always", "allow-always")):
            interaction, approval_id = _approval_turn(user, stream, session, "ls /tmp/%s" % decision)
            user.decide(approval_id, decision)
            reply = user.wait_reply(session, interaction)
            assert reply["text"] == "decision: " + word, (decision, reply)
            # the task the agent declared went through setManifest's tool list
            done = stream.wait_for("task_completed" if decision != "deny" else "task_cancelled",
                                   lambda d: d["interaction_id"] == interaction, timeout=WAIT)
            assert done.data["name"] == "shell", done.data
            stream.wait_for("task_progress", lambda d: d["interaction_id"] == interaction
                            and d["progress_percent"] == 50, timeout=WAIT)
        # approve_always left a grant: the next request is answered by the relay at once
        interaction = user.send(session, "run ls /tmp/again")
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == "decision: allow-always", reply
        assert user.pending_approvals() == []
    finally:
        stream.close()
        assert bridge.stop() == 0


def test_a_task_with_an_undeclared_tool_is_refused_and_logged(relay, user_token, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, sys\n"
        "print(json.dumps({'type': 'manifest', 'tools': [{'name': 'shell'}]}), flush=True)\n"
        "for raw in sys.stdin:\n"
        "    m = json.loads(raw)\n"
        "    if m['type'] != 'message': continue\n"
        "    ids = {'session_id': m['session_id'], 'interaction_id': m['interaction_id']}\n"
        "    print(json.dumps(dict(type='task_start', task_id='t1', kind='exec', name='rm', **ids)), flush=True)\n"
        "    print('this is not json', flush=True)\n"
        "    print(json.dumps(dict(type='delta', text='done', **ids)), flush=True)\n"
        "    print(json.dumps(dict(type='end', **ids)), flush=True)\n")
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("jsonl:%s %s" % (PYTHON, agent))
    try:
        session = user.create_session()
        interaction = user.send(session, "go")
        assert user.wait_reply(session, interaction)["text"] == "done"
        log = bridge.log_text()
        assert "createTask: HTTP 422 tool_not_declared request_id=req_" in log, log
        assert "agent line ignored" in log, log
    finally:
        assert bridge.stop() == 0


def test_cancel_reaches_the_agent(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import json, sys, threading, time\n"
        "stop = set()\n"
        "def turn(m):\n"
        "    ids = {'session_id': m['session_id'], 'interaction_id': m['interaction_id']}\n"
        "    for n in range(600):\n"
        "        if m['interaction_id'] in stop or '' in stop:\n"
        "            print(json.dumps(dict(type='end', finish_reason='cancelled', **ids)), flush=True); return\n"
        "        print(json.dumps(dict(type='delta', text='.', **ids)), flush=True); time.sleep(0.05)\n"
        "for raw in sys.stdin:\n"
        "    m = json.loads(raw)\n"
        "    if m['type'] == 'message': threading.Thread(target=turn, args=(m,)).start()\n"
        "    if m['type'] == 'cancel': stop.add(m['interaction_id'])\n")
    bridge.start("jsonl:%s %s" % (PYTHON, slow))
    try:
        session = user.create_session()
        interaction = user.send(session, "go")
        wait_until(lambda: any(m["text"].startswith("..") for m in user.replies(session, interaction)), WAIT,
                   what="dots")
        user.cancel(session, interaction)
        reply = user.wait_reply(session, interaction)
        assert reply["text"].endswith("[cancelled]") and reply["finish_reason"] is None, reply
        assert 2 <= reply["text"].count(".") < 600, reply
    finally:
        assert bridge.stop() == 0


def test_an_expired_approval_reaches_the_agent(relayd, tmp_path):
    from relaylib import mint_token
    relay = relayd("--approval-ttl", "2s")
    token = mint_token(relay.data, "alice")
    bridge, user = paired(relay, token, tmp_path)
    bridge.start(ECHO)
    try:
        session = user.create_session()
        interaction = user.send(session, "run rm -rf /tmp/nothing")
        wait_until(lambda: user.pending_approvals(), WAIT, what="a pending approval")
        # nobody decides: the relay expires it and the agent treats that as a refusal
        reply = user.wait_reply(session, interaction, timeout=WAIT)
        assert reply["text"] == "decision: deny", reply
        assert user.pending_approvals() == []
    finally:
        assert bridge.stop() == 0

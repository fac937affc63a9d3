"""The real Claude Code as one of two agents of one relay-bridge, in a chosen project (issue 36
item 1; docs/bridge.md "Several agents and projects"), with test_91's rig (agentlib.ClaudeRig: the
real @zed-industries/claude-agent-acp and Claude Code, a scripted stand-in of the Anthropic API, no
network): relay-bridge run --agent 'claude=acp:…' --agent 'echo=acp:tests/e2e/acp_agent.py' --root
SRC. A session of agent claude in project SRC/app starts Claude Code's session in that folder, and
the file it writes (approved on the relay) lands there and nowhere else; a session of the other
agent on the same bridge answers from the test agent in its own project."""
import json
import os
import subprocess

from agentlib import WAIT, ClaudeRig
from fake_anthropic import tools_then_text
from relaylib import assert_ok, wait_until
from streams import EventStream
from test_50_bridge_support import PYTHON, paired

HERE = os.path.dirname(os.path.abspath(__file__))
ACP_AGENT = os.path.join(HERE, "acp_agent.py")
READY = "acp agent @zed-industries/claude-agent-acp 0.23.1 ready"


def _repo(path):
    os.makedirs(path)
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
    subprocess.run(["git", "-C", path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
                    "-m", "first"], check=True)


def test_claude_code_writes_in_its_project_beside_another_agent(relay, user_token, tmp_path):
    root = os.path.join(str(tmp_path), "src")
    app, other = os.path.join(root, "app"), os.path.join(root, "other")
    _repo(app)
    _repo(other)
    target = os.path.join(app, "hello.txt")
    rig = ClaudeRig(tmp_path)
    rig.model.script = tools_then_text([("Write", {"file_path": target, "content": "hello from app\n"})], "Written.")
    launcher = rig.write_launcher(os.path.join(str(tmp_path), "claude-agent.sh"))
    echo_log = os.path.join(str(tmp_path), "echo.log")
    bridge = stream = None
    try:
        bridge, user = paired(relay, user_token, tmp_path)
        stream = EventStream(relay, user_token)
        bridge.start("claude=acp:" + launcher, "--agent",
                     "echo=acp:%s %s --state %s --log %s" % (PYTHON, ACP_AGENT, tmp_path / "echo-state", echo_log),
                     "--root", root, "--cwd", rig.cwd, "--plain-projects")
        bridge.wait_log(READY, timeout=WAIT)
        bridge.wait_log("acp agent acp-test-agent 1.0 ready", timeout=WAIT)
        # As a client does before it names an agent: relayd holds the manifest that declares both.
        wait_until(lambda: any(i["id"] == user.installation_id and len(i.get("agents") or []) == 2
                               for i in assert_ok(user.call("GET", "/v1/me"))["installations"]),
                   WAIT, interval=0.1, what="the manifest declaring claude and echo")
        listing = assert_ok(user.call("GET", "/v1/me/installations/%s/projects" % user.installation_id))
        ids = {p["name"]: p["id"] for p in listing["projects"]}
        assert sorted(ids) == ["app", "other"], listing

        session = assert_ok(user.call("POST", "/v1/me/sessions", {"installation_id": user.installation_id,
                                                                   "agent": "claude",
                                                                   "project": {"id": ids["app"]}}))["session_id"]
        interaction = user.send(session, "Write hello.txt")
        approval = stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                   timeout=WAIT).data
        assert approval["command"] == target, approval
        assert not os.path.exists(target)  # nothing written before the user said yes
        user.decide(approval["approval_id"], "approve")
        reply = user.wait_reply(session, interaction)
        assert reply["text"].startswith("Written. [tool ok: File created successfully"), reply
        with open(target) as f:
            assert f.read() == "hello from app\n"
        # Nowhere else: not in --cwd, not in the other project.
        assert not os.path.exists(os.path.join(rig.cwd, "hello.txt"))
        assert os.listdir(other) == [".git"]
        # Claude Code was told its working folder is the project (its system prompt names it).
        system = json.dumps(rig.model.conversation()[0].get("system", ""))
        assert app in system and rig.cwd not in system, system[:2000]

        # The other agent of the same bridge, in the other project, answers from the test agent.
        second = assert_ok(user.call("POST", "/v1/me/sessions", {"installation_id": user.installation_id,
                                                                  "agent": "echo",
                                                                  "project": {"id": ids["other"]}}))["session_id"]
        reply = user.wait_reply(second, user.send(second, "hello echo"))
        assert reply["text"] == "echo: hello echo", reply
        with open(echo_log) as f:
            news = [json.loads(line) for line in f if '"session_new"' in line]
        assert [n["cwd"] for n in news] == [other], news

        def used():
            rows = assert_ok(user.call("GET", "/v1/me/installations/%s/projects" % user.installation_id))
            return {p["name"]: p["agents_used"] for p in rows["projects"]} == {"app": ["claude"], "other": ["echo"]}
        wait_until(used, WAIT, interval=0.1, what="each project's agents_used")
        rig.assert_stayed_home()
    finally:
        if stream is not None:
            stream.close()
        status = bridge.stop() if bridge is not None else 0
        rig.close()
    assert status == 0

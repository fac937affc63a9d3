"""One relay-bridge, several agents and projects (issue 36 item 1; docs/bridge.md "Several agents
and projects"): `--agent NAME=SPEC` twice and `--root DIR` with our ACP test agent
(tests/e2e/acp_agent.py). The manifest names both agents; the project list comes live from the
bridge (device_required without a device, plain with --plain-projects); a session runs in the
project folder it names (its agent's session/new cwd, its file writes there and nowhere else),
in a git worktree when it asks for one; two sessions on two agents run side by side; and each
refusal (unknown project, a worktree name with path characters, a worktree git cannot make) is a
session state "refused" with its code, the user's message ends with an error naming it, and
nothing runs (the agent never hears of the session)."""
import json
import os
import subprocess

from relaylib import assert_error, assert_ok, wait_until
from streams import EventStream
from test_50_bridge_support import PYTHON, WAIT, paired

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.join(HERE, "acp_agent.py")


def git_repo(path, branch="main"):
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "first"], check=True)


class Two:
    """A paired bridge with two ACP test agents (one, the default, and two), a root of repositories."""

    def __init__(self, relay, token, tmp_path, flags=(), env=None):
        self.tmp = tmp_path
        self.root = tmp_path / "src"
        git_repo(self.root / "alpha")
        git_repo(self.root / "group" / "beta", branch="dev")
        (self.root / "plain-folder").mkdir()
        self.cwd = tmp_path / "work"
        self.cwd.mkdir()
        self.bridge, self.user = paired(relay, token, tmp_path)
        self.logs = {n: tmp_path / ("agent-%s.log" % n) for n in ("one", "two")}
        spec = "%s=acp:%s %s --state %s --log %s"
        self.bridge.start(spec % ("one", PYTHON, AGENT, tmp_path / "state-one", self.logs["one"]),
                          "--agent", spec % ("two", PYTHON, AGENT, tmp_path / "state-two", self.logs["two"]),
                          "--root", str(self.root), "--cwd", str(self.cwd), *flags, env=env)
        self.bridge.wait_log("acp agent acp-test-agent 1.0 ready", count=2)
        self.stream = EventStream(relay, token)

    def close(self):
        self.stream.close()
        return self.bridge.stop()

    def agent_log(self, name, event=None):
        try:
            with open(self.logs[name]) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in entries if event is None or e["event"] == event]

    def projects(self, query=""):
        return self.user.call("GET", "/v1/me/installations/%s/projects%s" % (self.user.installation_id, query))

    def start(self, **body):
        body["installation_id"] = self.user.installation_id
        return assert_ok(self.user.call("POST", "/v1/me/sessions", body))["session_id"]

    def view(self, session):
        return [s for s in assert_ok(self.user.call("GET", "/v1/me/sessions"))["sessions"] if s["id"] == session][0]

    def state(self, session):
        """The session's agent_state once the bridge posted one."""
        found = {}

        def posted():
            found["s"] = self.view(session).get("agent_state")
            return found["s"] is not None and found["s"].get("state") != "starting"
        wait_until(posted, WAIT, interval=0.1, what="the agent_state of %s" % session)
        return found["s"]

    def turn(self, session, text):
        interaction = self.user.send(session, text)
        return interaction, self.user.wait_reply(session, interaction)


def _ids(listing):
    return {p["path"]: p["id"] for p in listing["projects"]}


def test_two_agents_are_advertised_and_projects_need_a_device(relay, user_token, tmp_path):
    two = Two(relay, user_token, tmp_path)
    try:
        def advertised():
            me = assert_ok(two.user.call("GET", "/v1/me"))
            inst = [i for i in me["installations"] if i["id"] == two.user.installation_id][0]
            return len(inst["agents"]) == 2 and inst["agents"]
        agents = wait_until(advertised, WAIT, interval=0.1, what="both agents in the manifest")
        assert [(a["name"], a["kind"], a.get("default")) for a in agents] == [("one", "acp", True),
                                                                               ("two", "acp", None)], agents
        assert agents[0]["supports"]["session_load"] is True, agents
        # No device named, no --plain-projects: the bridge will not answer in clear.
        r = two.projects()
        assert_error(r, 502, "upstream_error")
        assert r.json()["error"]["details"]["bridge_error"]["code"] == "device_required", r.text
        # A device this bridge never accepted gets nothing either.
        r = two.projects("?device_id=dev_notacceptedhere0000")
        assert_error(r, 502, "upstream_error")
        assert r.json()["error"]["details"]["bridge_error"]["code"] == "device_not_accepted", r.text
    finally:
        assert two.close() == 0


def test_a_session_runs_and_writes_in_its_project_only(relay, user_token, tmp_path):
    two = Two(relay, user_token, tmp_path, flags=("--plain-projects",))
    try:
        listing = assert_ok(two.projects())
        alpha, beta = str((two.root / "alpha").resolve()), str((two.root / "group" / "beta").resolve())
        assert sorted(_ids(listing)) == [alpha, beta], listing  # the plain folder is no repository
        rows = {p["name"]: p for p in listing["projects"]}
        assert rows["beta"]["branch"] == "dev" and rows["alpha"]["branch"] == "main", rows
        assert rows["alpha"]["agents_used"] == [] and rows["alpha"]["id"].startswith("p_"), rows

        session = two.start(agent="two", project={"id": _ids(listing)[beta]})
        state = two.state(session)
        assert state["state"] == "ready", state
        assert state["project"] == {"id": _ids(listing)[beta], "name": "beta", "path": beta, "branch": "dev"}, state
        _, reply = two.turn(session, "hello in beta")
        assert reply["text"] == "echo: hello in beta", reply
        new = two.agent_log("two", "session_new")
        assert [n["cwd"] for n in new] == [beta], new
        assert two.agent_log("one", "session_new") == []

        # A write in the project goes through; one in the other project or in --cwd is refused.
        for target, ok in ((two.root / "group" / "beta" / "out.txt", True), (two.root / "alpha" / "out.txt", False),
                           (two.cwd / "out.txt", False)):
            interaction = two.user.send(session, "write %s words" % target)
            approval = two.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                           timeout=WAIT).data
            two.user.decide(approval["approval_id"], "approve")
            reply = two.user.wait_reply(session, interaction)
            if ok:
                assert reply["text"] == "wrote %s (allow-once)" % target, reply
                assert target.read_text() == "words\n"
            else:
                assert reply["text"].startswith("write failed"), reply
                assert not target.exists()
        # The project remembers its agent.
        rows = {p["name"]: p for p in assert_ok(two.projects())["projects"]}
        assert rows["beta"]["agents_used"] == ["two"], rows
    finally:
        assert two.close() == 0


def test_two_sessions_two_agents_and_a_worktree(relay, user_token, tmp_path):
    two = Two(relay, user_token, tmp_path, flags=("--plain-projects",))
    try:
        ids = _ids(assert_ok(two.projects()))
        alpha, beta = str((two.root / "alpha").resolve()), str((two.root / "group" / "beta").resolve())
        first = two.start(project={"id": ids[alpha], "worktree_branch": "feature/login"})
        second = two.start(agent="two", project={"id": ids[beta]})
        plain = two.start()
        _, r1 = two.turn(first, "one says")
        _, r2 = two.turn(second, "two says")
        _, r3 = two.turn(plain, "nobody's project")
        assert (r1["text"], r2["text"], r3["text"]) == ("echo: one says", "echo: two says", "echo: nobody's project")
        worktree = str((two.root / "alpha.worktrees" / "feature-login").resolve())
        assert sorted(n["cwd"] for n in two.agent_log("one", "session_new")) == sorted([worktree, str(two.cwd)])
        assert [n["cwd"] for n in two.agent_log("two", "session_new")] == [beta]
        branch = subprocess.run(["git", "-C", worktree, "branch", "--show-current"], capture_output=True, text=True)
        assert branch.stdout.strip() == "feature/login", branch
        state = two.state(first)
        assert state["state"] == "ready" and state["project"]["path"] == worktree, state
        assert state["project"]["branch"] == "feature/login" and state["project"]["id"] == ids[alpha], state
        assert state["project"]["name"] == "alpha", state
        # A session that names no project runs in --cwd, and its state names none.
        view = two.view(plain)
        assert "project" not in (view["agent_state"] or {}), view
        # relay-bridge sessions lists every agent's bindings, each with the folder its session works in.
        from test_50_bridge_support import BRIDGE
        out = subprocess.run([BRIDGE, "sessions", "--json"], env=two.bridge.env(), capture_output=True, text=True,
                             timeout=WAIT)
        assert out.returncode == 0, out.stderr
        rows = {r["session_id"]: (r["agent"], r["cwd"]) for r in json.loads(out.stdout)["sessions"]}
        assert rows == {first: ("one", worktree), second: ("two", beta), plain: ("one", str(two.cwd))}, rows
    finally:
        assert two.close() == 0


def _held_git(tmp_path):
    """A git first in relay-bridge's PATH that waits until the test writes the release file: (env, release)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    release = tmp_path / "release-git"
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    (bindir / "git").write_text('#!/bin/sh\nwhile [ ! -e "%s" ]; do sleep 0.05; done\nexec %s "$@"\n'
                                % (release, real_git))
    (bindir / "git").chmod(0o755)
    return {"PATH": "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin"))}, release


def test_git_making_a_worktree_holds_up_no_other_session(relay, user_token, tmp_path):
    """git runs off the bridge's loop: while it makes one session's worktree (held here by a git that waits
    for the test's word), another session's turn goes through; the first session says "starting", and the
    message sent to it meanwhile waits and is answered in the worktree once git is done (not refused as not
    ready)."""
    env, release = _held_git(tmp_path)
    two = Two(relay, user_token, tmp_path, flags=("--plain-projects",), env=env)
    try:
        ids = _ids(assert_ok(two.projects()))
        alpha = str((two.root / "alpha").resolve())
        plain = two.start()
        held = two.start(project={"id": ids[alpha], "worktree_branch": "held/by-git"})
        early = two.user.send(held, "sent while git works")
        wait_until(lambda: (two.view(held).get("agent_state") or {}).get("state") == "starting", WAIT,
                   interval=0.1, what="the held session's state: starting")
        # git is still held: this turn goes through all the same.
        _, reply = two.turn(plain, "meanwhile")
        assert reply["text"] == "echo: meanwhile", reply
        assert not release.exists()
        assert two.view(held)["agent_state"]["state"] == "starting"
        release.write_text("go\n")
        reply = two.user.wait_reply(held, early)
        assert reply["text"] == "echo: sent while git works", reply
        worktree = str((two.root / "alpha.worktrees" / "held-by-git").resolve())
        state = two.state(held)
        assert state["state"] == "ready" and state["project"]["path"] == worktree, state
        assert worktree in [n["cwd"] for n in two.agent_log("one", "session_new")]
    finally:
        release.touch()
        assert two.close() == 0


def test_a_stop_ends_a_git_that_hangs(relay, user_token, tmp_path):
    """The bridge stopped while git makes a worktree (git held and never released): git is ended and the
    bridge exits at once, cleanly; the message waiting for the worktree stays unacknowledged, for the next run."""
    env, release = _held_git(tmp_path)
    two = Two(relay, user_token, tmp_path, flags=("--plain-projects",), env=env)
    try:
        ids = _ids(assert_ok(two.projects()))
        held = two.start(project={"id": ids[str((two.root / "alpha").resolve())], "worktree_branch": "never"})
        two.user.send(held, "waits for git")
        wait_until(lambda: (two.view(held).get("agent_state") or {}).get("state") == "starting", WAIT,
                   interval=0.1, what="the held session's state: starting")
        wait_until(lambda: "parked until its session's worktree is made" in two.bridge.log_text(), WAIT,
                   interval=0.05, what="the message parked")
        assert two.close() == 0
        assert not (two.root / "alpha.worktrees" / "never").exists()
        assert two.agent_log("one", "prompt") == []
    finally:
        # Should the bridge have left its git behind, that git goes on and ends (no process outlives the test).
        two.bridge.stop()
        release.touch()


def test_each_refusal_is_a_clear_error_and_nothing_runs(relay, user_token, tmp_path):
    two = Two(relay, user_token, tmp_path, flags=("--plain-projects",))
    try:
        ids = _ids(assert_ok(two.projects()))
        alpha = str((two.root / "alpha").resolve())
        # git cannot make this one: a file stands where the worktrees' folder goes
        (two.root / "alpha.worktrees").write_text("in the way\n")
        cases = [
            ({"project": {"id": "p_AAAAAAAAAAAAAAAAAAAAAA"}}, "unknown_project"),
            ({"agent": "two", "project": {"id": ids[alpha], "worktree_branch": "../../escape"}},
             "worktree_name_invalid"),
            ({"project": {"id": ids[alpha], "worktree_branch": "-b"}}, "worktree_name_invalid"),
            ({"project": {"id": ids[alpha], "worktree_branch": "ok-name"}}, "worktree_failed"),
        ]
        for body, code in cases:
            session = two.start(**body)
            state = two.state(session)
            assert state["state"] == "refused" and state["error"]["code"] == code, (body, state)
            assert "/" not in state["error"]["message"], state  # no path in the words
            interaction = two.user.send(session, "hello")
            reply = two.user.wait_reply(session, interaction)
            assert reply["finish_reason"] == "error" and code in reply["text"], (body, reply)
        assert two.agent_log("one", "session_new") == [] and two.agent_log("two", "session_new") == []
        assert two.agent_log("one", "prompt") == [] and two.agent_log("two", "prompt") == []
        assert not (two.root / "escape").exists() and not (tmp_path / "escape").exists()
        assert (two.root / "alpha.worktrees").read_text() == "in the way\n"
    finally:
        assert two.close() == 0


def test_bad_agent_options_stop_the_bridge_before_it_starts(relay, user_token, tmp_path):
    bridge, _ = paired(relay, user_token, tmp_path)
    spec = "acp:%s %s" % (PYTHON, AGENT)
    cases = [
        (("a=" + spec, "--agent", "a=" + spec), "two agents are named a"),
        (("Bad=" + spec,), "names are 1-32"),
        (("a=" + spec, "--default-agent", "b"), "--default-agent b: no agent has that name"),
        (("a=" + spec, "--root", str(tmp_path / "missing")), "not a folder"),
        (("a=nothing:x",), "must be exec:COMMAND"),
    ]
    for args, words in cases:
        bridge.start(args[0], *args[1:], wait_connected=False)
        assert bridge.wait_exit() == 2, bridge.log_text()[-2000:]
        assert words in bridge.log_text(), (words, bridge.log_text()[-2000:])
        bridge.log.close()
        bridge.proc = None


def test_agents_conf_in_the_config_folder(relay, user_token, tmp_path):
    """With no --agent, the agents, the default and the roots come from agents.conf beside bridge.json; a bad
    line stops the bridge with its number."""
    from test_50_bridge_support import BRIDGE
    bridge, user = paired(relay, user_token, tmp_path)
    root = tmp_path / "src"
    git_repo(root / "app")
    conf = bridge.config / "agents.conf"
    conf.write_text("# two agents\n"
                    "first = acp:%s %s --state %s\n"
                    "second=acp:%s %s --state %s   # the default below\n"
                    "default = second\n"
                    "root = %s\n" % (PYTHON, AGENT, tmp_path / "s1", PYTHON, AGENT, tmp_path / "s2", root))
    log = open(bridge.log_path, "ab")
    bridge.log = log
    bridge.proc = subprocess.Popen([BRIDGE, "run", "--plain-projects", "--log-level", "debug"], stdout=log,
                                   stderr=subprocess.STDOUT, env=bridge.env())
    try:
        bridge.wait_log("connected as")
        bridge.wait_log("agent second: acp (the default)")

        def advertised():
            me = assert_ok(user.call("GET", "/v1/me"))
            agents = [i for i in me["installations"] if i["id"] == user.installation_id][0]["agents"]
            return [(a["name"], a.get("default")) for a in agents] == [("first", None), ("second", True)]
        wait_until(advertised, WAIT, interval=0.1, what="the agents of agents.conf in the manifest")
        listing = assert_ok(user.call("GET", "/v1/me/installations/%s/projects" % user.installation_id))
        assert [p["name"] for p in listing["projects"]] == ["app"], listing
    finally:
        assert bridge.stop() == 0
    conf.write_text("first = acp:x\nsecond = nothing:y\n")
    bridge.log = open(bridge.log_path, "ab")
    bridge.proc = subprocess.Popen([BRIDGE, "run"], stdout=bridge.log, stderr=subprocess.STDOUT, env=bridge.env())
    assert bridge.wait_exit() == 2
    assert "agents.conf line 2" in bridge.log_text(), bridge.log_text()[-1000:]
    bridge.log.close()

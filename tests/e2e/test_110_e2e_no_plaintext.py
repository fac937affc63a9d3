"""No content of an encrypted session reaches relayd in clear (issue 34, finding 2; issue 35, item 3).

The real relayd (with Web Push on), the real relay-bridge running the ACP test
agent (acp_agent.py) and the real `relay`, whose device the bridge accepts and
which makes the encrypted session. The agent fills every field it can with a
marker: a thought, a plan, tool calls (titles, a kind of its own, inputs, paths,
locations, a diff, terminal output, raw output, an error), a permission request
the user approves, a file read and a file written whose names hold it, updates
the bridge ignores, the reply and the usage (a model's name). A second marker
stands for the agent's own diagnostics: the reason it could not start a session
and the error of a failed prompt, with what it wrote on stderr. The user sees
both markers (opened with the session key); relayd's data folder, its store (on
PostgreSQL every table and a pg_dump), its Redis bus (every key it keeps, with
RELAY_TEST_BUS=redis), its log and the pushes it sent hold neither,
and relay-bridge's log holds no content (only the diagnostics, on the agent's
machine, as docs/bridge.md says).
"""
import json
import os
import subprocess
import uuid

from e2elib import open_, seal
from relaylib import assert_ok, bearer, wait_until
from test_18_push import PushService, push_relay
from test_50_bridge_support import PYTHON
from test_60_relay_cli import WAIT, Cli
from test_63_relay_with_bridge import pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "acp_agent.py")


def accept_device(cli, bridge):
    """The bridge accepts the terminal's device as the user does it (compares the emoji, confirms)."""
    return confirm_bridge(cli, bridge)[0]


def files_of(folder):
    """Every file under folder, as {path: bytes}."""
    out = {}
    for root, _, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    out[path] = f.read()
            except OSError:
                pass
    return out


# How to read each kind of Redis value a bus may keep: the command for a key.
REDIS_READERS = {"string": lambda k: ["GET", k], "list": lambda k: ["LRANGE", k, "0", "-1"],
                 "hash": lambda k: ["HGETALL", k], "set": lambda k: ["SMEMBERS", k],
                 "zset": lambda k: ["ZRANGE", k, "0", "-1"], "stream": lambda k: ["XRANGE", k, "-", "+"]}


def bus_holds(bus):
    """What relayd's Redis bus keeps, as {key: bytes} ({} on the in-process bus)."""
    if not bus or not bus.startswith("unix://"):
        return {}
    socket_path, db = bus[len("unix://"):].split("?")[0], bus.rsplit("db=", 1)[1].split("&")[0]

    def cli(*args):
        proc = subprocess.run(["redis-cli", "-s", socket_path, "-n", db, "--raw"] + list(args), capture_output=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    out = {}
    for key in cli("--scan").decode().splitlines():
        kind = cli("TYPE", key).decode().strip()
        if kind != "none":  # gone since the scan
            out["redis %s %s" % (kind, key)] = cli(*REDIS_READERS.get(kind, lambda k: ["DUMP", k])(key))
    return out


class Scene:
    def __init__(self, relayd, tmp_path, agent_flags):
        self.relay = push_relay(relayd)
        self.service = PushService()
        self.cli = Cli(tmp_path)
        self.token = self.cli.login(self.relay)
        self.service.vapid_key = assert_ok(self.relay.get("/v1/web/config"))["push"]["vapid_public_key"]
        self.phone = self.service.subscribe("phone")
        assert_ok(self.relay.post("/v1/me/push-subscriptions", self.phone.json(), token=self.token))
        self.bridge, self.inst = pair_real_bridge(self.cli, self.relay, tmp_path)
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.bridge.start("acp:%s %s %s" % (PYTHON, AGENT, agent_flags), "--cwd", str(self.work))
        self.bridge.wait_log("device key registered as")
        me = accept_device(self.cli, self.bridge)
        self.ses = self.cli.json("new", "--installation", self.inst, "--encrypted")["session_id"]
        self.bridge.wait_log("session %s: key received from device %s" % (self.ses, me))
        with open(self.cli.config / "client-session-keys.json") as f:
            self.key = bytes.fromhex(json.load(f)["sessions"][self.ses][0])

    def me(self, method, path):
        return assert_ok(self.relay.request(method, path, headers=bearer(self.token)))

    def send(self, text):
        return assert_ok(self.relay.post("/v1/me/sessions/%s/send" % self.ses,
                                         {"text_ct": seal(self.key, "messages/" + self.ses, text)},
                                         token=self.token))["interaction_id"]

    def reply(self, interaction, approve=False):
        """The agent's final reply to interaction, opened by the terminal; approves what the turn asks."""
        def final():
            if approve:
                for a in self.me("GET", "/v1/me/snapshot")["pending_approvals"]:
                    self.cli.run("approve", a["approval_id"])  # one the snapshot still lists may be decided already
            texts = [m.get("text") or "" for m in self.cli.json("history", self.ses)["messages"]
                     if m["role"] == "agent" and m.get("interaction_id") == interaction
                     and m.get("state", "final") == "final" and m.get("finish_reason") != "tool_call"]
            return texts[-1] if texts else None
        return wait_until(final, WAIT, interval=0.5, what="the agent's reply to %s" % interaction)

    def opened_timeline(self):
        """Every envelope of the session's timeline, opened: the text a client shows."""
        items = [i[i["type"]] for i in self.me("GET", "/v1/me/sessions/%s/timeline?limit=100" % self.ses)["items"]]
        opened = []
        for item in items:
            for field, value in item.items():
                if not field.endswith("_ct") or not isinstance(value, str):
                    continue
                for path in ("tasks/", "messages/", "approvals/"):
                    try:
                        opened.append(open_(self.key, path + self.ses, value))
                        break
                    except Exception:
                        continue
        return items, "\n".join(opened)

    def relayd_holds(self):
        """Everything of relayd's a marker must not be in: {where: bytes}."""
        out = files_of(self.relay.data)
        out.update(self.relay.store_dump())
        if self.relay.store is not None:
            # On PostgreSQL, also the dump docs/operations.md's backups take (test_42), sequences and all.
            proc = subprocess.run(["pg_dump", self.relay.store], capture_output=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
            out["pg_dump"] = proc.stdout
        out.update(bus_holds(getattr(self.relay, "bus", None)))
        out["relayd's log"] = self.relay.log_text().encode()
        out["the pushes"] = json.dumps(self.phone.messages).encode()
        return out

    def close(self):
        self.service.close()


def test_nothing_the_agent_writes_reaches_relayd_in_clear(relayd, tmp_path):
    marker = "okapi" + uuid.uuid4().hex[:12]
    diag = "numbat" + uuid.uuid4().hex[:12]
    # The agent's first session/new fails (its reason, with its stderr, is diagnostics).
    s = Scene(relayd, tmp_path, "--fail-new refused-%s --fail-new-once" % diag)
    try:
        (s.work / (marker + "-notes.txt")).write_text("notes of %s\n" % marker)

        failed = s.reply(s.send("hello"))
        assert "[the agent could not start a session: Internal error (refused-%s)]" % diag in failed, failed
        assert "the real reason: refused-" + diag in failed, failed

        done = s.reply(s.send("leak " + marker), approve=True)
        assert "Done with %s (allow-once)" % marker in done, done
        assert (s.work / (marker + "-out.txt")).read_text() == "new %s\n" % marker

        broken = s.reply(s.send("leakfail " + diag))
        assert "[the agent failed: Internal error: %s (the model said no to %s)]" % (diag, diag) in broken, broken
        assert "agent trouble: " + diag in broken, broken

        # The user sees the content: the tasks' envelopes open to it.
        items, opened = s.opened_timeline()
        for seen in ("Run cat %s" % os.path.join(str(s.work), marker + "-plan-A.txt"), "terminal output " + marker,
                     "plan step " + marker, "thinking about " + marker, "Odd tool " + marker,
                     "error: %s went wrong" % marker, "notes of " + marker, "about to read " + marker):
            assert seen in opened, (seen, opened[:3000])
        # The two files it touched are listed, their names sealed under their blind index's key.
        files = s.me("GET", "/v1/me/sessions/%s/files" % s.ses)["files"]
        names = sorted(open_(s.key, "agent_files/%s/%s" % (s.ses, f["path_blind_idx"]), f["display_name_ct"])
                       for f in files)
        assert names == [marker + "-notes.txt", marker + "-out.txt"], names
        tasks = [i for i in items if i.get("task_id")]
        assert len(tasks) >= 6 and all(t.get("name") is None for t in tasks), tasks
        assert {t["kind"] for t in tasks} >= {"execute", "other", "read", "edit", "plan", "think"}, tasks
        wait_until(lambda: s.phone.messages, WAIT, what="a push")

        # relay-bridge's log, on the agent's machine, has the diagnostics and no content.
        log = s.bridge.log_text()
        assert marker not in log, [l for l in log.splitlines() if marker in l]
        assert "refused-" + diag in log and "the model said no to " + diag in log, log[-4000:]
        assert s.bridge.stop() == 0
        for phase in ("running", "stopped"):
            for where, data in s.relayd_holds().items():
                for m in (marker, diag):
                    assert m.encode() not in data, (phase, where, m,
                                                    data[max(0, data.find(m.encode()) - 200):][:400])
            if phase == "running":
                s.relay.stop_ok()
    finally:
        s.close()

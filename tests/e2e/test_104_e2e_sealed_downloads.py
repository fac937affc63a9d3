"""relay-bridge downloads sealed attachments off its event loop (docs/bridge.md,
"What is sealed" and "Inside").

Real relayd, the real relay-bridge running journal_agent.py (which writes down
every line it is given, in order) and the real `relay` (which confirms the
bridge's device key and makes the encrypted session). relayd's public URL, the
host of the attachments' signed links, is a small proxy here that passes every
request on to relayd at once, except that while it is held it keeps back the
GETs of /v1/files/: the bridge's download of a sealed attachment then hangs,
as on a slow link.

- While the download hangs, the bridge keeps working: a message of another
  session reaches the agent and its reply streams back; the later updates of
  the attachment's own session (a second message, a cancel of the first) wait
  behind it; once the download is let through, the attachment reaches the agent
  intact, and the session's updates follow in the order they were sent.
- relayd restarting while a download hangs: the bridge reconnects, the relay
  replays the parked update and the one processed after it (neither was acked:
  an ack covers every id below it), the bridge recognises both, and each reaches
  the agent once.
- A bridge stopped while a download hangs stops at once; the update it had
  parked was never acked, so the relay replays it to the bridge started again.
"""
import hashlib
import json
import os
import socket
import threading
import time

from e2elib import seal, seal_bytes
from relaylib import assert_ok, wait_until
from test_50_bridge_support import PYTHON, restart_on_same_port
from test_60_relay_cli import WAIT, Cli
from test_63_relay_with_bridge import pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge

JOURNAL_AGENT = "jsonl:%s %s" % (PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "journal_agent.py"))
# The longest a GET is held: below the bridge's 60 s download timeout, so that a bridge whose loop
# waits on the download (the one this test guards against) fails the test rather than the download.
HOLD_MAX = 45
# How soon a message of another session must be answered while the download hangs.
PROMPT = 10


class FilesProxy:
    """relayd's public URL: every request goes on to relayd (one per connection), but while the proxy
    is held a GET of /v1/files/ waits until release() (HOLD_MAX at most)."""

    def __init__(self):
        self.upstream = None  # relayd's port, once it runs
        self.held = []        # the paths kept back
        self.hits = []        # every path asked for
        self.gate = threading.Event()
        self.gate.set()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self):
        self.gate.clear()

    def release(self):
        self.gate.set()

    def holding(self):
        return not self.gate.is_set()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            lines, rest = head.split(b"\r\n\r\n", 1)
            lines = lines.split(b"\r\n")
            path = lines[0].split(b" ")[1].decode()
            self.hits.append(path)
            if path.startswith("/v1/files/") and self.holding():
                self.held.append(path)
                self.gate.wait(HOLD_MAX)
            lines = [l for l in lines if not l.lower().startswith(b"connection:")] + [b"Connection: close"]
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            upstream.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + rest)
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                conn.sendall(data)
            upstream.close()
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.release()
        self.listener.close()


class Setup:
    """A relayd behind a FilesProxy, a real bridge confirmed by a real `relay`, one encrypted session."""

    def __init__(self, relayd, tmp_path, files_url=True):
        self.proxy = FilesProxy()
        # The bridge is paired with relayd's own URL, the links name the proxy: --files-url allows it.
        self.flags = ("--files-url", self.proxy.url) if files_url else ()
        self.relay = relayd("--public-url", self.proxy.url)
        self.proxy.upstream = self.relay.port
        self.cli = Cli(tmp_path)
        self.token = self.cli.login(self.relay)
        self.bridge, self.inst = pair_real_bridge(self.cli, self.relay, tmp_path)
        self.journal_path = tmp_path / "journal.jsonl"
        self.start_bridge()
        self.bridge.wait_log("device key registered as")
        me, _, _ = confirm_bridge(self.cli, self.bridge)
        self.ses = self.cli.json("new", "--installation", self.inst, "--encrypted")["session_id"]
        self.bridge.wait_log("session %s: key received from device %s" % (self.ses, me))
        with open(self.cli.config / "client-session-keys.json") as f:
            self.key = bytes.fromhex(json.load(f)["sessions"][self.ses][0])

    def start_bridge(self):
        self.bridge.start(JOURNAL_AGENT, *self.flags, env={"JOURNAL": str(self.journal_path)})

    def journal(self, session_id=None):
        """The messages and cancels the agent was given, in order (of session_id, or all)."""
        try:
            with open(self.journal_path) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in entries if e["type"] in ("message", "cancel") and
                (session_id is None or e["session_id"] == session_id)]

    def send_sealed(self, text, files=()):
        """A message of the encrypted session, with files sealed as a phone seals them: its interaction id."""
        path = "attachments/" + self.ses
        items = []
        for name, mime, data in files:
            up = self.relay.request("POST", "/v1/me/attachments", data=seal_bytes(self.key, path, data),
                                    headers={"Authorization": "Bearer " + self.token,
                                             "Content-Type": "application/octet-stream"})
            meta = {"name": name, "mime": mime, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            items.append({"key": assert_ok(up)["key"], "meta_ct": seal(self.key, path, json.dumps(meta))})
        body = {"text_ct": seal(self.key, "messages/" + self.ses, text)}
        if items:
            body["attachments"] = items
        return assert_ok(self.relay.post("/v1/me/sessions/%s/send" % self.ses, body,
                                         token=self.token))["interaction_id"]

    def send_held(self, text):
        """A sealed message whose attachment's GET the proxy holds, sent and held: its interaction id."""
        self.proxy.hold()
        interaction = self.send_sealed(text, [("okapi-notes.txt", "text/plain", NOTES)])
        wait_until(lambda: self.proxy.held, WAIT, what="the bridge's GET of the sealed attachment")
        return interaction

    def ask_plain(self, session_id, text, timeout):
        """Sends text in a plain session and returns the agent's final reply, waited for at most timeout."""
        sent = assert_ok(self.relay.post("/v1/me/sessions/%s/send" % session_id, {"text": text}, token=self.token))

        def final():
            r = assert_ok(self.relay.request("GET", "/v1/me/sessions/%s/messages?limit=100" % session_id,
                                             headers={"Authorization": "Bearer " + self.token}))
            return [m["text"] for m in r["messages"] if m["role"] == "agent" and
                    m["interaction_id"] == sent["interaction_id"] and m["state"] == "final"]
        return wait_until(final, timeout, what="the agent's reply to %r" % text)[0]

    def sealed_replies(self):
        """The agent's replies in the encrypted session, opened by the terminal: {interaction_id: text}."""
        return {m["interaction_id"]: m.get("text") for m in self.cli.json("history", self.ses)["messages"]
                if m["role"] == "agent" and m.get("state", "final") == "final"}

    def wait_sealed_replies(self, *interactions):
        """sealed_replies, once it holds a reply to every one of interactions."""
        def replies():
            got = self.sealed_replies()
            return got if all(i in got for i in interactions) else None
        return wait_until(replies, WAIT, what="the agent's replies in the encrypted session")


NOTES = b"okapi field notes: the slow link held them back\n" * 200


def _described(name, mime, data):
    return "%s %s %d %s" % (name, mime, len(data), hashlib.sha256(data).hexdigest())


def test_a_slow_download_holds_back_only_its_own_session(relayd, tmp_path):
    s = Setup(relayd, tmp_path)
    try:
        plain = assert_ok(s.relay.post("/v1/me/sessions", {"installation_id": s.inst}, token=s.token))["session_id"]
        first = s.send_held("read this")

        # Another session is served while the download hangs: its message reaches the agent, the reply
        # streams back.
        started = time.monotonic()
        assert s.ask_plain(plain, "hello from another session", PROMPT) == "echo: hello from another session"
        assert s.proxy.holding() and time.monotonic() - started < PROMPT
        assert s.relay.request("GET", "/v1/me", headers={"Authorization": "Bearer " + s.token}).json()[
            "result"]["installations"][0]["health"] == "healthy"

        # The attachment's own session waits: a cancel of the first message and a second message stay behind
        # it, while a later message of the other session (a barrier: the relay sent it after them) is
        # answered.
        assert_ok(s.relay.post("/v1/me/sessions/%s/cancel" % s.ses, {"interaction_id": first}, token=s.token))
        second = s.send_sealed("and a second question")
        assert s.ask_plain(plain, "barrier", PROMPT) == "echo: barrier"
        assert s.proxy.holding()
        assert s.journal(s.ses) == [], s.journal()
        s.bridge.wait_log("parked behind an earlier update of session %s" % s.ses, count=2)

        # Let the download through: the file reaches the agent intact, then the session's updates in order.
        s.proxy.release()
        wait_until(lambda: len(s.journal(s.ses)) == 3, WAIT, what="the session's three updates at the agent")
        entries = s.journal(s.ses)
        assert [(e["type"], e["interaction_id"]) for e in entries] == [
            ("message", first), ("cancel", first), ("message", second)], entries
        assert entries[0]["text"] == "read this" and entries[2]["text"] == "and a second question", entries
        assert entries[0]["files"] == _described("okapi-notes.txt", "text/plain", NOTES), entries
        # The other session's messages reached the agent first, while the download hung.
        order = [e["interaction_id"] for e in s.journal()]
        assert order.index(first) == 2, s.journal()
        replies = s.wait_sealed_replies(first, second)
        assert replies[first] == "files: " + _described("okapi-notes.txt", "text/plain", NOTES), replies
        assert replies[second] == "echo: and a second question", replies
        assert "sealed attachment" not in s.bridge.log_text()  # no download failed, no file refused
    finally:
        s.proxy.close()
        assert s.bridge.stop() == 0


def test_a_bridge_stopped_during_a_download_leaves_the_update_to_the_replay(relayd, tmp_path):
    s = Setup(relayd, tmp_path)
    try:
        first = s.send_held("read this")

        # SIGTERM is heard at once: the download in progress is abandoned, the parked update dropped unacked.
        started = time.monotonic()
        assert s.bridge.stop() == 0
        assert time.monotonic() - started < 5, "relay-bridge took %.1f s to stop" % (time.monotonic() - started)
        assert "1 updates still parked are left to the relay's replay" in s.bridge.log_text()
        assert s.journal(s.ses) == []

        # Started again, the bridge gets the update again (it was never acked) and the file goes through.
        s.proxy.release()
        s.start_bridge()
        wait_until(lambda: s.journal(s.ses), WAIT, what="the replayed message at the agent")
        entries = s.journal(s.ses)
        assert [(e["type"], e["interaction_id"]) for e in entries] == [("message", first)], entries
        assert entries[0]["files"] == _described("okapi-notes.txt", "text/plain", NOTES), entries
        replies = s.wait_sealed_replies(first)
        assert replies[first] == "files: " + _described("okapi-notes.txt", "text/plain", NOTES), replies
    finally:
        s.proxy.close()
        assert s.bridge.stop() == 0


def test_a_reconnect_during_a_download_gives_the_agent_nothing_twice(relayd, tmp_path):
    s = Setup(relayd, tmp_path)
    try:
        plain = assert_ok(s.relay.post("/v1/me/sessions", {"installation_id": s.inst}, token=s.token))["session_id"]
        first = s.send_held("read this")
        assert s.ask_plain(plain, "before the restart", PROMPT) == "echo: before the restart"

        # relayd restarts (close code 1012): the bridge reconnects at once and is sent again what it did not
        # ack, the parked message and the one answered after it; it takes neither a second time.
        skipped = s.bridge.log_text().count("skipped (already handled)")
        s.relay.stop_ok()
        restart_on_same_port(s.relay)
        s.bridge.wait_log("connected as", count=2, timeout=40)
        s.bridge.wait_log("skipped (already handled)", count=skipped + 2)
        assert s.proxy.holding() and s.journal(s.ses) == []

        s.proxy.release()
        wait_until(lambda: s.journal(s.ses), WAIT, what="the parked message at the agent")
        assert s.ask_plain(plain, "after the restart", PROMPT) == "echo: after the restart"
        entries = s.journal()
        assert [e["text"] for e in entries] == ["before the restart", "read this", "after the restart"], entries
        assert entries[1]["interaction_id"] == first
        assert entries[1]["files"] == _described("okapi-notes.txt", "text/plain", NOTES), entries
        replies = s.wait_sealed_replies(first)
        assert replies[first] == "files: " + _described("okapi-notes.txt", "text/plain", NOTES), replies
    finally:
        s.proxy.close()
        assert s.bridge.stop() == 0


def test_a_link_outside_the_relay_is_never_fetched(relayd, tmp_path):
    """issue 34: relayd's links name another origin (here the proxy, as a hostile relay's could name any
    address of the bridge's network) and the bridge was not told it is the relay's (--files-url): it
    requests nothing there, sealed or plain; the agent gets the items as download_failed, with no link."""
    s = Setup(relayd, tmp_path, files_url=False)
    try:
        first = s.send_sealed("read this", [("okapi-notes.txt", "text/plain", NOTES)])
        plain = assert_ok(s.relay.post("/v1/me/sessions", {"installation_id": s.inst}, token=s.token))["session_id"]
        up = assert_ok(s.relay.request("POST", "/v1/me/attachments?name=n.txt", data=b"plain notes",
                                       headers={"Authorization": "Bearer " + s.token, "Content-Type": "text/plain"}))
        sent = assert_ok(s.relay.post("/v1/me/sessions/%s/send" % plain,
                                      {"text": "and this", "attachments": [{"key": up["key"]}]}, token=s.token))
        wait_until(lambda: len(s.journal()) == 2, WAIT, what="both messages at the agent")
        entries = {e["interaction_id"]: e for e in s.journal()}
        assert entries[first]["files"] == "None no file: download_failed", entries
        assert entries[sent["interaction_id"]]["files"] == "n.txt no file: download_failed", entries
        assert s.wait_sealed_replies(first)[first] == "files: None no file: download_failed"
        assert s.proxy.hits == [], s.proxy.hits
        assert s.bridge.log_text().count("links outside the relay") == 2, s.bridge.log_text()
    finally:
        s.proxy.close()
        assert s.bridge.stop() == 0

"""Helpers of the relay-bridge end-to-end tests (test_5x_*.py); no tests here.

RelayBridge drives the real relay-bridge binary: `pair` with its
machine-readable output (the test claims the code it prints, through the
claim route), then `run` with an agent, its log captured in a file. The
binary is RELAY_BRIDGE, or else relay-bridge next to RELAYD (so that
`make test-asan` tests the sanitizer build), or build/relay-bridge.
Every wait is bounded and scales with SLOW.
"""
import json
import os
import signal
import subprocess
import sys
import time

from relaylib import SLOW, assert_ok, bearer, clean_env, sanitizer_report, wait_until


def _binary():
    if os.environ.get("RELAY_BRIDGE"):
        return os.environ["RELAY_BRIDGE"]
    if os.environ.get("RELAYD"):
        return os.path.join(os.path.dirname(os.environ["RELAYD"]), "relay-bridge")
    return "/work/main/build/relay-bridge"


BRIDGE = _binary()
WAIT = 15 * SLOW
PYTHON = sys.executable or "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")


class RelayBridge:
    """One relay-bridge configuration (its own RELAY_CONFIG_DIR) and process."""

    def __init__(self, relay, tmp_path, name="bridge"):
        self.relay = relay
        self.config = tmp_path / (name + "-config")
        self.log_path = tmp_path / (name + ".log")
        self.proc = None
        self.installation_id = None
        assert os.access(BRIDGE, os.X_OK), "relay-bridge not found at %s (set RELAY_BRIDGE)" % BRIDGE

    def env(self, extra=None):
        env = clean_env({"RELAY_CONFIG_DIR": str(self.config)})
        env.update(extra or {})
        return env

    def command(self, *argv, timeout=WAIT):
        proc = subprocess.run([BRIDGE] + list(argv), capture_output=True, text=True, timeout=timeout,
                              env=self.env())
        assert sanitizer_report(proc.stderr) is None, proc.stderr
        return proc

    def pair(self, user_token, name="test-machine"):
        """`relay-bridge pair`; the user claims the printed code. Returns the installation id."""
        proc = subprocess.Popen([BRIDGE, "pair", "--server", self.relay.url(""), "--name", name, "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env())
        try:
            first = json.loads(proc.stdout.readline())
            assert len(first["code"]) == 7 and first["code"].isalpha() and first["code"].isupper(), first
            assert first["claim_url"].endswith(first["code"]), first
            assert_ok(self.relay.claim(user_token, first["code"]))
            out, err = proc.communicate(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, (proc.returncode, out, err)
        assert sanitizer_report(err) is None, err
        last = json.loads(out.strip().splitlines()[-1])
        assert last["status"] == "paired", last
        self.installation_id = last["installation_id"]
        self.printed = out + err
        return self.installation_id

    def enrol_code(self):
        """A one-time code for a device's verification, as `relay-bridge devices add` shows it."""
        proc = self.command("devices", "add", "--json")
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        shown = json.loads(proc.stdout)
        assert shown["link"].endswith("?enrol=" + shown["code"]), shown
        return shown["code"]

    def confirm_device(self, device_id):
        """The owner's word on this machine: `relay-bridge devices confirm ID --yes`."""
        proc = self.command("devices", "confirm", device_id, "--yes", "--json")
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return json.loads(proc.stdout)

    def credentials(self):
        with open(self.config / "bridge.json") as f:
            return json.load(f)

    def token(self):
        return self.credentials()["token"]

    def start(self, agent, *flags, env=None, wait_connected=True):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([BRIDGE, "run", "--agent", agent, "--log-level", "debug"] + list(flags),
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env(env))
        if wait_connected:
            self.wait_log("connected as", count=1)
        return self

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, needle, count=1, timeout=WAIT):
        def seen():
            if self.proc is not None and self.proc.poll() is not None and self.log_text().count(needle) < count:
                raise AssertionError("relay-bridge exited with %s:\n%s" % (self.proc.returncode, self.log_text()))
            return self.log_text().count(needle) >= count
        wait_until(seen, timeout, interval=0.05, what="%r x%d in the bridge log" % (needle, count))

    def wait_exit(self, timeout=WAIT):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("relay-bridge still running:\n" + self.log_text()[-4000:])

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("relay-bridge ignored SIGTERM:\n" + self.log_text()[-4000:])
        if self.proc is not None:
            self.log.close()
        report = sanitizer_report(self.log_text())
        assert report is None, "sanitizer report from relay-bridge: %s\n%s" % (report, self.log_text()[-6000:])
        return self.proc.returncode if self.proc is not None else None


class User:
    """The client's side: sessions, sends, history, approvals, over the real routes."""

    def __init__(self, relay, token, installation_id):
        self.relay, self.token, self.installation_id = relay, token, installation_id

    def call(self, method, path, body=None):
        """One call, as a client makes it: told 429 (nothing was done), it waits as the answer says and asks again.
        Buckets are exact, on several nodes and after a restart too: a relay node that died takes with it the
        tokens its lease held, so a user's bucket may start a restart nearly empty and refill from there."""
        kw = {"headers": bearer(self.token)}
        if body is not None:
            kw["json"] = body
        for _ in range(20):
            r = self.relay.request(method, path, **kw)
            if r.status_code != 429:
                return r
            time.sleep(r.json()["error"].get("retry_after_ms", 100) / 1000.0)
        return r

    def create_session(self):
        return assert_ok(self.call("POST", "/v1/me/sessions", {"installation_id": self.installation_id}))["session_id"]

    def send(self, session_id, text):
        r = assert_ok(self.call("POST", "/v1/me/sessions/%s/send" % session_id, {"text": text}))
        return r["interaction_id"]

    def cancel(self, session_id, interaction_id=None):
        body = {} if interaction_id is None else {"interaction_id": interaction_id}
        return assert_ok(self.call("POST", "/v1/me/sessions/%s/cancel" % session_id, body))

    def messages(self, session_id):
        return assert_ok(self.call("GET", "/v1/me/sessions/%s/messages?limit=100" % session_id))["messages"]

    def replies(self, session_id, interaction_id):
        return [m for m in self.messages(session_id)
                if m["role"] == "agent" and m["interaction_id"] == interaction_id]

    def wait_reply(self, session_id, interaction_id, timeout=WAIT, ends_as_tool_call=False):
        """Waits for the agent's message that ends the turn to be final; returns it. A message that ended
        as a tool call is not that one: the text after a task, an approval or a capability request goes
        on in a new message (docs/bridge.md), unless the turn itself ended as a tool call
        (ends_as_tool_call: an openai: model that called tools)."""
        found = {}

        def final():
            hits = [m for m in self.replies(session_id, interaction_id) if m["state"] == "final"
                    and (ends_as_tool_call or m["finish_reason"] != "tool_call")]
            if hits:
                found["m"] = hits[0]
            return bool(hits)
        # Four polls a second: well under the default bucket's refill (10/s), so that polling for a long turn never
        # empties it, even when it starts empty (a relay node that died takes the tokens its lease held with it).
        wait_until(final, timeout, interval=0.25, what="a final reply to %s" % interaction_id)
        return found["m"]

    def shown_texts(self, session_id, interaction_id):
        """The texts of the turn's agent messages as clients show them: in the order they opened, without
        the empty placeholder a turn that begins with a task or a request ends as a tool call."""
        replies = sorted(self.replies(session_id, interaction_id), key=lambda m: (m["created_at"], m["message_id"]))
        return [m["text"] for m in replies if not (m["finish_reason"] == "tool_call" and not m["text"].strip())]

    def decide(self, approval_id, decision, **extra):
        body = {"decision": decision}
        body.update(extra)
        return assert_ok(self.call("POST", "/v1/me/approvals/%s" % approval_id, body))

    def pending_approvals(self):
        return assert_ok(self.call("GET", "/v1/me/snapshot"))["pending_approvals"]

    def revoke(self):
        return assert_ok(self.call("DELETE", "/v1/me/installations/%s" % self.installation_id))


def paired(relay, user_token, tmp_path, name="bridge"):
    """A paired RelayBridge and the User that owns it."""
    bridge = RelayBridge(relay, tmp_path, name)
    inst = bridge.pair(user_token)
    return bridge, User(relay, user_token, inst)


def restart_on_same_port(relay):
    """Starts relayd again after kill9() on the port the bridge knows
    (Relay.start() picks a fresh port; a bridge's saved server must keep working)."""
    import subprocess as sp
    from relaylib import RELAYD
    argv = [RELAYD, "--listen", "127.0.0.1:%d" % relay.port, "--data", str(relay.data)] + relay.args
    deadline = time.monotonic() + WAIT
    while True:
        with open(relay.log_path, "ab") as log:
            relay.proc = sp.Popen(argv, stdin=sp.DEVNULL, stdout=log, stderr=log, env=clean_env(relay.env))
        try:
            relay._wait_ready()
            return relay
        except Exception:
            relay.proc = None
            # the port may linger a moment after kill -9
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)

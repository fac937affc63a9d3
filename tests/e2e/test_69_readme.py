"""The README and docs as a newcomer meets them (issue 17, items 4 and 9).

The tour of README.md is run as written: its commands are read from the README, and only the
server's address, the data folder and the pairing code are put in (the test's relayd listens on a
free port with a temporary folder); the chat runs in tmux. It must show a reply streaming word by
word and a cancel. The docs link to docs/api.md, never to a spec outside the repository; every
relative link resolves; no example points an agent at relayd's own port; the tour's user is the one
`make run` prints a token for."""
import json
import os
import re
import shlex
import subprocess
import time

from relaylib import RELAYD
from test_50_bridge_support import RelayBridge
from test_60_relay_cli import WAIT, Cli
from test_62_relay_chat import screen, tmux, wait_screen  # noqa: F401 - tmux is a fixture

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.dirname(RELAYD)
README = os.path.join(REPO, "README.md")


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def tour_commands():
    """The commands of the README's tour, in order, without comments."""
    text = read("README.md")
    section = text[text.index("## A two-minute tour"):]
    block = section[section.index("```sh") + 5:]
    block = block[:block.index("```")]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def local_command(line, relay):
    """A tour command for this test: the test's relayd address and data folder, binaries of this build."""
    line = line.replace("http://127.0.0.1:8080", relay.url(""))
    line = re.sub(r"build/relayd token (\S+)", r"build/relayd token \1 --data %s" % shlex.quote(str(relay.data)),
                  line)
    return line.replace("build/", BUILD + "/")


def test_the_tour_streams_a_reply_word_by_word_and_cancels_one(relay, tmp_path, tmux):
    commands = tour_commands()
    assert commands[0] == "build/relayd", commands
    login, pair_bridge, pair_code, run_bridge, new, chat = commands[1:]
    bridge = RelayBridge(relay, tmp_path)
    cli = Cli(tmp_path)
    env = dict(cli.env, RELAY_CONFIG_DIR=str(bridge.config))
    cli.env["RELAY_CONFIG_DIR"] = str(bridge.config)  # one config folder, as on one machine

    def sh(line, **kw):
        return subprocess.run(["sh", "-c", local_command(line, relay)], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=WAIT, **kw)

    proc = sh(login)
    assert proc.returncode == 0, (login, proc.stdout, proc.stderr)
    # Piped, the bridge prints its code as JSON: the code the README's QWERTYU stands for.
    pairing = subprocess.Popen(["sh", "-c", local_command(pair_bridge, relay)], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        code = json.loads(pairing.stdout.readline())["code"]
        assert pair_code == "build/relay pair QWERTYU", pair_code
        proc = sh(pair_code.replace("QWERTYU", code))
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert pairing.wait(WAIT) == 0
    finally:
        if pairing.poll() is None:
            pairing.kill()
        pairing.communicate()
    agent = re.search(r"--agent '([^']+)'", run_bridge).group(1)
    bridge.proc = None
    bridge.log = open(bridge.log_path, "ab")
    bridge.proc = subprocess.Popen(["sh", "-c", "exec " + local_command(run_bridge, relay)], cwd=REPO, env=env,
                                   stdout=bridge.log, stderr=subprocess.STDOUT)
    try:
        bridge.wait_log("connected as")
        assert "--delay" in agent, agent
        proc = sh(new)
        assert proc.returncode == 0, (new, proc.stdout, proc.stderr)
        session = json.loads(proc.stdout)["session_id"]

        tmux("new-session", "-d", "-s", "chat", "-x", "150", "-y", "50",
             "sh -c %s" % shlex.quote("trap '' INT; cd %s && env -u NO_COLOR LANG=C.UTF-8 RELAY_CONFIG_DIR=%s %s; "
                                      "echo \"relay exited with status $?\"; sleep 60"
                                      % (shlex.quote(REPO), shlex.quote(str(bridge.config)),
                                         local_command(chat, relay))))
        wait_screen(tmux, "you>")
        sentence = "the quick brown fox jumps over the lazy dog"
        assert sentence in read("README.md")
        tmux("send-keys", "-t", "chat", sentence, "Enter")
        # Word by word: a moment shows the start of the reply without its end.
        partial = False
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            shown = screen(tmux)
            if "agent> the quick" in shown and "lazy dog" not in shown.split("agent>")[-1]:
                partial = True
            if shown.count("lazy dog") >= 2:
                break
            time.sleep(0.05)
        assert partial, screen(tmux)
        wait_screen(tmux, "you>")
        # Again, and Ctrl-C while it streams.
        tmux("send-keys", "-t", "chat", sentence, "Enter")
        wait_screen(tmux, "agent> the quick")
        tmux("send-keys", "-t", "chat", "C-c")
        wait_screen(tmux, "turn cancelled")
        def final_reply():
            history = json.loads(cli.run("history", session).stdout)["messages"]
            replies = [m for m in history if m["role"] == "agent"]
            return replies[-1] if replies and replies[-1]["state"] == "final" else None
        deadline = time.monotonic() + WAIT
        while final_reply() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        replies = [final_reply()]
        assert replies[0]["text"].endswith("[cancelled]"), replies
        assert "lazy dog" not in replies[0]["text"], replies
        tmux("send-keys", "-t", "chat", "C-c")
        wait_screen(tmux, "relay exited with status 0")
    finally:
        assert bridge.stop() == 0


def _markdown_files():
    files = ["README.md"]
    for root, _dirs, names in os.walk(os.path.join(REPO, "docs")):
        files += [os.path.relpath(os.path.join(root, n), REPO) for n in names if n.endswith(".md")]
    return files


def test_the_docs_link_inside_the_repository():
    for path in _markdown_files():
        text = read(path)
        assert "shared/spec" not in text and "relay-service-spec.md" not in text, path
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(path), target))
            assert os.path.exists(resolved), (path, target)
        for named in re.findall(r"`?(docs/[A-Za-z0-9_/.-]+\.md)`?", text):
            assert os.path.exists(os.path.join(REPO, named)), (path, named)
    assert "[docs/api.md](docs/api.md)" in read("README.md")


def test_no_example_points_an_agent_at_relayds_own_port():
    sources = _markdown_files() + ["tools/relay-bridge.c", "contrib/relay-bridge.service"]
    for path in sources:
        text = read(path)
        assert not re.search(r"openai:https?://(127\.0\.0\.1|localhost):8080", text), path


def test_the_tour_uses_the_user_make_run_prints_a_token_for():
    run = read("scripts/run.sh")
    user = re.search(r"USER_ID=\$\{RELAY_LOCAL_USER:-(\w+)\}", run).group(1)
    tokens = re.findall(r"relayd token (\w+)", " ".join(tour_commands()))
    assert tokens == [user], (tokens, user)
    assert "make run" in read("README.md")

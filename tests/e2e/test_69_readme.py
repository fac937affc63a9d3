"""The README and docs as a newcomer meets them (issue 17, items 4 and 9).

The tour of README.md is run as written: its commands are read from the README, and only the
pairing code is put in. Its first command, `make run`, is scripts/run.sh on this build's relayd
(test_77 checks the build it adds) on a free port, not 8080, with a temporary data folder; the
other commands take the address and the token from the two export lines it prints, as a reader
pastes them (issue 28, item 4). The chat runs in tmux. It must show a reply streaming word by
word and a cancel. The docs link to docs/api.md, never to a spec outside the repository; every
relative link resolves; no example points an agent at relayd's own port; the tour's user is the one
`make run` prints a token for."""
import json
import os
import re
import shlex
import subprocess
import signal
import time

import requests

from relaylib import RELAYD, START_TIMEOUT, clean_env, free_port, wait_until
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


def local_command(line):
    """A tour command for this test: the binaries of this build."""
    return line.replace("build/", BUILD + "/")


def make_run(tmp_path):
    """What `make run` starts once it has built, on a port that is not 8080; returns the process and the
    variables of the two export lines it printed."""
    port = free_port()
    env = clean_env({"RELAY_LISTEN": "127.0.0.1:%d" % port, "RELAY_DATA": str(tmp_path / "data")})
    proc = subprocess.Popen([os.path.join(REPO, "scripts", "run.sh"), RELAYD], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    exports = {}
    for line in proc.stdout:
        match = re.match(r"  export (RELAY|TOKEN)=(\S+)$", line)
        if match:
            exports[match.group(1)] = match.group(2)
        if len(exports) == 2:
            break
    assert exports.get("RELAY") == "http://127.0.0.1:%d" % port, exports

    def healthy():
        try:
            return requests.get(exports["RELAY"] + "/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False
    wait_until(healthy, START_TIMEOUT, what="make run's relayd to serve")
    return proc, exports


def test_the_tour_streams_a_reply_word_by_word_and_cancels_one(tmp_path, tmux):
    commands = tour_commands()
    assert commands[0] == "make run", commands
    # The address is the one make run printed, never written out.
    assert not [c for c in commands if "8080" in c or "127.0.0.1" in c or "localhost" in c], commands
    login, pair_bridge, pair_code, run_bridge, new, chat = commands[1:]
    assert '--server "$RELAY"' in login and '--token "$TOKEN"' in login and '--server "$RELAY"' in pair_bridge
    server, exports = make_run(tmp_path)
    try:
        run_the_tour(tmp_path, tmux, exports, login, pair_bridge, pair_code, run_bridge, new, chat)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(START_TIMEOUT)
        server.stdout.close()


def run_the_tour(tmp_path, tmux, exports, login, pair_bridge, pair_code, run_bridge, new, chat):
    bridge = RelayBridge(None, tmp_path)
    cli = Cli(tmp_path)
    env = dict(cli.env, RELAY_CONFIG_DIR=str(bridge.config), **exports)
    cli.env["RELAY_CONFIG_DIR"] = str(bridge.config)  # one config folder, as on one machine

    def sh(line, **kw):
        return subprocess.run(["sh", "-c", local_command(line)], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=WAIT, **kw)

    proc = sh(login)
    assert proc.returncode == 0, (login, proc.stdout, proc.stderr)
    # Piped, the bridge prints its code as JSON: the code the README's QWERTYU stands for.
    pairing = subprocess.Popen(["sh", "-c", local_command(pair_bridge)], cwd=REPO, env=env,
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
    bridge.proc = subprocess.Popen(["sh", "-c", "exec " + local_command(run_bridge)], cwd=REPO, env=env,
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
                                         local_command(chat))))
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
        # The second reply's start (the first reply's is on screen already).
        deadline = time.monotonic() + WAIT
        while screen(tmux).count("agent> the quick") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
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
        # What the screen shows is what was stored (issue 28, item 6): the words the agent sent before it
        # stopped and the [cancelled], then the line that says so.
        shown = wait_screen(tmux, "you>")
        cancelled = shown[shown.rindex("you> " + sentence):]
        cancelled = cancelled[cancelled.index("agent> "):cancelled.index("■ turn cancelled")]
        # (The terminal echoes the key as ^C where it was pressed; the reply goes on after it.)
        assert cancelled.replace("^C", "") == "agent> %s\n" % replies[0]["text"], (cancelled, replies)

        # run ls -la, always approved: the agent lists its folder (the repository, where the bridge runs).
        approvals_tour(tmux, cli, session)
        tmux("send-keys", "-t", "chat", "C-c")
        wait_screen(tmux, "relay exited with status 0")
    finally:
        assert bridge.stop() == 0


def prompt_ready(tmux):
    """Waits for the chat's prompt on the last line: the reply before it has ended."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        shown = screen(tmux)
        if shown.rstrip("\n").splitlines()[-1] == "you> ":
            return shown
        time.sleep(0.1)
    raise AssertionError("no prompt on the last line:\n" + screen(tmux))


def approvals_tour(tmux, cli, session):
    """The tour's approvals in the chat: each answer said as what it is, a grant's answer in one line, and the
    command's output in the reply (items 7 and 9)."""
    tmux("send-keys", "-t", "chat", "run ls -la", "Enter")
    wait_screen(tmux, "answer>")
    tmux("send-keys", "-t", "chat", "a")
    shown = wait_screen(tmux, "agent> allow-always: ran `ls -la` in %s: exit status 0" % REPO)
    assert "✓ always approved: a grant for this command" in shown, shown
    # The listing is the task's output, under its line.
    listing = shown[shown.index("✓ task shell completed"):shown.index("agent> allow-always")]
    assert "README.md" in listing and "exit status 0" in listing, shown
    prompt_ready(tmux)
    # Again: the grant answers, and one line says so.
    tmux("send-keys", "-t", "chat", "run ls -la", "Enter")
    deadline = time.monotonic() + WAIT
    while screen(tmux).count("agent> allow-always: ran `ls -la`") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    shown = prompt_ready(tmux)
    assert shown.count("agent> allow-always: ran `ls -la` in %s: exit status 0" % REPO) == 2, shown
    assert shown.count("README.md") == 2, shown
    assert shown.count('✓ approved by your "always approve" grant: ls -la') == 1, shown
    assert shown.count("answer>") == 1, shown
    # Denied: said as a denial, and nothing ran.
    tmux("send-keys", "-t", "chat", "run touch made-by-the-tour", "Enter")
    deadline = time.monotonic() + WAIT
    while screen(tmux).count("answer>") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    tmux("send-keys", "-t", "chat", "d")
    shown = wait_screen(tmux, "was not run")
    assert "✗ denied" in shown and "✓ deny" not in shown, shown
    assert "deny: `touch made-by-the-tour` was not run" in shown, shown
    assert not os.path.exists(os.path.join(REPO, "made-by-the-tour"))
    prompt_ready(tmux)


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


def test_the_tour_and_the_pairing_calls_use_what_make_run_prints():
    """The token of the tour is the one make run prints, and every address is $RELAY, so that
    RELAY_LISTEN=... make run changes them all."""
    run = read("scripts/run.sh")
    assert "export RELAY=$url" in run and "export TOKEN=$token" in run
    tour = " ".join(tour_commands())
    assert "relayd token" not in tour and '"$TOKEN"' in tour, tour
    readme = read("README.md")
    two_commands = readme[readme.index("## Two commands"):readme.index("## Running relayd")]
    assert "RELAY_LISTEN=127.0.0.1:8081 make run" in two_commands
    assert re.findall(r"curl -s -X POST (\S+)", two_commands) == [
        '"$RELAY/v1/pairing/start"', '"$RELAY/v1/me/pairing/claim"', '"$RELAY/v1/pairing/poll"']
    assert "builds relayd, relay and relay-bridge" in two_commands


def phone_commands():
    """The commands of the README's "On your phone", in order, without comments."""
    text = read("README.md")
    section = text[text.index("### On your phone"):]
    block = section[section.index("```sh") + 5:]
    block = block[:block.index("```")]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_phone_s_sign_in_link_is_for_the_tour_s_user_at_make_run_s_address(tmp_path):
    """Issue 35, item 4: the phone section's login-link, run as written in another terminal after
    `RELAY_LISTEN=... make run` (a port that is not 8080), signs in the tour's user `local` (the
    owner of its sessions) at the address make run picked."""
    link_line = next(line for line in phone_commands() if "relayd login-link" in line)
    argv = shlex.split(local_command(link_line))
    assert argv[2] == "local" and "--public-url" not in argv and "--listen" not in argv, link_line
    proc, exports = make_run(tmp_path)
    try:
        # The reader's other terminal, at the top of the repository: none of make run's settings.
        link = subprocess.run(argv + ["--data", str(tmp_path / "data")], cwd=REPO, capture_output=True, text=True,
                              timeout=60, env=clean_env())
        assert link.returncode == 0, link.stderr
        base, code = link.stdout.strip().split("/login#code=")
        assert base == exports["RELAY"], (base, exports)
        signed_in = requests.post(base + "/v1/login/exchange", json={"code": code}, timeout=5).json()["result"]
        me = requests.get(base + "/v1/me", headers={"Authorization": "Bearer " + exports["TOKEN"]}, timeout=5)
        assert signed_in["user_id"] == me.json()["result"]["user"]["id"] == "local", (signed_in, me.text)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=START_TIMEOUT)
    # The bridge is paired and run against the address the tour uses.
    rest = " ".join(phone_commands())
    assert 'relay-bridge pair --server "$RELAY"' in rest, rest

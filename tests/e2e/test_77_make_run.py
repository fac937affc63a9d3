"""`make run` (issue 15; issue 28, items 1 to 4): it builds the programs of the README's tour
(relayd, relay, relay-bridge; no tests, no fuzzers, no manuals) with a progress line that moves,
greets with the relay's address and a token as two export lines, logs as text on a terminal and as
JSON elsewhere, and when the port is taken says so and how to pick another, before starting anything."""
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import time

import requests

from relaylib import RELAYD, START_TIMEOUT, clean_env, free_port, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.dirname(RELAYD)


PROGRAMS = ["relayd", "relay", "relay-bridge"]
PROGRESS = re.compile(r"\[ *(\d+)%\] building (\S+) \((\d) of 3\)(: \S+\.c)?$")


def make_run(tmp_path, listen, **streams):
    env = clean_env({"RELAY_LISTEN": listen, "RELAY_DATA": str(tmp_path / "data")})
    # A user's make run, not a part of the make test that runs this suite: under its -j2 the
    # inherited jobserver flags make the build warn "jobserver unavailable" on stderr.
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    streams = streams or {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen(["make", "--no-print-directory", "run", "BUILD=%s" % BUILD], cwd=REPO, env=env,
                            start_new_session=True, **streams)


def assert_greeting(text, port, serving=True):
    """The two export lines of the tour, the relay's address among them, and a token relayd takes."""
    assert "  export RELAY=http://127.0.0.1:%d\n" % port in text, text
    token = re.search(r"^  export TOKEN=(\S+)$", text, re.M).group(1)
    assert '  build/relay login --server "$RELAY" --token "$TOKEN"' in text, text
    # A first token creates the store: its migrations are not part of a greeting.
    assert "migrated" not in text, text
    if not serving:
        return
    me = requests.get("http://127.0.0.1:%d/v1/me" % port, headers={"Authorization": "Bearer " + token}, timeout=5)
    assert me.status_code == 200 and me.json()["result"]["user"]["id"] == "local", me.text


def test_make_run_when_the_port_is_taken_says_how_to_pick_another(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = "127.0.0.1:%d" % taken.getsockname()[1]
        proc = make_run(tmp_path, listen)
        out, err = proc.communicate(timeout=600)
    assert proc.returncode != 0
    assert "%s is already in use" % listen in err, err
    assert "RELAY_LISTEN=127.0.0.1:8081 make run" in err and "--listen 127.0.0.1:8081" in err, err
    # Nothing was started or written for it.
    assert not (tmp_path / "data").exists()


def test_make_run_builds_the_tour_s_programs_shows_progress_greets_and_serves(tmp_path):
    port = free_port()
    proc = make_run(tmp_path, "127.0.0.1:%d" % port)
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(port), 600, interval=0.2, what="make run to serve")
        assert proc.poll() is None, proc.communicate()
        # The README's phone section, in another terminal (no RELAY_LISTEN there): the link names the
        # address make run picked, for the tour's user (issue 35, item 4).
        link = subprocess.run([os.path.join(BUILD, "relayd"), "login-link", "local", "--data", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=60, env=clean_env())
        assert link.returncode == 0, link.stderr
        assert re.match(r"http://127\.0\.0\.1:%d/login#code=\w{32}$" % port, link.stdout.strip()), link.stdout
        code = link.stdout.strip().split("#code=")[1]
        signed_in = requests.post("http://127.0.0.1:%d/v1/login/exchange" % port, json={"code": code}, timeout=5)
        assert signed_in.json()["result"]["user_id"] == "local", signed_in.text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=START_TIMEOUT)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0] == "building relayd, relay and relay-bridge (log: %s/run-build.log)" % BUILD, lines
    # Not a terminal: a line at each tenth of each program's build, in the order of the programs.
    built = next(n for n, line in enumerate(lines) if line.startswith("built in "))
    progress = [PROGRESS.match(line) for line in lines[1:built]]
    assert progress and all(progress), lines
    steps = [(int(m.group(3)), int(m.group(1))) for m in progress]
    assert steps == sorted(steps), steps
    assert [m.group(2) for m in progress] == [PROGRAMS[n - 1] for n, _ in steps], lines
    assert {n for n, _ in steps} == {1, 2, 3}, steps
    assert re.match(r"built in \d+ s$", lines[len(progress) + 1]), lines
    assert_greeting(out, port, serving=False)
    assert "Building C object" not in out + err and "Linking" not in out + err
    with open(os.path.join(BUILD, "run-build.log")) as f:
        log = f.read()
    # The tour's programs and what they are made of: no test, fuzzer, other program or manual.
    for other in ("unit_", "fuzz_", "catalogd", "Built target catalog\n", "manuals"):
        assert other not in log, (other, log[-2000:])
    for program in PROGRAMS:
        assert "Built target %s\n" % program in log, (program, log[-2000:])
    # A service manager (no terminal) gets JSON lines; the data folder is relayd's, private, so a first
    # start has nothing to warn about.
    # (make itself may say it was terminated, its one line that is not relayd's.)
    records = [json.loads(line) for line in err.splitlines() if line.strip() and not line.startswith("make: ***")]
    assert any(r["msg"] == "listening" for r in records), err
    assert not [r for r in records if r["level"] in ("warn", "error")], err
    assert (os.stat(tmp_path / "data").st_mode & 0o777) == 0o700


def test_make_run_on_a_terminal_moves_one_progress_line_greets_and_logs_text(tmp_path):
    port = free_port()
    leader, follower = pty.openpty()
    proc = make_run(tmp_path, "127.0.0.1:%d" % port, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    screen = b""
    try:
        deadline = time.monotonic() + 600
        while b"Stop it with Ctrl-C." not in screen.split(b"relayd is running at")[-1] or \
                b"relayd is running at" not in screen:
            assert time.monotonic() < deadline and proc.poll() is None, screen.decode(errors="replace")
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    screen += os.read(leader, 65536)
                except OSError:
                    break
        text = screen.decode().replace("\r\n", "\n")
        greeting = text[text.index("built in "):]
        assert_greeting(greeting, port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=START_TIMEOUT)
        os.close(leader)
    # One line that moves: each step overwrites the last one (carriage return, erase the line).
    build = text[:text.index("built in ")]
    assert build.count("\r\x1b[K[") >= 3 and "\n[" not in build, build
    for program in PROGRAMS:
        assert "%%] building %s (" % program in build, build
    # relayd's lines are text on a terminal, and the greeting is short: the two export lines, one sign-in
    # command, relayd's two start lines and its banner.
    assert '{"time"' not in greeting, greeting
    assert re.search(r"^\S+Z info  listening address=127\.0\.0\.1:%d " % port, greeting, re.M), greeting
    assert "relayd is running at http://127.0.0.1:%d\n" % port in greeting, greeting
    assert len([line for line in greeting.splitlines() if line.strip()]) <= 14, greeting
    assert "open to other local users" not in greeting and " warn " not in greeting, greeting


def test_a_fresh_clone_has_no_data_folder():
    """git would create a tracked data/ 0755 and relayd's first start would warn about its own folder."""
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""


def _healthy(port):
    try:
        return requests.get("http://127.0.0.1:%d/healthz" % port, timeout=1).status_code == 200
    except requests.RequestException:
        return False

"""`make run` (issue 15): it builds relayd alone (no tests, no fuzzers, no other program), prints
little, and when the port is taken says so and how to pick another, before starting anything."""
import os
import signal
import socket
import subprocess
import time

import requests

from relaylib import RELAYD, START_TIMEOUT, clean_env, free_port, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.dirname(RELAYD)


def make_run(tmp_path, listen):
    env = clean_env({"RELAY_LISTEN": listen, "RELAY_DATA": str(tmp_path / "data")})
    return subprocess.Popen(["make", "--no-print-directory", "run", "BUILD=%s" % BUILD], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


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


def test_make_run_builds_relayd_alone_prints_little_and_serves(tmp_path):
    port = free_port()
    proc = make_run(tmp_path, "127.0.0.1:%d" % port)
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(port), 600, interval=0.2, what="make run to serve")
        assert proc.poll() is None, proc.communicate()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=START_TIMEOUT)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("building relayd (log: "), lines
    assert any(line.strip().startswith("export TOKEN=") for line in lines), out
    assert len(lines) <= 6, out
    assert "Building C object" not in out + err and "Linking" not in out + err
    with open(os.path.join(BUILD, "run-build.log")) as f:
        log = f.read()
    # Only relayd and what it is made of: no test, fuzzer or other program.
    for other in ("unit_", "fuzz_", "catalogd", "relay-bridge", "Built target relay\n", "manuals"):
        assert other not in log, (other, log[-2000:])
    assert "Built target relayd" in log, log[-2000:]
    # The data folder is relayd's to create, private, so a first start has nothing to warn about.
    assert "open to other local users" not in err, err
    assert (os.stat(tmp_path / "data").st_mode & 0o777) == 0o700


def test_a_fresh_clone_has_no_data_folder():
    """git would create a tracked data/ 0755 and relayd's first start would warn about its own folder."""
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""


def _healthy(port):
    try:
        return requests.get("http://127.0.0.1:%d/healthz" % port, timeout=1).status_code == 200
    except requests.RequestException:
        return False

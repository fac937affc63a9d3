"""Operator interface: flags, environment, usage errors, clean shutdown."""
import re
import signal
import socket
import subprocess
import time

import pytest
import requests

from relaylib import (
    RELAYD, START_TIMEOUT, STOP_TIMEOUT, assert_ok, clean_env, free_port, run_relayd,
)

DURATION_FLAGS = [
    "--pairing-ttl", "--approval-ttl", "--ws-ping-interval", "--ws-pong-timeout",
    "--sse-heartbeat", "--replay-window", "--followup-window", "--delete-grace",
    "--idempotency-ttl",
]


def _env_name(flag):
    return "RELAY_" + flag[2:].upper().replace("-", "_")


def test_help_lists_every_setting_with_its_env_name():
    proc = run_relayd(["--help"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    for flag in ["--listen", "--data"] + DURATION_FLAGS:
        assert re.search(r"(^|\s)%s(\s|=|$)" % re.escape(flag), text, re.M), "%s missing from --help" % flag
        assert _env_name(flag) in text, "%s missing from --help" % _env_name(flag)


@pytest.mark.parametrize("flag,default", [
    ("--pairing-ttl", "120s"), ("--approval-ttl", "5m"), ("--ws-ping-interval", "30s"),
    ("--ws-pong-timeout", "10s"), ("--sse-heartbeat", "25s"), ("--replay-window", "5m"),
    ("--followup-window", "30m"), ("--delete-grace", "24h"), ("--idempotency-ttl", "24h"),
])
def test_help_shows_the_spec_defaults(flag, default):
    text = run_relayd(["--help"]).stdout
    block = text[text.index(flag):]
    block = block[:block.index("env ")]
    assert re.search(r"default %s\b" % re.escape(default), block), (flag, block)


@pytest.mark.parametrize("argv", [
    ["--pairing-ttl", "5"],
    ["--pairing-ttl", "5 s"],
    ["--pairing-ttl", "-5s"],
    ["--pairing-ttl", "abc"],
    ["--approval-ttl", "10x"],
    ["--pairing-ttl"],
    ["--no-such-flag"],
    ["--listen", "not-an-address"],
])
def test_bad_settings_exit_2_with_a_message(tmp_path, argv):
    port = free_port()
    full = ["--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path / "d")] + argv
    proc = run_relayd(full)
    assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
    assert proc.stderr.strip(), "no message for %r" % argv
    assert not (tmp_path / "d").exists(), "a usage error must not touch the data folder"


@pytest.mark.parametrize("name,value", [
    ("RELAY_PAIRING_TTL", "5"),
    ("RELAY_APPROVAL_TTL", "soon"),
])
def test_bad_env_setting_exits_2(tmp_path, name, value):
    proc = run_relayd(["--listen", "127.0.0.1:%d" % free_port(), "--data", str(tmp_path / "d")],
                      env={name: value})
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert name in proc.stderr, "the message names the variable: %r" % proc.stderr
    assert not (tmp_path / "d").exists(), "a usage error must not touch the data folder"


def test_port_in_use_fails_cleanly(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = run_relayd(["--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path / "d")])
    # An error exit, not a crash (a signal gives a negative status).
    assert proc.returncode > 0, (proc.returncode, proc.stderr)
    assert '"level":"error"' in proc.stderr, proc.stderr


def test_token_without_user_exits_2(tmp_path):
    proc = run_relayd(["token", "--data", str(tmp_path / "d")])
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    proc = run_relayd(["token"])
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)


def test_token_with_bad_ttl_exits_2(tmp_path):
    proc = run_relayd(["token", "alice", "--data", str(tmp_path / "d"), "--ttl", "forever"])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)


def test_token_prints_the_token_on_its_last_line(tmp_path):
    proc = run_relayd(["token", "alice", "--data", str(tmp_path / "d"), "--ttl", "10m"])
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip("\n").split("\n")[-1]
    assert re.match(r"^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$", last), proc.stdout


def test_env_pairing_ttl_works_like_the_flag(relayd):
    relay = relayd(env={"RELAY_PAIRING_TTL": "2s"})
    before = time.time()
    started = relay.pairing_start()
    assert before + 1 <= started["expires_at"] <= time.time() + 3, (before, started)


def test_flag_overrides_env(relayd):
    relay = relayd("--pairing-ttl", "7s", env={"RELAY_PAIRING_TTL": "2s"})
    before = time.time()
    started = relay.pairing_start()
    assert before + 6 <= started["expires_at"] <= time.time() + 8, (before, started)


@pytest.mark.parametrize("value,seconds", [("2500ms", 2.5), ("1m", 60), ("1h", 3600)])
def test_duration_units(relayd, value, seconds):
    relay = relayd("--pairing-ttl", value)
    before = time.time()
    started = relay.pairing_start()
    assert before + seconds - 1 <= started["expires_at"] <= time.time() + seconds + 1, (value, started)


def test_env_listen_and_data(tmp_path):
    # RELAY_LISTEN / RELAY_DATA are read when the flags are absent.
    port = free_port()
    data = tmp_path / "envdata"
    env = clean_env({"RELAY_LISTEN": "127.0.0.1:%d" % port, "RELAY_DATA": str(data)})
    log = open(tmp_path / "env.log", "wb")
    proc = subprocess.Popen([RELAYD], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                r = requests.get("http://127.0.0.1:%d/healthz" % port, timeout=1)
                break
            except requests.RequestException:
                assert proc.poll() is None, "relayd exited"
                assert time.monotonic() < deadline, "relayd did not answer"
                time.sleep(0.05)
        assert_ok(r)
        assert (data / "relay.db").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(STOP_TIMEOUT)
        log.close()
    assert rc == 0


def test_sigterm_with_an_idle_keepalive_connection_exits_0(relay):
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=10)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, "connection closed"
            head += chunk
        assert head.startswith(b"HTTP/1.1 200")
        # The connection stays open and idle while relayd is told to stop.
        rc = relay.stop()
        assert rc == 0, "relayd exited with status %d\n%s" % (rc, relay.log_text()[-3000:])
    finally:
        sock.close()


def test_sigterm_with_a_half_sent_request_exits_0(relay):
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=10)
    try:
        sock.sendall(b"POST /v1/pairing/start HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.2)  # let relayd read the head; nothing to poll from outside
        rc = relay.stop()
        assert rc == 0, "relayd exited with status %d\n%s" % (rc, relay.log_text()[-3000:])
    finally:
        sock.close()


def test_sigterm_logs_and_exits_0(relay):
    assert_ok(relay.get("/healthz"))
    relay.stop_ok()
    levels = [rec.get("level") for rec in relay.log_records()]
    assert levels and all(level in ("debug", "info", "warn", "error") for level in levels)
    assert "error" not in levels, relay.log_text()


def test_log_lines_are_json_with_request_ids(relay):
    r = relay.get("/v1/nope", headers={"X-Request-ID": "trace-me-123"})
    assert r.status_code == 404
    relay.stop_ok()
    records = relay.log_records()
    lines = [line for line in relay.log_text().splitlines() if line.strip()]
    assert len(records) == len(lines), "every stderr line is a JSON object"
    assert any(rec.get("request_id") == "trace-me-123" and rec.get("status") == 404 for rec in records)

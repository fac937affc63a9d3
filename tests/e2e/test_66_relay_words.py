"""What `relay` says, in its own words (issue 17, items 3 and 8): `help` is text even when piped (the
manifest only with --json); a pairing code that cannot be one is a usage error that says what a code
is; an unreachable relay is named once, without libcurl's wording; an answer cut off mid-body is told
in our words; a field the relay refuses is named."""
import json
import socket
import threading

import pytest

from relaylib import SLOW
from test_60_relay_cli import Cli, new_session, pair_with_cli


def test_help_is_text_when_piped_and_json_only_when_asked(tmp_path):
    cli = Cli(tmp_path)
    proc = cli.run("help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("relay "), proc.stdout[:200]
    assert "commands:" in proc.stdout and "exit status:" in proc.stdout, proc.stdout
    proc = cli.run("help", "send")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: relay send <session> <text>"), proc.stdout
    proc = cli.run("send", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: relay send"), proc.stdout
    manifest = json.loads(cli.run("help", "--json").stdout)
    assert manifest["name"] == "relay"
    # Results stay JSON when piped: only help changed.
    assert json.loads(cli.run("version").stdout)["name"] == "relay"


def test_a_pairing_code_that_cannot_be_one_says_what_a_code_is(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    for typed in ("ABC", "ABCDEFGH", "ABC1EFG", ""):
        proc = cli.run("pair", typed)
        assert proc.returncode == 2, (typed, proc.returncode, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert "7 letters" in error, error
        assert "malformed" not in error, error
    # Separators and case are how people type codes: still a code, which this relay never issued.
    proc = cli.run("pair", "abc defg")
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "pairing_not_found", proc.stdout


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_relay_is_named_once_in_our_words(tmp_path):
    server = "http://127.0.0.1:%d" % _closed_port()
    cli = Cli(tmp_path, {"RELAY_SERVER": server, "RELAY_TOKEN": "eyJhbGciOiJFZERTQSJ9.e30.c2ln"})
    proc = cli.run("whoami", timeout=60 * SLOW)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    said = proc.stdout + proc.stderr
    assert said.count(server) == 1, said
    assert "cannot reach %s" % server in json.loads(proc.stdout)["error"], proc.stdout
    assert "Couldn't connect" not in said and "Failed to connect" not in said, said
    # The notes before the error count the tries.
    assert "no answer (try 1)" in proc.stderr, proc.stderr


class CutOffServer:
    """Answers every request with a head promising 100 bytes, sends ten, and closes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                             b"{\"ok\":true")

    def close(self):
        self.sock.close()


@pytest.fixture
def cut_off():
    server = CutOffServer()
    yield server
    server.close()


def test_an_answer_cut_off_is_told_in_our_words(tmp_path, cut_off):
    cli = Cli(tmp_path, {"RELAY_SERVER": cut_off.url, "RELAY_TOKEN": "eyJhbGciOiJFZERTQSJ9.e30.c2ln"})
    proc = cli.run("whoami", timeout=60 * SLOW)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout)["error"]
    assert error == "no complete answer from %s: the connection broke before the answer was complete" % cut_off.url, \
        error
    assert "Transferred a partial file" not in proc.stdout + proc.stderr


def test_a_refused_field_is_named(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    proc = cli.run("send", ses, "")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout)
    assert error["code"] == "invalid_request", error
    assert "(text: " in error["error"], error
    agent.close()

"""h2o from the outside (issue 37): the two functions relayd puts in front of
h2o's own (the HTTP/1 head parser, for the head checks and per-route body
limits, and the socket close, for the lingering close) are checked at
start, and a server refuses to start when they are not in force, never
falling back silently (docs/internals/http.md, "h2o from the outside").

relayd-unhooked is relayd built with those two functions hidden inside the
program, as a linker that did not export them would leave them. What each
hook does when in force is tested where its behaviour is: test_08_hardening
(the head checks, the JSON body limit, the early 413 that lingers until the
client read it) and test_13_attachments (the upload limit).
"""
import os
import subprocess

from relaylib import RELAYD, START_TIMEOUT, assert_ok, clean_env, free_port, mint_token, post_head, raw_exchange

UNHOOKED = os.path.join(os.path.dirname(RELAYD), "relayd-unhooked")


def test_a_relayd_whose_h2o_hooks_are_not_in_force_refuses_to_start(tmp_path):
    port = free_port()
    proc = subprocess.run([UNHOOKED, "--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=START_TIMEOUT, env=clean_env())
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "refusing to start: h2o does not call relay's phr_parse_request" in proc.stderr, proc.stderr[-2000:]
    assert '"listening"' not in proc.stderr


def test_the_hooks_are_in_force_in_relayd(relay, user_token):
    # Started at all: the check passed. And the parser hook is the one answering: a 2 MB JSON head is
    # refused at once (the JSON limit), while the same length to the upload route is read and kept.
    big = 2 * 1024 * 1024
    refused = raw_exchange(relay.port, post_head("/v1/me/sessions", length=big,
                                                 extra={"Authorization": "Bearer " + user_token}))
    assert refused.status_code == 413, refused.status_code
    r = relay.request("POST", "/v1/me/attachments?name=big.bin",
                      headers={"Authorization": "Bearer " + user_token, "Content-Type": "application/octet-stream"},
                      data=b"\0" * big)
    assert assert_ok(r)["size"] == big
    assert "refusing to start" not in relay.log_text()


def test_catalogd_checks_its_hooks_too(tmp_path):
    catalogd = os.path.join(os.path.dirname(RELAYD), "catalogd")
    port = free_port()
    proc = subprocess.Popen([catalogd, "--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path / "cat")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())
    try:
        import requests
        import time
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if requests.get("http://127.0.0.1:%d/v1/health" % port, timeout=1).status_code < 500:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert proc.poll() is None, proc.stdout.read()[-2000:]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert "refusing to start" not in out

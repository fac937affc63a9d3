"""Fixtures of the relayd end-to-end suite.

`relayd(*flags, env=None, data=None, start=True)` starts the real binary on a
free loopback port with a fresh data folder and returns a relaylib.Relay.
At teardown every relayd still running gets SIGTERM and must exit with status
0, and no relayd's stderr may hold a sanitizer report (ASan makes the status
nonzero; UBSan may only print).
"""
import os

import pytest

from relaylib import RELAYD, Relay, mint_token, sanitizer_report


@pytest.fixture(scope="session", autouse=True)
def _relayd_binary():
    assert os.access(RELAYD, os.X_OK), "relayd binary not found at %s (set RELAYD)" % RELAYD


@pytest.fixture
def relayd(tmp_path):
    started = []
    counter = [0]

    def factory(*flags, env=None, data=None, start=True, ca=None):
        counter[0] += 1
        data_dir = data or (tmp_path / ("data%d" % counter[0]))
        log_path = tmp_path / ("relayd%d.log" % counter[0])
        relay = Relay(data_dir, log_path, flags, env, ca=ca)
        started.append(relay)
        if start:
            relay.start()
        return relay

    yield factory

    failures = []
    for relay in started:
        if relay.running:
            rc = relay.stop()
            if rc != 0:
                failures.append("relayd on %s exited with status %d\n%s"
                                % (relay.data, rc, relay.log_text()[-6000:]))
        report = sanitizer_report(relay.log_text())
        if report is not None:
            failures.append("sanitizer report from relayd on %s: %s\n%s"
                            % (relay.data, report, relay.log_text()[-6000:]))
    assert not failures, "\n".join(failures)


@pytest.fixture
def relay(relayd):
    """A relayd with default settings."""
    return relayd()


@pytest.fixture
def user_token(relay):
    """A token for user "alice" from the embedded issuer of `relay`."""
    return mint_token(relay.data, "alice")

"""The soak (make soak, not part of make test): the end-to-end suite's fixtures (tests/e2e/conftest.py:
relayd, postgres, redis_bus, ...) and its helpers, and at the end of the run every scenario's table.

The e2e conftest is loaded under another module name so that it does not clash with this one.
"""
import importlib.util
import os
import sys

E2E = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e")
sys.path.insert(0, os.path.abspath(E2E))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_spec = importlib.util.spec_from_file_location("e2e_conftest", os.path.join(E2E, "conftest.py"))
e2e_conftest = importlib.util.module_from_spec(_spec)
sys.modules["e2e_conftest"] = e2e_conftest
_spec.loader.exec_module(e2e_conftest)

# The fixtures, as if defined here; and the names e2e test modules take from `conftest` (test_81's helpers).
from e2e_conftest import (BUS, PG_SH, REDIS_SH, PostgresServer, RedisBus, RedisServer,  # noqa: E402,F401
                          _relayd_binary, postgres, pytest_configure, redis_bus, redis_server, relayd)

import soaklib  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if not soaklib.TABLES:
        return
    terminalreporter.section("soak figures")
    for report in soaklib.TABLES:
        terminalreporter.write_line(report.table())
        terminalreporter.write_line("")

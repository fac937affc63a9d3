"""The `catalog` command-line client end to end against a real catalogd:
every command in both output modes (a human summary on a terminal, JSON when
piped or with --json), every exit status (0, 1 for runtime and remote
errors, 2 for usage errors), CATALOG_BASE, the build-time default base and
NO_COLOR. Terminal runs use a pseudo-terminal."""
import json
import os
import pty
import select
import subprocess
import time

import pytest

from catalog_fixtures import (CATALOG_CLI, SLOW, SOURCE, TYPES, _catalog_binaries, catalog, catalogd_factory)

CLI_TIMEOUT = 30 * SLOW
TEST_PAPER = "relay-catalog-test-paper"
COMMANDS = {"search", "get", "paper", "api", "help", "version"}


def cli_env(base, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("CATALOG_BASE", "NO_COLOR")}
    env.update({"CATALOG_BASE": base, "TERM": "xterm", "COLUMNS": "100"})
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def run(base, *args, **env):
    """Runs the client with stdout piped: JSON mode."""
    p = subprocess.run([CATALOG_CLI] + list(args), capture_output=True, timeout=CLI_TIMEOUT, env=cli_env(base, **env))
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def run_tty(base, *args, **env):
    """Runs the client with stdout and stderr on a pseudo-terminal: human mode. Returns (status, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([CATALOG_CLI] + list(args), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=cli_env(base, **env), close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + CLI_TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    status = proc.wait(timeout=CLI_TIMEOUT)
    return status, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def json_error(base, status, *args, **env):
    code, out, _err = run(base, *args, **env)
    assert code == status, out
    body = json.loads(out)
    assert isinstance(body["error"], str) and body["error"]
    return body


# ---- search ----

def test_search_json_when_piped(catalog):
    status, out, err = run(catalog.base, "search", "swe", "bench", "--type", "eval", "--per", "2")
    assert status == 0, err
    answer = json.loads(out)
    assert answer["query"] == "swe bench" and answer["type"] == "evals" and answer["per"] == 2
    assert [h["slug"] for h in answer["results"]["evals"]["hits"]][0] == "swe-bench"
    assert len(answer["results"]["evals"]["hits"]) == 2


def test_search_human_on_a_terminal(catalog):
    status, out = run_tty(catalog.base, "search", "gpqa", "-n", "3", NO_COLOR="1")
    assert status == 0, out
    assert out.startswith('18 results for "gpqa"\n') or 'results for "gpqa"' in out.split("\n")[0]
    assert "\nEvals (2 of 2)\n  GPQA  evals/gpqa\n" in out
    assert "  GPQA Diamond  evals/gpqa-diamond\n" in out
    status, out = run_tty(catalog.base, "search", "gpqa")
    assert "\033[" in out  # colour on a terminal
    status, json_out = run_tty(catalog.base, "search", "gpqa", "--json")
    assert status == 0 and json.loads(json_out)["query"] == "gpqa"


def test_no_color(catalog):
    status, out = run_tty(catalog.base, "search", "gpqa", NO_COLOR="1")
    assert status == 0 and "\033[" not in out and "GPQA Diamond" in out
    status, out = run_tty(catalog.base, "search", "gpqa", NO_COLOR="")  # empty means unset
    assert "\033[" in out


def test_search_usage_errors(catalog):
    assert "usage" in json_error(catalog.base, 2, "search")["error"]
    assert "--per" in json_error(catalog.base, 2, "search", "x", "--per", "31")["error"]
    assert "--type" in json_error(catalog.base, 2, "search", "x", "--type", "widgets")["error"]
    assert "unknown flag" in json_error(catalog.base, 2, "search", "x", "--bogus")["error"]
    status, out = run_tty(catalog.base, "search", "x", "--per", "0")
    assert status == 2 and "catalog:" in out and "--per" in out


def test_search_remote_error(catalog):
    body = json_error(catalog.base, 1, "search", "!!!")
    assert body["status"] == 400 and body["code"] == "invalid_query"


# ---- get ----

def test_get_json_and_forms_of_the_type(catalog):
    for name in ("model", "models", "Model"):
        status, out, err = run(catalog.base, "get", name, "gpt-4o")
        assert status == 0, err
        doc = json.loads(out)
        assert doc["slug"] == "gpt-4o" and doc["type"] == "models"
    status, out, _ = run(catalog.base, "get", "person", "dan-hendrycks")
    assert json.loads(out)["type"] == "people"


def test_get_human(catalog):
    status, out = run_tty(catalog.base, "get", "eval", "swe-bench-verified", NO_COLOR="1")
    assert status == 0, out
    assert out.startswith("SWE-bench Verified  evals/swe-bench-verified\n")
    assert "Related" in out and "Papers:" in out and "Scores (" in out
    assert "https://" in out
    status, out = run_tty(catalog.base, "get", "paper", TEST_PAPER, NO_COLOR="1")
    assert "Licence: Creative Commons Attribution 4.0 International (redistributable)" in out
    assert "catalog paper %s --pdf" % TEST_PAPER in out


def test_get_errors(catalog):
    body = json_error(catalog.base, 1, "get", "model", "no-such-model")
    assert body["status"] == 404 and body["code"] == "entity_not_found" and "no-such-model" in body["error"]
    assert "not a catalog type" in json_error(catalog.base, 2, "get", "widget", "x")["error"]
    json_error(catalog.base, 2, "get", "model")
    json_error(catalog.base, 2, "get", "model", "a", "b")
    status, out = run_tty(catalog.base, "get", "model", "no-such-model")
    assert status == 1 and "catalog:" in out and "HTTP 404" in out


# ---- paper ----

def test_paper_text_both_modes(catalog):
    with open(os.path.join(SOURCE, "papers", TEST_PAPER + ".txt"), encoding="utf-8") as f:
        text = f.read()
    # Piped, --text is the text itself (test_22); the JSON object needs --json (issue 17, item 3).
    status, out, err = run(catalog.base, "paper", TEST_PAPER, "--text", "--json")
    assert status == 0, err
    answer = json.loads(out)
    assert answer["text"] == text and answer["format"] == "text" and answer["bytes"] == len(text.encode())
    status, out = run_tty(catalog.base, "paper", TEST_PAPER, "--text")
    assert status == 0 and out == text


def test_paper_pdf_to_a_file(catalog, tmp_path):
    with open(os.path.join(SOURCE, "papers", TEST_PAPER + ".pdf"), "rb") as f:
        pdf = f.read()
    target = tmp_path / "paper.pdf"
    status, out, err = run(catalog.base, "paper", TEST_PAPER, "--pdf", "-o", str(target))
    assert status == 0, err
    assert target.read_bytes() == pdf
    summary = json.loads(out)
    assert summary["path"] == str(target) and summary["bytes"] == len(pdf) and summary["content_type"] == "application/pdf"
    target.unlink()
    status, out = run_tty(catalog.base, "paper", TEST_PAPER, "--pdf", "--output=%s" % target)
    assert status == 0 and "wrote %d bytes" % len(pdf) in out and target.read_bytes() == pdf
    p = subprocess.run([CATALOG_CLI, "paper", TEST_PAPER, "--pdf", "-o", "-"], capture_output=True,
                       timeout=CLI_TIMEOUT, env=cli_env(catalog.base))
    assert p.returncode == 0 and p.stdout == pdf


def test_paper_errors(catalog, tmp_path):
    body = json_error(catalog.base, 1, "paper", "mmlu-paper", "--text", "--json")
    assert body["status"] == 403 and body["code"] == "not_redistributable"
    assert "https://arxiv.org/abs/2009.03300" in body["error"]
    assert json_error(catalog.base, 1, "paper", "relay-catalog-notes", "--pdf", "-o", str(tmp_path / "x"))["code"] == \
        "file_not_found"
    assert "exactly one" in json_error(catalog.base, 2, "paper", TEST_PAPER)["error"]
    json_error(catalog.base, 2, "paper", TEST_PAPER, "--text", "--pdf")
    assert "-o" in json_error(catalog.base, 2, "paper", TEST_PAPER, "--pdf")["error"]
    assert "cannot write" in json_error(catalog.base, 1, "paper", TEST_PAPER, "--text", "-o",
                                        str(tmp_path / "no" / "such" / "dir"))["error"]
    status, out = run_tty(catalog.base, "paper", "mmlu-paper", "--text")
    assert status == 1 and "licence" in out


# ---- api, help, version ----

def test_api_both_modes(catalog):
    status, out, _ = run(catalog.base, "api")
    assert status == 0
    index = json.loads(out)
    assert [t["type"] for t in index["types"]] == TYPES
    status, out = run_tty(catalog.base, "api", NO_COLOR="1")
    assert status == 0
    assert "Endpoints" in out and "GET /api/v1/search?q={query}" in out and "GET /llms.txt" in out
    assert "Types" in out and "people" in out


def test_help_both_modes(catalog):
    status, out = run_tty(catalog.base, "help", NO_COLOR="1")
    assert status == 0
    for command in COMMANDS:
        assert "\n  %s " % command in out
    assert "CATALOG_BASE" in out and "NO_COLOR" in out and "exit status" in out
    status, out = run_tty(catalog.base, "help", "search", NO_COLOR="1")
    assert status == 0 and out.startswith("usage: catalog search <query>") and "--per N" in out
    status, out = run_tty(catalog.base, "get", "-h", NO_COLOR="1")
    assert status == 0 and out.startswith("usage: catalog get <type> <slug>")


def test_help_json_manifest(catalog):
    for args in (("help", "--json"),):  # piped without --json, help is text (test_22; issue 17, item 3)
        status, out, _ = run(catalog.base, *args)
        assert status == 0
        manifest = json.loads(out)
        assert manifest["name"] == "catalog" and manifest["base_default"] == "http://127.0.0.1:8090"
        assert {c["name"] for c in manifest["commands"]} == COMMANDS
        for command in manifest["commands"]:
            assert command["usage"].startswith("catalog " + command["name"])
            assert command["summary"] and command["examples"]
            assert all(e.startswith("catalog ") for e in command["examples"])
        flags = {c["name"]: {f["flag"] for f in c["flags"]} for c in manifest["commands"]}
        assert flags["search"] == {"--type", "--per"} and flags["paper"] == {"--text", "--pdf", "--output"}
        assert {f["flag"] for f in manifest["global_flags"]} == {"--json", "--help"}
        assert {e["code"] for e in manifest["exit_codes"]} == {0, 1, 2}
        assert {t["singular"] for t in manifest["types"]} >= {"eval", "person", "capability"}
    status, out, _ = run(catalog.base, "help", "paper", "--json")
    assert status == 0 and json.loads(out)["name"] == "paper"
    assert "no command" in json_error(catalog.base, 2, "help", "nope")["error"]


def test_version_and_default_base(catalog):
    status, out, _ = run(catalog.base, "version")
    assert status == 0
    version = json.loads(out)
    assert version["name"] == "catalog" and version["api"] == "v1" and version["base"] == catalog.base
    status, out = run_tty(catalog.base, "version")
    assert status == 0 and out.startswith("catalog ") and catalog.base in out
    # Without CATALOG_BASE the build-time default applies.
    status, out, _ = run(catalog.base, "version", CATALOG_BASE=None)
    assert json.loads(out)["base"] == "http://127.0.0.1:8090"


# ---- runtime and usage errors ----

def test_unreachable_host():
    body = json_error("http://127.0.0.1:1", 1, "search", "mmlu")
    assert "cannot reach http://127.0.0.1:1" in body["error"]
    status, out = run_tty("http://127.0.0.1:1", "api")
    assert status == 1 and "cannot reach" in out


def test_bad_base_is_a_usage_error():
    assert "CATALOG_BASE" in json_error("ftp://example.org", 2, "api")["error"]


def test_usage_errors_in_both_modes(catalog):
    assert "no command" in json_error(catalog.base, 2)["error"]
    assert "no command" in json_error(catalog.base, 2, "--json")["error"]
    assert "unknown command" in json_error(catalog.base, 2, "frobnicate")["error"]
    assert "unknown command" in json_error(catalog.base, 2, "--json", "frobnicate")["error"]
    status, out = run_tty(catalog.base, "frobnicate", NO_COLOR="1")
    assert status == 2 and out.startswith("catalog: unknown command 'frobnicate'")
    status, out = run_tty(catalog.base, "frobnicate", "--json")
    assert status == 2 and "unknown command" in json.loads(out)["error"]


def test_remote_errors_in_both_modes(catalogd_factory):
    server = catalogd_factory()
    body = json_error(server.base, 1, "get", "eval", "nope")
    assert body["status"] == 404
    assert server.stop() == 0
    body = json_error(server.base, 1, "get", "eval", "mmlu")  # the server is gone now
    assert "cannot reach" in body["error"]

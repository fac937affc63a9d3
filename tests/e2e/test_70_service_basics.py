"""relayd as a service (issue 15): one version on all five programs, one relayd per data folder,
log lines for a person or for a machine, and what `relayd migrate --check` says about the schema."""
import hashlib
import json
import os
import re
import sqlite3
import subprocess

from relaylib import RELAYD, START_TIMEOUT, clean_env, run_relayd

BUILD = os.path.dirname(RELAYD)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = ("relayd", "relay-bridge", "relay", "catalogd", "catalog")


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(relay VERSION (\d+\.\d+\.\d+)", f.read()).group(1)


def test_every_program_prints_the_projects_version():
    version = project_version()
    for name in PROGRAMS:
        proc = subprocess.run([os.path.join(BUILD, name), "--version"], capture_output=True, text=True,
                              timeout=START_TIMEOUT, env=clean_env())
        assert proc.returncode == 0, (name, proc.stdout, proc.stderr)
        out = proc.stdout.strip()
        # The clients answer in JSON when piped, as their `version` command does.
        if out.startswith("{"):
            assert json.loads(out)["version"] == version, (name, out)
            assert json.loads(out)["name"] == name, (name, out)
        else:
            assert out.split()[:2] == [name, version], (name, out)


def test_a_second_relayd_on_the_same_data_folder_is_refused(relayd, tmp_path):
    first = relayd()
    second = relayd(data=first.data, start=False)
    second.start(expect_ready=False)
    rc = second.wait_exit(START_TIMEOUT)
    assert rc == 1, rc
    refusal = [r for r in second.log_records() if r.get("level") == "error"]
    assert any("another relayd (pid %d) is running on the data folder %s" % (first.proc.pid, first.data) in r["msg"]
               and "--data" in r["msg"] for r in refusal), second.log_text()
    # The first one did not notice; one-shot commands beside it work.
    assert first.get("/healthz").status_code == 200
    assert first.token("alice").count(".") == 2
    proc = run_relayd(["migrate", "--check", "--data", str(first.data)])
    assert proc.returncode == 0, proc.stderr
    # The lock goes with the process, even with kill -9: a new start on the folder is accepted.
    first.kill9()
    first.start()
    first.stop_ok()
    first.start()


def test_log_format_text_json_and_durations_as_plain_numbers(relayd):
    text = relayd("--log-format", "text")
    assert text.get("/healthz").status_code == 200
    assert text.get("/v1/me").status_code == 401
    text.stop_ok()
    lines = text.log_text().splitlines()
    assert lines and not any(line.startswith("{") for line in lines), lines[:5]
    listening = [line for line in lines if " listening " in line]
    assert listening and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  listening address=127\.0\.0\.1:\d+ ",
                                  listening[0]), listening
    request = [line for line in lines if " request " in line and "route=/v1/me " in line]
    assert request, lines
    assert re.search(r" status=401 duration_ms=\d+(\.\d{1,3})? ", request[0]), request[0]

    # Piped (as under a service manager), the default is JSON; a duration is a plain number.
    plain = relayd()
    assert plain.get("/v1/me").status_code == 401
    plain.stop_ok()
    raw = [line for line in plain.log_text().splitlines() if '"route":"/v1/me"' in line]
    assert raw, plain.log_text()
    match = re.search(r'"duration_ms":([^,}]+)', raw[0])
    assert match and re.fullmatch(r"\d+(\.\d{1,3})?", match.group(1)), raw[0]
    assert isinstance(json.loads(raw[0])["duration_ms"], (int, float))

    bad = run_relayd(["--log-format", "xml", "--data", "unused"])
    assert bad.returncode == 2 and "--log-format must be json, text or auto" in bad.stderr, bad.stderr


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_migrate_check_says_what_a_start_would_do_and_changes_nothing(relayd, tmp_path):
    data = tmp_path / "fresh"
    proc = run_relayd(["migrate", "--check", "--data", str(data)])
    assert proc.returncode == 0, proc.stderr
    assert re.match(r"no store at .*relay\.db yet: a start creates it at schema version (\d+)$", proc.stdout.strip())
    target = int(re.search(r"schema version (\d+)", proc.stdout).group(1))
    assert not data.exists(), "--check created the data folder"

    relay = relayd(data=data, store="sqlite")  # migrate --check of a data folder's SQLite store
    relay.stop_ok()
    db = os.path.join(str(data), "relay.db")
    before = _digest(db)
    proc = run_relayd(["migrate", "--check", "--data", str(data)])
    assert proc.returncode == 0 and "schema version %d, this relayd's: a start changes nothing" % target in proc.stdout

    # A store one version behind (as if written by the previous release): a start would migrate it.
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM schema_version WHERE version = ?", (target,))
    conn.commit()
    conn.close()
    behind = _digest(db)
    proc = run_relayd(["migrate", "--check", "--store", "sqlite:" + db])
    assert proc.returncode == 0, proc.stderr
    assert "schema version %d: a start migrates it to %d (1 migration" % (target - 1, target) in proc.stdout
    assert _digest(db) == behind, "--check changed the store"

    # A store from a newer relayd: --check says a start is refused, and a start is refused, clearly.
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_version VALUES (?), (?)", (target, target + 1))
    conn.commit()
    conn.close()
    newer = _digest(db)
    proc = run_relayd(["migrate", "--check", "--data", str(data)])
    assert proc.returncode == 1, proc.stdout
    assert "schema version %d, newer than this relayd (%d): a start would be refused" % (target + 1, target) \
        in proc.stdout
    relay.start(expect_ready=False)
    assert relay.wait_exit(START_TIMEOUT) == 1
    assert "the store is at schema version %d, newer than this relayd (%d)" % (target + 1, target) in relay.log_text()
    assert _digest(db) == newer, "a refused start changed the store"
    assert before != newer

    assert run_relayd(["migrate", "--check", "--store", "redis://x"]).returncode == 2
    usage = run_relayd(["migrate", "--frobnicate"])
    assert usage.returncode == 2 and "usage: relayd migrate --check" in usage.stderr


def _pg_exec(url, sql, params=()):
    import psycopg2

    conn = psycopg2.connect(url)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def test_migrate_check_on_postgresql_says_what_a_start_would_do_and_changes_nothing(relayd, postgres, tmp_path):
    url = postgres.database()
    try:
        proc = run_relayd(["migrate", "--check", "--store", url])
        assert proc.returncode == 0, proc.stderr
        m = re.match(r"the store database relay_\d+ on .* holds no relay schema yet: a start creates it at schema "
                     r"version (\d+)$", proc.stdout.strip())
        assert m, proc.stdout
        target = int(m.group(1))
        assert _pg_exec(url, "SELECT to_regclass('schema_version') IS NULL") == [(True,)], "--check created tables"

        relay = relayd(data=tmp_path / "pg", store=url)
        relay.stop_ok()
        tables = _pg_exec(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        proc = run_relayd(["migrate", "--check"], env={"RELAY_STORE": url})
        assert proc.returncode == 0, proc.stderr
        assert "schema version %d, this relayd's: a start changes nothing" % target in proc.stdout, proc.stdout

        # One version behind (as if written by the previous release): a start would migrate it, once.
        _pg_exec(url, "DELETE FROM schema_version WHERE version = %s", (target,))
        proc = run_relayd(["migrate", "--check", "--store", url])
        assert proc.returncode == 0, proc.stderr
        assert "schema version %d: a start migrates it to %d (1 migration" % (target - 1, target) in proc.stdout
        assert _pg_exec(url, "SELECT max(version) FROM schema_version") == [(target - 1,)], "--check migrated"
        assert _pg_exec(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == tables

        # From a newer relayd: refused by --check (status 1) and by a start, the store untouched.
        _pg_exec(url, "INSERT INTO schema_version VALUES (%s), (%s)", (target, target + 1))
        proc = run_relayd(["migrate", "--check", "--store", url])
        assert proc.returncode == 1, proc.stdout
        assert "schema version %d, newer than this relayd (%d): a start would be refused" % (target + 1, target) \
            in proc.stdout
        relay.start(expect_ready=False)
        assert relay.wait_exit(START_TIMEOUT) == 1
        assert _pg_exec(url, "SELECT max(version) FROM schema_version") == [(target + 1,)]
    finally:
        postgres.drop(url)

    # A server that is not there: status 1, the reason, and never the password.
    gone = "postgres://relay:s3cret-pass@/nothing?host=%s" % (tmp_path / "no-socket-here")
    proc = run_relayd(["migrate", "--check", "--store", gone])
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr.startswith("relayd migrate --check: ") and "s3cret" not in proc.stderr + proc.stdout, \
        proc.stderr

"""The Debian packages as an operator meets them (issue 15; `make test-package`).

The packages are built from a copy of the repository with `dpkg-buildpackage -b`, installed on
this machine with `dpkg -i`, and the installed relayd is started the way its unit says: by systemd
when systemd runs here, otherwise by this test, from the installed unit's own settings (user,
state directory, environment, umask). Then it is talked to: health, a token from the embedded
issuer, the client API, pairing, a bridge, the catalog, and the operator commands of
docs/operations.md (backup, restore, migrate --check, reload, graceful stop). At the end every
package is purged, and the user, folders and files the install made are removed: the machine is
left as it was found. Slow (the build takes minutes); not part of `make test` unless the lead
says so.
"""
import configparser
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("relayd", "relay-bridge", "relay-client", "relay-catalog")
UNIT = "/lib/systemd/system/relayd.service"
BRIDGE_UNIT = "/lib/systemd/user/relay-bridge.service"
STATE = "/var/lib/relayd"
WAIT = 30


def run(argv, check=True, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    proc = subprocess.run(argv, **kw)
    if check:
        assert proc.returncode == 0, "%s failed (%d)\n%s\n%s" % (argv, proc.returncode, proc.stdout[-4000:],
                                                                proc.stderr[-4000:])
    return proc


def installed(package):
    proc = run(["dpkg-query", "-W", "-f=${Status}", package], check=False)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def systemd_running():
    return os.path.isdir("/run/systemd/system") and \
        run(["systemctl", "is-system-running"], check=False).stdout.strip() in ("running", "degraded")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(relay VERSION (\d+\.\d+\.\d+)", f.read()).group(1)


def read_unit(path):
    """The [Service] section of a unit: a dict of lists (a key may repeat)."""
    service = {}
    section = None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                name, _, value = line.partition("=")
                service.setdefault(name, []).append(value)
    return service


class Machine:
    """What this machine had before the test, so that the test puts it back."""

    def __init__(self):
        self.had_user = user_exists("relayd")
        self.had_group = run(["getent", "group", "relayd"], check=False).returncode == 0
        self.had_state = os.path.exists(STATE)
        self.had_etc = os.path.exists("/etc/relayd")

    def restore(self):
        for package in reversed(PACKAGES):
            if installed(package) or run(["dpkg-query", "-W", package], check=False).returncode == 0:
                run(["dpkg", "--purge", package], check=False)
        if not self.had_state and os.path.exists(STATE):
            shutil.rmtree(STATE)
        if not self.had_state and os.path.exists("/var/lib/private/relayd"):
            shutil.rmtree("/var/lib/private/relayd")
        if not self.had_etc and os.path.exists("/etc/relayd"):
            shutil.rmtree("/etc/relayd")
        if not self.had_user and user_exists("relayd"):
            run(["userdel", "relayd"], check=False)
        if not self.had_group and run(["getent", "group", "relayd"], check=False).returncode == 0:
            run(["groupdel", "relayd"], check=False)


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """Builds the packages from a copy of the working tree; returns {package: path of its .deb}."""
    work = tmp_path_factory.mktemp("package")
    src = work / "relay"
    files = run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard"]).stdout.splitlines()
    for name in files:
        if name.startswith(("build", "tests/browser/node_modules")) or not os.path.isfile(os.path.join(REPO, name)):
            continue
        os.makedirs(os.path.dirname(str(src / name)), exist_ok=True)
        shutil.copy2(os.path.join(REPO, name), str(src / name))
    started = time.monotonic()
    proc = run(["nice", "dpkg-buildpackage", "-b", "-us", "-uc", "-j2"], check=False, cwd=str(src), timeout=3600)
    with open(str(work / "build.log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    assert proc.returncode == 0, "dpkg-buildpackage failed; log %s\n%s" % (work / "build.log", proc.stderr[-4000:])
    print("dpkg-buildpackage took %.0f s" % (time.monotonic() - started))
    out = {}
    for package in PACKAGES:
        found = glob.glob(str(work / ("%s_*.deb" % package)))
        assert len(found) == 1, (package, os.listdir(str(work)))
        out[package] = found[0]
    return out


@pytest.fixture(scope="module")
def machine(debs):
    for package in PACKAGES:
        assert not installed(package), "%s is installed on this machine already: the test would replace it" % package
    state = Machine()
    yield state
    state.restore()


def test_the_packages_hold_what_they_should(debs):
    version = project_version()
    contents = {}
    for package, path in debs.items():
        fields = run(["dpkg-deb", "-f", path, "Package", "Version"]).stdout
        assert "Version: %s" % version in fields, (package, fields)
        contents[package] = run(["dpkg-deb", "-c", path]).stdout
    assert "./usr/bin/relayd" in contents["relayd"]
    assert "./lib/systemd/system/relayd.service" in contents["relayd"]
    assert "./etc/relayd/relayd.env" in contents["relayd"]
    assert "./usr/share/man/man1/relayd.1.gz" in contents["relayd"]
    assert "./usr/share/doc/relayd/operations.md" in contents["relayd"]
    assert "./usr/share/doc/relayd/examples/nginx-relay.conf" in contents["relayd"]
    assert "./usr/bin/relay-bridge" in contents["relay-bridge"]
    assert "./lib/systemd/user/relay-bridge.service" in contents["relay-bridge"]
    assert "./usr/bin/relay\n" in contents["relay-client"] or re.search(r"\./usr/bin/relay$", contents["relay-client"],
                                                                      re.M)
    assert "./usr/bin/catalogd" in contents["relay-catalog"] and "./usr/bin/catalog" in contents["relay-catalog"]
    assert "./usr/share/relay/catalog/" in contents["relay-catalog"]
    # No test or fuzz binary slipped in.
    assert "unit_" not in "".join(contents.values()) and "fuzz_" not in "".join(contents.values())


@pytest.fixture(scope="module")
def relayd(debs, machine):
    """dpkg -i the packages, then the installed relayd, running as its unit says; yields its base URL."""
    proc = run(["dpkg", "-i"] + [debs[p] for p in PACKAGES], check=False, env=dict(os.environ,
                                                                                     DEBIAN_FRONTEND="noninteractive"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert user_exists("relayd"), "the relayd package did not make its user"
    port = free_port()
    with open("/etc/relayd/relayd.env", "a") as f:
        f.write("RELAY_LISTEN=127.0.0.1:%d\nRELAY_METRICS_LISTEN=127.0.0.1:%d\n" % (port, free_port()))
    base = "http://127.0.0.1:%d" % port
    if systemd_running():
        run(["systemctl", "restart", "relayd"])
        yield {"base": base, "pid": None, "mode": "systemd"}
        run(["systemctl", "stop", "relayd"], check=False)
        return
    handle = start_like_the_unit()
    wait_healthy(base, handle)
    yield {"base": base, "proc": handle, "mode": "unit settings"}
    if handle.poll() is None:
        handle.send_signal(signal.SIGTERM)
        handle.wait(WAIT)


def unit_environment(service):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    for value in service.get("Environment", []):
        name, _, val = value.partition("=")
        env[name] = val
    for value in service.get("EnvironmentFile", []):
        path = value.lstrip("-")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#") and "=" in line:
                        name, _, val = line.partition("=")
                        env[name] = val
    return env


def as_unit_user(service, argv):
    """argv run the way systemd would run the unit's ExecStart: its user, group and umask."""
    user, group = service["User"][0], service["Group"][0]
    umask = service.get("UMask", ["0022"])[0]
    inner = "umask %s && exec \"$@\"" % umask
    return ["setpriv", "--reuid", user, "--regid", group, "--init-groups", "--no-new-privs",
            "sh", "-c", inner, "sh"] + argv


def start_like_the_unit():
    """systemd is not running here: do what it would do with the installed unit."""
    service = read_unit(UNIT)
    user = service["User"][0]
    state = os.path.join("/var/lib", service["StateDirectory"][0])
    mode = int(service.get("StateDirectoryMode", ["0755"])[0], 8)
    os.makedirs(state, exist_ok=True)
    entry = pwd.getpwnam(user)
    os.chown(state, entry.pw_uid, entry.pw_gid)
    os.chmod(state, mode)
    exec_start = service["ExecStart"][0].split()
    log = open("/tmp/relayd-package-test.log", "ab")
    return subprocess.Popen(as_unit_user(service, exec_start), cwd=service["WorkingDirectory"][0],
                            env=unit_environment(service), stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def wait_healthy(base, handle=None, path="/healthz"):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if handle is not None and handle.poll() is not None:
            with open("/tmp/relayd-package-test.log") as f:
                raise AssertionError("the installed relayd exited (%s):\n%s" % (handle.returncode, f.read()[-3000:]))
        try:
            if requests.get(base + "/healthz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError("the installed relayd did not answer at %s" % base)


def relayd_command(argv):
    """An operator command of docs/operations.md, run as the service's user as the docs say."""
    service = read_unit(UNIT)
    env = unit_environment(service)
    return run(as_unit_user(service, ["/usr/bin/relayd"] + argv), env=env, cwd="/")


def test_the_installed_relayd_runs_as_its_own_user_with_its_unit_settings(relayd):
    service = read_unit(UNIT)
    assert service["ExecStart"] == ["/usr/bin/relayd"], service["ExecStart"]
    for setting in ("NoNewPrivileges", "PrivateTmp", "ProtectSystem", "RestrictAddressFamilies", "StateDirectory",
                    "ExecReload"):
        assert setting in service, setting
    assert service["ProtectSystem"] == ["strict"]
    assert run(["/usr/bin/relayd", "--version"]).stdout.strip() == "relayd %s" % project_version()
    r = requests.get(relayd["base"] + "/healthz", timeout=5)
    assert r.status_code == 200
    # The data folder is the relayd user's, closed to others; the files in it too.
    st = os.stat(STATE)
    assert pwd.getpwuid(st.st_uid).pw_name == "relayd" and st.st_mode & 0o077 == 0, oct(st.st_mode)
    for name in os.listdir(STATE):
        path = os.path.join(STATE, name)
        assert pwd.getpwuid(os.stat(path).st_uid).pw_name == "relayd", name
        assert os.stat(path).st_mode & 0o077 == 0, (name, oct(os.stat(path).st_mode))
    # A second relayd on the same folder is refused.
    second = run(as_unit_user(service, ["/usr/bin/relayd", "--listen", "127.0.0.1:0"]), check=False,
                 env=unit_environment(service), timeout=WAIT)
    assert second.returncode == 1 and "another relayd" in second.stderr, second.stderr


def test_talk_to_it_token_pairing_and_a_bridge(relayd, tmp_path):
    base = relayd["base"]
    token = relayd_command(["token", "alice"]).stdout.strip().splitlines()[-1]
    me = requests.get(base + "/v1/me", headers={"Authorization": "Bearer " + token}, timeout=5)
    assert me.status_code == 200 and me.json()["result"]["user"]["id"] == "alice", me.text
    # The installed client and bridge against the installed relay.
    config = tmp_path / "config"
    env = dict(os.environ, RELAY_CONFIG_DIR=str(config), NO_COLOR="1")
    run(["/usr/bin/relay", "login", "--server", base, "--token", token], env=env)
    pairing = subprocess.Popen(["/usr/bin/relay-bridge", "pair", "--server", base, "--name", "package-test",
                                "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        code = json.loads(pairing.stdout.readline())["code"]
        run(["/usr/bin/relay", "pair", code], env=env)
        assert pairing.wait(WAIT) == 0
    finally:
        if pairing.poll() is None:
            pairing.kill()
        pairing.communicate()
    bridge = subprocess.Popen(["/usr/bin/relay-bridge", "run", "--agent", "exec:cat"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        created = json.loads(run(["/usr/bin/relay", "new", "--title", "package"], env=env).stdout)
        sent = run(["/usr/bin/relay", "send", created["session_id"], "hello from the package"], env=env, timeout=WAIT)
        assert "hello from the package" in sent.stdout, sent.stdout
    finally:
        bridge.send_signal(signal.SIGTERM)
        bridge.wait(WAIT)


def test_the_catalog_serves_its_installed_dataset(relayd, tmp_path):
    port = free_port()
    proc = subprocess.Popen(["/usr/bin/catalogd", "--listen", "127.0.0.1:%d" % port, "--data", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy("http://127.0.0.1:%d" % port, path="/api/v1")
        out = run(["/usr/bin/catalog", "search", "benchmark", "--json"],
                  env=dict(os.environ, CATALOG_BASE="http://127.0.0.1:%d" % port))
        assert json.loads(out.stdout), out.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(WAIT)


def test_the_operator_commands_of_the_docs(relayd, tmp_path):
    base = relayd["base"]
    check = relayd_command(["migrate", "--check"])
    assert "a start changes nothing" in check.stdout, check.stdout
    backups = tempfile.mkdtemp(prefix="relayd-backups-")
    try:
        os.chown(backups, pwd.getpwnam("relayd").pw_uid, pwd.getpwnam("relayd").pw_gid)
        dest = os.path.join(backups, "nightly")
        out = relayd_command(["backup", dest])
        assert out.stdout.startswith("backup written to %s" % dest), out.stdout
        restored = os.path.join(backups, "restored")
        out = relayd_command(["restore", dest, "--data", restored])
        assert "restored" in out.stdout
        assert sorted(os.listdir(restored)) == sorted(["attachments", "issuer.key", "relay.db", "relayd.lock",
                                                       "url.key", "vapid.key"])
    finally:
        shutil.rmtree(backups)
    # Reload (the unit's ExecReload: SIGHUP) keeps it serving; a stop is graceful (exit 0).
    if relayd["mode"] == "systemd":
        run(["systemctl", "reload", "relayd"])
        wait_healthy(base)
        run(["systemctl", "stop", "relayd"])
        assert run(["systemctl", "show", "-p", "ExecMainStatus", "relayd"]).stdout.strip() == "ExecMainStatus=0"
    else:
        handle = relayd["proc"]
        handle.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        wait_healthy(base, handle)
        handle.send_signal(signal.SIGTERM)
        assert handle.wait(WAIT) == 0

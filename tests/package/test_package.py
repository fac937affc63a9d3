"""The Debian packages and docs/operations.md as an operator meets them (issue 15; `make test-package`).

The commands of docs/operations.md run here as written wherever this machine allows: the packages
are built from a copy of the repository with `dpkg-buildpackage -b -us -uc`, installed with
`dpkg -i`, `make install` is staged under a DESTDIR, and the operator commands run as the service's
user with `runuser`. The installed relayd is started the way its unit says: by systemd when systemd
runs here, otherwise by this test from the installed unit's own settings (user, state directory,
environment, umask), since without systemd `systemctl` has nothing to talk to. Then it is talked
to: health, a token from the embedded issuer, pairing with the installed client and bridge, the
catalog, metrics, TLS from a copied certificate with a reload, backup, restore, an upgrade, and the
graceful stop. At the end every package is purged and the user, folders and files the test made
are removed: the machine is left as it was found. Slow (the build takes minutes).
"""
import datetime
import glob
import ipaddress
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import requests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("relayd", "relay-bridge", "relay-client", "relay-catalog")
UNIT = "/lib/systemd/system/relayd.service"
STATE = "/var/lib/relayd"
BACKUPS = "/var/backups/relayd"
ENV_FILE = "/etc/relayd/relayd.env"
WAIT = 30
LOG = None  # the installed relayd's log when this test starts it: in the test's folder (work)


def run(argv, check=True, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    proc = subprocess.run(argv, **kw)
    if check:
        assert proc.returncode == 0, "%s failed (%d)\n%s\n%s" % (argv, proc.returncode, proc.stdout[-4000:],
                                                                proc.stderr[-4000:])
    return proc


def sh(command, check=True, **kw):
    """A command line of docs/operations.md, run as written by sh."""
    return run(["sh", "-c", command], check=check, **kw)


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


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(relay VERSION (\d+\.\d+\.\d+)", f.read()).group(1)


def read_unit(path):
    """The [Service] section of a unit: a dict of lists (a key may repeat)."""
    service, section = {}, None
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

    PATHS = (STATE, STATE + ".before-restore", "/var/lib/private/relayd", "/etc/relayd", BACKUPS)

    def __init__(self):
        self.had_user = user_exists("relayd")
        self.had_group = run(["getent", "group", "relayd"], check=False).returncode == 0
        self.had = {path: os.path.exists(path) for path in self.PATHS}

    def restore(self):
        for package in reversed(PACKAGES):
            if run(["dpkg-query", "-W", package], check=False).returncode == 0:
                run(["dpkg", "--purge", package], check=False)
        for path, had in self.had.items():
            if not had and os.path.exists(path):
                shutil.rmtree(path)
        if not self.had_user and user_exists("relayd"):
            run(["userdel", "relayd"], check=False)
        if not self.had_group and run(["getent", "group", "relayd"], check=False).returncode == 0:
            run(["groupdel", "relayd"], check=False)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    global LOG
    folder = tmp_path_factory.mktemp("package")
    LOG = str(folder / "relayd.log")
    return folder


@pytest.fixture(scope="module")
def src(work):
    """A copy of the working tree: dpkg-buildpackage writes beside and inside it."""
    tree = work / "relay"
    files = run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard"]).stdout.splitlines()
    for name in files:
        if name.startswith(("build", "tests/browser/node_modules")) or not os.path.isfile(os.path.join(REPO, name)):
            continue
        os.makedirs(os.path.dirname(str(tree / name)), exist_ok=True)
        shutil.copy2(os.path.join(REPO, name), str(tree / name))
    return tree


@pytest.fixture(scope="module")
def debs(work, src):
    """docs/operations.md, Install: install-deps, then dpkg-buildpackage; {package: its .deb}."""
    sh("./scripts/install-deps.sh package", cwd=str(src))
    started = time.monotonic()
    proc = sh("dpkg-buildpackage -b -us -uc", check=False, cwd=str(src), timeout=3600,
              env=dict(os.environ, DEB_BUILD_OPTIONS="parallel=2"))
    with open(str(work / "build.log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    assert proc.returncode == 0, "dpkg-buildpackage failed; log %s\n%s" % (work / "build.log", proc.stderr[-4000:])
    print("\ndpkg-buildpackage took %.0f s" % (time.monotonic() - started))
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
    for path in ("./usr/bin/relayd", "./lib/systemd/system/relayd.service", "./etc/relayd/relayd.env",
                 "./usr/share/man/man1/relayd.1.gz", "./usr/share/doc/relayd/operations.md",
                 "./usr/share/doc/relayd/examples/nginx-relay.conf", "./usr/share/doc/relayd/examples/Caddyfile",
                 "./usr/lib/sysusers.d/relayd.conf"):
        assert path in contents["relayd"], path
    assert "./usr/bin/relay-bridge" in contents["relay-bridge"]
    assert "./lib/systemd/user/relay-bridge.service" in contents["relay-bridge"]
    assert re.search(r"\./usr/bin/relay$", contents["relay-client"], re.M), contents["relay-client"]
    assert "./usr/bin/catalogd" in contents["relay-catalog"] and "./usr/share/relay/catalog/" in contents["relay-catalog"]
    everything = "".join(contents.values())
    assert "unit_" not in everything and "fuzz_" not in everything, "a test binary slipped into a package"


def test_make_install_stages_the_programs_units_and_user(work, src):
    """docs/operations.md, Install, from source: make install, systemd-sysusers (into the staged root)."""
    dest = work / "destdir"
    sh("make install PREFIX=/usr/local DESTDIR=%s INSTALL_BUILD=%s" % (dest, work / "build-install"), cwd=str(src),
       timeout=3600)
    for program in ("relayd", "relay-bridge", "relay", "catalogd", "catalog"):
        path = dest / "usr/local/bin" / program
        out = run([str(path), "--version"]).stdout
        assert project_version() in out, (program, out)
        assert (dest / "usr/local/share/man/man1" / (program + ".1")).exists(), program
    unit = read_unit(str(dest / "usr/local/lib/systemd/system/relayd.service"))
    assert unit["ExecStart"] == ["/usr/local/bin/relayd"], unit["ExecStart"]
    bridge = read_unit(str(dest / "usr/local/lib/systemd/user/relay-bridge.service"))
    assert bridge["ExecStart"][0].startswith("/usr/local/bin/relay-bridge run"), bridge["ExecStart"]
    assert (dest / "usr/local/share/relay/catalog").is_dir()
    assert (dest / "usr/local/share/doc/relay/operations.md").exists()
    # systemd-sysusers, pointed at the staged root, makes the user the unit runs as.
    (dest / "etc").mkdir(exist_ok=True)
    run(["systemd-sysusers", "--root=%s" % dest, str(dest / "usr/local/lib/sysusers.d/relayd.conf")])
    assert re.search(r"^relayd:x:\d+:\d+:.*:/var/lib/relayd:/usr/sbin/nologin$",
                     (dest / "etc/passwd").read_text(), re.M)
    # The staged catalogd reads the dataset where make install put it.
    strings = run(["strings", str(dest / "usr/local/bin/catalogd")], check=False).stdout
    assert "/usr/local/share/relay/catalog" in strings


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


class Service:
    """relayd as its unit runs it: systemctl when systemd runs, else the unit's settings by hand."""

    def __init__(self):
        self.systemd = systemd_running()
        self.enabled = False
        self.proc = None

    def start(self):
        if self.systemd:
            if not self.enabled:
                # docs/operations.md, Running as a service.
                sh("systemctl daemon-reload")
                sh("systemctl enable --now relayd")
                self.enabled = True
            else:
                sh("systemctl start relayd")
            sh("systemctl status relayd")
            sh("journalctl -u relayd -n 20 --no-pager")
            return
        service = read_unit(UNIT)
        user = service["User"][0]
        state = os.path.join("/var/lib", service["StateDirectory"][0])
        os.makedirs(state, exist_ok=True)
        entry = pwd.getpwnam(user)
        os.chown(state, entry.pw_uid, entry.pw_gid)
        os.chmod(state, int(service.get("StateDirectoryMode", ["0755"])[0], 8))
        umask = service.get("UMask", ["0022"])[0]
        argv = ["setpriv", "--reuid", user, "--regid", service["Group"][0], "--init-groups", "--no-new-privs",
                "sh", "-c", "umask %s && exec \"$@\"" % umask, "sh"] + service["ExecStart"][0].split()
        log = open(LOG, "ab")
        self.proc = subprocess.Popen(argv, cwd=service["WorkingDirectory"][0], env=unit_environment(service),
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL)

    def reload(self):
        if self.systemd:
            run(["systemctl", "reload", "relayd"])
        else:
            self.proc.send_signal(signal.SIGHUP)

    def stop(self):
        """systemctl stop: SIGTERM, and the exit status must be 0 (a graceful stop)."""
        if self.systemd:
            sh("systemctl stop relayd")
            status = run(["systemctl", "show", "-p", "ExecMainStatus", "relayd"]).stdout.strip()
            assert status == "ExecMainStatus=0", status
            return
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            assert self.proc.wait(WAIT) == 0, open(LOG).read()[-3000:]
        self.proc = None

    def alive(self):
        return self.systemd or (self.proc is not None and self.proc.poll() is None)


def wait_healthy(base, service=None, path="/healthz", verify=True):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if service is not None and not service.alive():
            raise AssertionError("the installed relayd exited:\n%s" % open(LOG).read()[-3000:])
        try:
            if requests.get(base + path, timeout=2, verify=verify).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError("nothing answered at %s" % base)


@pytest.fixture(scope="module")
def relayd(work, src, debs, machine):
    """dpkg -i as docs/operations.md says, the settings file, and the installed relayd running."""
    proc = sh("dpkg -i ../relayd_*.deb ../relay-client_*.deb", check=False, cwd=str(src),
              env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run(["dpkg", "-i", debs["relay-bridge"], debs["relay-catalog"]])
    assert user_exists("relayd"), "the relayd package did not make its user"
    service = Service()
    if service.systemd:
        run(["systemctl", "stop", "relayd"], check=False)  # the package started it on 8080; settings first
    port = 8080 if port_free(8080) else free_port()
    metrics = 9464 if port_free(9464) else free_port()
    # "editor /etc/relayd/relayd.env": the settings of the walk-through, those this machine can have.
    with open(ENV_FILE, "a") as f:
        f.write("RELAY_LISTEN=127.0.0.1:%d\nRELAY_METRICS_LISTEN=127.0.0.1:%d\nRELAY_TRUSTED_PROXIES=127.0.0.1/32\n"
                % (port, metrics))
    service.start()
    state = {"service": service, "base": "http://127.0.0.1:%d" % port, "metrics": metrics, "port": port}
    wait_healthy(state["base"], service)
    yield state
    if service.alive():
        service.stop()


def test_the_installed_relayd_runs_as_its_own_user_with_its_unit_settings(relayd):
    service = read_unit(UNIT)
    assert service["ExecStart"] == ["/usr/bin/relayd"], service["ExecStart"]
    for setting in ("NoNewPrivileges", "PrivateTmp", "ProtectSystem", "RestrictAddressFamilies", "StateDirectory",
                    "ExecReload", "CapabilityBoundingSet"):
        assert setting in service, setting
    assert service["ProtectSystem"] == ["strict"]
    assert run(["/usr/bin/relayd", "--version"]).stdout.strip() == "relayd %s" % project_version()
    st = os.stat(STATE)
    assert pwd.getpwuid(st.st_uid).pw_name == "relayd" and st.st_mode & 0o077 == 0, oct(st.st_mode)
    for name in os.listdir(STATE):
        path = os.path.join(STATE, name)
        assert pwd.getpwuid(os.stat(path).st_uid).pw_name == "relayd", name
        assert os.stat(path).st_mode & 0o077 == 0, (name, oct(os.stat(path).st_mode))
    # A second relayd on the same folder is refused.
    second = run(["runuser", "-u", "relayd", "--", "relayd", "--listen", "127.0.0.1:0", "--data", STATE],
                 check=False, timeout=WAIT)
    assert second.returncode == 1 and "another relayd" in second.stderr, second.stderr


def test_a_token_pairing_and_a_bridge_with_the_installed_programs(relayd, work):
    base = relayd["base"]
    token = sh("runuser -u relayd -- relayd token alice --data /var/lib/relayd").stdout.strip().splitlines()[-1]
    me = requests.get(base + "/v1/me", headers={"Authorization": "Bearer " + token}, timeout=5)
    assert me.status_code == 200 and me.json()["result"]["user"]["id"] == "alice", me.text
    relayd["token"] = token
    config = work / "client-config"
    env = dict(os.environ, RELAY_CONFIG_DIR=str(config), NO_COLOR="1")
    run(["relay", "login", "--server", base, "--token", token], env=env)
    pairing = subprocess.Popen(["relay-bridge", "pair", "--server", base, "--name", "package-test", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        code = json.loads(pairing.stdout.readline())["code"]
        run(["relay", "pair", code], env=env)
        assert pairing.wait(WAIT) == 0
    finally:
        if pairing.poll() is None:
            pairing.kill()
        pairing.communicate()
    bridge = subprocess.Popen(["relay-bridge", "run", "--agent", "exec:cat"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        created = json.loads(run(["relay", "new", "--title", "package"], env=env).stdout)
        sent = run(["relay", "send", created["session_id"], "hello from the package"], env=env, timeout=WAIT)
        assert "hello from the package" in sent.stdout, sent.stdout
    finally:
        bridge.send_signal(signal.SIGTERM)
        bridge.wait(WAIT)


def test_the_catalog_serves_its_installed_dataset(relayd, work):
    port = free_port()
    data = work / "catalog-data"
    data.mkdir()
    proc = subprocess.Popen(["catalogd", "--listen", "127.0.0.1:%d" % port, "--data", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy("http://127.0.0.1:%d" % port, path="/api/v1")
        out = run(["catalog", "search", "benchmark", "--json"], env=dict(os.environ,
                                                                         CATALOG_BASE="http://127.0.0.1:%d" % port))
        assert json.loads(out.stdout)["total"] > 0, out.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(WAIT)


def test_metrics_on_their_own_listener(relayd):
    out = sh("curl -s http://127.0.0.1:%d/metrics" % relayd["metrics"]).stdout
    assert "relay_build_info{version=\"%s\"} 1" % project_version() in out, out[:500]
    assert "relay_store_commit_duration_seconds_count" in out
    assert requests.get(relayd["base"] + "/metrics", timeout=5).status_code == 404


def test_backup_restore_and_an_upgrade_as_the_docs_say(relayd, src):
    service, base = relayd["service"], relayd["base"]
    token = relayd.get("token") or sh("runuser -u relayd -- relayd token alice --data /var/lib/relayd") \
        .stdout.strip().splitlines()[-1]
    session_count = len(requests.get(base + "/v1/me", headers={"Authorization": "Bearer " + token},
                                     timeout=5).json()["result"]["sessions"])
    sh("install -d -o relayd -g relayd -m 0700 /var/backups/relayd")
    out = sh("runuser -u relayd -- relayd backup /var/backups/relayd/nightly --data /var/lib/relayd").stdout
    assert out.startswith("backup written to /var/backups/relayd/nightly"), out
    # Restore, with the service stopped, into a fresh folder.
    service.stop()
    sh("mv /var/lib/relayd /var/lib/relayd.before-restore")
    sh("install -d -o relayd -g relayd -m 0700 /var/lib/relayd")
    out = sh("runuser -u relayd -- relayd restore /var/backups/relayd/nightly --data /var/lib/relayd").stdout
    assert "restored /var/backups/relayd/nightly into /var/lib/relayd" in out, out
    service.start()
    wait_healthy(base, service)
    me = requests.get(base + "/v1/me", headers={"Authorization": "Bearer " + token}, timeout=5)
    assert me.status_code == 200, me.text  # the restored issuer key signs the same tokens
    assert len(me.json()["result"]["sessions"]) == session_count

    # An upgrade: a backup, the package again (the same version stands in for a newer one), the check.
    out = sh("runuser -u relayd -- relayd backup /var/backups/relayd/before-upgrade --data /var/lib/relayd").stdout
    assert "before-upgrade" in out
    if not service.systemd:
        service.stop()  # the package's restart is systemd's; by hand, stop and start around it
    sh("dpkg -i relayd_*.deb", cwd=str(src.parent), env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    check = sh("runuser -u relayd -- relayd migrate --check --data /var/lib/relayd").stdout
    assert "a start changes nothing" in check, check
    if not service.systemd:
        service.start()
    wait_healthy(base, service)
    with open(ENV_FILE) as f:
        assert "RELAY_METRICS_LISTEN" in f.read(), "the upgrade replaced the operator's settings"


def _self_signed(folder):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    (folder / "fullchain.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "privkey.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    return folder / "fullchain.pem"


def test_tls_from_a_copied_certificate_reload_and_a_graceful_stop(relayd, work):
    """docs/operations.md, HTTPS: the certificate copied where the service's user reads it, then reload."""
    service = relayd["service"]
    certs = work / "certs"
    certs.mkdir()
    cert = _self_signed(certs)
    sh("cd %s && install -m 0640 -g relayd fullchain.pem privkey.pem /etc/relayd/" % certs)
    service.stop()
    with open(ENV_FILE, "a") as f:
        f.write("RELAY_TLS_CERT=/etc/relayd/fullchain.pem\nRELAY_TLS_KEY=/etc/relayd/privkey.pem\n")
    service.start()
    base = "https://127.0.0.1:%d" % relayd["port"]
    wait_healthy(base, service, verify=str(cert))
    # Renewal: new files, then the unit's reload (SIGHUP); the relay keeps serving the new one.
    renewed = _self_signed(certs)
    sh("cd %s && install -m 0640 -g relayd fullchain.pem privkey.pem /etc/relayd/" % certs)
    service.reload()
    time.sleep(0.5)
    wait_healthy(base, service, verify=str(renewed))
    service.stop()

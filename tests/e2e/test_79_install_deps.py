"""scripts/install-deps.sh (issue 35, item 5): `make run` (and build, install) installs what building and
running the programs needs, never the test toolchain; `make test` installs that too, and the servers among
it (PostgreSQL, Redis, nginx, Caddy) are installed without being started as system services: a
policy-rc.d denies every start during that apt-get and is put back as it was, and the servers this run
installed are left disabled. The install itself runs here against stand-ins for apt-get, dpkg-query,
systemctl and update-rc.d on PATH (and a policy file of the test's own): nothing is installed on, or
removed from, this machine."""
import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "install-deps.sh")

# Packages only the tests need: browsers, database and web servers, Node, packaging tools, test runners.
TEST_ONLY = re.compile(r"^(chromium.*|firefox.*|nginx.*|caddy|apache2.*|postgresql.*|redis-server|mariadb.*|"
                       r"mysql.*|nodejs|npm|debhelper.*|dpkg-dev|fakeroot|python3-pytest.*|tmux|libcmocka.*|"
                       r"clang.*|libclang.*|fonts-.*|python3-psycopg2|python3-websockets|redis-tools)$")


def listed(need):
    proc = subprocess.run([SCRIPT, "--list", need], capture_output=True, text=True, timeout=10, check=True)
    return proc.stdout.split()


def makefile_rules():
    with open(os.path.join(REPO, "Makefile")) as f:
        text = f.read()
    rules = {}
    for m in re.finditer(r"^([a-z-]+):([^\n=]*)\n((?:\t[^\n]*\n)*)", text, re.M):
        rules[m.group(1)] = (m.group(2).split(), m.group(3))
    return rules


def test_make_run_build_and_install_install_no_test_only_package():
    build = listed("build")
    assert build and len(build) == len(set(build)), build
    assert [p for p in build if TEST_ONLY.match(p)] == [], build
    rules = makefile_rules()
    assert rules["deps"][1].strip() == "@./scripts/install-deps.sh build", rules["deps"]
    for target in ("run", "build", "install"):
        assert rules[target][0] == ["deps"], (target, rules[target])
    # make test installs the test list before it builds (cmocka must be there when CMake looks for it).
    assert rules["deps-test"][1].strip() == "@./scripts/install-deps.sh test", rules["deps-test"]
    assert rules["test"][0] == ["deps-test"], rules["test"]
    assert rules["test"][1].splitlines()[0].strip().startswith("@$(MAKE) --no-print-directory build"), rules["test"]
    for target in ("test-asan", "test-package", "fuzz"):
        assert "deps-test" in rules[target][0], (target, rules[target])


def test_the_build_list_builds_what_the_packages_build_and_the_test_list_holds_everything():
    build, package, test = listed("build"), listed("package"), listed("test")
    with open(os.path.join(REPO, "debian", "control")) as f:
        control = f.read()
    depends = re.search(r"^Build-Depends:(.*?)^\S", control, re.M | re.S).group(1)
    names = [re.match(r"\s*([a-z0-9.+-]+)", d).group(1) for d in depends.split(",") if d.strip()]
    assert [n for n in names if n != "debhelper-compat" and n not in build] == [], (names, build)
    assert set(build) < set(package) < set(test), (build, package, test)
    assert "debhelper" in package and "chromium" not in package
    # Everything make test needs (what the one list held before, and Node).
    for p in ("libcmocka-dev", "clang", "libclang-rt-14-dev", "python3-pytest", "python3-requests",
              "python3-websockets", "python3-cryptography", "python3-psycopg2", "tmux", "chromium",
              "fonts-noto-color-emoji", "redis-server", "redis-tools", "postgresql", "nginx", "caddy", "nodejs", "npm",
              "debhelper", "dpkg-dev", "fakeroot", "help2man"):
        assert p in test, p


def _stubs(tmp_path, installed_servers=()):
    """Stand-ins on PATH: dpkg-query (every package installed but tmux, nginx and caddy, less those named
    as installed), apt-get (records its arguments and what policy-rc.d answers to a start meanwhile),
    systemctl and update-rc.d (record their arguments), id (root), node and npm."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    missing = " ".join(p for p in ("tmux", "nginx", "caddy") if p not in installed_servers)
    scripts = {
        "dpkg-query": 'for p in %s; do [ "$3" = "$p" ] && exit 1; done; printf "install ok installed"\n' % missing,
        "apt-get": 'echo "apt-get $*" >> "$CALLS"\n'
                   'if [ -x "$RL_POLICY_RC_D" ]; then "$RL_POLICY_RC_D" nginx start; echo "policy $?" >> "$CALLS";'
                   ' else echo "policy none" >> "$CALLS"; fi\n'
                   'exit "${APT_STATUS:-0}"\n',
        "systemctl": 'echo "systemctl $*" >> "$CALLS"\n',
        "update-rc.d": 'echo "update-rc.d $*" >> "$CALLS"\n',
        "id": 'echo 0\n',
        "node": 'exit 0\n',
        "npm": 'exit 0\n',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    policy = tmp_path / "policy-rc.d"
    env = {"PATH": "%s:/usr/bin:/bin" % bin_dir, "CALLS": str(log), "RL_POLICY_RC_D": str(policy),
           "LANG": "C.UTF-8"}
    return env, log, policy


def _run(env, need, **extra):
    return subprocess.run([SCRIPT, need], capture_output=True, text=True, timeout=30, env=dict(env, **extra))


def test_make_test_installs_the_servers_without_starting_them_and_puts_the_policy_back(tmp_path):
    env, log, policy = _stubs(tmp_path)
    # The machine's own policy (a container's, say) is put back as it was.
    policy.write_text("#!/bin/sh\n# the machine's own\nexit 0\n")
    policy.chmod(0o755)
    proc = _run(env, "test")
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "apt-get install -y -q --no-install-recommends tmux nginx caddy", calls
    # During the install, every start was denied (101: "action forbidden by policy").
    assert calls[1] == "policy 101", calls
    assert policy.read_text() == "#!/bin/sh\n# the machine's own\nexit 0\n"
    assert [p for p in os.listdir(tmp_path) if p.startswith("policy-rc.d.")] == []
    # The two servers it installed are disabled (and stopped when systemd runs); no other is touched.
    disabled = [c for c in calls if c.startswith("systemctl disable")]
    assert disabled == ["systemctl disable --quiet nginx.service", "systemctl disable --quiet caddy.service"], calls
    assert not [c for c in calls if "postgresql" in c or "redis" in c], calls
    assert "without starting them as system services" in proc.stderr and "nginx caddy" in proc.stderr, proc.stderr


def test_without_a_policy_before_none_is_left_and_a_failed_install_still_puts_it_back(tmp_path):
    env, log, policy = _stubs(tmp_path)
    proc = _run(env, "test", APT_STATUS="100")
    assert proc.returncode != 0
    calls = log.read_text().splitlines()
    # Tried twice (after an apt-get update), starts denied both times; nothing left behind.
    assert calls.count("policy 101") == 2 and "apt-get update -q" in calls, calls
    assert not policy.exists()
    assert [p for p in os.listdir(tmp_path) if "policy" in p] == [], os.listdir(tmp_path)


def test_a_server_installed_before_is_left_alone_and_make_run_touches_no_policy(tmp_path):
    env, log, policy = _stubs(tmp_path, installed_servers=("nginx", "caddy"))
    proc = _run(env, "test")
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    # Only tmux was missing: no server, so no policy, and no service touched.
    assert calls == ["apt-get install -y -q --no-install-recommends tmux", "policy none"], calls
    log.unlink()
    # make run: none of the test list is missing for it, nothing to install.
    proc = _run(env, "build")
    assert proc.returncode == 0 and not log.exists(), (proc.stderr, log.exists() and log.read_text())


def test_not_as_root_it_says_what_to_run(tmp_path):
    env, log, policy = _stubs(tmp_path)
    (tmp_path / "bin" / "id").write_text("#!/bin/sh\necho 1000\n")
    proc = _run(env, "test")
    assert proc.returncode == 1 and not log.exists()
    assert "missing packages: tmux nginx caddy" in proc.stderr, proc.stderr
    assert "install-deps.sh test" in proc.stderr and "without starting nginx caddy as system services" in proc.stderr
    proc = subprocess.run([SCRIPT, "everything"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and "usage" in proc.stderr

"""docs/operations.md: every command in it is exercised by a test or by the package test (issue 15).

Each command line of the page's sh blocks must be listed below with the test that runs it, and that
test's file must hold the command (as written, or the named fragment where a test runs it against
its own files and ports). A new command in the page fails here until a test runs it."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "tests/package/test_package.py"

# command as written in the page -> (test file, fragment that file must hold)
EXERCISED = {
    "./scripts/install-deps.sh package": (PACKAGE, 'sh("./scripts/install-deps.sh package"'),
    "dpkg-buildpackage -b -us -uc": (PACKAGE, '"dpkg-buildpackage -b -us -uc"'),
    "dpkg -i ../relayd_*.deb ../relay-client_*.deb": (PACKAGE, '"dpkg -i ../relayd_*.deb ../relay-client_*.deb"'),
    "make install PREFIX=/usr/local": (PACKAGE, '"make install PREFIX=/usr/local DESTDIR='),
    "systemd-sysusers": (PACKAGE, '"systemd-sysusers", "--root='),
    "systemctl daemon-reload": (PACKAGE, 'sh("systemctl daemon-reload")'),
    "editor /etc/relayd/relayd.env": (PACKAGE, "with open(ENV_FILE, \"a\") as f:"),
    "systemctl enable --now relayd": (PACKAGE, 'sh("systemctl enable --now relayd")'),
    "systemctl status relayd": (PACKAGE, 'sh("systemctl status relayd")'),
    "journalctl -u relayd -f": (PACKAGE, 'sh("journalctl -u relayd -n 20 --no-pager")'),
    "runuser -u relayd -- relayd token alice --data /var/lib/relayd":
        (PACKAGE, '"runuser -u relayd -- relayd token alice --data /var/lib/relayd"'),
    "relayd --listen 0.0.0.0:443 --public-url https://relay.example.com \\":
        ("tests/e2e/test_07_tls.py", '"--tls-cert", str(cert), "--tls-key", str(key)'),
    "--tls-cert /etc/letsencrypt/live/relay.example.com/fullchain.pem \\":
        ("tests/e2e/test_07_tls.py", '"--tls-cert"'),
    "--tls-key  /etc/letsencrypt/live/relay.example.com/privkey.pem": ("tests/e2e/test_07_tls.py", '"--tls-key"'),
    "apt-get install -y nginx": ("scripts/install-deps.sh", " nginx "),
    "cp /usr/share/doc/relayd/examples/nginx-relay.conf /etc/nginx/sites-available/relay":
        ("tests/e2e/test_74_behind_nginx.py", '"contrib", "nginx-relay.conf"'),
    "ln -s /etc/nginx/sites-available/relay /etc/nginx/sites-enabled/relay":
        ("tests/e2e/test_74_behind_nginx.py", "include {dir}/relay.conf;"),
    "nginx -t": ("tests/e2e/test_74_behind_nginx.py", '[NGINX, "-t", "-c", conf'),
    "systemctl reload nginx": ("tests/e2e/test_74_behind_nginx.py", "subprocess.Popen([NGINX, \"-c\", conf"),
    "apt-get install -y caddy": ("scripts/install-deps.sh", " caddy\""),
    "cp /usr/share/doc/relayd/examples/Caddyfile /etc/caddy/Caddyfile":
        ("tests/e2e/test_75_behind_caddy.py", '"contrib", "Caddyfile"'),
    "caddy validate --config /etc/caddy/Caddyfile --adapter caddyfile":
        ("tests/e2e/test_75_behind_caddy.py", '[CADDY, "validate", "--config", CADDYFILE, "--adapter", "caddyfile"]'),
    "systemctl reload caddy": ("tests/e2e/test_75_behind_caddy.py", '[CADDY, "run", "--config"'),
    "curl -s http://127.0.0.1:9464/metrics": (PACKAGE, 'sh("curl -s http://127.0.0.1:%d/metrics"'),
    "install -d -o relayd -g relayd -m 0700 /var/backups/relayd":
        (PACKAGE, '"install -d -o relayd -g relayd -m 0700 /var/backups/relayd"'),
    "runuser -u relayd -- relayd backup /var/backups/relayd/nightly --data /var/lib/relayd":
        (PACKAGE, '"runuser -u relayd -- relayd backup /var/backups/relayd/nightly --data /var/lib/relayd"'),
    "systemctl stop relayd": (PACKAGE, 'sh("systemctl stop relayd")'),
    "mv /var/lib/relayd /var/lib/relayd.before-restore": (PACKAGE, '"mv /var/lib/relayd /var/lib/relayd.before-restore"'),
    "install -d -o relayd -g relayd -m 0700 /var/lib/relayd":
        (PACKAGE, '"install -d -o relayd -g relayd -m 0700 /var/lib/relayd"'),
    "runuser -u relayd -- relayd restore /var/backups/relayd/nightly --data /var/lib/relayd":
        (PACKAGE, '"runuser -u relayd -- relayd restore /var/backups/relayd/nightly --data /var/lib/relayd"'),
    "systemctl start relayd": (PACKAGE, 'sh("systemctl start relayd")'),
    "runuser -u relayd -- relayd backup /var/backups/relayd/before-upgrade --data /var/lib/relayd":
        (PACKAGE, '"runuser -u relayd -- relayd backup /var/backups/relayd/before-upgrade --data /var/lib/relayd"'),
    "dpkg -i relayd_*.deb": (PACKAGE, 'sh("dpkg -i relayd_*.deb"'),
    "runuser -u relayd -- relayd migrate --check --data /var/lib/relayd":
        (PACKAGE, '"runuser -u relayd -- relayd migrate --check --data /var/lib/relayd"'),
    # PostgreSQL: a password in the URL (never logged), a Unix socket, the move from SQLite, backups.
    "relayd --data /var/lib/relayd --store 'postgres://relay:PASSWORD@db.example.com:5432/relay?sslmode=require'":
        ("tests/e2e/test_41_store_migrate.py", '"postgres://relay@", "postgres://relay:hunter2-secret@"'),
    "relayd --store 'postgres://relay@/relay?host=/var/run/postgresql'     # a Unix socket":
        ("tests/e2e/conftest.py", '"postgres://relay@/%s?host=%s"'),
    "relayd migrate --from sqlite:/var/lib/relayd/relay.db --to 'postgres://relay:PASSWORD@db/relay'":
        ("tests/e2e/test_41_store_migrate.py", '["migrate", "--from", "sqlite:%s" % src, "--to", dst]'),
    "relayd --data /var/lib/relayd --store 'postgres://relay:PASSWORD@db/relay'":
        ("tests/e2e/test_41_store_migrate.py", "relayd(store=url"),
    'pg_dump --format=custom --file=relay.pgdump "$RELAY_STORE"':
        ("tests/e2e/test_42_postgres_backup.py", """DUMP = 'pg_dump --format=custom --file=relay.pgdump "$RELAY_STORE"'"""),
    'pg_restore --clean --if-exists --no-owner --dbname="$RELAY_STORE" relay.pgdump':
        ("tests/e2e/test_42_postgres_backup.py",
         """RESTORE = 'pg_restore --clean --if-exists --no-owner --dbname="$RELAY_STORE" relay.pgdump'"""),
    # One process per core: processes on one port, each with its data folder and metrics port.
    "RELAY_REUSE_PORT=on RELAY_DATA=/var/lib/relayd/1 RELAY_METRICS_LISTEN=127.0.0.1:9464 relayd --listen 0.0.0.0:8080 &":
        ("tests/e2e/test_109_reuse_port.py", '"--reuse-port", "on",'),
    "RELAY_REUSE_PORT=on RELAY_DATA=/var/lib/relayd/2 RELAY_METRICS_LISTEN=127.0.0.1:9465 relayd --listen 0.0.0.0:8080 &":
        ("tests/e2e/test_109_reuse_port.py", '"--metrics-listen", "127.0.0.1:%d" % metrics'),
    # Redis: the three forms of a bus location.
    "relayd --bus redis://:PASSWORD@10.0.0.5:6379/0      # TCP; the password may be %-encoded":
        ("tests/e2e/test_43_redis_bus_urls.py", 'url = "redis://:%s@127.0.0.1:%d/0"'),
    "relayd --bus redis://relay:PASSWORD@redis.internal/2  # an ACL user, database 2":
        ("tests/e2e/test_43_redis_bus_urls.py", 'url = "redis://relay:%s@127.0.0.1:%d/2"'),
    "relayd --bus 'unix:///run/redis/redis.sock?db=0'       # a Unix socket (password=P, user=U)":
        ("tests/e2e/test_43_redis_bus_urls.py", 'url = "unix://%s?db=5&user=relay&password=%s"'),
}

# Synopses, not commands.
SYNOPSES = {"relayd [--listen HOST:PORT] [--data DIR] [settings...]"}

def doc_commands():
    with open(os.path.join(REPO, "docs", "operations.md"), encoding="utf-8") as f:
        text = f.read()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_every_command_of_operations_md_is_exercised():
    missing = []
    for command in doc_commands():
        if command in SYNOPSES:
            continue
        if command not in EXERCISED:
            missing.append(command)
            continue
        path, fragment = EXERCISED[command]
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            assert fragment in f.read(), "%s no longer runs %r (looked for %r)" % (path, command, fragment)
    assert not missing, "commands of docs/operations.md that no test runs: %r" % missing
    # And nothing listed here has left the page unnoticed.
    assert set(EXERCISED) <= set(doc_commands()), set(EXERCISED) - set(doc_commands())

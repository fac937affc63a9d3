"""A redis-server set up the way docs/operations.md ("Redis") sets one up: a loopback TCP port and a
Unix socket, a password on the default user and an ACL user `relay` limited to the relay's keys and
channels. For the tests of bus locations with credentials (test_43, test_80); the suite's own Redis
(conftest's RedisServer) has no password."""
import os
import shutil
import subprocess
import tempfile
import time

from relaylib import free_port

# Every character a URL gives a meaning to, and a '%' that must stay one once decoded.
PASSWORD = "p@ss/w:rd?#1"
ACL_PASSWORD = "acl-s3cret-%41"


class GuardedRedis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rl-redis-guarded-")
        self.port = free_port()
        self.socket = os.path.join(self.dir, "redis.sock")
        conf = os.path.join(self.dir, "redis.conf")
        with open(conf, "w") as f:
            f.write("bind 127.0.0.1\nport %d\nunixsocket %s\nunixsocketperm 700\ndir %s\n"
                    "pidfile %s/redis.pid\nlogfile %s/redis.log\ndaemonize yes\nsave \"\"\nappendonly no\n"
                    "databases 16\n" % (self.port, self.socket, self.dir, self.dir, self.dir))
            f.write("user default on >%s ~* &* +@all\n" % PASSWORD)
            f.write("user relay on >%s ~relay:* &relay:* +@all\n" % ACL_PASSWORD)
        subprocess.run(["redis-server", conf], check=True, timeout=30)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def cli(self, *args, db=0):
        """redis-cli as the default user on database `db`; its stdout, stripped."""
        proc = subprocess.run(["redis-cli", "-s", self.socket, "--user", "default", "--pass", PASSWORD,
                               "--no-auth-warning", "-n", str(db)] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=30)
        return proc.stdout.strip()

    def sizes(self):
        """Keys per logical database."""
        return {db: int(self.cli("DBSIZE", db=db) or 0) for db in range(16)}

    def stop(self):
        self.cli("SHUTDOWN", "NOSAVE")
        shutil.rmtree(self.dir, ignore_errors=True)

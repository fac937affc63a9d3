#!/bin/sh
# A throw-away PostgreSQL server for the tests: a cluster in a folder of its
# own, listening on a Unix socket in that folder only (no TCP port), trusted
# local connections as the role "relay".
#
#   pg.sh start DIR        initdb and start a cluster in DIR (absent or empty), create the database
#                          "relay", print its URL
#   pg.sh url DIR [DB]     print the URL of database DB (default relay)
#   pg.sh createdb DIR DB  create database DB, print its URL
#   pg.sh reset DIR [DB]   empty database DB: drop every table (its schema "public" is made again)
#   pg.sh stop DIR         stop the server and remove DIR
#   pg.sh down DIR         stop the server and keep the cluster (a server that is down, for tests)
#   pg.sh up DIR           start the cluster of DIR again
#   pg.sh run CMD [ARG...] start a cluster in a fresh folder, run CMD with RL_TEST_STORE (the URL),
#                          RL_TEST_STORE_RESET (the command that empties it) and RL_TEST_PG (the folder)
#                          in its environment, then stop it and remove the folder whatever CMD did;
#                          exits with CMD's status
#
# PostgreSQL refuses to run as root: as root, the server runs as the system
# user "relaytest" (created when missing), which owns DIR; clients connect as
# the calling user. The server is for tests only: fsync is off, which loses
# nothing when a process crashes (the tests' kill -9), only when the machine
# does. PG_BINDIR names the server's programs (default: the newest
# /usr/lib/postgresql/*/bin).
set -eu

RUN_AS=relaytest
ROLE=relay

bindir() {
	if [ -n "${PG_BINDIR:-}" ]; then
		echo "$PG_BINDIR"
		return
	fi
	found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
	if [ -z "$found" ]; then
		echo "pg.sh: no PostgreSQL server found (apt-get install postgresql, or set PG_BINDIR)" >&2
		exit 1
	fi
	echo "$found"
}

# Runs a server program as the unprivileged user when we are root.
as_server() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$RUN_AS" -- "$@"
	else
		"$@"
	fi
}

absolute() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$(pwd)/$1" ;;
	esac
}

url() {
	echo "postgres://$ROLE@/$2?host=$1"
}

sql() {
	dir=$1
	db=$2
	shift 2
	"$(bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -U "$ROLE" -d "$db" "$@" >/dev/null
}

start() {
	dir=$(absolute "$1")
	bin=$(bindir)
	mkdir -p "$dir"
	if [ -n "$(ls -A "$dir")" ]; then
		echo "pg.sh: $dir is not empty" >&2
		exit 1
	fi
	# A Unix socket path is at most 107 bytes: DIR/.s.PGSQL.5432 must fit.
	if [ ${#dir} -gt 90 ]; then
		echo "pg.sh: $dir is too long a path for a Unix socket" >&2
		exit 1
	fi
	if [ "$(id -u)" -eq 0 ]; then
		if ! id "$RUN_AS" >/dev/null 2>&1; then
			useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$RUN_AS"
		fi
		chown "$RUN_AS" "$dir"
		if ! runuser -u "$RUN_AS" -- test -w "$dir"; then
			echo "pg.sh: $RUN_AS cannot reach $dir (a parent folder is private); use a folder under /tmp" >&2
			exit 1
		fi
	fi
	chmod 0700 "$dir"
	as_server "$bin/initdb" -D "$dir/data" -U "$ROLE" -A trust -E UTF8 --locale=C --no-sync --no-instructions \
		>"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		exit 1
	}
	up "$dir"
	# The socket folder is the cluster's; clients of any user reach the socket through it.
	chmod 0711 "$dir"
	sql "$dir" postgres -c "CREATE DATABASE relay"
	url "$dir" relay
}

up() {
	dir=$(absolute "$1")
	as_server "$(bindir)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir' -c unix_socket_permissions=0777 \
-c fsync=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB" start >/dev/null || {
		cat "$dir/server.log" >&2
		exit 1
	}
}

down() {
	dir=$(absolute "$1")
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_server "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_server "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}

stop() {
	dir=$(absolute "$1")
	down "$dir"
	rm -rf "$dir"
}

reset() {
	dir=$(absolute "$1")
	sql "$dir" "${2:-relay}" -c "SET client_min_messages = warning" -c "DROP SCHEMA public CASCADE" \
		-c "CREATE SCHEMA public"
}

run() {
	dir=$(mktemp -d "${TMPDIR:-/tmp}/rl-pg-XXXXXX")
	trap 'stop "$dir"' EXIT
	trap 'exit 130' INT TERM
	RL_TEST_STORE=$(start "$dir")
	RL_TEST_STORE_RESET="$(absolute "$0") reset $dir"
	RL_TEST_PG=$dir
	export RL_TEST_STORE RL_TEST_STORE_RESET RL_TEST_PG
	status=0
	"$@" || status=$?
	exit $status
}

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
command=$1
shift
case "$command:$#" in
start:1) start "$1" ;;
stop:1) stop "$1" ;;
down:1) down "$1" ;;
up:1) up "$1" ;;
url:1 | url:2) url "$(absolute "$1")" "${2:-relay}" ;;
createdb:2) sql "$(absolute "$1")" postgres -c "CREATE DATABASE \"$2\"" && url "$(absolute "$1")" "$2" ;;
reset:1 | reset:2) reset "$@" ;;
run:0) usage ;;
run:*) run "$@" ;;
*) usage ;;
esac

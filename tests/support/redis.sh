#!/bin/sh
# A throwaway redis-server for the tests: a Unix socket in a temporary folder,
# no TCP port, no persistence, stopped at the end.
#
#   redis.sh run CMD [ARGS...]  starts a server, runs CMD with RL_TEST_BUS (its
#                               location) and the variables below, stops the
#                               server, removes the folder; exits with CMD's status
#   redis.sh start DIR          starts (or starts again) the server of DIR
#   redis.sh stop DIR           stops it (SIGTERM, no save), waiting for it to go
#   redis.sh flush DIR          empties every database
#
# CMD sees RL_TEST_BUS=unix://DIR/redis.sock?db=0, RL_TEST_REDIS_DIR=DIR, and
# RL_TEST_BUS_RESET, RL_TEST_REDIS_START, RL_TEST_REDIS_STOP: shell commands
# that flush, start and stop this server.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
self="$here/redis.sh"

start() {
	dir=$1
	if [ ! -f "$dir/redis.conf" ]; then
		cat >"$dir/redis.conf" <<CONF
port 0
unixsocket $dir/redis.sock
unixsocketperm 700
dir $dir
pidfile $dir/redis.pid
logfile $dir/redis.log
daemonize yes
save ""
appendonly no
databases 16
CONF
	fi
	redis-server "$dir/redis.conf"
	# The server answers once its socket is up; give it five seconds.
	i=0
	while ! redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "redis.sh: redis-server did not start; its log:" >&2
			cat "$dir/redis.log" >&2 || true
			return 1
		fi
		sleep 0.05
	done
}

stop() {
	dir=$1
	[ -f "$dir/redis.pid" ] || return 0
	pid=$(cat "$dir/redis.pid")
	kill -TERM "$pid" 2>/dev/null || true
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.05
	done
	rm -f "$dir/redis.pid" "$dir/redis.sock"
}

case "${1:-}" in
start) start "$2" ;;
stop) stop "$2" ;;
flush) redis-cli -s "$2/redis.sock" flushall >/dev/null ;;
run)
	shift
	command -v redis-server >/dev/null || {
		echo "redis.sh: redis-server is missing (scripts/install-deps.sh installs it)" >&2
		exit 1
	}
	dir=$(mktemp -d /tmp/rl-redis-XXXXXX)
	trap 'stop "$dir"; rm -rf "$dir"' EXIT
	trap 'exit 130' INT TERM
	start "$dir"
	export RL_TEST_REDIS_DIR="$dir"
	export RL_TEST_BUS="unix://$dir/redis.sock?db=0"
	export RL_TEST_BUS_RESET="sh '$self' flush '$dir'"
	export RL_TEST_REDIS_START="sh '$self' start '$dir'"
	export RL_TEST_REDIS_STOP="sh '$self' stop '$dir'"
	status=0
	"$@" || status=$?
	exit "$status"
	;;
*)
	echo "usage: redis.sh run CMD... | start DIR | stop DIR | flush DIR" >&2
	exit 2
	;;
esac

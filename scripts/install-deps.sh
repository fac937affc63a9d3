#!/bin/sh
# Installs the Debian packages a make target needs. One list per need, each a superset of the one before:
#
#   scripts/install-deps.sh           build: build relayd, relay, relay-bridge and catalogd and run them
#                                     (make run, make build, make install; docs/bridge.md)
#   scripts/install-deps.sh package   the build's, and what dpkg-buildpackage needs (docs/operations.md)
#   scripts/install-deps.sh test      everything make test needs: the above, and the test toolchain
#                                     (cmocka, clang, pytest, tmux, Chromium, Node, PostgreSQL, Redis, nginx, Caddy)
#   scripts/install-deps.sh --list build|package|test   prints a list, one package a line, and installs nothing
#
# As root it runs apt-get; otherwise it prints what to run.
#
# The test list holds servers the tests start themselves, on sockets and ports of their own. Debian starts
# a server package as a system service when it is installed (nginx and Caddy both on port 80, PostgreSQL,
# Redis): during that apt-get, /usr/sbin/policy-rc.d denies every start (exit 101, the policy-rc.d
# interface), and is put back as it was afterwards, whatever happens; a server installed by this run is then
# disabled (and stopped, should anything have started it), so that a reboot does not start it either. A
# server that was installed before is left as it is. RL_POLICY_RC_D names another policy file (the tests').
set -eu

BUILD_PACKAGES="build-essential cmake pkg-config help2man python3 curl \
libh2o-evloop-dev libwslay-dev libuv1-dev libjansson-dev libsqlite3-dev libssl-dev libcurl4-openssl-dev \
libsodium-dev zlib1g-dev libhiredis-dev libpq-dev libqrencode-dev"
PACKAGE_PACKAGES="debhelper dpkg-dev fakeroot"
TEST_PACKAGES="clang libclang-rt-14-dev libcmocka-dev tmux git \
python3-pytest python3-requests python3-websockets python3-cryptography python3-psycopg2 \
chromium fonts-dejavu-core fonts-noto-color-emoji \
redis-server redis-tools postgresql nginx caddy"
# The servers among them, as package:service.
SERVERS="redis-server:redis-server postgresql:postgresql nginx:nginx caddy:caddy"
# Node runs the end-to-end suite's independent EventSource client, the browser suite (playwright-core),
# the ACP agents the bridge tests drive and the protocol authors' bridge client (tests/interop, built
# with TypeScript from npm). Debian 12's own nodejs (18) and npm (9) are what the tests' package locks
# are pinned for: nothing the tests install needs newer. Any node and npm on PATH will do.
NODE_PACKAGES="nodejs npm"
NODE_MIN=18
POLICY=${RL_POLICY_RC_D:-/usr/sbin/policy-rc.d}

list=0
if [ "${1:-}" = "--list" ]; then
	list=1
	shift
fi
need=${1:-build}
case $need in
build) packages=$BUILD_PACKAGES ;;
package) packages="$BUILD_PACKAGES $PACKAGE_PACKAGES" ;;
test) packages="$BUILD_PACKAGES $PACKAGE_PACKAGES $TEST_PACKAGES" ;;
*)
	echo "usage: $0 [--list] [build|package|test]" >&2
	exit 2
	;;
esac
if [ $list = 1 ]; then
	[ "$need" = test ] && packages="$packages $NODE_PACKAGES"
	printf '%s\n' $packages
	exit 0
fi

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ "$need" = test ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
	missing="$missing $NODE_PACKAGES"
fi

check_node() {
	[ "$need" = test ] || return 0
	command -v node >/dev/null 2>&1 || return 0
	if ! node -e "process.exit(Number(process.versions.node.split('.')[0]) >= $NODE_MIN ? 0 : 1)"; then
		echo "node $(node --version) is too old: the tests need Node.js $NODE_MIN or later (Debian 12's nodejs)" >&2
		exit 1
	fi
}

if [ -z "$missing" ]; then
	check_node
	exit 0
fi

# The services of the servers this run installs (none that was there before).
services=""
for entry in $SERVERS; do
	case " $missing " in
	*" ${entry%%:*} "*) services="$services ${entry#*:}" ;;
	esac
done

if [ "$(id -u)" -ne 0 ]; then
	echo "missing packages:$missing" >&2
	if [ -n "$services" ]; then
		echo "run: sudo $0 $need   (it installs them without starting$services as system services)" >&2
	else
		echo "run: sudo apt-get install -y$missing" >&2
	fi
	exit 1
fi

# policy-rc.d denies every start while the servers install; the one that was there comes back after.
saved=""
deny_starts() {
	if [ -e "$POLICY" ] || [ -L "$POLICY" ]; then
		saved="$POLICY.install-deps.$$"
		mv "$POLICY" "$saved"
	fi
	printf '#!/bin/sh\n# scripts/install-deps.sh: no service starts while the test servers install\nexit 101\n' \
		>"$POLICY"
	chmod 755 "$POLICY"
}
allow_starts() {
	rm -f "$POLICY"
	if [ -n "$saved" ]; then
		mv "$saved" "$POLICY"
		saved=""
	fi
}
# Installed, not enabled and not running: the tests start their own.
quiet_service() {
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable --quiet "$1.service" >/dev/null 2>&1 || true
		if [ -d /run/systemd/system ]; then
			systemctl stop "$1.service" >/dev/null 2>&1 || true
		fi
	fi
	if command -v update-rc.d >/dev/null 2>&1 && [ -e "/etc/init.d/$1" ]; then
		update-rc.d "$1" disable >/dev/null 2>&1 || true
	fi
}

echo "installing:$missing" >&2
if [ -n "$services" ]; then
	trap allow_starts EXIT
	trap 'exit 130' INT TERM
	deny_starts
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends $missing >/dev/null; then
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
if [ -n "$services" ]; then
	allow_starts
	trap - EXIT INT TERM
	for service in $services; do
		quiet_service "$service"
	done
	echo "installed without starting them as system services (the tests start their own):$services" >&2
fi
check_node

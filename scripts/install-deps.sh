#!/bin/sh
# Installs the Debian packages that building relayd and running its tests need.
# As root it runs apt-get; otherwise it prints the command to run.
set -eu

PACKAGES="build-essential cmake pkg-config clang libclang-rt-14-dev \
libh2o-evloop-dev libwslay-dev libuv1-dev libjansson-dev libsqlite3-dev libssl-dev \
libcurl4-openssl-dev libsodium-dev libcmocka-dev zlib1g-dev curl libhiredis-dev redis-server redis-tools \
python3 python3-pytest python3-requests python3-websockets python3-cryptography \
tmux libqrencode-dev chromium fonts-dejavu-core fonts-noto-color-emoji nginx \
postgresql libpq-dev python3-psycopg2 help2man debhelper dpkg-dev fakeroot caddy"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

# Node runs the end-to-end suite's independent EventSource client, the browser suite
# (playwright-core), the ACP agents the bridge tests drive and the protocol authors' bridge client
# (tests/interop, built with TypeScript from npm). Debian 12's own nodejs (18) and npm
# (9) are what the tests' package locks are pinned for: nothing the tests install needs newer.
NODE_MIN=18
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing="$missing nodejs npm"
fi

check_node() {
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

if [ "$(id -u)" -ne 0 ]; then
	echo "missing packages:$missing" >&2
	echo "run: sudo apt-get install -y$missing" >&2
	exit 1
fi

echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends $missing >/dev/null; then
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
check_node

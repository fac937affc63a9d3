#!/bin/sh
# Installs what the catalog benchmark needs beyond the build: nginx (the
# static-file reference) and wrk (the load generator), from Debian.
# As root it runs apt-get; otherwise it prints the command to run.
set -eu

PACKAGES="nginx wrk python3"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

[ -z "$missing" ] && exit 0

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
# The benchmark starts its own nginx on loopback; the packaged service is not needed.
systemctl disable --now nginx >/dev/null 2>&1 || true

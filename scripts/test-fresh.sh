#!/bin/sh
# make test-fresh, and CI (.ci/run): the README's `make test`, run in a Debian 12 root made
# fresh for this run, so that a package the project's own files do not install fails here
# instead of on a newcomer's machine.
#
#   1. debootstrap a minbase bookworm root (plus git, make and ca-certificates: what the
#      README asks a newcomer to have) from the host's own Debian mirror;
#   2. give it the host's apt sources for bookworm, apt settings, certificate authorities and
#      npm settings, so that the same registries answer the same way (nothing else of the
#      host's: not its Node, not its Python packages, not its tools);
#   3. clone the committed HEAD of this checkout into it (uncommitted changes are not tested);
#   4. run `make test` there as root, in a mount namespace of its own (proc, sys and dev bound
#      in it vanish with it), with the host's environment cut down to what a login has;
#   5. remove the root, whatever happened.
#
# Needs root (debootstrap, chroot, unshare). FRESH_ROOT_DIR (default /var/tmp) is where the root
# goes: about 3 GiB. FRESH_KEEP=1 keeps it for a look afterwards; FRESH_TARGET runs another make
# target than test there (build, say, to try the install steps alone). Exits with make's status.
set -eu

say() { printf 'test-fresh: %s\n' "$*"; }
die() { say "$*" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot and unshare need it)"
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse HEAD)
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }

if ! command -v debootstrap >/dev/null 2>&1; then
	say "installing debootstrap"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends debootstrap >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends debootstrap >/dev/null; }
fi

# The host's mirror of the main archive: the first URI of a bookworm source, one-line or deb822.
host_mirror() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" && $0 ~ / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN { RS = "" } /Suites:[^\n]*bookworm( |\n|$)/ && !/debian-security/ {
			if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { s = substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", s); print s; exit } }' "$f"
	done
}
mirror=$(host_mirror | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

base=${FRESH_ROOT_DIR:-/var/tmp}
root=$(mktemp -d "$base/relay-fresh.XXXXXX")
chmod 755 "$root" # it becomes /: the tests' unprivileged users (PostgreSQL's) must get through it
cleanup() {
	status=$?
	# Anything the run left behind inside the root (a server a test did not stop) goes first.
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
	done
	if [ "${FRESH_KEEP:-0}" = 1 ]; then
		say "kept the root in $root"
	else
		rm -rf --one-file-system "$root"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "a fresh Debian 12 root in $root, from $mirror"
if ! debootstrap --variant=minbase --include=git,make,ca-certificates bookworm "$root" "$mirror" \
	>"$root.debootstrap.log" 2>&1; then
	tail -n 20 "$root.debootstrap.log" >&2
	rm -f "$root.debootstrap.log"
	die "debootstrap failed"
fi
rm -f "$root.debootstrap.log"
say "root made in $(elapsed) s"

# The host's apt sources for bookworm only: a third-party repository the host has (a newer Node,
# say) is exactly what a newcomer's machine lacks.
rm -f "$root/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && grep -q bookworm "$f" && cp "$f" "$root$f"
done
for f in /etc/apt/apt.conf.d/*; do
	[ -f "$f" ] && [ ! -e "$root$f" ] && cp "$f" "$root$f"
done
# Certificate authorities the host trusts beyond Debian's (a proxy's, a company's).
if [ -d /usr/local/share/ca-certificates ]; then
	cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the root"
fi
# npm's settings (registry, cafile) from wherever the host keeps them, as Debian's npm reads them.
for f in /etc/npmrc /usr/etc/npmrc /usr/local/etc/npmrc "${HOME:-/root}/.npmrc"; do
	[ -f "$f" ] && { cat "$f"; echo; } >>"$root/etc/npmrc"
done
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
# An installed system has its package lists; debootstrap fetched only the main suite's.
chroot "$root" apt-get update -q -o APT::Sandbox::User=root >/dev/null || die "apt-get update failed in the root"

git clone -q "$repo" "$root/root/relay"
git -C "$root/root/relay" checkout -q "$commit"
target=${FRESH_TARGET:-test}
say "cloned $commit; running make $target in the root (a newcomer's first run installs the packages)"

# The environment of a login on that machine, plus the host's certificate and proxy variables
# whose files the root has.
set -- HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
	TERM="${TERM:-dumb}" CI="${CI:-}"
for v in SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO \
	http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	eval "value=\${$v:-}"
	[ -n "$value" ] || continue
	case $v in
	*proxy | *PROXY) set -- "$@" "$v=$value" ;;
	*) [ -e "$root$value" ] && set -- "$@" "$v=$value" ;;
	esac
done

status=0
FRESH_TARGET_IN=$target
export FRESH_TARGET_IN
unshare --mount --propagation private sh -c '
	root=$1; shift
	mount -t proc proc "$root/proc"
	mount --rbind /sys "$root/sys"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
	exec chroot "$root" /usr/bin/env -i "$@" sh -c "cd /root/relay && make $FRESH_TARGET_IN"
' sh "$root" "$@" || status=$?

if [ "$status" -eq 0 ]; then
	say "make $target passed in the fresh root; $(elapsed) s in all"
else
	say "make $target FAILED in the fresh root (status $status); $(elapsed) s in all"
fi
exit "$status"

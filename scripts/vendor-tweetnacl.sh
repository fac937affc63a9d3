#!/bin/sh
# Re-creates web/app/vendor/tweetnacl/ from the npm registry and checks it.
#
# The web client takes X25519 and NaCl's crypto_box_beforenm from tweetnacl
# (docs/web.md, "End-to-end encryption"). Its two files are committed, not
# fetched at build time: relayd embeds web/ into its binary (web/embed.c), and
# that build, like a Debian package build, runs offline and without npm. This
# script is where the committed copy comes from and how to check it: it fetches
# the pinned tarball with npm's own client, checks the registry's sha512
# integrity, and checks the two extracted files against the SHA-256 sums below
# (tests/browser/unit/crypto.test.js checks the committed files against the same
# sums). `--check` only compares, with no network.
set -eu

VERSION=1.0.3
INTEGRITY=sha512-6rt+RN7aOi1nGMyC4Xa5DdYiukl2UWCbcJft7YhxReBGQD7OAM8Pbxw6YMo4r2diNEA8FEmu32YOn9rhaiE5yw==
SUMS="6bcd37a3b20dce913f82d4b23e4e2b661058b4b953df8a3f8c45d56ac4f72447  nacl-fast.js
88d9b4eb60579c191ec391ca04c16130572d7eedc4a86daa58bf28c6e14c9bcd  LICENSE"

here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/web/app/vendor/tweetnacl"

if [ "${1:-}" = "--check" ]; then
	cd "$dest" && echo "$SUMS" | sha256sum -c -
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "tweetnacl@$VERSION" >/dev/null
got="sha512-$(openssl dgst -sha512 -binary "tweetnacl-$VERSION.tgz" | base64 -w0)"
if [ "$got" != "$INTEGRITY" ]; then
	echo "vendor-tweetnacl: the tarball's integrity is $got, expected $INTEGRITY" >&2
	exit 1
fi
tar xzf "tweetnacl-$VERSION.tgz" package/nacl-fast.js package/LICENSE
(cd package && echo "$SUMS" | sha256sum -c -)
mkdir -p "$dest"
cp package/nacl-fast.js package/LICENSE "$dest/"
echo "vendor-tweetnacl: tweetnacl $VERSION in $dest"

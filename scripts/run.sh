#!/bin/sh
# `make run`: starts relayd on its embedded default (SQLite in ./data, listening
# on 127.0.0.1:8080) after a short greeting: the relay's address and a user
# token for a local user, as two export lines the README's tour goes on with.
set -eu
RELAYD=${1:-build/relayd}
DATA=${RELAY_DATA:-data}
USER_ID=${RELAY_LOCAL_USER:-local}
LISTEN=${RELAY_LISTEN:-127.0.0.1:8080}
PUBLIC_URL=${RELAY_PUBLIC_URL:-}
TLS_CERT=${RELAY_TLS_CERT:-}
prev=
shift || true
for arg in "$@"; do
	case $prev$arg in
	--listen=*) LISTEN=${arg#--listen=} ;;
	--listen*) LISTEN=$arg ;;
	--public-url=*) PUBLIC_URL=${arg#--public-url=} ;;
	--public-url*) PUBLIC_URL=$arg ;;
	--tls-cert=*) TLS_CERT=${arg#--tls-cert=} ;;
	--tls-cert*) TLS_CERT=$arg ;;
	esac
	case $arg in
	--listen | --public-url | --tls-cert) prev=$arg ;;
	*) prev= ;;
	esac
done

# A port already taken is the usual first stumble: say so before anything else, and how to pick another.
if python3 - "$LISTEN" <<'PY'
import socket, sys
host, _, port = sys.argv[1].rpartition(":")
host = host.strip("[]") or "127.0.0.1"
try:
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.bind((host, int(port)))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
then
	cat >&2 <<MSG
make run: $LISTEN is already in use (another relayd, or another program).
Pick another address with RELAY_LISTEN, or --listen after the relayd binary:

  RELAY_LISTEN=127.0.0.1:8081 make run
  $RELAYD --listen 127.0.0.1:8081 --data $DATA
MSG
	exit 1
fi

# The address clients use, as relayd itself derives it (--public-url, else http(s)://LISTEN).
if [ -n "$PUBLIC_URL" ]; then
	url=${PUBLIC_URL%/}
elif [ -n "$TLS_CERT" ]; then
	url=https://$LISTEN
else
	url=http://$LISTEN
fi

# A first token creates and migrates the store: those log lines are for when it fails, not for a greeting.
errors=$(mktemp)
if ! token=$("$RELAYD" token "$USER_ID" --data "$DATA" 2>"$errors"); then
	cat "$errors" >&2
	rm -f "$errors"
	echo "make run: $RELAYD token could not make a user token (above: why)" >&2
	exit 1
fi
rm -f "$errors"
cat <<MSG

Starting relayd at $url with its data in $DATA.
In another terminal, at the top of this repository, the README's tour goes on with:

  export RELAY=$url
  export TOKEN=$token

  build/relay login --server "\$RELAY" --token "\$TOKEN"

TOKEN signs in the local user '$USER_ID' for 30 days (another user's: '$RELAYD token NAME --data $DATA').

MSG
exec "$RELAYD" --data "$DATA" "$@"

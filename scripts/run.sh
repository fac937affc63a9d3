#!/bin/sh
# `make run`: starts relayd on its embedded default (SQLite in ./data, listening
# on 127.0.0.1:8080) after printing a user token for a local user.
set -eu
RELAYD=${1:-build/relayd}
DATA=${RELAY_DATA:-data}
USER_ID=${RELAY_LOCAL_USER:-local}
LISTEN=${RELAY_LISTEN:-127.0.0.1:8080}
prev=
shift || true
for arg in "$@"; do
	case $prev$arg in
	--listen=*) LISTEN=${arg#--listen=} ;;
	--listen*) LISTEN=$arg ;;
	esac
	prev=$([ "$arg" = --listen ] && echo --listen || true)
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

token=$("$RELAYD" token "$USER_ID" --data "$DATA" | tail -n 1)
cat <<MSG
A user token for the local user '$USER_ID' (valid 30 days; make another with
'$RELAYD token NAME --data $DATA'):

  export TOKEN=$token

MSG
exec "$RELAYD" --data "$DATA" "$@"

#!/bin/sh
# `make run`: starts relayd on its embedded default (SQLite in ./data, listening
# on 127.0.0.1:8080) after printing a user token for a local user.
set -eu
RELAYD=${1:-build/relayd}
DATA=${RELAY_DATA:-data}
USER_ID=${RELAY_LOCAL_USER:-local}

token=$("$RELAYD" token "$USER_ID" --data "$DATA" | tail -n 1)
cat <<MSG
A user token for the local user '$USER_ID' (valid 30 days; make another with
'$RELAYD token NAME --data $DATA'):

  export TOKEN=$token

MSG
shift || true
exec "$RELAYD" --data "$DATA" "$@"

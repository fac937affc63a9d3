#!/bin/sh
# `make run`'s build: the programs of the README's tour and nothing else (no tests, no fuzzers), with
# the compiler's lines kept in BUILD/run-build.log and shown only when the build fails. A first build
# takes about a minute on two cores, so it says how far it is: on a terminal one line that moves
# ("[ 45%] building relayd (1 of 3): src/relay/hub.c"), elsewhere a line at each tenth of the way,
# so that a log or a test sees it move too.
#
#   scripts/run-build.sh BUILD JOBS TARGET...
set -u
BUILD=$1
JOBS=$2
shift 2
LOG=$BUILD/run-build.log
STATUS=$BUILD/run-build.status
names=$(echo "$@" | sed 's/ \([^ ]*\)$/ and \1/; s/ \([^ ]*\) and/, \1 and/g')
if [ -t 1 ]; then tty=1; else tty=0; fi
started=$(date +%s)

echo "building $names (log: $LOG)"
: >"$LOG"
# cmake counts each target's percentage from 0 to 100, so the targets are built one after the other,
# each named in the line with its place among them.
n=0
for target in "$@"; do
	n=$((n + 1))
	# The pipe hides cmake's exit status from sh (no pipefail in POSIX sh): it goes through a file.
	rm -f "$STATUS"
	{ cmake --build "$BUILD" -j"$JOBS" --target "$target" 2>&1; echo $? >"$STATUS"; } | tee -a "$LOG" | {
		shown=-10
		while IFS= read -r line; do
			# Makefiles say "[ 45%] Building C object ...dir/hub.c.o"; Ninja "[12/140] Building C object ...".
			percent=$(printf '%s\n' "$line" | sed -n 's/^\[ *\([0-9]*\)%\].*/\1/p; s/^\[\([0-9]*\)\/\([0-9]*\)\].*/\1 \2/p')
			case $percent in
			*" "*) percent=$((${percent% *} * 100 / ${percent#* })) ;;
			"") continue ;;
			esac
			what=$(printf '%s\n' "$line" | sed -n 's/.*Building C object .*\.dir\/\(.*\)\.o$/\1/p')
			if [ $tty = 1 ]; then
				printf '\r\033[K[%3d%%] building %s (%d of %d)%s' "$percent" "$target" $n $# "${what:+: $what}"
			elif [ $((percent - shown)) -ge 10 ]; then
				printf '[%3d%%] building %s (%d of %d)%s\n' "$percent" "$target" $n $# "${what:+: $what}"
				shown=$percent
			fi
		done
		if [ $tty = 1 ]; then printf '\r\033[K'; fi
	}
	result=$(cat "$STATUS" 2>/dev/null || echo 1)
	[ "$result" = 0 ] || break
done
rm -f "$STATUS"
if [ "$result" != 0 ]; then
	tail -n 30 "$LOG"
	echo "the build failed: the whole log is $LOG" >&2
	exit 1
fi
echo "built in $(( $(date +%s) - started )) s"

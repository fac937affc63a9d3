#!/bin/sh
# Runs the libFuzzer targets of a fuzz build (make fuzz; docs/operations.md "Fuzzing") one after the other,
# each for a fixed time, and prints a table at the end:
#
#   scripts/fuzz.sh BUILD SECONDS [TARGET...]     TARGET: a name of tests/fuzz/corpus/ (all when none)
#
# Each target starts from its kept corpus (tests/fuzz/corpus/NAME) and its regression inputs
# (tests/fuzz/regress/NAME); what it finds goes to a scratch folder, and only the inputs that add coverage
# to the kept corpus are merged into it afterwards (libFuzzer -merge=1), so the corpora in the repository
# grow with coverage, not with time. An input that crashes, leaks, times out or runs out of memory is
# copied to tests/fuzz/regress/NAME/, which ctest replays (tests/fuzz/replay.c): it fails until the bug is
# fixed. The exit status is 1 when any target found one. (A timeout or slow-unit input that ends in time
# when run again alone was a busy machine, not a hang: it is reported and not kept.)
#
# The runs are niced (FUZZ_NICE, 19 by default): the fuzzers take a whole core each while they run.
set -u

if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD SECONDS [TARGET...]" >&2
	exit 2
fi
build=$1
seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
nice_level=${FUZZ_NICE:-19}

if [ $# -eq 0 ]; then
	set -- $(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/relay-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT INT TERM
rows=""
failed=0

count() {
	find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l
}

for name in "$@"; do
	bin=$build/fuzz_$name
	kept=$root/tests/fuzz/corpus/$name
	regress=$root/tests/fuzz/regress/$name
	work=$scratch/$name
	if [ ! -x "$bin" ]; then
		echo "fuzz: no target $bin" >&2
		failed=1
		continue
	fi
	mkdir -p "$work/new" "$work/artifacts" "$kept"
	seeds="$kept"
	[ -d "$regress" ] && seeds="$seeds $regress"
	before=$(count "$kept")
	echo "fuzzing $name for ${seconds}s ($before inputs kept)"
	# The first folder takes what the run finds; the kept corpus and the regression inputs are read only.
	# shellcheck disable=SC2086
	nice -n "$nice_level" "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/new" $seeds >"$work/log" 2>&1
	status=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
	# libFuzzer's -timeout and its slow-unit report are wall-clock time: on a busy machine a niced run can be
	# kept off the CPU past them. Such an input is run once more, alone; one that then ends in time was the
	# machine, not the code: it is reported, not kept (a timeout still stopped the run there, so its time is
	# shorter than asked).
	for artifact in "$work/artifacts"/timeout-* "$work/artifacts"/slow-unit-*; do
		[ -e "$artifact" ] || continue
		if "$bin" -runs=1 -timeout=10 -rss_limit_mb=2048 "$artifact" >"$work/rerun.log" 2>&1; then
			echo "fuzz: $name: $(basename "$artifact") ends in time when run alone ($(sed -n 's/^Executed .* in //p' "$work/rerun.log")): the machine was busy; not kept" >&2
			rm -f "$artifact"
			case $(basename "$artifact") in
			timeout-*)
				status=0
				execs="${execs:-?} (stopped by a busy machine)"
				;;
			esac
		fi
	done
	found=$(count "$work/artifacts")
	if [ "$found" -gt 0 ]; then
		mkdir -p "$regress"
		cp "$work/artifacts"/* "$regress/"
		echo "fuzz: $name: $(ls "$work/artifacts" | tr '\n' ' ')copied to tests/fuzz/regress/$name/; the run's end:" >&2
		tail -n 40 "$work/log" >&2
		failed=1
	elif [ "$status" -ne 0 ]; then
		echo "fuzz: $name exited with $status and left no input; the run's end:" >&2
		tail -n 20 "$work/log" >&2
		found="exit $status"
		failed=1
	fi
	if [ "$(count "$work/new")" -gt 0 ]; then
		nice -n "$nice_level" "$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 "$kept" "$work/new" \
			>"$work/merge.log" 2>&1 || {
			echo "fuzz: merging into tests/fuzz/corpus/$name failed; the merge's end:" >&2
			tail -n 20 "$work/merge.log" >&2
			failed=1
		}
	fi
	after=$(count "$kept")
	rows="$rows$(printf '%-20s %8s %12s %10s %8s' "$name" "$seconds" "${execs:-?}" "$((after - before))" "$found")
"
done

echo
printf '%-20s %8s %12s %10s %8s\n' target seconds execs new-files crashes
printf '%s' "$rows"
exit $failed

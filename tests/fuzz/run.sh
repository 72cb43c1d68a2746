#!/bin/sh
# Replays the committed corpus through the job_build fuzzer, then fuzzes a
# scratch copy of it for a bounded time; fails on any crash, leak, UB or
# violated invariant. Usage: sh tests/fuzz/run.sh FUZZER SECONDS (0: replay only)
set -eu
BIN=$1 SECS=$2
DIR=$(dirname "$0")
ART=build/fuzz/artifacts
mkdir -p "$ART"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

# Each seed once, no mutation: a seed that fails is a regression.
echo "fuzz: replaying $(ls "$DIR/corpus" | wc -l) seeds"
if ! "$BIN" -artifact_prefix="$ART/" "$DIR"/corpus/* >build/fuzz/replay.log 2>&1; then
	cat build/fuzz/replay.log >&2
	echo "fuzz: a committed seed fails" >&2
	exit 1
fi
[ "$SECS" -gt 0 ] || exit 0

# libFuzzer adds what it finds to its corpus directory: a copy keeps the
# committed seeds as they are.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-fuzz.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
cp "$DIR"/corpus/* "$TMP/"
echo "fuzz: fuzzing for ${SECS}s; failing inputs go to $ART/"
"$BIN" -max_total_time="$SECS" -max_len=65536 -timeout=20 -rss_limit_mb=2048 \
	-dict="$DIR/json.dict" -artifact_prefix="$ART/" -print_final_stats=1 "$TMP"

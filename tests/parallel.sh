#!/usr/bin/env bash
# make test's suites that need real servers, run by JOBS workers at once.
# Each worker is its own tests/services.sh run (its own Postgres, Redis,
# ports and TEST_DIR) and takes the next item from one queue until none is
# left, so the suites' waits on servers, relays and workers overlap. Each
# item's output is printed whole when it ends.
#
#   parallel.sh JOBS ITEM...     (STAGEDRAIN_BIN names the relay)
#
# An ITEM is check:PROGRAM, each suite PROGRAM --list names, run on the
# worker's servers one after another (as they share them in one run); or a
# script (a client library's tests/run, tests/doc_test.sh), run on servers of
# its own, which it sets up as it needs. The queue takes the scripts first,
# then the longest suites; a suite the list below does not name goes last.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$1
shift

# Longest first (seconds alone on a two-core machine, roughly 70 down to 10).
longest=(routes_e2e http tls release trouble guarantees sentinel sentinel_wait sentinel_start sentinel_tls
	routed status once e2e stop startup activejob_e2e security xmin cursor capped_e2e)

work=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-parallel.XXXXXX")
trap 'rm -rf "$work"' EXIT
for item in "$@"; do
	if [ "${item#check:}" = "$item" ]; then echo "run $item -"; fi
done >"$work/queue"
for item in "$@"; do
	prog=${item#check:}
	[ "$prog" != "$item" ] || continue
	all=$("$prog" --list)
	for s in "${longest[@]}"; do grep -qx "$s" <<<"$all" && echo "check $prog $s"; done
	grep -vxF -f <(printf '%s\n' "${longest[@]}") <<<"$all" | sed "s|^|check $prog |" || true
done >>"$work/queue"
echo 0 >"$work/next"

# The queue's next line, or nothing, under a lock.
take() {
	local n
	exec 9>"$work/lock"
	flock 9
	n=$(($(cat "$work/next") + 1))
	echo "$n" >"$work/next"
	flock -u 9
	sed -n "${n}p" "$work/queue"
}

# run check PROGRAM SUITE: on the worker's servers; run run SCRIPT -: on its own.
run() {
	if [ "$1" = check ]; then
		"$2" "$3"
	else
		bash tests/services.sh run bash "$2"
	fi
}

worker() {
	local kind what name label start rc
	while read -r kind what name < <(take) && [ -n "$kind" ]; do
		label=$([ "$kind" = check ] && echo "$name" || echo "$what")
		start=$(date +%s)
		rc=0
		run "$kind" "$what" "$name" >"$work/$1.out" 2>&1 || rc=$?
		echo "$label $rc $(($(date +%s) - start))" >>"$work/done"
		if [ "$rc" -ne 0 ]; then cp "$work/$1.out" "$work/failed.${label//\//_}"; fi
		{
			flock 8
			echo "== $label ($(($(date +%s) - start)) s, worker $1)"
			cat "$work/$1.out"
		} 8>>"$work/print.lock"
	done
}

export -f take run worker
export work
pids=()
for w in $(seq 1 "$jobs"); do
	bash tests/services.sh run bash -c "worker $w" &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done

total=$(wc -l <"$work/queue")
touch "$work/done"
ran=$(wc -l <"$work/done")
bad=$(awk '$2 != 0 { print $1 }' "$work/done" | tr '\n' ' ')
slowest=$(sort -k3 -nr "$work/done" | head -n 3 | awk '{ printf " %s %ss", $1, $3 }')
echo "parallel: $ran of $total ran in $jobs workers; slowest:$slowest"
if [ "$ran" -ne "$total" ] || [ -n "$bad" ] || [ "$failed" -ne 0 ]; then
	# Again at the end, so a log's tail (CI shows only that) holds the cause.
	for f in "$work"/failed.*; do
		[ -e "$f" ] || continue
		echo "== FAILED ${f##*/failed.}: its last lines again"
		grep -v '^tests/harness.c:[0-9]*:S' "$f" | tail -n 40
	done
	echo "parallel: FAILED: ${bad:-a worker whose servers did not start or stop}" >&2
	exit 1
fi

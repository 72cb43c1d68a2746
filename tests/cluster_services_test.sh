#!/usr/bin/env bash
# A check of services.sh's cluster verbs, by hand (not part of make test; it
# takes about ten seconds), with the time each took:
#
#   bash tests/services.sh run bash tests/cluster_services_test.sh [no-coverage]
#
# Keys on three hash tags, a reshard of 100 slots, one slot moved with its keys
# while clients get ASK, a master SIGKILLed (writes to another master counted
# meanwhile: refused with CLUSTERDOWN until the promotion unless no-coverage),
# revived as a replica, and no server left after cluster-stop.
set -euo pipefail

: "${TEST_DIR:?run under tests/services.sh run}"
S=$TEST_SERVICES
dir=$TEST_DIR

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }
sh_() { bash "$S" "$@"; }
fail() {
	echo "cluster_services_test: $*" >&2
	exit 1
}

t=$(now)
sh_ cluster-start "$dir" "${1:-}"
echo "cluster-start: $(since "$t")"
p1=$(cat "$dir/cluster-n1.port")
slot_of() { redis-cli -p "$p1" cluster keyslot "$1"; }

for q in q1 q2 q3; do
	redis-cli -c -p "$p1" set "{$q}:a" "v$q" >/dev/null
	m=$(sh_ cluster-master-of "$dir" "$(slot_of "{$q}:a")")
	[ "$(redis-cli -p "$m" get "{$q}:a")" = "v$q" ] || fail "{$q}:a is not on $m, the master of its slot"
done

from=$(sh_ cluster-master-of "$dir" 0)
to=$(sh_ cluster-master-of "$dir" 16383)
t=$(now)
sh_ cluster-reshard "$dir" "$from" "$to" 100
echo "cluster-reshard of 100 slots: $(since "$t")"
[ "$(sh_ cluster-master-of "$dir" 99)" = "$to" ] || fail "slot 99 did not move from $from to $to"
[ "$(sh_ cluster-master-of "$dir" 100)" = "$from" ] || fail "slot 100 moved from $from"

# {q2}'s slot with 51 keys, moved 10 at a time, 300 ms apart.
slot=$(slot_of '{q2}:a')
src=$(sh_ cluster-master-of "$dir" "$slot")
for i in $(seq 1 50); do redis-cli -c -p "$p1" rpush "{q2}:l$i" x >/dev/null; done
dst=$from
[ "$dst" != "$src" ] || dst=$to
t=$(now)
CLUSTER_MIGRATE_PAUSE_MS=300 bash "$S" cluster-move-slot "$dir" "$slot" "$dst" &
mover=$!
sleep 0.5
[[ "$(redis-cli -p "$src" llen '{q2}:l50')" == "ASK $slot 127.0.0.1:$dst" ]] ||
	fail "no ASK for a moved key of the half-moved slot $slot"
wait "$mover"
echo "cluster-move-slot of 51 keys, 300 ms between batches: $(since "$t")"
[ "$(sh_ cluster-master-of "$dir" "$slot")" = "$dst" ] || fail "slot $slot is not on $dst"
[ "$(redis-cli -p "$dst" cluster countkeysinslot "$slot")" = 51 ] || fail "slot $slot lost keys"

# {q3}'s master killed; meanwhile a write to {q1}'s master every 50 ms.
victim=$(sh_ cluster-master-of "$dir" "$(slot_of '{q3}:a')")
other=$(sh_ cluster-master-of "$dir" "$(slot_of '{q1}:a')")
[ "$other" != "$victim" ] || fail "{q1} and {q3} share master $other"
(
	ok=0 refused=0 end=$((SECONDS + 6))
	while [ "$SECONDS" -lt "$end" ]; do
		if [[ "$(redis-cli -p "$other" incr '{q1}:n' 2>&1)" =~ ^[0-9]+$ ]]; then
			ok=$((ok + 1))
		else
			refused=$((refused + 1))
		fi
		sleep 0.05
	done
	echo "writes to the other master meanwhile: $ok done, $refused refused (about 60 ms apart)"
) &
writer=$!
sleep 0.3
t=$(now)
sh_ cluster-kill "$dir" "$victim"
promoted=$(sh_ cluster-wait-promoted "$dir" "$victim")
echo "cluster-kill to cluster-wait-promoted ($promoted in place of $victim): $(since "$t")"
wait "$writer"
[ "$(redis-cli -p "$promoted" get '{q3}:a')" = vq3 ] || fail "{q3}:a is not on $promoted"
t=$(now)
sh_ cluster-revive "$dir" "$victim"
echo "cluster-revive: $(since "$t")"
[[ "$(redis-cli -p "$victim" role)" == slave* ]] || fail "$victim is not a replica"

pids=$(cat "$dir"/cluster/n*.pid)
t=$(now)
sh_ cluster-stop "$dir"
echo "cluster-stop: $(since "$t")"
for pid in $pids; do
	state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || continue
	[ "$state" = Z ] || fail "redis-server $pid still runs"
done
echo "ok"

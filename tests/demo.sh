#!/usr/bin/env bash
# `make demo`: throwaway Postgres and Redis, a relay, jobs staged in transactions,
# and what arrives in Redis. Everything is stopped and removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${STAGEDRAIN_BIN:-$here/../bin/stagedrain}
dir=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-demo.XXXXXX")
relay=""
cleanup() {
	[ -z "$relay" ] || { kill "$relay" 2>/dev/null || true; wait "$relay" 2>/dev/null || true; }
	bash "$here/services.sh" stop "$dir"
	rm -rf "$dir"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting a throwaway PostgreSQL and Redis in $dir"
bash "$here/services.sh" start "$dir"
# shellcheck disable=SC1091
. "$dir/env"
export STAGEDRAIN_PG_URL=$TEST_PG_URL STAGEDRAIN_REDIS_URL=$TEST_REDIS_URL
redis() { redis-cli -p "$TEST_REDIS_PORT" "$@"; }
sql() { psql -X -q -v ON_ERROR_STOP=1 "$TEST_PG_URL" "$@"; }

say "stagedrain migrate"
"$bin" migrate

say "starting the relay, with its HTTP endpoint on a free port (its log lines follow)"
"$bin" --poll-interval 50ms --http-addr "${DEMO_HTTP_ADDR:-127.0.0.1:0}" --watch-interval 500ms \
	2> >(tee "$dir/relay.log" >&2) &
relay=$!
for _ in $(seq 1 100); do grep -q "serving http" "$dir/relay.log" 2>/dev/null && break; sleep 0.1; done
http=$(grep -o 'serving http" addr=[^ ]*' "$dir/relay.log" | sed 's/.*addr=//')
sleep 0.5

say "an application stages two jobs and a scheduled one inside its transaction"
sql <<'SQL'
BEGIN;
INSERT INTO staged_jobs (queue, job_class, args) VALUES
  ('default', 'WelcomeMailer', '[42, "ada@example.com"]'),
  ('critical', 'ChargeCard', '[42, {"cents": 1999}]');
INSERT INTO staged_jobs (job_class, args, run_at)
  VALUES ('ReminderJob', '[42]', now() + interval '1 day');
\echo before COMMIT, Redis has:
\! redis-cli -p "$TEST_REDIS_PORT" llen queue:default
\! sleep 0.5
COMMIT;
SQL
sleep 0.5
echo "after COMMIT:"
for q in default critical; do echo "queue:$q"; redis lrange "queue:$q" 0 -1; done
echo "schedule:"
redis zrange schedule 0 -1 withscores
echo "queues:"
redis smembers queues

say "a transaction that rolls back stages nothing"
sql -c "BEGIN; INSERT INTO staged_jobs (job_class) VALUES ('NeverRuns'); ROLLBACK;"
sleep 0.5
echo "queue:default still holds $(redis llen queue:default) job(s)"

say "a row that cannot be a job goes to staged_jobs_dead, with the reason"
sql -c "INSERT INTO staged_jobs (job_class, args) VALUES ('Broken', '{\"not\": \"an array\"}')"
sleep 0.5
sql -c "SELECT id, job_class, reason FROM staged_jobs_dead"

say "what Prometheus scrapes: curl -s http://$http/metrics"
sleep 1.5 # the watcher reads the database every 500 ms here (--watch-interval)
curl -s "http://$http/metrics" | grep -v '^#'
echo
echo "curl http://$http/readyz: $(curl -s "http://$http/readyz")"
echo "curl http://$http/healthz: $(curl -s "http://$http/healthz")"

say "stopping the relay with SIGTERM"
kill -TERM "$relay"
wait "$relay"
relay=""

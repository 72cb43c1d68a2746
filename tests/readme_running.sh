#!/usr/bin/env bash
# The README's "Running it" block, run as written against the throwaway servers
# of tests/services.sh (their URLs put in for db, app and redis; --once added to
# the relay's line), with a job staged in between as the app's role through an
# ORM's INSERT ... RETURNING id, uuid, jid. Fails if any step fails or the job
# does not reach Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TEST_PG_URL:?run under tests/services.sh}" "${TEST_REDIS_URL:?}" "${STAGEDRAIN_BIN:?}"

hostdb=${TEST_PG_URL#postgresql://postgres@} # 127.0.0.1:PORT/postgres
block=$(awk '/^## Running it/ { f = 1 } f && /^```sh/ { b = 1; next } b && /^```/ { exit } b' README.md)
[ -n "$block" ] || { echo "readme_running: no sh block under '## Running it'" >&2; exit 1; }
block=$(printf '%s\n' "$block" | sed -e "s#@db/app#@$hostdb#g" -e "s#redis://redis:6379/0#$TEST_REDIS_URL#g" \
	-e "s#^bin/stagedrain#$STAGEDRAIN_BIN#")
relay_line=$(printf '%s\n' "$block" | grep -n "^$STAGEDRAIN_BIN --pg-url" | tail -1 | cut -d: -f1)
[ -n "$relay_line" ] || { echo "readme_running: the block does not end by running the relay" >&2; exit 1; }

psql -X -q -v ON_ERROR_STOP=1 -d "$TEST_PG_URL" -c "DROP ROLE IF EXISTS relay" \
	-c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'app') THEN CREATE ROLE app LOGIN; END IF; END \$\$"
redis-cli -u "$TEST_REDIS_URL" FLUSHDB >/dev/null

trap 'rm -f relay.pw' EXIT # the block writes the relay's password file here
printf '%s\n' "$block" | head -n $((relay_line - 1)) | bash -euo pipefail
# What ActiveRecord's create! and Django's objects.create send, as the app's role.
psql -X -q -v ON_ERROR_STOP=1 -d "postgresql://app@$hostdb" -c "INSERT INTO staged_jobs (queue, job_class, args)
	VALUES ('default', 'ReadmeJob', '[1]') RETURNING id, uuid, jid" >/dev/null
printf '%s\n' "$block" | sed -n "${relay_line},\$p" | sed -e '$ s/$/ --once/' | bash -euo pipefail \
	>"$TEST_DIR/readme_relay.log" 2>&1 || { cat "$TEST_DIR/readme_relay.log" >&2; exit 1; }
# Set up as the README says, the relay has nothing to warn about.
if grep -E "level=(warn|error)" "$TEST_DIR/readme_relay.log" >&2; then
	echo "readme_running: FAIL: the relay warned (above)" >&2
	exit 1
fi

n=$(redis-cli -u "$TEST_REDIS_URL" LLEN queue:default)
left=$(psql -X -qAt -d "$TEST_PG_URL" -c "SELECT count(*) FROM staged_jobs")
psql -X -q -d "$TEST_PG_URL" -c "DROP OWNED BY relay" -c "DROP ROLE relay" -c "DROP ROLE app" >/dev/null
if [ "$n" != 1 ] || [ "$left" != 0 ]; then
	echo "readme_running: FAIL: queue:default holds $n jobs (want 1), $left rows left staged (want 0)" >&2
	exit 1
fi
echo "readme_running: the README's Running it block ran as written; 1 passed, 0 failed"

#!/usr/bin/env bash
# Under tests/services.sh: each client library's own tests (clients/*/test*/run),
# on one pair of throwaway servers.
# Each step resets what it uses; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
for run in clients/*/test/run clients/*/tests/run; do
	[ -f "$run" ] || continue
	echo "== $run"
	bash "$run"
done

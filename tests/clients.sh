#!/usr/bin/env bash
# Under tests/services.sh: the README's "Running it" block, then each client
# library's own tests (clients/*/test*/run), on one pair of throwaway servers.
# Each step resets what it uses; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/readme_running.sh
for run in clients/*/test/run clients/*/tests/run; do
	[ -f "$run" ] || continue
	echo "== $run"
	bash "$run"
done

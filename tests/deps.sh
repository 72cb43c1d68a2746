#!/bin/sh
# Installs the Debian packages stagedrain builds, tests and demos with, if any is
# missing. apt-get needs root; without it, says what to install and fails.
set -eu
PKGS="gcc make pkg-config libc6-dev libpq-dev libhiredis-dev libjansson-dev libssl-dev check
      postgresql redis-server redis-tools ruby-sidekiq ruby-activejob ruby-rails ruby-pg python3-celery python3-redis
      python3-django python3-psycopg2 python3-sqlalchemy python3-pip python3-venv
      php-cli php-laravel-framework php-redis php-pgsql composer phpunit
      procps util-linux
      openssl libmicrohttpd-dev curl python3 python3-yaml mandoc man-db shellcheck prometheus"

# The Node client's tests (clients/node) need Node.js 20 or later with npm. A
# node already on PATH (NodeSource's nodejs, say) is used as it is; without
# one, Debian's nodejs and npm are installed (Debian 12's nodejs is 18,
# which node_deps then refuses: install Node.js 20, e.g. NodeSource's).
node_wanted=0
# Arguments name other packages to install instead (make fuzz: clang, ...).
if [ $# -eq 0 ]; then
	node_wanted=1
	command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
else
	PKGS=$*
fi

# clients/node/node_modules from its lockfile (npm ci), unless it is as new
# as package-lock.json already (npm writes node_modules/.package-lock.json).
node_deps() {
	dir=$(cd "$(dirname "$0")/.." && pwd)/clients/node
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	if [ "$major" -lt 20 ]; then
		echo "deps: clients/node needs Node.js 20 or later; $(command -v node || echo node) is $(node --version 2>/dev/null || echo missing)" >&2
		exit 1
	fi
	if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
		[ -n "$(find "$dir/package-lock.json" -newer "$dir/node_modules/.package-lock.json")" ]; then
		echo "deps: npm ci in clients/node"
		(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
	fi
}

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	[ "$node_wanted" = 0 ] || node_deps
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$missing (run 'sudo make deps')" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
# Debian starts the packaged servers; the tests and the demo start their own.
# prometheus is there for its promtool (the metrics test checks a scrape with it).
for s in postgresql redis-server prometheus; do
	if command -v systemctl >/dev/null 2>&1; then systemctl stop "$s" 2>/dev/null || true; fi
	service "$s" stop >/dev/null 2>&1 || true
done
[ "$node_wanted" = 0 ] || node_deps

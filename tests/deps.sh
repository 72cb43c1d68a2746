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

# Arguments name other packages to install instead (make fuzz: clang, ...).
[ $# -eq 0 ] || PKGS=$*
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
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

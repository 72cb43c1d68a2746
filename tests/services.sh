#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis for tests and the demo, in a temp directory on
# loopback, stopped by PID. Never touches a server that was already running.
#
#   services.sh run CMD...        start both, run CMD with TEST_* set, stop both
#   services.sh start DIR         start both in DIR, write DIR/env
#   services.sh stop DIR          stop both
#   services.sh redis-stop DIR    stop Redis only (it keeps its data: AOF, fsync always)
#   services.sh redis-start DIR   start it again on the same port
set -euo pipefail

pgbin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || { echo "services.sh: no PostgreSQL server found (apt-get install postgresql)" >&2; exit 1; }
	echo "$d"
}

# Postgres refuses to run as root; the Debian package's postgres user will do.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	echo "services.sh: no free port found" >&2
	exit 1
}

redis_start() {
	local dir=$1 port
	port=$(cat "$dir/redis.port")
	redis-server --bind 127.0.0.1 --port "$port" --unixsocket "$dir/redis.sock" \
		--unixsocketperm 700 --dir "$dir/redis" --daemonize yes \
		--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
		--appendonly yes --appendfsync always --save '' >/dev/null
	for _ in $(seq 1 100); do
		if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then return; fi
		sleep 0.1
	done
	echo "services.sh: redis did not start on port $port:" >&2
	tail -n 5 "$dir/redis.log" >&2 || true
	return 1
}

redis_stop() {
	local dir=$1 pid
	[ -f "$dir/redis.pid" ] || return 0
	pid=$(cat "$dir/redis.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$dir/redis.pid"; return 0; }
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$dir/redis.pid"
}

pg_start() {
	local dir=$1 bin port
	bin=$(pgbin)
	port=$(free_port)
	mkdir -p "$dir/pg" "$dir/pgrun"
	[ "$(id -u)" != 0 ] || chown postgres: "$dir/pg" "$dir/pgrun"
	as_pg "$bin/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	as_pg "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pgrun/pg.log" -w -t 30 start \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir/pgrun -c fsync=off -c max_connections=50" \
		>/dev/null || { cat "$dir/pgrun/pg.log" >&2; exit 1; }
	echo "$port" >"$dir/pg.port"
}

pg_stop() {
	local dir=$1 pid
	[ -f "$dir/pg/postmaster.pid" ] || return 0
	pid=$(head -n 1 "$dir/pg/postmaster.pid")
	kill -INT "$pid" 2>/dev/null || true # fast shutdown
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

start() {
	local dir=$1
	chmod 755 "$dir"
	mkdir -p "$dir/redis"
	# A port found free can be taken before the server binds it: try another.
	for try in 1 2 3; do
		free_port >"$dir/redis.port"
		if redis_start "$dir"; then break; fi
		[ "$try" != 3 ] || exit 1
	done
	pg_start "$dir"
	cat >"$dir/env" <<-ENV
	export TEST_DIR=$dir
	export TEST_PG_URL=postgresql://postgres@127.0.0.1:$(cat "$dir/pg.port")/postgres
	export TEST_REDIS_URL=redis://127.0.0.1:$(cat "$dir/redis.port")/0
	export TEST_REDIS_PORT=$(cat "$dir/redis.port")
	export TEST_SERVICES="$(readlink -f "$0")"
	ENV
}

stop() {
	pg_stop "$1"
	redis_stop "$1"
}

cmd=${1:-}
shift || true
case "$cmd" in
run)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-test.XXXXXX")
	trap 'stop "$dir"; rm -rf "$dir"' EXIT
	trap 'exit 130' INT TERM
	start "$dir"
	# shellcheck disable=SC1091
	. "$dir/env"
	"$@"
	;;
start) start "$1" ;;
stop) stop "$1" ;;
redis-stop) redis_stop "$1" ;;
redis-start) redis_start "$1" ;;
*)
	sed -n '2,9p' "$0" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis for tests and the demo, in a temp directory on
# loopback, stopped by PID. Never touches a server that was already running.
#
#   services.sh run CMD...        start both, run CMD with TEST_* set, stop both
#   services.sh start DIR         start both in DIR, write DIR/env
#   services.sh stop DIR          stop both
#   services.sh redis-stop DIR    stop Redis only (it keeps its data: AOF, fsync always)
#   services.sh redis-start DIR   start it again on the same port
#   services.sh redis-start-loading DIR [US]
#                                 start it again, loading its AOF slowly (US µs per
#                                 command, default 100), and return while it answers LOADING
#   services.sh pg-restart DIR    restart Postgres (fast shutdown) on the same port
#   services.sh redis2-start DIR  a second, empty Redis (port in DIR/redis2.port)
#   services.sh pgfo-start DIR    a Postgres primary and a streaming standby of it
#                                 (ports in DIR/pgfo1.port, DIR/pgfo2.port)
#   services.sh pgfo-promote DIR  stop that primary (fast), promote the standby
#   services.sh pgfo-stop DIR     stop both; `stop` stops these extra servers too
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

# redis_start DIR [READY [EXTRA...]]: READY is the reply that counts as up
# (PONG, or LOADING for a server still reading its AOF).
redis_start() {
	local dir=$1 ready=${2:-PONG} port
	shift 2 || shift $#
	port=$(cat "$dir/redis.port")
	redis-server --bind 127.0.0.1 --port "$port" --unixsocket "$dir/redis.sock" \
		--unixsocketperm 700 --dir "$dir/redis" --daemonize yes \
		--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
		--appendonly yes --appendfsync always --save '' "$@" >/dev/null
	for _ in $(seq 1 100); do
		if redis-cli -p "$port" ping 2>/dev/null | grep -q "$ready"; then return; fi
		sleep 0.1
	done
	echo "services.sh: redis did not start on port $port:" >&2
	tail -n 5 "$dir/redis.log" >&2 || true
	return 1
}

# redis_stop DIR [NAME]: stops the Redis whose pid is in DIR/NAME.pid.
redis_stop() {
	local dir=$1 pidfile=$1/${2:-redis}.pid pid
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$pidfile"
}

# A second Redis without persistence: the primary the test Redis replicates
# from while it plays a demoted replica.
redis2_start() {
	local dir=$1 port
	mkdir -p "$dir/redis2"
	for try in 1 2 3; do
		port=$(free_port)
		redis-server --bind 127.0.0.1 --port "$port" --dir "$dir/redis2" --daemonize yes \
			--pidfile "$dir/redis2.pid" --logfile "$dir/redis2.log" --save '' \
			--appendonly no >/dev/null
		for _ in $(seq 1 50); do
			if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
				echo "$port" >"$dir/redis2.port"
				return
			fi
			sleep 0.1
		done
		redis_stop "$dir" redis2
		[ "$try" != 3 ] || { tail -n 5 "$dir/redis2.log" >&2; exit 1; }
	done
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

pg_restart() {
	local dir=$1
	# Without -o, pg_ctl restarts with the options of the last start.
	as_pg "$(pgbin)/pg_ctl" -D "$dir/pg" -l "$dir/pgrun/pg.log" -w -t 30 -m fast restart \
		>/dev/null || { tail -n 5 "$dir/pgrun/pg.log" >&2; exit 1; }
}

# A primary and a standby streaming from it, for a failover test; separate from
# the shared server so later tests keep theirs. The primary is a copy of the
# shared server (cheaper than initdb), the standby a copy of the primary.
pgfo_start() {
	local dir=$1 bin p1 p2
	bin=$(pgbin)
	# A test that ran these servers before left their (stopped) data behind.
	rm -rf "$dir/pgfo1" "$dir/pgfo2"
	mkdir -p "$dir/pgfo1" "$dir/pgfo2" "$dir/pgforun"
	chmod 700 "$dir/pgfo1" "$dir/pgfo2"
	[ "$(id -u)" != 0 ] || chown postgres: "$dir/pgfo1" "$dir/pgfo2" "$dir/pgforun"
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/pg.port")" -U postgres -D "$dir/pgfo1" \
		-X stream -c fast --no-sync >"$dir/pgfo-basebackup.log" 2>&1 ||
		{ cat "$dir/pgfo-basebackup.log" >&2; exit 1; }
	p1=$(free_port)
	as_pg "$bin/pg_ctl" -D "$dir/pgfo1" -l "$dir/pgforun/p1.log" -w -t 30 start \
		-o "-c listen_addresses=127.0.0.1 -p $p1 -k $dir/pgforun -c fsync=off -c max_connections=20" \
		>/dev/null || { cat "$dir/pgforun/p1.log" >&2; exit 1; }
	echo "$p1" >"$dir/pgfo1.port"
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres -D "$dir/pgfo2" -R -X stream \
		-c fast --no-sync >"$dir/pgfo-basebackup.log" 2>&1 || { cat "$dir/pgfo-basebackup.log" >&2; exit 1; }
	p2=$(free_port)
	as_pg "$bin/pg_ctl" -D "$dir/pgfo2" -l "$dir/pgforun/p2.log" -w -t 30 start \
		-o "-c listen_addresses=127.0.0.1 -p $p2 -k $dir/pgforun -c fsync=off -c max_connections=20" \
		>/dev/null || { cat "$dir/pgforun/p2.log" >&2; exit 1; }
	echo "$p2" >"$dir/pgfo2.port"
}

pgfo_promote() {
	local dir=$1
	pg_stop "$dir" pgfo1
	as_pg "$(pgbin)/pg_ctl" -D "$dir/pgfo2" -w -t 30 promote >/dev/null
}

# pg_stop DIR [DATADIR]: fast shutdown of the server in DIR/DATADIR (default pg).
pg_stop() {
	local dir=$1 pidfile=$1/${2:-pg}/postmaster.pid pid
	[ -f "$pidfile" ] || return 0
	pid=$(head -n 1 "$pidfile")
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
	pg_stop "$1" pgfo1
	pg_stop "$1" pgfo2
	pg_stop "$1"
	redis_stop "$1" redis2
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
redis-start-loading) redis_start "$1" LOADING --key-load-delay "${2:-100}" ;;
redis2-start) redis2_start "$1" ;;
redis2-stop) redis_stop "$1" redis2 ;;
pg-restart) pg_restart "$1" ;;
pgfo-start) pgfo_start "$1" ;;
pgfo-promote) pgfo_promote "$1" ;;
pgfo-stop)
	pg_stop "$1" pgfo1
	pg_stop "$1" pgfo2
	;;
*)
	sed -n '2,19p' "$0" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis for tests and the demo, in a temp directory on
# loopback, stopped by PID. Never touches a server that was already running.
#
#   services.sh run CMD...        start both, run CMD with TEST_* set, stop both
#   services.sh start DIR         start both in DIR, write DIR/env
#   services.sh stop DIR          stop both
#   services.sh redis-stop DIR    stop Redis only (it keeps its data: AOF, fsync always)
#   services.sh redis-start DIR   start it again on the same port
#   services.sh redis-kill DIR    SIGKILL Redis, as a crash would end it (the AOF keeps
#                                 what it acknowledged); redis-start starts it again
#   services.sh redis-start-loading DIR [US]
#                                 start it again, loading its AOF slowly (US µs per
#                                 command, default 100), and return while it answers LOADING
#   services.sh pg-restart DIR    restart Postgres (fast shutdown) on the same port
#   services.sh pg-stop DIR       stop Postgres only (fast shutdown)
#   services.sh pg-start DIR      start it again on the same port
#   services.sh redis2-start DIR  a second, empty Redis (port in DIR/redis2.port)
#   services.sh pgfo-start DIR    a Postgres primary and a streaming standby of it
#                                 (ports in DIR/pgfo1.port, DIR/pgfo2.port)
#   services.sh pgfo-promote DIR  stop that primary (fast), promote the standby
#   services.sh pgfo-stop DIR     stop both; `stop` stops these extra servers too
#   services.sh pgxm-start DIR    a Postgres primary for logical slots and prepared
#                                 transactions and a streaming standby of it with
#                                 hot_standby_feedback on (DIR/pgxm1.port, DIR/pgxm2.port)
#   services.sh pgxm-stop DIR     stop both; `stop` stops them too
#   services.sh tls-start DIR     a throwaway CA under DIR/tls and two TLS-only Redis:
#                                 DIR/tls.port (no client certificate asked) and
#                                 DIR/tlsauth.port (a client certificate required)
#   services.sh tls-stop DIR      stop both
#   services.sh sentinel-start DIR
#                                 a Redis primary (DIR/sentinel-r1.port), its replica
#                                 (DIR/sentinel-r2.port) and three sentinels
#                                 (DIR/sentinel{1,2,3}.port) watching stagedrain-test
#   services.sh sentinel-tls-start DIR
#                                 the same, every one of them on TLS only (tls-start's CA)
#   services.sh sentinel-cut DIR  the current primary stops feeding its replica
#   services.sh sentinel-kill DIR SIGKILL the current primary
#   services.sh sentinel-revive DIR
#                                 start that one again (the sentinels make it a replica)
#   services.sh sentinel-stop DIR stop them all
#   services.sh cluster-start DIR [no-coverage]
#                                 a Redis Cluster: three masters, a replica each
#                                 (ports in DIR/cluster-n{1..6}.port, seeds in
#                                 DIR/cluster.url and TEST_CLUSTER_URL in DIR/env);
#                                 no-coverage: cluster-require-full-coverage no
#   services.sh cluster-master-of DIR SLOT
#                                 print the port of the master that serves SLOT now
#   services.sh cluster-kill DIR PORT
#                                 SIGKILL that node (noting the slots it served)
#   services.sh cluster-wait-promoted DIR PORT
#                                 wait until other masters serve the killed node's
#                                 slots and the cluster is ok; print their ports
#   services.sh cluster-revive DIR PORT
#                                 start it again: it rejoins as a replica
#   services.sh cluster-reshard DIR FROM_PORT TO_PORT SLOTS
#                                 move SLOTS slots between masters (redis-cli --cluster)
#   services.sh cluster-move-slot DIR SLOT TO_PORT
#                                 move one slot and its keys by hand, in batches of
#                                 CLUSTER_MIGRATE_COUNT (10), CLUSTER_MIGRATE_PAUSE_MS
#                                 apart (0): clients get ASK meanwhile
#   services.sh cluster-stop DIR  stop them all; `stop` stops them too
#
# `run` starts no cluster (six servers are costly) unless SERVICES_CLUSTER is
# set: yes, or no-coverage as for cluster-start.
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

# A port below the kernel's ephemeral range: a client's outgoing connection
# (the relay's, a test's) can take any port inside it between our check and the
# server's bind, as one did to Postgres in CI.
free_port() {
	local p lo span
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
	span=$((lo - 10000))
	[ "$span" -ge 1000 ] || span=20000 lo=50000
	for _ in $(seq 1 50); do
		p=$((lo - 1 - (RANDOM * 32768 + RANDOM) % span))
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
	# A test that failed may have left it SIGSTOPped: the TERM waits for a CONT.
	kill "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$pidfile"
}

# redis_kill DIR: SIGKILLs the test Redis and waits until its port refuses
# connections (its sockets are closed, whoever reaps it).
redis_kill() {
	local dir=$1 pid port
	[ -f "$dir/redis.pid" ] || return 0
	pid=$(cat "$dir/redis.pid")
	port=$(cat "$dir/redis.port")
	kill -9 "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$dir/redis.pid"
}

# A second Redis without persistence: the primary the test Redis replicates
# from while it plays a demoted replica.
redis2_start() {
	local dir=$1 port
	# One a failed test never stopped would be lost to its pid file.
	redis_stop "$dir" redis2
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

# pg_listen DATADIR SOCKDIR MAXCONN PORTFILE LOG [OPTIONS]: starts the server in
# DATADIR on a free port, which goes to PORTFILE, with OPTIONS (-c name=value ...)
# besides. A port found free can be taken before the server binds it: try another.
pg_listen() {
	local data=$1 run=$2 maxconn=$3 portfile=$4 log=$5 extra=${6:-} port try
	for try in 1 2 3; do
		port=$(free_port)
		if as_pg "$(pgbin)/pg_ctl" -D "$data" -l "$log" -w -t 30 start \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $run -c fsync=off -c max_connections=$maxconn $extra" \
			>/dev/null 2>&1; then
			echo "$port" >"$portfile"
			return 0
		fi
		[ "$try" != 3 ] || { cat "$log" >&2; exit 1; }
	done
}

pg_start() {
	local dir=$1
	mkdir -p "$dir/pg" "$dir/pgrun"
	[ "$(id -u)" != 0 ] || chown postgres: "$dir/pg" "$dir/pgrun"
	as_pg "$(pgbin)/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	pg_listen "$dir/pg" "$dir/pgrun" 50 "$dir/pg.port" "$dir/pgrun/pg.log"
}

# pg_start_again DIR: the shared server, stopped by pg-stop, on its old port.
pg_start_again() {
	local dir=$1
	as_pg "$(pgbin)/pg_ctl" -D "$dir/pg" status >/dev/null 2>&1 && return 0
	as_pg "$(pgbin)/pg_ctl" -D "$dir/pg" -l "$dir/pgrun/pg.log" -w -t 30 start \
		-o "-c listen_addresses=127.0.0.1 -p $(cat "$dir/pg.port") -k $dir/pgrun -c fsync=off -c max_connections=50" \
		>/dev/null || { tail -n 5 "$dir/pgrun/pg.log" >&2; exit 1; }
}

pg_restart() {
	local dir=$1
	# Without -o, pg_ctl restarts with the options of the last start.
	as_pg "$(pgbin)/pg_ctl" -D "$dir/pg" -l "$dir/pgrun/pg.log" -w -t 30 -m fast restart \
		>/dev/null || { tail -n 5 "$dir/pgrun/pg.log" >&2; exit 1; }
}

# pg_pair_start DIR NAME MAXCONN [PRIMARY_OPTS [STANDBY_OPTS]]: a primary in
# DIR/NAME1 and a standby streaming from it in DIR/NAME2 (ports in
# DIR/NAME1.port, DIR/NAME2.port), apart from the shared server so later tests
# keep theirs. The primary is a copy of the shared server (cheaper than
# initdb), the standby a copy of the primary.
pg_pair_start() {
	local dir=$1 name=$2 maxconn=$3 primary_opts=${4:-} standby_opts=${5:-} bin p1
	local d1=$dir/${name}1 d2=$dir/${name}2 run=$dir/${name}run log=$dir/$name-basebackup.log
	bin=$(pgbin)
	# A test that ran these servers before left their (stopped) data behind.
	rm -rf "$d1" "$d2"
	mkdir -p "$d1" "$d2" "$run"
	chmod 700 "$d1" "$d2"
	[ "$(id -u)" != 0 ] || chown postgres: "$d1" "$d2" "$run"
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/pg.port")" -U postgres -D "$d1" \
		-X stream -c fast --no-sync >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
	pg_listen "$d1" "$run" "$maxconn" "$d1.port" "$run/p1.log" "$primary_opts"
	p1=$(cat "$d1.port")
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres -D "$d2" -R -X stream \
		-c fast --no-sync >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
	pg_listen "$d2" "$run" "$maxconn" "$d2.port" "$run/p2.log" "$standby_opts"
}

# For a failover test.
pgfo_start() {
	pg_pair_start "$1" pgfo 20
}

# What every xmin holder needs: a primary with wal_level=logical for a logical
# slot and max_prepared_transactions for PREPARE TRANSACTION, and a standby
# whose feedback carries its queries' xmin to the primary, every second rather
# than every ten.
PGXM_PRIMARY="-c wal_level=logical -c max_prepared_transactions=10"
PGXM_STANDBY="-c max_prepared_transactions=10 -c hot_standby_feedback=on -c wal_receiver_status_interval=1s"
PGXM_STANDBY+=" -c cluster_name=pgxm-standby" # its application_name on the primary

pgxm_start() {
	pgxm_stop "$1" # a test that failed may have left them running
	pg_pair_start "$1" pgxm 30 "$PGXM_PRIMARY" "$PGXM_STANDBY"
}

pgxm_stop() {
	pg_stop "$1" pgxm2
	pg_stop "$1" pgxm1
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

# openssl_cert DIR NAME CA SUBJECT EXT: a P-256 key DIR/NAME.key and a
# certificate for it signed by DIR/CA (two days, enough for any test run).
openssl_cert() {
	local d=$1 name=$2 ca=$3 subj=$4 ext=$5
	openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$d/$name.key" -out "$d/$name.csr" -subj "$subj" 2>/dev/null
	printf '%s\n' "$ext" >"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" -CAcreateserial \
		-days 2 -out "$d/$name.crt" -extfile "$d/$name.ext" 2>/dev/null
}

# A CA of its own (and a second, unrelated one), a server certificate for
# redis.test and 127.0.0.1 only (not localhost: the name-mismatch case), a
# client certificate.
tls_certs() {
	local d=$1/tls ca
	mkdir -p "$d"
	for ca in ca other-ca; do
		openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
			-keyout "$d/$ca.key" -out "$d/$ca.crt" -days 2 -subj "/CN=stagedrain test $ca" 2>/dev/null
	done
	openssl_cert "$d" server ca /CN=redis.test \
		"$(printf 'subjectAltName=DNS:redis.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth')"
	openssl_cert "$d" client ca /CN=stagedrain-test-client 'extendedKeyUsage=clientAuth'
}

# tls_redis DIR NAME AUTH: a Redis on a TLS port only, DIR/NAME.port; AUTH is
# its --tls-auth-clients (yes: a client certificate is required).
tls_redis() {
	local dir=$1 name=$2 auth=$3 d=$1/tls port try
	mkdir -p "$dir/$name"
	for try in 1 2 3; do
		port=$(free_port)
		redis-server --bind 127.0.0.1 --port 0 --tls-port "$port" --tls-cert-file "$d/server.crt" \
			--tls-key-file "$d/server.key" --tls-ca-cert-file "$d/ca.crt" --tls-auth-clients "$auth" \
			--dir "$dir/$name" --daemonize yes --pidfile "$dir/$name.pid" --logfile "$dir/$name.log" \
			--save '' --appendonly no >/dev/null
		for _ in $(seq 1 50); do
			if redis-cli --tls --cacert "$d/ca.crt" --cert "$d/client.crt" --key "$d/client.key" \
				-h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
				echo "$port" >"$dir/$name.port"
				return
			fi
			sleep 0.1
		done
		redis_stop "$dir" "$name"
		[ "$try" != 3 ] || { tail -n 5 "$dir/$name.log" >&2; exit 1; }
	done
}

tls_start() {
	tls_stop "$1" # a test that failed may have left them running
	tls_certs "$1"
	tls_redis "$1" tls no
	tls_redis "$1" tlsauth yes
}

tls_stop() {
	redis_stop "$1" tls
	redis_stop "$1" tlsauth
}

# Sentinel's servers: DIR/sentinel/rN (the Redis, N = 1 primary, 2 replica) and
# DIR/sentinel/sN (the sentinels). The replica logs in to its primary as the ACL
# user repl, which may replicate and nothing else: sentinel-cut switches it off
# there, so the replica stops receiving writes and cannot resync. Both Redis
# carry the user and the masteruser setting, since either may be primary after a
# failover.
SENTINEL_MASTER=stagedrain-test

# scli DIR ARGS...: redis-cli to a server of the sentinel topology in DIR, over
# TLS when sentinel-tls-start started it.
scli() {
	local dir=$1
	shift
	if [ -f "$dir/sentinel/tls" ]; then
		redis-cli --tls --cacert "$dir/tls/ca.crt" -h 127.0.0.1 "$@"
	else
		redis-cli -h 127.0.0.1 "$@"
	fi
}

# listen_conf DIR PORT: the configuration lines that listen on PORT, in clear
# or (sentinel-tls-start) on TLS only, replication over TLS too.
listen_conf() {
	local dir=$1 port=$2 t=$1/tls
	if [ ! -f "$dir/sentinel/tls" ]; then
		echo "port $port"
		return
	fi
	printf 'port 0\ntls-port %s\ntls-cert-file %s\ntls-key-file %s\n' "$port" "$t/server.crt" "$t/server.key"
	printf 'tls-ca-cert-file %s\ntls-auth-clients no\ntls-replication yes\n' "$t/ca.crt"
}

# await_pong DIR PORT: true once a server on PORT answers PING, within 5 s.
await_pong() {
	for _ in $(seq 1 50); do
		if scli "$1" -p "$2" ping 2>/dev/null | grep -q PONG; then return 0; fi
		sleep 0.1
	done
	return 1
}

# sentinel_node DIR NAME PORTFILE CONF [ARGS...]: starts the server whose
# configuration is listen_conf on a free port plus the function CONF's lines
# (CONF DIR NAME), with ARGS; its port goes to DIR/PORTFILE.port. A port found
# free can be taken before the server binds it: another is tried, twice.
sentinel_node() {
	local dir=$1 name=$2 portfile=$3 conf=$4 d=$1/sentinel port try
	shift 4
	for try in 1 2 3; do
		port=$(free_port)
		{
			listen_conf "$dir" "$port"
			printf 'bind 127.0.0.1\ndaemonize yes\npidfile %s\nlogfile %s\n' "$d/$name.pid" "$d/$name.log"
			"$conf" "$dir" "$name"
		} >"$d/$name.conf"
		redis-server "$d/$name.conf" "$@" >/dev/null
		if await_pong "$dir" "$port"; then
			echo "$port" >"$dir/$portfile.port"
			return
		fi
		redis_stop "$d" "$name"
		[ "$try" != 3 ] || { tail -n 5 "$d/$name.log" >&2; exit 1; }
	done
}

# The data servers' lines; SENTINEL_PRIMARY, when set, is the port to replicate.
redis_node_conf() {
	local d=$1/sentinel name=$2
	mkdir -p "$d/$name"
	cat <<-CONF
	dir $d/$name
	save ""
	appendonly no
	repl-diskless-sync-delay 0
	user default on nopass ~* &* +@all
	user repl on >repl-secret -@all +psync +sync +replconf +ping
	masteruser repl
	masterauth repl-secret
	CONF
	[ -z "${SENTINEL_PRIMARY:-}" ] || echo "replicaof 127.0.0.1 $SENTINEL_PRIMARY"
}

# A sentinel's lines: it watches the primary on port SENTINEL_PRIMARY.
sentinel_node_conf() {
	cat <<-CONF
	dir $1/sentinel
	sentinel monitor $SENTINEL_MASTER 127.0.0.1 $SENTINEL_PRIMARY 2
	sentinel down-after-milliseconds $SENTINEL_MASTER 1000
	sentinel failover-timeout $SENTINEL_MASTER 3000
	sentinel parallel-syncs $SENTINEL_MASTER 1
	CONF
}

# sentinel_field DIR PORT FIELD: a field of SENTINEL MASTER as sentinel PORT sees it.
sentinel_field() {
	scli "$1" -p "$2" sentinel master "$SENTINEL_MASTER" 2>/dev/null |
		awk -v f="$3" 'prev == f { print; exit } { prev = $0 }'
}

# Ready when the replica is in sync and every sentinel knows the replica and
# the two other sentinels: only then is a failover sure to find a quorum.
sentinel_start() {
	local dir=$1 tls=${2:-} n p ok SENTINEL_PRIMARY=
	sentinel_stop "$dir" # a test that failed may have left them running
	rm -rf "$dir/sentinel"
	mkdir -p "$dir/sentinel"
	if [ -n "$tls" ]; then
		[ -f "$dir/tls/ca.crt" ] || tls_certs "$dir"
		touch "$dir/sentinel/tls"
	fi
	sentinel_node "$dir" r1 sentinel-r1 redis_node_conf
	SENTINEL_PRIMARY=$(cat "$dir/sentinel-r1.port")
	sentinel_node "$dir" r2 sentinel-r2 redis_node_conf
	for n in 1 2 3; do sentinel_node "$dir" "s$n" "sentinel$n" sentinel_node_conf --sentinel; done
	for _ in $(seq 1 300); do
		ok=1
		scli "$dir" -p "$(cat "$dir/sentinel-r2.port")" info replication |
			grep -q '^master_link_status:up' || ok=0
		for n in 1 2 3; do
			p=$(cat "$dir/sentinel$n.port")
			[ "$(sentinel_field "$dir" "$p" num-slaves)" = 1 ] || ok=0
			[ "$(sentinel_field "$dir" "$p" num-other-sentinels)" = 2 ] || ok=0
		done
		[ "$ok" = 0 ] || return 0
		sleep 0.1
	done
	echo "services.sh: sentinels did not see the replica and each other in $CLUSTER_WAIT s" >&2
	exit 1
}

# The port of the primary the sentinels name now.
sentinel_primary() {
	scli "$1" -p "$(cat "$1/sentinel1.port")" sentinel get-master-addr-by-name "$SENTINEL_MASTER" | tail -n 1
}

# The N of DIR/sentinel/rN.pid for the Redis on port PORT.
sentinel_which() {
	local dir=$1 port=$2 n
	for n in 1 2; do
		[ "$(cat "$dir/sentinel-r$n.port")" != "$port" ] || { echo "$n"; return; }
	done
	echo "services.sh: no sentinel Redis on port $port" >&2
	exit 1
}

sentinel_cut() {
	local port
	port=$(sentinel_primary "$1")
	scli "$1" -p "$port" acl setuser repl off >/dev/null
	scli "$1" -p "$port" client kill user repl >/dev/null
}

sentinel_kill() {
	local d=$1/sentinel n pid
	n=$(sentinel_which "$1" "$(sentinel_primary "$1")")
	pid=$(cat "$d/r$n.pid")
	kill -9 "$pid"
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$d/r$n.pid"; return 0; }
		sleep 0.1
	done
}

# Starts again whichever of the two Redis is not running (a killed primary):
# the sentinels make it a replica of the current primary.
sentinel_revive() {
	local d=$1/sentinel n
	for n in 1 2; do
		[ -f "$d/r$n.pid" ] || redis-server "$d/r$n.conf" >/dev/null
	done
}

sentinel_stop() {
	local d=$1/sentinel n
	for n in 1 2 3; do redis_stop "$d" "s$n"; done
	for n in 1 2; do redis_stop "$d" "r$n"; done
}

# Redis Cluster's servers: DIR/cluster/nN (N = 1..6: its dir, with nodes.conf
# and the AOF), DIR/cluster/nN.conf (what cluster-revive starts it with again),
# nN.pid, nN.log; its port in DIR/cluster-nN.port. Each node's bus port is a
# free_port of its own (cluster-port), not port + 10000, which may fall in the
# kernel's ephemeral range. cluster-node-timeout is 1 s: a failover takes a
# few seconds, not fifteen.
CLUSTER_NODES=6
CLUSTER_WAIT=30 # seconds: every cluster-* wait gives up after that

# ccli PORT ARGS...: redis-cli to the cluster node on PORT.
ccli() {
	local port=$1
	shift
	redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# cluster_pong PORT: true once the node on PORT answers PING, within 5 s (not
# await_pong: a sentinel-tls-start in the same DIR would make that speak TLS).
cluster_pong() {
	for _ in $(seq 1 50); do
		[ "$(ccli "$1" ping 2>/dev/null)" != PONG ] || return 0
		sleep 0.1
	done
	return 1
}

# cluster_node_conf DIR N PORT BUSPORT COVERAGE: node N's configuration file.
cluster_node_conf() {
	local d=$1/cluster n=$2
	mkdir -p "$d/n$n"
	cat <<-CONF
	port $3
	cluster-port $4
	bind 127.0.0.1
	daemonize yes
	pidfile $d/n$n.pid
	logfile $d/n$n.log
	dir $d/n$n
	cluster-enabled yes
	cluster-config-file nodes.conf
	cluster-node-timeout 1000
	cluster-require-full-coverage $5
	appendonly yes
	appendfsync always
	save ""
	repl-diskless-sync-delay 0
	CONF
}

# cluster_node DIR N COVERAGE: starts node N on two free ports (client and
# bus); a port found free can be taken before the server binds it: another
# pair is tried, twice.
cluster_node() {
	local dir=$1 n=$2 d=$1/cluster port bus try
	for try in 1 2 3; do
		port=$(free_port)
		bus=$(free_port)
		[ "$bus" != "$port" ] || continue
		cluster_node_conf "$dir" "$n" "$port" "$bus" "$3" >"$d/n$n.conf"
		redis-server "$d/n$n.conf" >/dev/null
		if cluster_pong "$port"; then
			echo "$port" >"$dir/cluster-n$n.port"
			return
		fi
		redis_stop "$d" "n$n"
		[ "$try" != 3 ] || { tail -n 5 "$d/n$n.log" >&2; exit 1; }
	done
}

# pid_alive PID: true while PID runs; a zombie counts as gone (its sockets are
# closed), since this machine's init may take a second to reap it.
pid_alive() {
	local state
	state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

# cluster_alive DIR N: true while node N runs.
cluster_alive() {
	local pidfile=$1/cluster/n$2.pid
	[ -f "$pidfile" ] && pid_alive "$(cat "$pidfile")"
}

# cluster_live DIR: the ports of the nodes that run, one per line.
cluster_live() {
	local n
	for n in $(seq 1 "$CLUSTER_NODES"); do
		! cluster_alive "$1" "$n" || cat "$1/cluster-n$n.port"
	done
}

# cluster_which DIR PORT: the N of the node on PORT.
cluster_which() {
	local dir=$1 port=$2 n
	for n in $(seq 1 "$CLUSTER_NODES"); do
		[ "$(cat "$dir/cluster-n$n.port" 2>/dev/null)" != "$port" ] || { echo "$n"; return; }
	done
	echo "services.sh: no cluster node on port $port" >&2
	exit 1
}

# On CLUSTER NODES' text: owner[slot] = the id of the master that serves the
# slot in that node's view; open slots ([slot->-id], [slot-<-id]) are left out,
# and so are masters flagged fail or fail? when SKIPFAIL is set.
# shellcheck disable=SC2016 # awk's own $ fields
CLUSTER_MAP_AWK='
$3 ~ /master/ && !(skipfail && $3 ~ /fail/) {
	for (i = 9; i <= NF; i++) {
		if ($i ~ /^\[/) continue
		n = split($i, r, "-")
		for (s = r[1]; s <= r[n]; s++) owner[s] = $1
	}
}'

# cluster_map PORT: node PORT's slot map, one "FIRST-LAST ID" line per range.
cluster_map() {
	ccli "$1" cluster nodes 2>/dev/null | awk "$CLUSTER_MAP_AWK"'
	END {
		for (s = 0; s < 16384; s++) {
			if (owner[s] == cur && s > 0) continue
			if (s > 0 && cur != "") print first "-" s - 1, cur
			first = s; cur = owner[s]
		}
		if (cur != "") print first "-16383", cur
	}'
}

# cluster_myself PORT: the myself line of node PORT's CLUSTER NODES.
cluster_myself() {
	ccli "$1" cluster nodes 2>/dev/null | awk '$3 ~ /myself/'
}

# cluster_holds SLOT: true if the CLUSTER NODES line on stdin is a master's
# that serves SLOT.
cluster_holds() {
	awk -v slot="$1" '
	$3 ~ /master/ {
		for (i = 9; i <= NF; i++) {
			if ($i ~ /^\[/) continue
			n = split($i, r, "-")
			if (slot + 0 >= r[1] + 0 && slot + 0 <= r[n] + 0) found = 1
		}
	}
	END { exit !found }'
}

# Ready when every node says cluster_state:ok and knows all six, and every
# replica's link to its master is up.
cluster_start() {
	local dir=$1 coverage=yes n p hosts=() ok info end
	[ "${2:-}" != no-coverage ] || coverage=no
	cluster_stop "$dir" # a test that failed may have left them running
	rm -rf "$dir/cluster"
	mkdir -p "$dir/cluster"
	for n in $(seq 1 "$CLUSTER_NODES"); do
		cluster_node "$dir" "$n" "$coverage"
		hosts+=("127.0.0.1:$(cat "$dir/cluster-n$n.port")")
	done
	redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes \
		>"$dir/cluster/create.log" 2>&1 || { tail -n 20 "$dir/cluster/create.log" >&2; exit 1; }
	end=$((SECONDS + CLUSTER_WAIT))
	while [ "$SECONDS" -lt "$end" ]; do
		ok=1
		for n in $(seq 1 "$CLUSTER_NODES"); do
			p=$(cat "$dir/cluster-n$n.port")
			info=$(ccli "$p" cluster info 2>/dev/null) || info=
			[[ "$info" == *cluster_state:ok* && "$info" == *cluster_known_nodes:6* ]] || ok=0
			info=$(ccli "$p" info replication 2>/dev/null) || info=
			[[ "$info" == *role:master* || "$info" == *master_link_status:up* ]] || ok=0
		done
		if [ "$ok" = 1 ]; then
			echo "redis-cluster://${hosts[0]},${hosts[1]},${hosts[2]}" >"$dir/cluster.url"
			# For a test script under `run`: the seeds with the other TEST_* variables.
			if [ -f "$dir/env" ]; then
				sed -i '/^export TEST_CLUSTER_URL=/d' "$dir/env"
				echo "export TEST_CLUSTER_URL=$(cat "$dir/cluster.url")" >>"$dir/env"
			fi
			return 0
		fi
		sleep 0.1
	done
	echo "services.sh: the cluster was not ok (state, six known nodes, replica links) in $CLUSTER_WAIT s:" >&2
	for n in $(seq 1 "$CLUSTER_NODES"); do
		p=$(cat "$dir/cluster-n$n.port")
		echo "n$n port $p: $(ccli "$p" cluster info 2>&1 | grep -E 'cluster_state|known_nodes' | tr -d '\r' | tr '\n' ' ')" \
			"$(ccli "$p" info replication 2>&1 | grep -E '^(role|master_link_status)' | tr -d '\r' | tr '\n' ' ')" >&2
	done
	exit 1
}

# The port of the node that serves SLOT now, in its own view (the map of a
# node that has not heard of a failover yet may name a dead master). Exits 1
# if no running master serves it (its master is dead and not replaced yet).
cluster_master_of() {
	local dir=$1 slot=$2 p
	for p in $(cluster_live "$dir"); do
		if cluster_myself "$p" | cluster_holds "$slot"; then
			echo "$p"
			return 0
		fi
	done
	echo "services.sh: no running cluster master serves slot $slot" >&2
	exit 1
}

# SIGKILLs node PORT and waits until it is gone; first notes its id and the
# slots it served (DIR/cluster/nN.killed) for cluster-wait-promoted.
cluster_kill() {
	local dir=$1 n pid
	n=$(cluster_which "$dir" "$2")
	cluster_alive "$dir" "$n" || { echo "services.sh: cluster node on port $2 is not running" >&2; exit 1; }
	cluster_myself "$2" | awk '{ printf "%s", $1; if ($3 ~ /master/) for (i = 9; i <= NF; i++) if ($i !~ /^\[/) printf " %s", $i; print "" }' \
		>"$dir/cluster/n$n.killed"
	pid=$(cat "$dir/cluster/n$n.pid")
	kill -9 "$pid"
	for _ in $(seq 1 100); do
		if ! pid_alive "$pid" && ! (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
			rm -f "$dir/cluster/n$n.pid"
			return 0
		fi
		sleep 0.1
	done
	echo "services.sh: cluster node on port $2 (pid $pid) did not die in 10 s" >&2
	exit 1
}

# Waits until every running node says cluster_state:ok and, in its map, every
# slot the killed node PORT served belongs to another master not flagged
# failing; prints that master's port (one line per master, if several).
cluster_wait_promoted() {
	local dir=$1 n id ranges p ok view end
	n=$(cluster_which "$dir" "$2")
	[ -f "$dir/cluster/n$n.killed" ] || { echo "services.sh: cluster-kill did not kill port $2" >&2; exit 1; }
	read -r id ranges <"$dir/cluster/n$n.killed" || true
	end=$((SECONDS + CLUSTER_WAIT))
	while [ "$SECONDS" -lt "$end" ]; do
		ok=1
		for p in $(cluster_live "$dir"); do
			[[ "$(ccli "$p" cluster info 2>/dev/null)" == *cluster_state:ok* ]] || { ok=0; break; }
			view=$(ccli "$p" cluster nodes 2>/dev/null | awk -v skipfail=1 -v dead="$id" -v ranges="$ranges" "$CLUSTER_MAP_AWK"'
			END {
				k = split(ranges, rs, " ")
				for (j = 1; j <= k; j++) {
					n = split(rs[j], r, "-")
					for (s = r[1]; s <= r[n]; s++) {
						if (owner[s] == "" || owner[s] == dead) { print "no"; exit }
						ids[owner[s]] = 1
					}
				}
				for (o in ids) print o
			}')
			[ "$view" != no ] || { ok=0; break; }
		done
		if [ "$ok" = 1 ]; then
			[ -z "$view" ] && return 0
			for id in $view; do
				for p in $(cluster_live "$dir"); do
					[ "$(ccli "$p" cluster myid)" != "$id" ] || echo "$p"
				done
			done
			return 0
		fi
		sleep 0.1
	done
	echo "services.sh: the slots of cluster node $2 ($ranges) were not served by another master with cluster_state:ok in $CLUSTER_WAIT s" >&2
	exit 1
}

# Starts node PORT again with its configuration and nodes.conf. If another
# master serves its old slots now, it rejoins as that one's replica: waits
# until its link is up. If none does (it was a master and no replica took
# over), it serves them again: waits until it says so. Either way, until it
# says cluster_state:ok and no running node flags it failing.
cluster_revive() {
	local dir=$1 port=$2 n id ranges='' role=slave info p end
	n=$(cluster_which "$dir" "$port")
	[ ! -f "$dir/cluster/n$n.killed" ] || read -r id ranges <"$dir/cluster/n$n.killed" || true
	if [ -n "$ranges" ]; then
		role=master
		for p in $(cluster_live "$dir"); do
			! cluster_myself "$p" | cluster_holds "${ranges%%-*}" || role=slave
		done
	fi
	if ! cluster_alive "$dir" "$n"; then
		redis-server "$dir/cluster/n$n.conf" >/dev/null
		cluster_pong "$port" || { tail -n 5 "$dir/cluster/n$n.log" >&2; exit 1; }
	fi
	rm -f "$dir/cluster/n$n.killed"
	id=$(ccli "$port" cluster myid)
	end=$((SECONDS + CLUSTER_WAIT))
	while [ "$SECONDS" -lt "$end" ]; do
		info=$(ccli "$port" info replication 2>/dev/null) || info=
		if [[ "$info" == *role:$role* ]] &&
			{ [ "$role" = master ] || [[ "$info" == *master_link_status:up* ]]; } &&
			{ [ "$role" = slave ] || cluster_myself "$port" | cluster_holds "${ranges%%-*}"; } &&
			[[ "$(ccli "$port" cluster info 2>/dev/null)" == *cluster_state:ok* ]] &&
			! for p in $(cluster_live "$dir"); do ccli "$p" cluster nodes; done 2>/dev/null |
			awk -v id="$id" '$1 == id && $3 ~ /fail/ { bad = 1 } END { exit !bad }'; then
			return 0
		fi
		sleep 0.1
	done
	echo "services.sh: cluster node on port $port was not a ready $role in $CLUSTER_WAIT s" >&2
	exit 1
}

# Waits until every running node has the same slot map and no slot is open
# (importing or migrating) anywhere.
cluster_agree() {
	local dir=$1 p first view ok end
	end=$((SECONDS + CLUSTER_WAIT))
	while [ "$SECONDS" -lt "$end" ]; do
		ok=1 first=
		for p in $(cluster_live "$dir"); do
			view=$(cluster_map "$p")
			[ -n "$first" ] || first=$view
			[ "$view" = "$first" ] || ok=0
			! cluster_myself "$p" | grep -q '\[' || ok=0
		done
		[ "$ok" = 0 ] || return 0
		sleep 0.1
	done
	echo "services.sh: the cluster nodes did not agree on the slot map in $CLUSTER_WAIT s" >&2
	exit 1
}

# Moves SLOTS slots from master FROM_PORT to master TO_PORT with redis-cli's
# own resharding (keys and all), then waits until every node agrees.
cluster_reshard() {
	local dir=$1 from=$2 to=$3 slots=$4 log=$1/cluster/reshard.log
	redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$(ccli "$from" cluster myid)" \
		--cluster-to "$(ccli "$to" cluster myid)" --cluster-slots "$slots" --cluster-yes \
		>"$log" 2>&1 || { tail -n 20 "$log" >&2; exit 1; }
	cluster_agree "$dir"
}

# ccli_ok PORT ARGS...: the command must answer OK (or, for MIGRATE, NOKEY: the
# key went away meanwhile).
ccli_ok() {
	local out
	out=$(ccli "$@" 2>&1)
	case "$out" in
	OK | NOKEY) ;;
	*)
		echo "services.sh: port $1: ${*:2}: $out" >&2
		exit 1
		;;
	esac
}

# Moves one slot with its keys to master TO_PORT by hand, as redis-cli does it:
# the target IMPORTING, the source MIGRATING, MIGRATE of CLUSTER_MIGRATE_COUNT
# keys at a time (default 10), then SETSLOT NODE on the target, the source and
# every other master. CLUSTER_MIGRATE_PAUSE_MS, when set, is slept once the
# slot is open and after each batch: meanwhile the source answers ASK for the
# slot's keys it no longer has.
cluster_move_slot() {
	local dir=$1 slot=$2 to=$3 from src dst pause count p keys
	pause=$(awk -v ms="${CLUSTER_MIGRATE_PAUSE_MS:-0}" 'BEGIN { printf "%.3f", ms / 1000 }')
	count=${CLUSTER_MIGRATE_COUNT:-10}
	from=$(cluster_master_of "$dir" "$slot")
	[ "$from" != "$to" ] || return 0
	src=$(ccli "$from" cluster myid)
	dst=$(ccli "$to" cluster myid)
	ccli_ok "$to" cluster setslot "$slot" importing "$src"
	ccli_ok "$from" cluster setslot "$slot" migrating "$dst"
	sleep "$pause"
	while :; do
		mapfile -t keys < <(ccli "$from" cluster getkeysinslot "$slot" "$count")
		if [ "${#keys[@]}" = 0 ] || [ -z "${keys[0]}" ]; then break; fi
		ccli_ok "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys "${keys[@]}"
		sleep "$pause"
	done
	ccli_ok "$to" cluster setslot "$slot" node "$dst"
	ccli_ok "$from" cluster setslot "$slot" node "$dst"
	for p in $(cluster_live "$dir"); do
		if [ "$p" != "$to" ] && [ "$p" != "$from" ] && [[ "$(ccli "$p" role)" == master* ]]; then
			ccli_ok "$p" cluster setslot "$slot" node "$dst"
		fi
	done
	cluster_agree "$dir"
}

# SIGTERM to all six at once, then waits for each, SIGKILL after 10 s.
cluster_stop() {
	local dir=$1 d=$1/cluster n pids=()
	for n in $(seq 1 "$CLUSTER_NODES"); do
		if cluster_alive "$dir" "$n"; then
			pids[n]=$(cat "$d/n$n.pid")
			kill "${pids[n]}" 2>/dev/null || true
		fi
	done
	for n in "${!pids[@]}"; do
		for _ in $(seq 1 100); do
			pid_alive "${pids[n]}" || break
			sleep 0.1
		done
		! pid_alive "${pids[n]}" || kill -9 "${pids[n]}" 2>/dev/null || true
		rm -f "$d/n$n.pid"
	done
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
	cluster_stop "$1"
	sentinel_stop "$1"
	tls_stop "$1"
	pg_stop "$1" pgfo1
	pg_stop "$1" pgfo2
	pgxm_stop "$1"
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
	[ -z "${SERVICES_CLUSTER:-}" ] || cluster_start "$dir" "$SERVICES_CLUSTER"
	# shellcheck disable=SC1091
	. "$dir/env"
	"$@"
	;;
start) start "$1" ;;
stop) stop "$1" ;;
redis-stop) redis_stop "$1" ;;
redis-start) redis_start "$1" ;;
redis-kill) redis_kill "$1" ;;
redis-start-loading) redis_start "$1" LOADING --key-load-delay "${2:-100}" ;;
redis2-start) redis2_start "$1" ;;
redis2-stop) redis_stop "$1" redis2 ;;
pg-restart) pg_restart "$1" ;;
pg-stop) pg_stop "$1" ;;
pg-start) pg_start_again "$1" ;;
pgfo-start) pgfo_start "$1" ;;
pgfo-promote) pgfo_promote "$1" ;;
pgxm-start) pgxm_start "$1" ;;
pgxm-stop) pgxm_stop "$1" ;;
tls-start) tls_start "$1" ;;
tls-stop) tls_stop "$1" ;;
sentinel-start) sentinel_start "$1" ;;
sentinel-tls-start) sentinel_start "$1" tls ;;
sentinel-cut) sentinel_cut "$1" ;;
sentinel-kill) sentinel_kill "$1" ;;
sentinel-revive) sentinel_revive "$1" ;;
sentinel-stop) sentinel_stop "$1" ;;
cluster-start) cluster_start "$1" "${2:-}" ;;
cluster-master-of) cluster_master_of "$1" "$2" ;;
cluster-kill) cluster_kill "$1" "$2" ;;
cluster-wait-promoted) cluster_wait_promoted "$1" "$2" ;;
cluster-revive) cluster_revive "$1" "$2" ;;
cluster-reshard) cluster_reshard "$1" "$2" "$3" "$4" ;;
cluster-move-slot) cluster_move_slot "$1" "$2" "$3" ;;
cluster-stop) cluster_stop "$1" ;;
pgfo-stop)
	pg_stop "$1" pgfo1
	pg_stop "$1" pgfo2
	;;
*)
	sed -n '2,65p' "$0" >&2
	exit 2
	;;
esac

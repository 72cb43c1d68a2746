#!/usr/bin/env bash
# `make image-test`: docker/Dockerfile built and run, with Debian's own tools and
# no container registry. mmdebstrap makes the base from the Debian mirror apt
# already uses, imported as debian:bookworm-slim; buildah builds the image; podman
# runs `migrate` and the relay from it on the host network against the harness's
# throwaway Postgres and Redis. Checked: the jobs reach Redis, /healthz answers
# 200, the image's HEALTHCHECK passes, the relay runs as uid 10001 and gid 10001
# that both have names, and SIGTERM stops it with status 0. Images, containers
# and their storage live in one temp directory that is removed at the end, so a
# second run starts clean; only the apt packages stay. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "image_test: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (mmdebstrap, and podman's own storage): sudo make image-test"
start=$SECONDS
sh tests/deps.sh buildah podman mmdebstrap runc
dir=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-image.XXXXXX")
image=localhost/stagedrain:image-test
base=docker.io/library/debian:bookworm-slim
relay=stagedrain-image-test-$$
# The services directory is Postgres's too (it runs as user postgres).
chmod 755 "$dir"
mkdir -p "$dir/services" "$dir/tmp"
# Storage, engine and registry settings of this run only; /etc/containers is
# read for nothing else. runc and cgroupfs need no systemd; the ulimits are
# modest so that a container starts under a host's lower hard limits (podman's
# default is the host's maximum, which runc may not be allowed to set).
cat >"$dir/storage.conf" <<-CONF
	[storage]
	driver = "overlay"
	graphroot = "$dir/storage"
	runroot = "$dir/run"
CONF
cat >"$dir/containers.conf" <<-CONF
	[containers]
	default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
	[engine]
	runtime = "runc"
	cgroup_manager = "cgroupfs"
	events_logger = "file"
	events_logfile_path = "$dir/events.log"
	tmp_dir = "$dir/libpod"
	[network]
	network_config_dir = "$dir/cni"
CONF
# No registry to search: the Dockerfile names its base in full (docker_check),
# and that is the one imported here.
cat >"$dir/registries.conf" <<-CONF
	unqualified-search-registries = []
	short-name-mode = "enforcing"
CONF
export CONTAINERS_STORAGE_CONF=$dir/storage.conf CONTAINERS_CONF=$dir/containers.conf \
	CONTAINERS_REGISTRIES_CONF=$dir/registries.conf TMPDIR=$dir/tmp
# runc's state too (it would be /run/runc).
podman() { command podman --runtime-flag "root=$dir/runc" "$@"; }

# containers/image keeps a blob cache under /var/lib/containers whatever the
# storage settings say, and podman makes runc's default state directory even
# when runc is told another: each is removed again if this run made it.
made=""
for p in /var/lib/containers/cache /var/lib/containers /run/runc; do [ -e "$p" ] || made="$made $p"; done
cleanup() {
	podman rm -f -t 0 "$relay" >/dev/null 2>&1 || true
	buildah rm --all >/dev/null 2>&1 || true
	podman rmi -f "$image" "$base" >/dev/null 2>&1 || true
	bash tests/services.sh stop "$dir/services" >/dev/null 2>&1 || true
	# Nothing may stay mounted in the tree rm -rf walks.
	findmnt -rn -o TARGET | grep "^$dir/" | sort -r | xargs -r umount -l 2>/dev/null || true
	rm -rf "$dir"
	for p in $made; do
		case $p in */cache) rm -rf "$p" ;; *) rmdir "$p" 2>/dev/null || true ;; esac
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The end of a failed step's log (removed with the rest), then the one-line reason.
fail_log() { tail -n 20 "$1" >&2; fail "$2"; }

# The base: the Debian suites apt reads on this machine, the only reachable
# archive. minbase is what Debian's official images start from; the dpkg and
# apt settings make it slim as theirs is (no docs, no apt caches in layers).
debian_sources() {
	# shellcheck disable=SC2016 # apt's format fields, not the shell's
	apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 'Origin: Debian' |
		awk '$2 ~ /^bookworm(-|$)/ { print "deb", $1, $2, $3 }' | sort -u
}
sources=$(debian_sources)
[ -n "$sources" ] || { apt-get update -qq && sources=$(debian_sources); }
[ -n "$sources" ] || fail "apt's sources hold no Debian bookworm suite to build the base image from"
t0=$SECONDS
# shellcheck disable=SC2016 # the hook's $1 is the root mmdebstrap builds, expanded by its shell
echo "$sources" | mmdebstrap --variant=minbase --quiet \
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook='printf "%s\n" "Dir::Cache::pkgcache \"\";" "Dir::Cache::srcpkgcache \"\";" \
		"Acquire::Languages \"none\";" >"$1/etc/apt/apt.conf.d/docker-slim"; rm -f "$1"/var/cache/apt/*.bin' \
	bookworm "$dir/base.tar" - >"$dir/mmdebstrap.log" 2>&1 ||
	fail_log "$dir/mmdebstrap.log" "mmdebstrap could not make the base image"
podman import --quiet "$dir/base.tar" "$base" >"$dir/import.log" 2>&1 ||
	fail_log "$dir/import.log" "podman import of the base image failed"
rm -f "$dir/base.tar"
base_s=$((SECONDS - t0))

# The image, as docker/Dockerfile says, from the repository root. The build
# stage's apt-get reaches the mirror on the host's network; --pull=never: the
# base is the one just imported, or the build fails.
t0=$SECONDS
buildah bud --isolation=chroot --format docker --pull=never --network host \
	-f docker/Dockerfile -t "$image" . >"$dir/build.log" 2>&1 ||
	fail_log "$dir/build.log" "buildah bud -f docker/Dockerfile failed"
build_s=$((SECONDS - t0))

bash tests/services.sh start "$dir/services" >"$dir/services.log" 2>&1 ||
	fail_log "$dir/services.log" "the throwaway Postgres and Redis did not start"
# shellcheck disable=SC1091
. "$dir/services/env"
sql() { psql -X -q -v ON_ERROR_STOP=1 "$TEST_PG_URL" "$@"; }
jobs_in_redis() { redis-cli -p "$TEST_REDIS_PORT" llen queue:default; }

# The uid and gid the image runs as, by name: both have entries.
ids=$(podman run --rm --pull=never --network host --entrypoint id "$image" 2>"$dir/id.log") ||
	fail_log "$dir/id.log" "podman run could not start a container from the image"
[ "$ids" = "uid=10001(stagedrain) gid=10001(stagedrain) groups=10001(stagedrain)" ] ||
	fail "the image runs as '$ids', not uid=10001(stagedrain) gid=10001(stagedrain)"

podman run --rm --pull=never --network host -e STAGEDRAIN_PG_URL="$TEST_PG_URL" "$image" migrate \
	>"$dir/migrate.log" 2>&1 || fail_log "$dir/migrate.log" "stagedrain migrate from the image failed"
sql -c "INSERT INTO staged_jobs (queue, job_class, args)
        SELECT 'default', 'ImageTestJob', jsonb_build_array(n) FROM generate_series(1, 3) n"

# A free loopback port below the ephemeral range for the relay's endpoint; the
# image's HEALTHCHECK reads the port from STAGEDRAIN_HTTP_ADDR as well.
read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
port=""
for _ in $(seq 1 50); do
	p=$((lo - 1 - (RANDOM * 32768 + RANDOM) % (lo - 10000)))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || fail "no free loopback port for the relay's endpoint"
podman run -d --name "$relay" --pull=never --network host \
	-e STAGEDRAIN_PG_URL="$TEST_PG_URL" -e STAGEDRAIN_REDIS_URL="$TEST_REDIS_URL" \
	-e STAGEDRAIN_HTTP_ADDR="127.0.0.1:$port" "$image" --poll-interval 100ms \
	>"$dir/run.log" 2>&1 || fail_log "$dir/run.log" "podman run of the relay failed"
relay_log() { podman logs "$relay" >"$dir/relay.log" 2>&1 || true; echo "$dir/relay.log"; }
for _ in $(seq 1 100); do [ "$(jobs_in_redis)" = 3 ] && break; sleep 0.1; done
[ "$(jobs_in_redis)" = 3 ] || fail_log "$(relay_log)" "the relay in the container moved $(jobs_in_redis) of 3 staged jobs"
# Jobs committed while it runs arrive too.
sql -c "INSERT INTO staged_jobs (queue, job_class, args)
        SELECT 'default', 'ImageTestJob', jsonb_build_array(n) FROM generate_series(4, 5) n"
for _ in $(seq 1 100); do [ "$(jobs_in_redis)" = 5 ] && break; sleep 0.1; done
[ "$(jobs_in_redis)" = 5 ] || fail_log "$(relay_log)" "the relay in the container moved $(jobs_in_redis) of 5 staged jobs"
args=$(redis-cli -p "$TEST_REDIS_PORT" lrange queue:default 0 -1 | grep -o '"class":"ImageTestJob","args":\[[0-9]*\]' |
	grep -o '[0-9]*\]' | tr -d ']' | sort -n | tr '\n' ' ')
[ "$args" = "1 2 3 4 5 " ] || fail "queue:default holds the jobs with args '$args', not 1 2 3 4 5"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz" || true)
[ "$code" = 200 ] || fail_log "$(relay_log)" "/healthz of the relay in the container answered '$code', not 200"
# The image's own HEALTHCHECK command, run by podman inside the container.
podman healthcheck run "$relay" >"$dir/health.log" 2>&1 || fail_log "$dir/health.log" "the image's HEALTHCHECK failed"
pid=$(podman inspect -f '{{.State.Pid}}' "$relay")
read -r uid gid < <(ps -o uid=,gid= -p "$pid")
[ "$uid:$gid" = 10001:10001 ] || fail "the relay process runs as $uid:$gid, not 10001:10001"

# SIGTERM, then SIGKILL after 10 s: a clean stop is status 0, not 137.
podman stop -t 10 "$relay" >"$dir/stop.log" 2>&1 || fail_log "$dir/stop.log" "podman stop failed"
status=$(podman inspect -f '{{.State.ExitCode}}' "$relay")
[ "$status" = 0 ] || fail_log "$(relay_log)" "the relay exited with $status on SIGTERM, not 0"
grep -q 'stopped on signal' "$(relay_log)" || fail_log "$dir/relay.log" "the relay did not log its stop"

size() { podman image inspect -f '{{.Size}}' "$1"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
total=$(size "$image")
echo "image_test: base $base_s s (mmdebstrap, import), image $build_s s (buildah bud); total $((SECONDS - start)) s"
echo "image_test: $image is $(mb "$total"): the base $(mb "$(size "$base")") and the app layer $(mb $((total - $(size "$base"))))"
echo "image_test: migrate and the relay ran from the image: 5 jobs in Redis, /healthz 200, HEALTHCHECK healthy,"
echo "image_test: uid=10001(stagedrain) gid=10001(stagedrain), SIGTERM exit 0"

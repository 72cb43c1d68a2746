# stagedrain: build, test, demo. `make help` lists the targets.
CC ?= cc
PKG_CONFIG ?= pkg-config

WARN = -std=c11 -Wall -Wextra -Wpedantic -Wstrict-prototypes -Wmissing-prototypes \
       -Wold-style-definition -Wwrite-strings -Wformat=2 -Wundef -Werror
ifeq ($(SAN),1)
OUT = build/san
OPT = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
else
OUT = build
OPT = -O2 -g
endif

LIBS_PC = libpq hiredis jansson libmicrohttpd openssl
CPPFLAGS += -Iinclude -I$(OUT) $(shell $(PKG_CONFIG) --cflags $(LIBS_PC) 2>/dev/null)
CFLAGS += $(WARN) $(OPT)
LDFLAGS += $(filter -fsanitize%,$(OPT)) -pthread
LDLIBS += $(shell $(PKG_CONFIG) --libs $(LIBS_PC) 2>/dev/null) -lm
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
# Debian's python3, which has python3-yaml (tests/deps.sh), before any other on PATH.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

# Modules shared by the daemon and the tests; main.c only wires them.
# A row into a job and its commands: pure, so the fuzzer links them alone.
JOB_SRC = relay/job_build.c relay/buf.c relay/payload.c relay/format.c relay/formats.c relay/format_sidekiq.c relay/format_resque.c \
          relay/format_activejob.c relay/format_celery.c relay/celery_codec.c relay/format_laravel.c relay/format_laravel_built.c relay/format_bullmq.c relay/format_bullmq_script.c \
          relay/redis_cmds.c relay/pyrepr.c relay/queue_groups.c
LIB_SRC = $(JOB_SRC) relay/log.c relay/values.c relay/settings.c relay/redis_url.c relay/config.c relay/config_apply.c relay/config_files.c \
          relay/signals.c relay/usage.c relay/sidekiq_probe.c relay/clock.c relay/pg_session.c relay/pg_source.c \
          relay/redis_tls.c relay/redis_io.c relay/redis_sentinel.c relay/redis_conn.c relay/redis_cluster.c relay/redis_sink.c relay/cluster_sink.c relay/cluster_push.c relay/push_script.c relay/redis_policy.c relay/drain.c relay/pipe.c relay/build.c relay/push.c relay/fault.c relay/read_plan.c relay/report.c relay/ladder_start.c relay/migrate.c relay/backoff.c relay/batch.c relay/fence.c relay/gaps.c relay/snapshot.c \
          relay/metrics.c relay/metrics_text.c relay/metrics_series.c relay/metrics_ready.c relay/watch.c relay/http.c relay/pg_conn.c relay/pg_read.c relay/read_bounds.c relay/queue_limits.c relay/rounds.c relay/backpressure.c relay/pg_held.c relay/release.c relay/release_routes.c relay/ladder.c relay/ladder_reroute.c \
          relay/once.c relay/narrow.c relay/stop.c relay/http_deadline.c relay/http_lograte.c \
          relay/lock_holder.c relay/routes.c relay/target.c relay/target_connect.c relay/metrics_targets.c relay/metrics_cluster.c relay/metrics_held.c relay/watch_held.c \
          relay/commands.c relay/cmd_args.c \
          relay/cmd_status.c relay/status_judge.c relay/status_read.c relay/status_print.c relay/status_horizon.c relay/status_targets.c \
          relay/cmd_dead.c relay/dead_cmd.c relay/cmd_held.c relay/dead_list.c relay/dead_replay.c relay/dead_text.c relay/xmin_holders.c \
          relay/pg_privileges.c relay/readers.c relay/cmd_move.c relay/watch_readers.c
LIB_OBJ = $(LIB_SRC:relay/%.c=$(OUT)/%.o) $(OUT)/sql_embed.o
UNIT_SRC = tests/unit_main.c tests/check_config.c tests/check_redis_url.c tests/check_job.c tests/check_buf.c \
           tests/check_backoff.c tests/check_fence.c tests/check_gaps.c tests/check_metrics.c tests/check_rounds.c \
           tests/check_format_activejob.c tests/check_format_celery.c tests/check_format_laravel.c tests/check_format_bullmq.c \
           tests/check_queue_groups.c tests/check_cmd_args.c tests/check_status_unit.c tests/check_xmin_remedy.c \
           tests/check_routes.c tests/check_target.c tests/check_relay_argv.c tests/check_cluster_unit.c
INTEG_SRC = tests/integration_main.c tests/harness.c tests/check_relay.c \
            tests/check_faults.c tests/check_leader.c tests/check_e2e.c tests/check_sink.c \
            tests/check_cursor.c tests/check_security.c tests/check_trouble.c tests/check_http.c \
            tests/check_reconcile.c tests/check_guarantees.c tests/check_tls.c tests/check_sentinel.c \
            tests/check_sidekiq_version.c tests/check_formats.c tests/check_e2e_activejob.c \
            tests/check_e2e_celery.c tests/check_e2e_laravel.c tests/check_e2e_bullmq.c tests/check_release.c \
            tests/check_e2e_capped.c tests/check_once.c tests/check_startup.c tests/check_stop.c \
            tests/check_status.c tests/check_dead.c tests/check_xmin.c tests/check_routed.c tests/check_route_change.c \
            tests/check_e2e_routes.c tests/check_misconfig.c tests/check_cluster.c

# The test support library: processes, the throwaway servers, SQL, Redis, logs.
# The Check suites, the chaos programs and the bench all link it; no Check in it.
SUPPORT_SRC = tests/support/timing.c tests/support/proc.c tests/support/services.c tests/support/sql.c \
              tests/support/redis.c tests/support/logs.c tests/support/relay_keys.c tests/support/celery_body.c \
              tests/support/job_rows.c tests/support/fake_sentinel.c tests/support/redis_server.c \
              tests/support/relay_argv.c
SUPPORT_LIB = $(OUT)/tests/libsupport.a

BENCH_SRC = tests/bench/bench.c tests/bench/util.c tests/bench/proc.c tests/bench/load.c \
            tests/bench/naive.c tests/bench/table.c tests/bench/xid.c tests/bench/wait.c tests/bench/release.c \
            tests/bench/routed.c tests/bench/cpu.c tests/bench/cluster.c
# A quick look: make bench BENCH_ARGS="--jobs 100000 --minutes 1 --big-jobs 0"
# The xid-holding long transaction alone (about 5 minutes; sizes: --xid-seconds,
# --xid-backlog, --xid-rate, --xid-rollback, --xid-holders idle,prepared):
#   make bench BENCH_ARGS="--only xid-holder --runs 1"
BENCH_ARGS ?=

BIN = $(OUT)/stagedrain
MAN = $(OUT)/stagedrain.1
.PHONY: all test test-unit test-integration test-servers test-ops test-clients doc-test man-check docker-check layers-check image-test \
        install uninstall \
        chaos chaos-caps chaos-routes chaos-cluster chaos-steady deps demo fuzz bench clean format format-check help

# Where `make install` puts things: $(DESTDIR)$(PREFIX)/bin, share/man/man1, share/stagedrain.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/stagedrain
INSTALL ?= install
# The page's date: the last commit's, so a rebuild gives the same page (today's outside git).
MAN_DATE ?= $(shell d=$$(git log -1 --format=%cs 2>/dev/null); date -u -d "$${d:-now}" '+%B %-d, %Y')

all: $(BIN) bin/stagedrain $(MAN)

bin/stagedrain: $(BIN)
	@mkdir -p bin
	@if [ "$(OUT)" = build ]; then cp $(BIN) $@; fi

$(BIN): $(OUT)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(OUT)/%.o: relay/%.c include/*.h | $(OUT)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(OUT)/tests/%.o: tests/%.c include/*.h tests/*.h tests/support/*.h | $(OUT)/tests
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -c -o $@ $<

$(OUT)/tests/support/%.o: tests/support/%.c tests/support/*.h include/*.h | $(OUT)/tests
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -c -o $@ $<

$(SUPPORT_LIB): $(SUPPORT_SRC:tests/%.c=$(OUT)/tests/%.o)
	rm -f $@
	$(AR) rcs $@ $^

# The migrations are compiled into the binary so the container needs no files.
$(OUT)/sql_embed.c: sql/*.sql sql/embed.sh | $(OUT)
	sh sql/embed.sh sql/[0-9]*.sql > $@

$(OUT)/sql_embed.o: $(OUT)/sql_embed.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

# build/ may exist without tests/ (make fuzz makes only build/fuzz/).
$(OUT) $(OUT)/tests:
	mkdir -p $(OUT)/tests

# The manual page is generated from the settings table, like --help: it links
# the table and its writers only, no libraries.
$(OUT)/gen_man: $(OUT)/gen_man.o $(OUT)/usage.o $(OUT)/settings.o $(OUT)/values.o $(OUT)/commands.o
	$(CC) $(LDFLAGS) -o $@ $^

$(MAN): $(OUT)/gen_man
	$(OUT)/gen_man '$(MAN_DATE)' > $@.tmp && mv $@.tmp $@

$(OUT)/check_unit: $(UNIT_SRC:tests/%.c=$(OUT)/tests/%.o) $(LIB_OBJ) $(SUPPORT_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

$(OUT)/check_integration: $(INTEG_SRC:tests/%.c=$(OUT)/tests/%.o) $(LIB_OBJ) $(SUPPORT_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

# The chaos test: not a Check suite but one program that starts its own servers,
# two relays, producers and a killer, then checks Redis. Defaults are the full size.
CHAOS_JOBS ?= 200000
CHAOS_KILLS ?= 50
CHAOS_BACKEND_KILLS ?= 10
CHAOS_REDIS_RESTARTS ?= 3
CHAOS_PRODUCERS ?= 6
CHAOS_TIMEOUT ?= 900
CHAOS_SEED ?=
CHAOS_ARGS ?=
# --max-queue-length of the relays (make chaos-caps: 200); empty: uncapped.
CHAOS_CAPS ?=
# 1: two queues routed to two more Redis (make chaos-routes); empty: one Redis.
CHAOS_ROUTES ?=
# 1: with routes, three more queues routed to a Redis Cluster (make chaos-cluster);
# its faults: masters SIGKILLed and revived, slots moved (empty: kills/25, at least 1).
CHAOS_CLUSTER ?=
CHAOS_CLUSTER_KILLS ?=
CHAOS_SLOT_MOVES ?=

$(OUT)/tests/chaos/%.o: tests/chaos/%.c tests/chaos/*.h tests/support/*.h include/*.h | $(OUT)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests -Itests/chaos $(CFLAGS) -c -o $@ $<

$(OUT)/chaos: $(OUT)/tests/chaos/chaos.o $(OUT)/tests/chaos/common.o $(OUT)/tests/chaos/caps.o \
              $(OUT)/tests/chaos/routes.o $(OUT)/tests/chaos/cluster_check.o $(OUT)/tests/chaos/cluster.o $(SUPPORT_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

chaos: deps
	$(MAKE) $(BIN) $(OUT)/chaos
	$(OUT)/chaos --bin $(BIN) --services tests/services.sh --jobs $(CHAOS_JOBS) \
		--kills $(CHAOS_KILLS) --backend-kills $(CHAOS_BACKEND_KILLS) \
		--redis-restarts $(CHAOS_REDIS_RESTARTS) --producers $(CHAOS_PRODUCERS) \
		--timeout $(CHAOS_TIMEOUT) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) \
		$(if $(CHAOS_CAPS),--caps $(CHAOS_CAPS)) $(if $(CHAOS_ROUTES),--routes 1) \
		$(if $(CHAOS_CLUSTER),--cluster 1) $(if $(CHAOS_CLUSTER_KILLS),--cluster-kills $(CHAOS_CLUSTER_KILLS)) \
		$(if $(CHAOS_SLOT_MOVES),--slot-moves $(CHAOS_SLOT_MOVES)) $(CHAOS_ARGS)

# The same faults with every queue capped, skewed tenants and a consumer popping.
chaos-caps:
	$(MAKE) chaos CHAOS_CAPS=$(or $(CHAOS_CAPS),200)

# The same faults with three targets: two of the four queues routed to two
# more Redis (--route), the Redis restarts spread over the three, and route
# changes between relay restarts (r2 removed, r3 added; the normal set again).
chaos-routes:
	$(MAKE) chaos CHAOS_ROUTES=1

# The same with a Redis Cluster too (services.sh cluster-start: 3 masters, a
# replica each): three hash-tagged queues routed to it with --format bullmq
# and --redis-wait-replicas 1, and faults of its own: a master SIGKILLed, its
# replica promoted, the master revived; a slot moved key by key while jobs
# flow. The checker reads BullMQ's lists at each slot's master.
chaos-cluster:
	$(MAKE) chaos CHAOS_ROUTES=1 CHAOS_CLUSTER=1

# The steady chaos test: one relay that is never restarted (so nothing resets its
# cursor), producers that interleave xid assignment and staging across sessions,
# no faults; every committed job must reach Redis once, within 2 s of its commit.
# Defaults: a full run of about 2.5 minutes.
CHAOS_STEADY_SECONDS ?= 120
CHAOS_STEADY_RATE ?= 1500
CHAOS_STEADY_ARGS ?=

$(OUT)/chaos-steady: $(OUT)/tests/chaos/steady.o $(OUT)/tests/chaos/common.o $(SUPPORT_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

chaos-steady: deps
	$(MAKE) $(BIN) $(OUT)/chaos-steady
	$(OUT)/chaos-steady --bin $(BIN) --services tests/services.sh --seconds $(CHAOS_STEADY_SECONDS) \
		--rate $(CHAOS_STEADY_RATE) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) $(CHAOS_STEADY_ARGS)

$(OUT)/bench/%.o: tests/bench/%.c tests/bench/bench.h tests/support/*.h include/*.h | $(OUT)
	@mkdir -p $(OUT)/bench
	$(CC) $(CPPFLAGS) -Itests -Itests/bench -pthread $(CFLAGS) -c -o $@ $<

$(OUT)/bench/bench: $(BENCH_SRC:tests/bench/%.c=$(OUT)/bench/%.o) $(OUT)/buf.o $(SUPPORT_LIB)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(LDLIBS)

deps:
	@sh tests/deps.sh

test-unit: deps
	$(MAKE) $(OUT)/check_unit
	$(OUT)/check_unit
	$(MAKE) man-check docker-check layers-check

# The relay's structure (docs/development.md): no circle between its modules,
# no relay/*.c over 600 lines, one batch's way entering at most 12 files.
layers-check: $(LIB_OBJ) $(OUT)/main.o $(OUT)/gen_man.o
	$(PYTHON) tests/layers.py $(OUT)
	$(PYTHON) tests/layers_test.py -q

# mandoc's linter on the generated page: any warning fails.
man-check: $(MAN)
	mandoc -Tlint -W warning $(MAN)

# The Dockerfile's rules (hadolint is not packaged for Debian) and the compose file's shape;
# then each rule of our own, on a file that breaks it.
docker-check:
	$(PYTHON) tests/docker_check.py docker/Dockerfile docker/docker-compose.yml
	$(PYTHON) tests/docker_check_test.py -q

# docker/Dockerfile built with buildah from a base mmdebstrap makes (no registry),
# then migrate and the relay run from it with podman against throwaway servers.
# Root; installs buildah, podman, mmdebstrap and runc; leaves no images behind.
image-test: deps
	bash tests/image_test.sh

# The suites that need real servers run side by side: TEST_JOBS workers, each
# with its own throwaway Postgres and Redis (tests/services.sh, stopped by
# PID), take them one by one (tests/parallel.sh). The bench is only built
# here (so it keeps compiling), not run: see `make bench`.
TEST_JOBS ?= 5
CHECK_RUN = check:$(OUT)/check_integration
# The client libraries (clients/) with their real frameworks and workers, and
# every command README.md, docs/*.md and the clients' READMEs mark runnable
# with the drift checks (tests/doc_test.sh); not again under SAN=1, whose
# relay the integration suites already run.
CLIENT_RUNS = $(wildcard clients/*/test/run clients/*/tests/run)
test-integration: deps
	$(MAKE) $(BIN) $(OUT)/check_integration $(OUT)/bench/bench
	STAGEDRAIN_BIN=$(BIN) bash tests/parallel.sh $(TEST_JOBS) $(CHECK_RUN)

test-clients: deps
	$(MAKE) $(BIN)
	STAGEDRAIN_BIN=$(BIN) bash tests/parallel.sh $(TEST_JOBS) $(CLIENT_RUNS)

doc-test: deps
	$(MAKE) $(BIN)
	STAGEDRAIN_BIN=$(BIN) bash tests/services.sh run bash tests/doc_test.sh

# All of them in one queue.
test-servers: deps
	$(MAKE) $(BIN) $(OUT)/check_integration $(OUT)/bench/bench
	STAGEDRAIN_BIN=$(BIN) bash tests/parallel.sh $(TEST_JOBS) $(if $(SAN),,$(CLIENT_RUNS) tests/doc_test.sh) $(CHECK_RUN)

test: test-unit test-ops test-servers

# make install into a scratch DESTDIR, then man finds the page and the binary runs.
test-ops: deps
	$(MAKE) $(BIN) $(MAN)
	bash tests/install_test.sh

install: $(BIN) $(MAN)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)/sql $(DESTDIR)$(DATADIR)/examples
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(BINDIR)/stagedrain
	$(INSTALL) -m 644 $(MAN) $(DESTDIR)$(MANDIR)/man1/stagedrain.1
	$(INSTALL) -m 644 sql/*.sql $(DESTDIR)$(DATADIR)/sql/
	$(INSTALL) -m 644 contrib/stagedrain.service contrib/stagedrain.env $(DESTDIR)$(DATADIR)/examples/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/stagedrain $(DESTDIR)$(MANDIR)/man1/stagedrain.1
	rm -rf $(DESTDIR)$(DATADIR)

demo: deps all
	bash tests/demo.sh

# libFuzzer over job_build and every format (pure, so they link alone):
# replays tests/fuzz/corpus, then fuzzes a copy of it for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
build/fuzz/fuzz_job: tests/fuzz/fuzz_job.c $(JOB_SRC) include/*.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(WARN) -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -Iinclude $(shell $(PKG_CONFIG) --cflags jansson) \
		-o $@ $(filter %.c,$^) $(shell $(PKG_CONFIG) --libs jansson)

fuzz:
	@sh tests/deps.sh clang libclang-rt-dev make pkg-config libjansson-dev
	$(MAKE) build/fuzz/fuzz_job
	sh tests/fuzz/run.sh build/fuzz/fuzz_job $(FUZZ_SECONDS)

# Starts its own throwaway servers, runs the relay binary as a real process,
# prints one table and writes it to $(OUT)/bench.txt.
bench: deps all
	$(MAKE) $(OUT)/bench/bench
	$(OUT)/bench/bench --bin $(BIN) --out $(OUT)/bench.txt $(BENCH_ARGS)

# Every C source folder, in the daemon's style (.clang-format); CI fails on a difference.
FORMAT_SRC = $(wildcard relay/*.c include/*.h tests/*.c tests/*.h tests/*/*.c tests/*/*.h)

format:
	@sh tests/deps.sh clang-format
	clang-format -i $(FORMAT_SRC)

format-check:
	@sh tests/deps.sh clang-format
	clang-format --dry-run --Werror $(FORMAT_SRC)

clean:
	rm -rf build bin

help:
	@echo "make            build bin/stagedrain"
	@echo "make demo       throwaway Postgres+Redis, stage jobs, relay them, show Redis"
	@echo "make bench      throughput, latency, long-transaction and memory figures (BENCH_ARGS=...)"
	@echo "make test       unit, integration, client and doc suites against real servers, TEST_JOBS=5 at once"
	@echo "                (SAN=1: ASan+UBSan, unit and integration only)"
	@echo "make test-unit / test-integration / test-clients / doc-test   one part of make test"
	@echo "make image-test build docker/Dockerfile (buildah, mmdebstrap) and run the relay from it (podman)"
	@echo "make chaos      kill leaders, backends and redis while jobs flow; check redis"
	@echo "                (CHAOS_JOBS=200000 CHAOS_KILLS=50 CHAOS_BACKEND_KILLS=10 CHAOS_REDIS_RESTARTS=3)"
	@echo "make chaos-caps the same with --max-queue-length 200, tenants and a consumer (CHAOS_CAPS=N)"
	@echo "make chaos-routes the same with two queues routed to two more Redis, routes changed between restarts"
	@echo "make chaos-cluster the same with three queues on a redis cluster (bullmq), masters killed, slots moved"
	@echo "make chaos-steady  one relay, no faults, interleaved producers: every job once, within 2 s"
	@echo "                (CHAOS_STEADY_SECONDS=120 CHAOS_STEADY_RATE=1500)"
	@echo "make fuzz       libFuzzer over row -> job JSON for FUZZ_SECONDS (default 60)"
	@echo "make format     reformat every C source in the daemon's style (format-check: only check)"
	@echo "make install    PREFIX=/usr/local DESTDIR=: binary, man page, SQL, systemd example"
	@echo "make clean      remove build output"

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

LIBS_PC = libpq hiredis jansson libmicrohttpd
CPPFLAGS += -Iinclude -I$(OUT) $(shell $(PKG_CONFIG) --cflags $(LIBS_PC) 2>/dev/null)
CFLAGS += $(WARN) $(OPT) -pthread
LDFLAGS += $(filter -fsanitize%,$(OPT)) -pthread
LDLIBS += $(shell $(PKG_CONFIG) --libs $(LIBS_PC) 2>/dev/null) -lm
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

# Modules shared by the daemon and the tests; main.c only wires them.
LIB_SRC = relay/buf.c relay/log.c relay/config.c relay/job.c relay/pg_source.c \
          relay/redis_sink.c relay/drain.c relay/migrate.c relay/backoff.c relay/batch.c relay/fence.c relay/gaps.c \
          relay/metrics.c relay/watch.c relay/http.c
LIB_OBJ = $(LIB_SRC:relay/%.c=$(OUT)/%.o) $(OUT)/sql_embed.o
UNIT_SRC = tests/unit_main.c tests/check_config.c tests/check_job.c tests/check_buf.c \
           tests/check_backoff.c tests/check_fence.c tests/check_gaps.c tests/check_metrics.c
INTEG_SRC = tests/integration_main.c tests/harness.c tests/check_relay.c \
            tests/check_faults.c tests/check_leader.c tests/check_e2e.c tests/check_sink.c \
            tests/check_cursor.c tests/check_security.c tests/check_http.c

BIN = $(OUT)/stagedrain
.PHONY: all test test-unit test-integration deps demo clean format format-check help

all: $(BIN) bin/stagedrain

bin/stagedrain: $(BIN)
	@mkdir -p bin
	@if [ "$(OUT)" = build ]; then cp $(BIN) $@; fi

$(BIN): $(OUT)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(OUT)/%.o: relay/%.c include/*.h | $(OUT)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(OUT)/tests/%.o: tests/%.c include/*.h tests/*.h | $(OUT)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -c -o $@ $<

# The migrations are compiled into the binary so the container needs no files.
$(OUT)/sql_embed.c: sql/*.sql sql/embed.sh | $(OUT)
	sh sql/embed.sh sql/[0-9]*.sql > $@

$(OUT)/sql_embed.o: $(OUT)/sql_embed.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(OUT):
	mkdir -p $(OUT)/tests

$(OUT)/check_unit: $(UNIT_SRC:tests/%.c=$(OUT)/tests/%.o) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

$(OUT)/check_integration: $(INTEG_SRC:tests/%.c=$(OUT)/tests/%.o) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

deps:
	@sh tests/deps.sh

test-unit: deps
	$(MAKE) $(OUT)/check_unit
	$(OUT)/check_unit

# The harness starts a throwaway Postgres and Redis, runs the suites, stops them by PID.
test-integration: deps
	$(MAKE) $(BIN) $(OUT)/check_integration
	STAGEDRAIN_BIN=$(BIN) bash tests/services.sh run $(OUT)/check_integration

test: test-unit test-integration

demo: deps all
	bash tests/demo.sh

format:
	clang-format -i relay/*.c include/*.h tests/*.c tests/*.h

format-check:
	clang-format --dry-run --Werror relay/*.c include/*.h tests/*.c tests/*.h

clean:
	rm -rf build bin

help:
	@echo "make            build bin/stagedrain"
	@echo "make demo       throwaway Postgres+Redis, stage jobs, relay them, show Redis"
	@echo "make test       unit and integration suites against real servers (SAN=1: ASan+UBSan)"
	@echo "make clean      remove build output"

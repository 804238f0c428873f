# Two commands do all set-up on a fresh machine:
#   make demo   - the main job (Spark -> embedded reference broker -> consumer group); ROWS=20000 for a subset
#   make test   - the whole test suite
# Both create (or reuse) the virtual environment in .venv first.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ROWS   ?=
PYTEST_ARGS ?=

.PHONY: install demo test lint clean ext

install: $(STAMP)

C_SOURCES := $(shell find sdk broker-reference integrations -name "*.c" 2>/dev/null)

$(STAMP): pyproject.toml setup.py $(C_SOURCES)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[spark,dev]"
	@touch $(STAMP)

# make ext - rebuild the optional C accelerators in place (after editing a *.c file); a lock keeps
# concurrent builds apart.
ext:
	flock /tmp/rocketmq-sdk-build.lock $(PY) -m pip install --quiet --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true

demo: install
	$(PY) examples/flights_demo.py $(if $(ROWS),--rows $(ROWS),)

# make test also runs the codec, store and producer tests a second time on the pure-Python twins of
# the C accelerators (ROCKETMQ_PURE_PYTHON=1), so both implementations stay tested (~20 s);
# PURE_PASS=0 skips that pass (e.g. with PYTEST_ARGS selecting a few tests)
PURE_TESTS ?= tests/protocol tests/remoting tests/store tests/producer
PURE_PASS ?= 1

test: install
	$(PY) -m pytest $(PYTEST_ARGS)
	$(if $(filter 1,$(PURE_PASS)),ROCKETMQ_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider $(PURE_TESTS))

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
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

# The README and CI call these targets as they are.
VENV := .venv
PY := $(VENV)/bin/python
# The C functions' ceiling (lizard: cyclomatic complexity, lines): every one at most 60 lines
# (as the Python's), and no more complex than the worst today (a JSON or protobuf read's
# field dispatch); the count above complexity 10 only goes down (tests/unit/test_structure.py)
C_MAX_CCN := 18
C_MAX_LINES := 60
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export PATH := $(abspath $(VENV)/bin):$(PATH)

.PHONY: setup demo test test-fast test-unit lint fmt clean airflow pack bench sanitize

setup:
	bash scripts/setup.sh

# The packed environment and code for a cluster's executors (README "Spark on a cluster").
pack: setup
	bash scripts/pack.sh

# README command 1: set everything up, then run the main job.
demo: setup
	$(VENV)/bin/recon demo

# README command 2: the whole test suite (lint, types and the sanitizer run included).
test: setup lint sanitize
	bash scripts/run-tests.sh

# The C modules built with AddressSanitizer and UndefinedBehaviorSanitizer, their differential
# tests and the record loops' mutation fuzz run against them (scripts/sanitize.sh).
sanitize: setup
	bash scripts/sanitize.sh

# Everything but the end-to-end tests (tests/e2e, marked slow): a quick check while working.
test-fast: setup lint
	bash scripts/run-tests.sh -m "not slow"

# The unit tests alone: no Spark, no Airflow, a tenth of each property test's examples (under a
# minute; `make test` runs them all in full).
test-unit:
	RECON_QUICK_TESTS=1 bash scripts/run-tests.sh tests/unit -q -p no:randomly -m "not slow"

# Airflow with a scheduler and the UI (http://localhost:8080) on this machine.
airflow: setup
	$(VENV)/bin/python -m recon.demo.airflow_local

# The speed benchmark (README "Speed"): copy floor, naive job and `recon run` on the same hour of
# each format at two sizes; results in benchmarks/results/. BENCH_ARGS="--sizes 100k,1m" etc.
bench: setup
	$(PY) -m benchmarks.run $(BENCH_ARGS)

lint:
	$(VENV)/bin/ruff check recon dags deploy tests scripts benchmarks
	$(VENV)/bin/ruff format --check recon dags deploy tests scripts benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lizard -l c -w -C $(C_MAX_CCN) -L $(C_MAX_LINES) recon/decode/formats/*.c recon/decode/formats/*.h

fmt:
	$(VENV)/bin/ruff format recon dags deploy tests scripts benchmarks
	$(VENV)/bin/ruff check --fix recon dags deploy tests scripts benchmarks

clean:
	rm -rf $(VENV) recon/_proto demo-data var dist .pytest_cache .mypy_cache .ruff_cache

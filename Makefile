# The two quickstart commands (see README.md):
#   make example   runs the main example end to end on the embedded default (no server)
#   make test      runs the whole suite: lint, types, unit + real-Kafka + Spark tests, docs
# Both install what they need into .venv first (Python packages; `test` also the Kafka jars,
# and Debian's chromium for the browser tests when it is missing: `make chromium`).

PYTHON ?= python3
# pytest's worker processes in `make test` (pytest-xdist; tests/support/suite_scheduling.py
# says which tests share one). Most of the suite waits on brokers, JVMs and worker
# processes, so more workers than cores pays; TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install chromium example test lint typecheck unit compat docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,spark,docs,bench]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

# The browser tests' Chromium (tests/support/browser.py): Debian's package, installed here
# when missing and root (as CI runs); otherwise this says how, and the browser tests fail
# with the same advice (they never skip).
CHROMIUM := /usr/bin/chromium
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && apt-get install -y -q --no-install-recommends chromium; \
	  else \
	    echo "no $(CHROMIUM): the browser tests will fail. Install it:" \
	      "sudo apt-get install -y --no-install-recommends chromium"; \
	  fi; \
	fi

example: install
	$(BIN)/python examples/enrich_rest.py

lint: install
	$(BIN)/ruff check aiostreams tests benchmarks examples

typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy --strict examples  # the examples are what users copy: typed as strictly

unit: install chromium
	$(BIN)/python -m aiostreams.localkafka fetch
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The compatibility run: a representative set of broker tests on the Kafka release the
# suite's broker does not run (aiostreams/localkafka/releases.py; the suite: 4.4.0).
COMPAT_KAFKA ?= 3.9.1
COMPAT_TESTS := tests/transport/test_kafka.py tests/integration/test_kafka_app.py \
                tests/integration/test_kafka_static_membership.py \
                tests/cli/test_cli_groups_protocols.py tests/localkafka/test_releases.py
compat: install
	$(BIN)/python -m aiostreams.localkafka fetch --version $(COMPAT_KAFKA)
	AIOSTREAMS_KAFKA_VERSION=$(COMPAT_KAFKA) $(BIN)/python -m pytest -m kafka $(COMPAT_TESTS)

docs: install
	$(BIN)/mkdocs build --strict --site-dir $(VENV)/site
	@echo "The site is in $(VENV)/site/. Serve it with"
	@echo "  $(BIN)/python -m http.server -b 127.0.0.1 -d $(VENV)/site 8000   # then open http://127.0.0.1:8000/"
	@echo "or, to rebuild as you edit: $(BIN)/mkdocs serve   # http://127.0.0.1:8000/"

test: lint typecheck unit compat docs

bench: install
	$(BIN)/python -m benchmarks all

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

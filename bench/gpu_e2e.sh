#!/usr/bin/env bash
# bench/e2e.py on a lent GPU machine (the `device` tool's `run`), from the repo root: the whole product
# (`prisma serve`, embedded mode, its jobs in-process) driven through its HTTP API on N demo notes, the
# embedder and the SAE at device 'auto' (CUDA there), naming and the rest on that machine's CPUs.
#   carry: .dev/whl2 .dev/e5-transfer.bin.xz .dev/e5-transfer.json
# .dev/whl2 holds the locked wheels of the runtime that the machine's image lacks (fastapi, starlette,
# uvicorn, pydantic, sqlalchemy, alembic, faiss-cpu, lark, arq, transformers, ...: 42 MB), .dev/e5-*
# is `bench/gpu_model.py make`'s transfer copy of the default model (its rows cover the first 50,000
# demo notes' tokens, seed 0, which bench/e2e.py generates). Writes e2e.log and e2e-gpu.json under $OUT
# (copy e2e-gpu.json to bench/results/), the server's log where the run failed.
# Prepare (here, once; .dev/ is in .git/info/exclude):
#   python bench/gpu_model.py make
#   pip download -d .dev/whl2 --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
#     $(grep -E '^(fastapi|opentelemetry-api|pyjwt|starlette|uvicorn|pydantic|pydantic-core|pydantic-settings|sqlalchemy|alembic|mako|arq|redis|hiredis|python-multipart|itsdangerous|lark|snowballstemmer|faiss-cpu|annotated-types|typing-inspection|typing-extensions|python-dotenv|ollama|h11|transformers)==' requirements/runtime.lock | sed 's/ .*//')
set -euo pipefail
OUT=${OUT:-/tmp/gpu-out}
N=${N:-50000}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl2/*.whl
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
nproc
python3 bench/gpu_model.py build .dev/e5-transfer.bin.xz /tmp/models/e5
export PRISMA_MODELS='{"default": "/tmp/models/e5", "multilingual-e5-small": "/tmp/models/e5"}'
python3 bench/import_check.py || true  # every module that fails to import, named at once
status=0
# A call that stops at the limit keeps its data dir on the machine while it is warm: the next call, with
# RESUME=/tmp/prisma-e2e-…, goes on from the stage it stopped in (the job in flight from its checkpoint).
if [ -n "${RESUME:-}" ]; then args=(--resume "$RESUME"); else args=(--n "$N" --embedding computed --no-save-donors --tmp /tmp); fi
timeout "${E2E_TIMEOUT:-540}" python3 bench/e2e.py "${args[@]}" \
  --out "$OUT/e2e-gpu.json" 2>&1 | tee -a "$OUT/e2e.log" || status=$?
for log in /tmp/prisma-e2e-*/serve.log; do [ -f "$log" ] && tail -c 200000 "$log" > "$OUT/serve.log"; done
exit "$status"

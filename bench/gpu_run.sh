#!/usr/bin/env bash
# The GPU checks in one command, on a lent GPU machine (the `device` tool's `run`), from the repo root:
#   carry: .dev/whl .dev/e5-transfer.bin.xz .dev/e5-transfer.json
#          .dev/data/medical-abstracts/medical_tc_test.csv .dev/data/negex/rsAnnotations-1-120-random.txt
# where .dev/whl holds the locked wheels the machine lacks (transformers, sentence-transformers,
# tokenizers, huggingface-hub and its httpx2, pydantic, eai-sparsify and its small needs), .dev/e5-*
# is `bench/gpu_model.py make`'s transfer copy of the model and .dev/data links ../shared/data.
# Writes test_cuda.log, gpu.json and gpu.log under $OUT (copy gpu.json to bench/results/).
set -euo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 bench/gpu_model.py build .dev/e5-transfer.bin.xz /tmp/models/e5
export PRISMA_MODELS='{"default": "/tmp/models/e5", "multilingual-e5-small": "/tmp/models/e5"}'
python3 -m pytest --noconftest -p no:cacheprovider tests/test_cuda.py -v 2>&1 | tee "$OUT/test_cuda.log" || true
python3 bench/gpu.py --abstracts .dev/data/medical-abstracts/medical_tc_test.csv \
  --negex .dev/data/negex/rsAnnotations-1-120-random.txt --out "$OUT/gpu.json" "$@" 2>&1 | tee "$OUT/gpu.log"

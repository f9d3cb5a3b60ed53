#!/usr/bin/env bash
# The GPU checks in one command, on a lent GPU machine (the `device` tool's `run`), from the repo root:
#   carry: .dev/whl .dev/e5-transfer.bin.xz .dev/e5-transfer.json
#          .dev/data/medical-abstracts/medical_tc_test.csv .dev/data/negex/rsAnnotations-1-120-random.txt
# where .dev/whl holds the locked wheels the machine lacks (transformers, sentence-transformers,
# tokenizers, huggingface-hub and its httpx2, pydantic, eai-sparsify and its small needs), .dev/e5-*
# is `bench/gpu_model.py make`'s transfer copy of the model and .dev/data links ../shared/data.
# Writes test_cuda.log, gpu.json and gpu.log under $OUT (copy gpu.json to bench/results/).
# Prepare (here, once; .dev/ is in .git/info/exclude):
#   python bench/gpu_model.py make                       # → .dev/e5-transfer.bin.xz (16.7 MB) + .json
#   ln -sfn "$(realpath ../shared/data)" .dev/data
#   pip download -d .dev/whl --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     transformers==5.24.0 sentence-transformers==6.2.0 tokenizers==0.23.3 huggingface-hub==2.4.0 \
#     httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 pydantic==2.14.4 pydantic-core==2.50.5 \
#     annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 eai-sparsify==1.3.3 \
#     natsort simple_parsing docstring_parser                # 21 MB; the rest is on the machine
# `bash bench/gpu_run.sh --only-sae --out $OUT/gpu-sae.json` runs (c) alone, with a profile.
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

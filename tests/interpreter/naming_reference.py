"""A small segment corpus named end to end, for checking that a faster naming names the same.

The texts are sentences of demo notes, stored in naming_fixture/naming_segments.json (so that a change to the demo's
generator changes nothing here); their vectors are hashed bags of words (D dimensions, unit norm), the
label embedder the same hash, and the codes a TopK of a seeded random encoder. `python -m
tests.interpreter.naming_reference` rewrites naming_fixture/naming_expected.json from the code as it is.

Bags of words tie often (many distinct texts are mathematically as near to a third), and which of two tied
texts comes first then turns on the last bit of a float32 sum: on the BLAS kernel OpenBLAS picks for the CPU
(its AVX-512 and its AVX2 kernels round differently) and on numpy's sorts for the CPU. So the corpus is named,
and its expectation written, in a process whose arithmetic is pinned to what every x86-64 CPU with AVX2 does
alike (PINNED): OpenBLAS's Haswell kernels on one thread, numpy's AVX2 loops.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from contracts.interpret import BackendOptions
from services.interpreter import ahead as ahead_module
from services.interpreter.corpus import Corpus
from services.interpreter.naming import Namer, naming_order
from services.interpreter.phrases import PhraseBackend

DATA = Path(__file__).parent / "naming_fixture"
SEGMENTS, EXPECTED = DATA / "naming_segments.json", DATA / "naming_expected.json"
D, N_FEATURES, K, BATCH = 64, 96, 4, 32
PINNED = {"OPENBLAS_CORETYPE": "Sandybridge", "OPENBLAS_NUM_THREADS": "1", "NPY_ENABLE_CPU_FEATURES": "X86_V3"}
ROOT = Path(__file__).resolve().parents[2]


def write_segments(notes: int = 200) -> None:
    """The demo's first `notes` notes (seed 0), split into their non-empty lines."""
    from gateway.demo.corpus import generate_notes

    lines = [s.strip() for n in generate_notes(notes, seed=0) for s in n.text.splitlines()]
    SEGMENTS.write_text(json.dumps([s for s in lines if len(s) > 3], ensure_ascii=False, indent=0) + "\n")


def hashed_bag(texts: list[str]) -> np.ndarray:
    """float32 [len(texts), D] unit-norm: each lower-cased word adds one to its crc32's dimension (a text's
    vector does not depend on the texts embedded with it: services/embedder/encoder.py forward_chunks)."""
    out = np.zeros((len(texts), D), np.float32)
    for r, text in enumerate(texts):
        for w in re.findall(r"\w+", text.lower()):
            out[r, zlib.crc32(w.encode()) % D] += 1.0
        out[r, len(text) % 2] += 0.05  # no zero vector; a text's vector its own alone, as the embedder's are
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def reference_corpus() -> Corpus:
    texts = json.loads(SEGMENTS.read_text())
    vectors = hashed_bag(texts)  # [N, D]
    encoder = np.random.default_rng(0).normal(size=(N_FEATURES, D)).astype(np.float32)
    pre = np.maximum(vectors @ encoder.T, 0)  # [N, n]
    idx = np.argsort(-pre, axis=1, kind="stable")[:, :K]
    rows = np.repeat(np.arange(len(texts)), K)
    codes = sp.csr_matrix((np.take_along_axis(pre, idx, 1).ravel(), (rows, idx.ravel())),
                          shape=(len(texts), N_FEATURES), dtype=np.float32)
    codes.eliminate_zeros()
    return Corpus(pa.array(texts, type=pa.string()), np.arange(len(texts), dtype=np.int64), vectors, codes.tocsc())


def name_reference(ahead: int = 0, child: bool = False) -> list:
    """Every feature of the reference corpus named in naming order, BATCH at a time, controls from the
    labels before (as runs.py does), as JSON; with `ahead`, groups of `ahead` batches prepared (Namer.prepare)
    one group ahead, as runs.py prepares them, drawn by a child process with `child` (naming.py ahead_process)."""
    corpus = reference_corpus()
    if child:  # chunks of half a batch: the child draws a group's first chunks, this process its last ones
        ahead_module.CHUNK = BATCH // 2
    namer = Namer(corpus, [(BackendOptions(backend="keywords"), PhraseBackend())], hashed_bag, ahead_process=child)
    records: list = []
    features = naming_order(corpus)
    group = BATCH * ahead
    for i in range(0, len(features), BATCH):
        if group and i % group == 0:
            for start in ([0] if i == 0 else []) + [i + group]:
                asyncio.run(namer.prepare(features[start:start + group]))
        pool = [r.interpretations[r.best].label for r in records[-256:] if r.best is not None]
        records += asyncio.run(namer.name_features(features[i:i + BATCH], pool))
    namer.close()
    return [without_times(r.model_dump(mode="json")) for r in records]


def without_times(value: object) -> object:
    """`value` without its `created_at` fields (when it was named, not what)."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "created_at"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def name_pinned(ahead: int = 0, child: bool = False) -> list:
    """`name_reference(ahead, child)` as a process with PINNED arithmetic names it (numpy and OpenBLAS read these
    variables when loaded, so not in this process)."""
    done = subprocess.run([sys.executable, "-m", "tests.interpreter.naming_reference", "--print", str(ahead),
                           str(int(child))],
                          cwd=ROOT, env={**os.environ, **PINNED}, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"naming the reference corpus failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    if any(os.environ.get(k) != v for k, v in PINNED.items()):  # again, in a process with PINNED arithmetic
        os.execve(sys.executable, [sys.executable, "-m", "tests.interpreter.naming_reference", *sys.argv[1:]],
                  {**os.environ, **PINNED})
    if sys.argv[1:2] == ["--print"]:
        print(json.dumps(name_reference(int(sys.argv[2]), sys.argv[3:4] == ["1"])))
    else:
        if not SEGMENTS.exists():
            write_segments()
        EXPECTED.write_text(json.dumps(name_reference(), ensure_ascii=False, indent=0) + "\n")

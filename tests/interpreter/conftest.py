"""A small synthetic corpus in a real artifact store, in the layout the embedder and SAE write.

d = n = 8, k = 2. Document i is about topic t = i % 6 (topics 6 and 7 never fire); its vector
points along axis t (plus noise); the SAE's encoder is the identity, so feature t fires on
the documents of topic t with an activation that grows with i. Every document has two chunks:
a filler sentence, then a sentence with the topic's words; the second chunk's vector is the
one along axis t, so the strongest chunk for feature t is the second.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from safetensors.numpy import save as st_save

from artifacts import ArtifactStore
from contracts.interpret import CorpusRef

TOPICS = [
    "asthma wheezing inhaler", "fracture cast orthopaedic", "diabetes insulin glucose",
    "migraine headache aura", "eczema rash dermatitis", "otitis earache eardrum",
]
N_DOCS, D = 240, 8


def topic_of(i: int) -> int:
    return i % len(TOPICS)


def build_corpus(root: Path) -> tuple[ArtifactStore, CorpusRef]:
    rng = np.random.default_rng(0)
    store = ArtifactStore(str(root))
    texts, positions, vectors, chunk_vecs, cs, ce = [], [], [], [], [], []
    for i in range(N_DOCS):
        t = topic_of(i)
        filler = f"Visit number {i} of a routine follow-up, nothing else to report today."
        topical = f"The child has {TOPICS[t]} and the plan concerns {TOPICS[t].split()[0]}."
        text = f"{filler} {topical}"
        texts.append(text)
        strength = 0.5 + i / N_DOCS
        v_topic = np.eye(D)[t] * strength + rng.normal(0, 0.05, D)
        v_fill = np.eye(D)[7] * 0.3 + rng.normal(0, 0.05, D)
        doc = v_topic + v_fill
        vectors.append(doc / np.linalg.norm(doc))
        chunk_vecs += [v_fill, v_topic]
        positions += [i, i]
        cs += [0, len(filler) + 1]
        ce += [len(filler), len(text)]
    table = pa.table({"position": list(range(N_DOCS)), "doc_id": [500 + i for i in range(N_DOCS)],
                      "external_id": [f"d{i}" for i in range(N_DOCS)], "text": texts,
                      "labels": [[] for _ in range(N_DOCS)], "metadata": ["{}"] * N_DOCS})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    snap = store.write_bytes("datasets/1/snapshot.parquet", buf.getvalue())
    x = np.asarray(vectors, np.float32)
    shards = []
    for s, (lo, hi) in enumerate(((0, 128), (128, N_DOCS))):
        b = io.BytesIO()
        np.save(b, x[lo:hi])
        shards.append(store.write_bytes(f"emb/embeddings/shard-{s:05d}.npy", b.getvalue()).uri)
    b = io.BytesIO()
    np.savez(b, vectors=np.asarray(chunk_vecs, np.float16), position=np.asarray(positions, np.int64),
             token_start=np.zeros(len(cs), np.int32), token_end=np.zeros(len(cs), np.int32),
             char_start=np.asarray(cs, np.int32), char_end=np.asarray(ce, np.int32))
    chunks = store.write_bytes("emb/chunks/shard-00000.npz", b.getvalue()).uri
    tensors = {"encoder.weight": np.eye(D, dtype=np.float32), "encoder.bias": np.zeros(D, np.float32),
               "W_dec": np.eye(D, dtype=np.float32), "b_dec": np.zeros(D, np.float32)}
    store.write_bytes("sae/1/sae.safetensors", st_save(tensors))
    store.write_bytes("sae/1/cfg.json", json.dumps({"activation": "topk", "k": 2, "num_latents": D, "d_in": D,
                                                      "expansion_factor": 1}).encode())
    pre = x  # identity encoder, zero biases
    idx = np.argsort(-pre, axis=1)[:, :2]
    rows = np.repeat(np.arange(N_DOCS), 2)
    vals = np.maximum(np.take_along_axis(pre, idx, 1), 0).ravel()
    codes = sp.csr_matrix((vals, (rows, idx.ravel())), shape=(N_DOCS, D), dtype=np.float32)
    codes.eliminate_zeros()
    b = io.BytesIO()
    sp.save_npz(b, codes.tocsc(), compressed=False)
    csc = store.write_bytes("sae/1/codes.csc.npz", b.getvalue()).uri
    return store, CorpusRef(snapshot_uri=snap.uri, embeddings=shards, chunks=[chunks], codes_csc_uri=csc,
                            sae_uri=store.uri("sae/1"))


def topic_embed(texts: list[str]) -> np.ndarray:
    """A stand-in embedder: a label points along the axis of the topic whose words it names."""
    out = np.zeros((len(texts), D), np.float32)
    for r, text in enumerate(texts):
        for t, words in enumerate(TOPICS):
            out[r, t] += sum(w in text.lower() for w in words.split())
        out[r, 7] += 0.1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[ArtifactStore, CorpusRef]:
    return build_corpus(tmp_path_factory.mktemp("interp-store"))

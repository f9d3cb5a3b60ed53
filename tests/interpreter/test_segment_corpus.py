"""Naming on segments: the interpreter's corpus of an SAE run trained on sentences is made of those
sentences (their spans of the notes, vectors and codes), so evidence and keywords are a sentence's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from pydantic import ValidationError

from contracts.interpret import CorpusRef
from services.interpreter.corpus import segment_corpus

TEXTS = ["Febbre da due giorni. Sospetta bronchiolite.", "Tosse secca. Bronchiolite confermata.", "Otite esclusa."]
SPANS = [(0, 0, 21), (0, 22, 44), (1, 0, 12), (1, 13, 37), (2, 0, 14)]  # (document, start, end)


def _inputs() -> tuple[pa.Table, list[dict[str, np.ndarray]], sp.csr_matrix]:
    table = pa.table({"position": [0, 1, 2], "doc_id": [10, 11, 12], "text": TEXTS})
    rng = np.random.default_rng(0)
    shard = {"position": np.array([s[0] for s in SPANS], dtype=np.int64),
             "char_start": np.array([s[1] for s in SPANS], dtype=np.int32),
             "char_end": np.array([s[2] for s in SPANS], dtype=np.int32),
             "vectors": rng.normal(size=(len(SPANS), 8)).astype(np.float16)}
    codes = sp.csr_matrix(np.array([[0, 1.0], [2.0, 0], [0, 0.5], [0, 0], [1.0, 0]], dtype=np.float32))
    return table, [shard], codes


def test_units_are_the_sentences_with_their_documents_ids() -> None:
    corpus = segment_corpus(*_inputs())
    assert [corpus.text(i) for i in range(corpus.n_docs)] == [
        "Febbre da due giorni.", "Sospetta bronchiolite.", "Tosse secca.", "Bronchiolite confermata.", "Otite esclusa."]
    assert corpus.doc_ids.tolist() == [10, 10, 11, 11, 12]
    positions, values = corpus.column(0)  # feature 0 fires on the suspicion and the exclusion sentences
    assert positions.tolist() == [1, 4] and values.tolist() == [2.0, 1.0]
    assert np.allclose(np.linalg.norm(corpus.vectors, axis=1), 1.0, atol=1e-3)


def test_many_documents_are_sampled_whole() -> None:
    table, shards, codes = _inputs()
    corpus = segment_corpus(table, shards, codes, max_documents=2, seed=1)
    kept = set(corpus.doc_ids.tolist())
    assert len(kept) == 2  # every segment of two documents, none of the third
    assert corpus.n_docs == sum(1 for s in SPANS if s[0] + 10 in kept)


def test_mismatched_codes_and_half_a_reference_are_refused() -> None:
    table, shards, codes = _inputs()
    with pytest.raises(ValueError, match="5 segments, 4 segment code rows"):
        segment_corpus(table, shards, codes[:4])
    with pytest.raises(ValidationError, match="segments and segment_codes_uri"):
        CorpusRef(snapshot_uri="s", embeddings=["e"], codes_csc_uri="c", segments=["seg"])

"""Phrase and extractive-span candidates of the keywords back-end, and the cached driving-chunk
search, checked against the plain per-document one (evidence.strongest_chunk)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from services.interpreter.backends.base import NamingRequest
from services.interpreter.backends.keywords import (LABEL_WORDS, KeywordsBackend, best_span, extractive_spans,
                                                    label_words)
from services.interpreter.corpus import ChunkIndex, Corpus
from services.interpreter.evidence import excerpts, strongest_chunk
from services.interpreter.naming import DrivingChunks
from services.interpreter.sae_encoder import SaeEncoder

IT_POS = [
    "Bambino di 6 anni con trauma cranico minore dopo una caduta dalla bicicletta, GCS 15.",
    "Trauma cranico minore in lattante: caduta dal fasciatoio, nessuna perdita di coscienza.",
    "Accesso per trauma cranico minore; osservazione di sei ore, vomito assente.",
    "Caduta dalle scale con trauma cranico minore, TAC non eseguita, dimesso.",
    "Trauma cranico minore durante una partita di calcio, cefalea lieve.",
]
IT_NEG = [
    "Trauma del ginocchio durante una partita di calcio, radiografia negativa.",
    "Febbre da tre giorni e tosse, auscultazione toracica negativa.",
    "Distorsione della caviglia dopo una caduta, bendaggio e riposo.",
    "Dolore addominale e vomito, ecografia nella norma, dimesso.",
    "Otite media acuta con febbre, terapia antibiotica per sette giorni.",
]


@pytest.mark.anyio
async def test_candidates_include_the_known_phrase_and_spans_that_read_like_names():
    result = await KeywordsBackend().name_feature(NamingRequest(0, IT_POS, IT_NEG))
    labels = [c.label for c in result.candidates]
    phrases = [lab for lab in labels if "," not in lab and len(lab.split()) >= 2]
    assert phrases, labels
    assert any(set(p.split()) <= {"trauma", "cranico", "minore"} for p in phrases), labels
    assert all(label_words(lab) <= LABEL_WORDS for lab in labels)
    assert not any(w in labels for w in ("ginocchio", "febbre", "caduta, febbre"))


def test_best_span_is_the_densest_stretch_of_one_sentence_as_written():
    text = "Il bambino presentava un trauma cranico minore dopo una caduta. La TAC era negativa; attività fisica."
    weights = {"trauma cranico": 3.0, "caduta": 2.0, "negativa": 1.0, "attivita fisica": 1.0, "attivita": 0.5}
    assert best_span(text, weights) == (5.0, "trauma cranico minore dopo una caduta")
    assert best_span(text, weights, max_words=3) == (3.0, "trauma cranico")  # the caduta is 6 words on
    assert best_span("La TAC era negativa; attività fisica.", weights) == (1.5, "attività fisica")
    assert best_span("nothing here at all", weights) is None
    got = extractive_spans([text, text, "caduta e trauma cranico"], weights, k=3)
    assert got == ["trauma cranico minore dopo una caduta", "caduta e trauma cranico"]  # no repeats


def random_corpus(seed: int, n_docs: int = 40, d: int = 16, n: int = 24, k: int = 3) -> Corpus:
    """Documents of 1-4 chunks with random vectors and a random TopK encoder."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, n_docs)
    words = [" ".join(f"w{rng.integers(100)}" for _ in range(40 * s)) for s in sizes]
    starts, ends, position = [], [], []
    for p, (text, s) in enumerate(zip(words, sizes)):
        cuts = np.linspace(0, len(text), s + 1).astype(int)
        starts += cuts[:-1].tolist()
        ends += cuts[1:].tolist()
        position += [p] * s
    chunk_vectors = rng.normal(size=(len(position), d)).astype(np.float16)
    chunks = ChunkIndex.from_arrays([{"vectors": chunk_vectors, "position": np.asarray(position),
                                      "char_start": np.asarray(starts, np.int32),
                                      "char_end": np.asarray(ends, np.int32)}], n_docs)
    sae = SaeEncoder(rng.normal(size=(n, d)).astype(np.float32), rng.normal(0, 0.1, n).astype(np.float32),
                     rng.normal(0, 0.1, d).astype(np.float32), k)
    vectors = rng.normal(size=(n_docs, d)).astype(np.float32)
    return Corpus(pa.array(words), np.arange(n_docs), vectors, sp.csc_matrix((n_docs, n), dtype=np.float32),
                  chunks, sae)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_driving_chunks_equal_the_per_document_search(seed: int):
    corpus = random_corpus(seed)
    driving = DrivingChunks(corpus)
    for feature in range(corpus.n_features):
        for p in range(corpus.n_docs):
            assert driving.span(p, feature) == strongest_chunk(corpus, p, feature), (feature, p)
    positions = list(range(corpus.n_docs))
    assert driving.excerpts(5, positions, 120) == excerpts(corpus, 5, positions, 120)


@pytest.mark.anyio
async def test_interleaved_naming_batches_leave_blas_threads_as_they_were(synthetic):
    """Two batches awaiting each other's turns: BLAS is on one thread while either runs, and on its
    own count again once both are done (whatever order they finish in)."""
    import asyncio

    from threadpoolctl import threadpool_info

    from contracts.interpret import BackendOptions
    from services.interpreter.corpus import load_corpus
    from services.interpreter.naming import Namer

    from tests.interpreter.conftest import topic_embed  # noqa: E402

    def blas_threads() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    seen: list[list[int]] = []

    async def slow_embed(texts: list[str]):
        seen.append(blas_threads())
        await asyncio.sleep(0.01)
        return topic_embed(texts)

    store, ref = synthetic
    namer = Namer(load_corpus(store, ref), [(BackendOptions(backend="keywords"), KeywordsBackend())], slow_embed)
    first, second = await asyncio.gather(namer.name_features([0, 1]), namer.name_features([2]))
    assert [r.feature for r in first + second] == [0, 1, 2] and all(r.best is not None for r in first + second)
    assert seen and all(set(s) == {1} for s in seen if s)
    assert blas_threads() == before

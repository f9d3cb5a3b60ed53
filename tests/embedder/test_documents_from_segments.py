"""A run whose `document_vectors` is 'segments': each document's vector is the mean of its segments'
vectors, each weighted by its content tokens (the document text is not read by the model a second time), its chunks are its segments,
a resumed run reuses its shards, and a spec asking for it without segments is refused by name."""

from __future__ import annotations


import numpy as np
import pytest
from pydantic import ValidationError

from artifacts import ArtifactStore
from contracts.embed import EmbeddingRunSpec, EmbedJobPayload
from services.embedder.config import EmbedderSettings
from services.embedder.models import ModelCache
from services.embedder.runs import run_embedding
from tests.embedder.conftest import stored_array

NOTES = [
    "Torace: MV fisiologico. Tosse da 2 giorni.",
    "Sospetta bronchiolite, esclusa polmonite. Torace: MV fisiologico.",
    "Febbre.",
    "Bronchiolite confermata: sibili diffusi, saturazione 93%. Torace: MV ridotto, rantoli fini bilaterali.",
]


def _run(store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache, run_id: int,
         **spec: object):
    payload = EmbedJobPayload(run_id=run_id, snapshot_uri=snapshot(NOTES).uri,
                              artifact_prefix=f"embedding-runs/{run_id}",
                              spec=EmbeddingRunSpec(shard_size=2, segments=True, **spec))
    return payload, run_embedding(payload, store, settings=settings, models=models)


def test_documents_are_the_mean_of_their_segments(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache
) -> None:
    _, pooled = _run(store, snapshot, settings, models, 21, document_vectors="segments")
    _, encoded = _run(store, snapshot, settings, models, 22)
    docs = stored_array(store, pooled.shards)
    seg, position = stored_array(store, pooled.segments, "vectors"), stored_array(store, pooled.segments, "position")
    assert docs.shape == (4, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-5)
    # chunks are the segments, their token spans each segment's content tokens: the weights
    weights = (stored_array(store, pooled.chunks, "token_end") - stored_array(store, pooled.chunks, "token_start")).clip(1)
    assert np.all(weights > 1)
    for d in range(4):  # float16 segment files: the weighted mean of the stored rows, renormalised, to their rounding
        rows = position == d
        mean = (seg[rows].astype(np.float32) * weights[rows, None]).sum(axis=0) / weights[rows].sum()
        assert np.allclose(docs[d], mean / np.linalg.norm(mean), atol=2e-3)
        if rows.sum() > 1:  # not the plain mean: a long clause weighs more than "Torace:"
            plain = seg[rows].astype(np.float32).mean(axis=0)
            assert not np.allclose(docs[d], plain / np.linalg.norm(plain), atol=2e-3)
    # the segments are the very ones an encoded run stores; the documents differ from the encoded ones
    assert np.array_equal(seg, stored_array(store, encoded.segments, "vectors"))
    cos = (docs * stored_array(store, encoded.shards)).sum(axis=1)
    assert cos[2] > 0.999  # "Febbre." is one segment: its vector is the document's
    assert cos[3] < 0.99  # a note of six clauses is not read as one text
    # chunks are the segments: their character spans, one row each
    assert np.array_equal(stored_array(store, pooled.chunks, "char_start"), stored_array(store, pooled.segments, "char_start"))
    assert pooled.n_chunks == pooled.n_segments == len(seg)
    # no second pass over the documents' text: fewer texts embedded than an encoded run's documents + segments
    assert pooled.n_segments_embedded == encoded.n_segments_embedded


def test_a_resumed_run_reuses_its_shards_and_keeps_its_setting(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache
) -> None:
    payload, first = _run(store, snapshot, settings, models, 23, document_vectors="segments")
    again = run_embedding(payload, store, settings=settings, models=models)
    assert (again.shards_computed, again.shards_reused) == (0, 2)
    assert again.n_tokens == first.n_tokens and again.n_chunks == first.n_chunks
    other = payload.model_copy(update={"spec": payload.spec.model_copy(update={"document_vectors": "encoded"})})
    with pytest.raises(Exception, match="document_vectors"):  # the manifest names the setting it was made with
        run_embedding(other, store, settings=settings, models=models)


def test_documents_from_segments_needs_segments() -> None:
    with pytest.raises(ValidationError, match="document_vectors\n.*'segments' .* needs segments: true"):
        EmbeddingRunSpec(document_vectors="segments")
    with pytest.raises(ValidationError, match="document_vectors"):
        EmbeddingRunSpec(segments=True, document_vectors="notes")

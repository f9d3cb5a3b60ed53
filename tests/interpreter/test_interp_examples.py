"""A feature's documents for the feature page: quantiles covered, activations true to the codes,
the driving chunk is the strongest one, near misses are non-activating and nearest first; and
the same through the interpreter's HTTP app."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from contracts.examples import ExamplesRequest, FeatureExamples
from services.interpreter.app import create_app
from services.interpreter.config import InterpreterSettings
from services.interpreter.corpus import load_corpus
from services.interpreter.evidence import strongest_chunk
from services.interpreter.examples import feature_examples


@pytest.fixture(scope="module")
def corpus(synthetic):
    store, ref = synthetic
    return load_corpus(store, ref)


@pytest.mark.parametrize("feature", [0, 3, 5])
def test_examples_span_quantiles_and_match_the_codes(corpus, synthetic, feature):
    _, ref = synthetic
    out = feature_examples(corpus, ExamplesRequest(corpus=ref, feature=feature, activating=8, quantiles=4))
    positions, acts = corpus.column(feature)
    by_position = dict(zip(positions.tolist(), acts.tolist(), strict=True))
    assert out.n_activating == len(positions)
    assert len(out.activating) == min(8, len(positions))
    assert [e.activation for e in out.activating] == sorted((e.activation for e in out.activating), reverse=True)
    for e in out.activating:
        assert e.activation == pytest.approx(by_position[e.position])
        assert e.doc_id == corpus.doc_ids[e.position]
        assert e.span == strongest_chunk(corpus, e.position, feature)
    if len(positions) >= 8:
        assert {e.quantile for e in out.activating} == {0, 1, 2, 3}
        assert out.activating[0].activation == pytest.approx(acts.max())
    near = out.near_misses
    assert near and not {e.position for e in near} & set(positions.tolist())
    assert [e.similarity for e in near] == sorted((e.similarity for e in near), reverse=True)
    # centred on the corpus's mean: the same as cosines over an explicitly centred copy of the vectors
    centred = corpus.vectors.astype(np.float64) - corpus.vectors.astype(np.float64).mean(axis=0)
    centre = centred[[e.position for e in out.activating]].mean(axis=0)
    expected = centred @ centre / np.linalg.norm(centred, axis=1) / np.linalg.norm(centre)
    expected[positions] = -np.inf
    assert [e.position for e in near] == np.argsort(-expected, kind="stable")[:len(near)].tolist()
    assert [e.similarity for e in near] == pytest.approx(expected[[e.position for e in near]].tolist(), abs=1e-5)


def test_a_driving_chunk_lies_inside_its_document(corpus, synthetic):
    _, ref = synthetic
    spans = [(e.position, e.span) for f in range(4)
             for e in feature_examples(corpus, ExamplesRequest(corpus=ref, feature=f)).activating if e.span]
    assert spans, "the synthetic corpus has multi-chunk documents"
    for p, (s, e) in spans:
        assert 0 <= s < e <= len(corpus.text(p))


@pytest.mark.anyio
async def test_examples_over_http(synthetic, tmp_path):
    store, ref = synthetic
    app = create_app(InterpreterSettings(artifact_root=store.root), embed_texts=lambda texts: np.zeros((len(texts), 8)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://interpreter") as client:
        r = await client.post("/examples", json=ExamplesRequest(corpus=ref, feature=2).model_dump(mode="json"))
        assert r.status_code == 200, r.text
        assert FeatureExamples.model_validate(r.json()).activating
        r = await client.post("/examples", json={"corpus": ref.model_dump(mode="json"), "feature": 10_000})
        assert r.status_code == 422 and "feature: 10000" in r.json()["detail"]

"""Text search by documents and their best segments (gateway/search/segment_rank.py), against a
naive computation on random vectors with repeated segments."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.search import segment_rank


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _corpus(seed: int = 0, n_docs: int = 40, d: int = 16) -> tuple[np.ndarray, list[dict], np.ndarray, np.ndarray]:
    """Documents, two segment shards, and every segment row's (document, float32 vector). A third of the
    segments repeat a stock phrase (the same float16 vector, as the embedder stores copies)."""
    rng = np.random.default_rng(seed)
    docs = _unit(rng.normal(size=(n_docs, d))).astype(np.float32)
    stock = _unit(rng.normal(size=(5, d))).astype(np.float16)
    counts = rng.integers(1, 6, size=n_docs)
    position = np.repeat(np.arange(n_docs), counts)
    own = _unit(rng.normal(size=(len(position), d))).astype(np.float16)
    pick = rng.random(len(position)) < 0.35
    vectors = np.where(pick[:, None], stock[rng.integers(0, 5, len(position))], own)
    starts = np.concatenate([np.arange(c) * 10 for c in counts]).astype(np.int32)
    half = int(np.searchsorted(position, n_docs // 2))
    shards = [{"vectors": vectors[a:b], "position": position[a:b], "char_start": starts[a:b],
               "char_end": starts[a:b] + 9} for a, b in ((0, half), (half, len(position)))]
    return docs, shards, position, vectors.astype(np.float32)


def test_rank_is_the_mean_of_the_document_and_its_best_segment() -> None:
    docs, shards, position, vectors = _corpus()
    ranker = segment_rank.build(docs, shards, max_distinct=10_000)
    assert ranker is not None
    distinct = len(np.unique(vectors.astype(np.float16).view(np.uint16), axis=0))
    assert len(ranker.distinct) == distinct < len(vectors)  # each repeated vector stored once
    q = np.random.default_rng(1).normal(size=docs.shape[1]).astype(np.float32)
    qn = q / np.linalg.norm(q)
    seg_cos = _unit(vectors) @ qn
    naive = np.array([(docs[i] @ qn + seg_cos[position == i].max()) / 2 for i in range(len(docs))])
    got = segment_rank.rank(ranker, q, 10)
    assert got.positions.tolist() == np.argsort(-naive, kind="stable")[:10].tolist()
    np.testing.assert_allclose(got.scores, np.sort(naive)[::-1][:10], atol=1e-5)
    for pos, row in zip(got.positions.tolist(), got.segments.tolist()):
        assert position[row] == pos and seg_cos[row] == pytest.approx(seg_cos[position == pos].max(), abs=1e-6)
    whole = segment_rank.rank(ranker, q, 1000)  # k past the documents: every one, once
    assert sorted(whole.positions.tolist()) == list(range(len(docs)))


@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_exact_where_the_best_segments_are_stock_phrases_many_documents_hold(k: int) -> None:
    """The query is a stock phrase: the best segments are held by many documents, so the threshold rule
    must read past them (and, for k = 40, every document) and still give the naive ranking."""
    docs, shards, position, vectors = _corpus(5, n_docs=300)
    ranker = segment_rank.build(docs, shards, max_distinct=10_000)
    rows, counts = np.unique(vectors.astype(np.float16).view(np.uint16), axis=0, return_counts=True)
    q = rows[np.argmax(counts)].view(np.float16).astype(np.float32)  # the commonest stock phrase
    assert counts.max() > 30
    for query in (q, q + 0.3 * docs[7]):
        qn = query / np.linalg.norm(query)
        seg_cos = _unit(vectors) @ qn
        naive = np.array([(docs[i] @ qn + seg_cos[position == i].max()) / 2 for i in range(len(docs))])
        got = segment_rank.rank(ranker, query, k)
        assert got.positions.tolist() == np.argsort(-naive, kind="stable")[:k].tolist()
        np.testing.assert_allclose(got.scores, np.sort(naive)[::-1][:k], atol=1e-5)


def test_exact_where_every_segment_is_near_the_query() -> None:
    """Every segment close to the query, so the bound from the best ones is no bound: the rule widens until
    it has read every document, and the documents' own cosines decide."""
    docs, shards, position, _ = _corpus(6, n_docs=200)
    rng = np.random.default_rng(7)
    q = _unit(rng.normal(size=(1, docs.shape[1])))[0]
    for shard in shards:
        shard["vectors"] = _unit(q + 0.05 * rng.normal(size=shard["vectors"].shape)).astype(np.float16)
    vectors = np.concatenate([sh["vectors"] for sh in shards]).astype(np.float32)
    ranker = segment_rank.build(docs, shards, max_distinct=10_000)
    seg_cos = _unit(vectors) @ q
    naive = np.array([(docs[i] @ q + seg_cos[position == i].max()) / 2 for i in range(len(docs))])
    got = segment_rank.rank(ranker, q, 5)
    assert got.positions.tolist() == np.argsort(-naive, kind="stable")[:5].tolist()


def test_stored_and_read_back_ranks_the_same() -> None:
    docs, shards, _, _ = _corpus(2)
    ranker = segment_rank.build(docs, shards, max_distinct=10_000)
    again = segment_rank.from_bytes(segment_rank.to_bytes(ranker))
    q = np.random.default_rng(3).normal(size=docs.shape[1])
    a, b = segment_rank.rank(ranker, q, 15), segment_rank.rank(again, q, 15)
    assert a.positions.tolist() == b.positions.tolist() and a.segments.tolist() == b.segments.tolist()
    np.testing.assert_allclose(a.scores, b.scores, atol=2e-3)  # stored as float16
    assert again.char_end.tolist() == ranker.char_end.tolist()


def test_too_many_distinct_segments_or_a_document_without_one() -> None:
    docs, shards, _, vectors = _corpus(4)
    distinct = len(np.unique(vectors.astype(np.float16).view(np.uint16), axis=0))
    assert segment_rank.build(docs, shards, max_distinct=distinct - 1) is None  # the FAISS index alone then
    assert segment_rank.build(docs, shards, max_distinct=distinct) is not None
    with pytest.raises(ValueError, match="at least one segment"):
        segment_rank.build(np.vstack([docs, docs[:1]]), shards, max_distinct=10_000)

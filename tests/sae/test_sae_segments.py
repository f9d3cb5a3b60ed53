"""SAE runs on segment vectors: the sparse max-pool against a dense reference, training on
segments, and the stored segment codes whose row-wise max is the document codes."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp
from pydantic import ValidationError
from sae_fixtures import tiny_payload

from artifacts import ArtifactStore
from contracts.sae import SaeTrainPayload
from services.sae.encoding import load_sparse, max_pool_rows
from services.sae.pipeline import train_sae
from services.sae.segments import Segments, training_vectors


def dense_max(rows: np.ndarray, owner: np.ndarray, n_out: int) -> np.ndarray:
    out = np.zeros((n_out, rows.shape[1]), dtype=np.float32)
    for r, o in enumerate(owner):
        out[o] = np.maximum(out[o], rows[r])
    return out


@pytest.mark.parametrize("n_rows,n_out,n_feat,block", [(0, 3, 5, 4), (1, 1, 1, 1), (37, 11, 7, 1),
                                                        (37, 11, 7, 5), (200, 40, 64, 1 << 22), (50, 60, 9, 16)])
def test_max_pool_rows_equals_a_dense_reference(n_rows: int, n_out: int, n_feat: int, block: int) -> None:
    rng = np.random.default_rng(n_rows + n_out)
    owner = np.sort(rng.integers(0, n_out, n_rows))  # some owners have no rows, some many
    dense = rng.random((n_rows, n_feat)).astype(np.float32) * (rng.random((n_rows, n_feat)) < 0.3)
    got = max_pool_rows(sp.csr_matrix(dense), owner, n_out, block_nnz=block)
    assert got.shape == (n_out, n_feat) and got.dtype == np.float32
    np.testing.assert_array_equal(got.toarray(), dense_max(dense, owner, n_out))
    assert got.has_sorted_indices and got.nnz == np.count_nonzero(got.toarray())


def test_max_pool_rows_refuses_unsorted_owners_and_negative_values() -> None:
    rows = sp.csr_matrix(np.ones((3, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="non-decreasing"):
        max_pool_rows(rows, np.array([1, 0, 1]), 2)
    with pytest.raises(ValueError, match="non-negative"):
        max_pool_rows(sp.csr_matrix(-np.ones((3, 2), dtype=np.float32)), np.array([0, 0, 1]), 2)


def segment_payload(store: ArtifactStore, **cfg) -> SaeTrainPayload:
    """tiny_payload's 300 documents, each with 1-4 segments (two shards), noisy copies of it."""
    base = tiny_payload(store)
    x = np.load(io.BytesIO(store.read_bytes(base.embeddings[0].uri)))
    rng = np.random.default_rng(1)
    position = np.repeat(np.arange(len(x)), rng.integers(1, 5, len(x)))  # [S]
    vectors = (x[position] + 0.3 * rng.standard_normal((len(position), x.shape[1]))).astype(np.float16)
    infos = []
    for i, rows in enumerate((position < 150, position >= 150)):
        buf = io.BytesIO()
        np.savez(buf, vectors=vectors[rows], position=position[rows], char_start=np.zeros(rows.sum(), np.int32),
                 char_end=np.arange(rows.sum(), dtype=np.int32))
        infos.append(store.write_bytes(f"emb/segments/{i}.npz", buf.getvalue()))
    config = base.config.model_copy(update=cfg)
    return SaeTrainPayload(run_id=7, embeddings=base.embeddings, segments=infos, artifact_prefix="sae/seg",
                           config=config)


def test_sae_run_trains_on_segments_and_pools_their_codes(tmp_path) -> None:
    store = ArtifactStore(str(tmp_path))
    payload = segment_payload(store, train_on="segments_and_documents", document_codes="max_over_segments")
    result = train_sae(payload, store)
    art = result.artifacts
    assert art.segment_codes is not None and art.segments is not None
    seg_codes = load_sparse(store, art.segment_codes.uri)
    with np.load(io.BytesIO(store.read_bytes(art.segments.uri))) as z:
        position, char_end = z["position"], z["char_end"]
    assert seg_codes.shape[0] == len(position) and seg_codes.indices.dtype == np.int32
    assert seg_codes.data.dtype == np.float32 and np.diff(seg_codes.indptr).max() <= payload.config.k
    docs = load_sparse(store, art.codes_csr.uri)
    assert docs.shape == (300, result.num_latents)
    np.testing.assert_array_equal(docs.toarray(), dense_max(seg_codes.toarray(), position, 300))
    assert char_end[:3].tolist() == [0, 1, 2]
    assert 0 < result.metrics.fvu < 1


def test_training_vectors_never_take_a_held_out_documents_segment() -> None:
    x = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    seg = Segments(np.repeat(x, 2, axis=0) + 0.5, np.repeat(np.arange(10), 2), np.zeros(20, np.int32),
                   np.zeros(20, np.int32))
    train, hold = training_vectors(x, seg, "segments_and_documents", np.array([0, 2, 3]), np.array([7]))
    assert sorted(train[:, 0].tolist()) == [0, 0.5, 0.5, 2, 2.5, 2.5, 3, 3.5, 3.5]
    assert sorted(hold[:, 0].tolist()) == [7, 7.5, 7.5]


def test_a_config_using_segments_needs_segment_shards(tmp_path) -> None:
    store = ArtifactStore(str(tmp_path))
    payload = tiny_payload(store)
    with pytest.raises(ValidationError, match="segment shards"):
        SaeTrainPayload(**payload.model_dump(exclude={"config"}),
                        config=payload.config.model_copy(update={"document_codes": "max_over_segments"}))


def test_auto_follows_the_embedding_run_and_keeps_what_was_asked() -> None:
    """'auto' (the default): with segment vectors, trained on segments and documents and a document's codes the
    max over its segments; without, the document vectors. An explicit choice is kept either way."""
    from contracts.sae import SaeConfig

    with_segments, without = SaeConfig().resolved(True), SaeConfig().resolved(False)
    assert (with_segments.train_on, with_segments.document_codes) == ("segments_and_documents", "max_over_segments")
    assert (without.train_on, without.document_codes) == ("documents", "document_vector")
    assert with_segments.uses_segments and not without.uses_segments and not SaeConfig().uses_segments
    asked = SaeConfig(train_on="documents", document_codes="document_vector").resolved(True)
    assert (asked.train_on, asked.document_codes) == ("documents", "document_vector")


def test_a_payload_resolves_auto_by_the_shards_it_is_given(tmp_path) -> None:
    store = ArtifactStore(str(tmp_path))
    assert tiny_payload(store).config.train_on == "documents"  # no segment shards
    payload = segment_payload(store, train_on="auto", document_codes="auto")  # shards, nothing asked: it reads them
    assert (payload.config.train_on, payload.config.document_codes) == ("segments_and_documents", "max_over_segments")


def test_a_run_with_words_trains_on_them_and_reads_each_segment_by_its_words(tmp_path) -> None:
    """Segment shards that hold their words (an embedding run's word_states): the SAE trains on the words of the
    training documents only, a segment's codes are the max over its words' codes (its own vector unread), a
    document's the max over its segments', and the result says how many words it read."""
    from services.sae.encoding import encode_all
    from services.sae.io import load_sae
    from services.sae.segments import load_segments

    store = ArtifactStore(str(tmp_path))
    base = segment_payload(store, train_on="segments", document_codes="max_over_segments")
    rng = np.random.default_rng(2)
    infos, all_words, all_owner, rows_before = [], [], [], 0
    for i, info in enumerate(base.segments):
        with np.load(io.BytesIO(store.read_bytes(info.uri))) as z:
            arrays = {k: z[k] for k in z.files}
        s = len(arrays["position"])
        owner = np.sort(np.concatenate([np.arange(s), rng.integers(0, s, 2 * s)]))  # every segment 1+ words
        d = arrays["vectors"].shape[1]
        words = arrays["vectors"][owner].astype(np.float32) + 0.2 * rng.standard_normal((len(owner), d))
        arrays["vectors"] = rng.standard_normal(arrays["vectors"].shape).astype(np.float16)  # never read
        buf = io.BytesIO()
        np.savez(buf, **arrays, word_vectors=words.astype(np.float16), word_segment=owner)
        infos.append(store.write_bytes(f"emb/words/{i}.npz", buf.getvalue()))
        all_words.append(words.astype(np.float16))
        all_owner.append(owner + rows_before)
        rows_before += s
    payload = base.model_copy(update={"segments": infos})
    seg = load_segments(store, infos, 300)
    np.testing.assert_array_equal(seg.word_segment, np.concatenate(all_owner))
    hold = np.arange(250, 300)
    train, held = training_vectors(np.zeros((300, 12), np.float32), seg, "segments", np.arange(250), hold)
    in_hold = np.isin(seg.position[seg.word_segment], hold)
    assert train.dtype == np.float32 and len(train) == (~in_hold).sum() and len(held) == in_hold.sum()
    np.testing.assert_array_equal(held, seg.words[in_hold].astype(np.float32))

    result = train_sae(payload, store)
    assert result.segment_words == len(seg.words) > len(seg.position)
    sae = load_sae(store, "sae/seg")
    words_codes = encode_all(sae, np.concatenate(all_words).astype(np.float32)).toarray()
    seg_codes = load_sparse(store, result.artifacts.segment_codes.uri).toarray()
    np.testing.assert_array_equal(seg_codes, dense_max(words_codes, seg.word_segment, len(seg.position)))
    assert (np.count_nonzero(seg_codes, axis=1) > payload.config.k).any(), "a segment of several words"
    docs = load_sparse(store, result.artifacts.codes_csr.uri).toarray()
    np.testing.assert_array_equal(docs, dense_max(seg_codes, seg.position, 300))

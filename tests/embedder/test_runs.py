"""Embedding runs: shard layout, resume, provenance, and the typed input errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from artifacts import ArtifactStore
from contracts.embed import CHUNK_ARRAYS, EmbeddingRunSpec, EmbedJobPayload
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import embed_texts
from services.embedder.errors import (
    EmbedderInputError,
    EmptyDatasetError,
    RunCancelledError,
    RunSpecMismatchError,
    UnknownModelError,
)
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.runs import run_embedding
from services.embedder.shards import shard_keys
from tests.embedder.conftest import stored_array

SPEC = EmbeddingRunSpec(max_length=18, shard_size=4, batch_tokens=120)


def payload(uri: str, spec: EmbeddingRunSpec = SPEC, prefix: str = "embedding-runs/7") -> EmbedJobPayload:
    return EmbedJobPayload(run_id=7, snapshot_uri=uri, artifact_prefix=prefix, spec=spec)


def load_vectors(store: ArtifactStore, result) -> np.ndarray:
    return np.concatenate([np.load(io.BytesIO(store.read_bytes(s.uri))) for s in result.shards])


def test_run_writes_shards_equal_to_direct_embedding(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache, lm: LoadedModel
) -> None:
    texts = make_corpus(11)
    snap = snapshot(texts)
    progress = []
    result = run_embedding(payload(snap.uri), store, settings=settings, models=models, on_progress=progress.append)
    assert (result.n_documents, result.dim, result.max_length) == (11, 384, 18)
    assert (result.shards_computed, result.shards_reused) == (3, 0)
    assert [s.uri.rsplit("/", 2)[-2:] for s in result.shards] == [
        ["embeddings", f"shard-{i:05d}.npy"] for i in range(3)
    ]
    vectors = load_vectors(store, result)
    direct = embed_texts(lm.with_max_length(18), texts)
    torch.testing.assert_close(torch.from_numpy(vectors), torch.from_numpy(direct.vectors), rtol=1e-4, atol=1e-5)
    assert result.n_chunks == int(direct.n_chunks.sum())
    assert result.n_tokens == int(direct.n_tokens.sum())
    assert sum(result.chunks_per_doc_histogram.values()) == 11
    assert progress[-1].done == progress[-1].total == 11
    assert [p.done for p in progress] == sorted(p.done for p in progress)

    with np.load(io.BytesIO(store.read_bytes(result.chunks[1].uri))) as z:
        assert set(z.files) == set(CHUNK_ARRAYS)
        assert z["vectors"].dtype == np.float16 and z["vectors"].shape[1] == 384
        assert set(z["position"].tolist()) == {4, 5, 6, 7}
        mine = z["position"] == 5
        starts, ends = z["char_start"][mine], z["char_end"][mine]
    assert len(starts) > 1 and texts[5][starts[0] : ends[-1]] == texts[5]
    assert all(texts[5][e:s].strip() == "" for e, s in zip(ends[:-1], starts[1:])), "spans tile the text"


def test_rerun_reuses_shards_and_recomputes_only_missing(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(11))
    first = run_embedding(payload(snap.uri), store, settings=settings, models=models)
    again = run_embedding(payload(snap.uri), store, settings=settings, models=models)
    assert (again.shards_computed, again.shards_reused) == (0, 3)
    assert again.shards == first.shards and again.chunks == first.chunks
    assert again.chunks_per_doc_histogram == first.chunks_per_doc_histogram

    emb_key, _ = shard_keys("embedding-runs/7", 1)
    store.delete(emb_key)
    with store.open_write(emb_key + ".bogus") as f:  # unrelated file is ignored
        f.write(b"x")
    store.fs.pipe(store.local_path(emb_key) + ".tmp-deadbeef", b"half a file")  # killed writer's leftover
    resumed = run_embedding(payload(snap.uri), store, settings=settings, models=models)
    assert (resumed.shards_computed, resumed.shards_reused) == (1, 2)
    assert np.array_equal(load_vectors(store, resumed), load_vectors(store, first))


def test_unknown_model_names_the_path(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(3))
    spec = EmbeddingRunSpec(model="/no/such/model-dir")
    with pytest.raises(UnknownModelError, match="/no/such/model-dir") as info:
        run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    assert isinstance(info.value, EmbedderInputError) and isinstance(info.value, ValueError)


def test_empty_dataset(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot([])
    with pytest.raises(EmptyDatasetError, match="no documents"):
        run_embedding(payload(snap.uri), store, settings=settings, models=models)


def test_missing_snapshot(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    with pytest.raises(EmbedderInputError, match="does not exist"):
        run_embedding(payload(store.uri("datasets/9/none.parquet")), store, settings=settings, models=models)


def test_max_length_beyond_the_model(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(3))
    with pytest.raises(EmbedderInputError, match="max_length 4096"):
        run_embedding(payload(snap.uri, EmbeddingRunSpec(max_length=4096)), store, settings=settings, models=models)


def test_other_spec_on_same_prefix_is_refused(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(5))
    run_embedding(payload(snap.uri), store, settings=settings, models=models)
    other = SPEC.model_copy(update={"pooling": "cls"})
    with pytest.raises(RunSpecMismatchError, match="new artifact prefix"):
        run_embedding(payload(snap.uri, other), store, settings=settings, models=models)


def test_should_stop_cancels_between_batches(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(11))
    calls = iter(range(100))
    with pytest.raises(RunCancelledError):
        run_embedding(payload(snap.uri), store, settings=settings, models=models,
                      should_stop=lambda: next(calls) >= 3)
    written = store.list("embedding-runs/7/embeddings")
    assert len(written) < 3


SEG_TEXTS = ["", "Tosse da 2 giorni. Sospetta bronchiolite.\nDiagnosi: bronchiolite.", "No EDEMA. Pz. vigile.",
             "Una frase sola", "   ", "Febbre. Otite? Esclusa.\nDimesso."]


def test_segments_are_kept_with_spans_and_resumed(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache, lm: LoadedModel
) -> None:
    from contracts.embed import SEGMENT_ARRAYS
    from services.embedder.segments import embed_segments
    from services.embedder.shards import segment_key

    spec = SPEC.model_copy(update={"segments": True})
    snap = snapshot(SEG_TEXTS)
    result = run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    assert len(result.segments) == 2 and result.n_segments == 13
    rows = {}
    for info in result.segments:
        with np.load(io.BytesIO(store.read_bytes(info.uri))) as z:
            assert set(z.files) == set(SEGMENT_ARRAYS) and z["vectors"].dtype == np.float16
            for name in SEGMENT_ARRAYS:
                rows.setdefault(name, []).append(z[name])
    seg = {k: np.concatenate(v) for k, v in rows.items()}
    assert seg["position"].tolist() == [0, 1, 1, 1, 1, 2, 2, 3, 4, 5, 5, 5, 5]  # every document has a row
    pieces = [SEG_TEXTS[p][a:b] for p, a, b in zip(seg["position"], seg["char_start"], seg["char_end"])]
    assert pieces == ["", "Tosse da 2 giorni.", "Sospetta bronchiolite.", "Diagnosi:", "bronchiolite.",
                      "No EDEMA.", "Pz. vigile.", "Una frase sola", "   ", "Febbre.", "Otite?", "Esclusa.", "Dimesso."]
    direct = embed_segments(lm.with_max_length(18), SEG_TEXTS)
    torch.testing.assert_close(torch.from_numpy(seg["vectors"].astype(np.float32)), torch.from_numpy(direct.vectors),
                               rtol=0, atol=2e-3)  # float16 storage

    store.delete(segment_key("embedding-runs/7", 1))  # a shard without its segments is incomplete
    again = run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    assert (again.shards_computed, again.shards_reused) == (1, 1) and again.n_segments == result.n_segments
    with pytest.raises(RunSpecMismatchError):  # the same prefix without segments is another spec
        run_embedding(payload(snap.uri), store, settings=settings, models=models)


def test_segment_unit_clause_by_default_sentence_on_request(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache
) -> None:
    texts = ["Sospetta bronchiolite, esclusa polmonite ma presente otite.", "No EDEMA, but fever."]
    snap = snapshot(texts)

    def pieces(result) -> list[str]:  # noqa: ANN001
        out = []
        for info in result.segments:
            with np.load(io.BytesIO(store.read_bytes(info.uri))) as z:
                out += [texts[p][a:b] for p, a, b in zip(z["position"], z["char_start"], z["char_end"])]
        return out

    clauses = run_embedding(payload(snap.uri, SPEC.model_copy(update={"segments": True})), store,
                            settings=settings, models=models)
    assert pieces(clauses) == ["Sospetta bronchiolite,", "esclusa polmonite", "ma presente otite.",
                               "No EDEMA,", "but fever."]
    sentence_spec = SPEC.model_copy(update={"segments": True, "segment_unit": "sentence"})
    with pytest.raises(RunSpecMismatchError):  # the same prefix with the other unit is another spec
        run_embedding(payload(snap.uri, sentence_spec), store, settings=settings, models=models)
    sentences = run_embedding(payload(snap.uri, sentence_spec, prefix="embedding-runs/8"), store,
                              settings=settings, models=models)
    assert pieces(sentences) == texts


def test_token_segments_are_each_piece_read_in_its_note(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache, lm: LoadedModel
) -> None:
    """Unit "token": one row per word piece (spans without the white space before a word; a text of no piece keeps
    one row), its vector the piece's state in its own note (the same word reads differently after "No"), from the
    documents' own pass: the documents' vectors are a run's without segments, bit for bit."""
    from services.embedder.shards import segment_key

    texts = [*SEG_TEXTS, "No fever.", "High fever."]
    snap = snapshot(texts)
    spec = SPEC.model_copy(update={"segments": True, "segment_unit": "token"})
    result = run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    seg = {name: stored_array(store, result.segments, name) for name in ("position", "char_start", "char_end",
                                                                        "vectors")}
    pieces = [texts[p][a:b] for p, a, b in zip(seg["position"], seg["char_start"], seg["char_end"])]
    short = lm.with_max_length(18)
    tok = short.tokenizer(texts, add_special_tokens=False)["input_ids"]
    for i, text in enumerate(texts):
        mine = [p for p, d in zip(pieces, seg["position"]) if d == i]
        if text.strip():
            assert "".join(mine) == "".join(text.split()), "the pieces cover the text's characters, in order, once"
            assert all(p == p.strip() and p for p in mine) and len(mine) <= len(tok[i])
        else:
            assert mine == [text], "a text of no piece keeps one row: every document has one"
    assert result.n_segments == len(pieces) and pieces[-2:] == ["fever", "."]
    assert result.segment_unit == "token"
    norms = np.linalg.norm(seg["vectors"].astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=2e-3)  # unit rows, float16 storage
    fever = [seg["vectors"][j].astype(np.float32) for j, p in enumerate(pieces) if p == "fever"]
    assert len(fever) == 2 and float(fever[0] @ fever[1]) < 0.99, "a piece's state depends on its note"

    plain = run_embedding(payload(snap.uri, prefix="embedding-runs/8"), store, settings=settings, models=models)
    np.testing.assert_array_equal(load_vectors(store, result), load_vectors(store, plain))
    store.delete(segment_key("embedding-runs/7", 1))  # resumed: the shard without its segments is computed again
    again = run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    assert (again.shards_computed, again.n_segments) == (1, result.n_segments)


@pytest.mark.parametrize("unit", ["token", "word"])
def test_passages_of_a_token_or_word_run_get_its_rows(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache, unit: str
) -> None:
    """POST /passages with a token or word run's spec (a new note scored as the run reads its notes): its rows."""
    from contracts.embed import PassageRequest
    from contracts.packed import PackedArray
    from services.embedder.passages import embed_passages

    texts = ["No EDEMA. Pz. vigile.", "Febbre. Otite? Esclusa.\nDimesso."]
    spec = SPEC.model_copy(update={"segments": True, "segment_unit": unit})
    result = run_embedding(payload(snapshot(texts).uri, spec), store, settings=settings, models=models)
    for documents in (True, False):
        got = embed_passages(models, PassageRequest(texts=texts, spec=spec, documents=documents), settings)
        for key, name in (("doc", "position"), ("start", "char_start"), ("end", "char_end"), ("vectors", "vectors")):
            array = PackedArray.model_validate(getattr(got.segments, key).model_dump()).array()
            np.testing.assert_array_equal(array, stored_array(store, result.segments, name))
        assert (got.documents is not None) == documents


def test_word_segments_are_each_word_read_in_its_note(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache, lm: LoadedModel
) -> None:
    """Unit "word": one row per white-space word, its vector the mean of its pieces' states in the note (the token
    run's rows of that word, averaged), its span the word as written; a text of no word keeps one row."""
    texts = [*SEG_TEXTS, "No fever.", "High fever, bronchiolitis."]
    snap = snapshot(texts)
    words = run_embedding(payload(snap.uri, SPEC.model_copy(update={"segments": True, "segment_unit": "word"})),
                          store, settings=settings, models=models)
    tokens = run_embedding(payload(snap.uri, SPEC.model_copy(update={"segments": True, "segment_unit": "token"}),
                                   prefix="embedding-runs/8"), store, settings=settings, models=models)
    got = {n: stored_array(store, words.segments, n) for n in ("position", "char_start", "char_end", "vectors")}
    per = {n: stored_array(store, tokens.segments, n) for n in ("position", "char_start", "char_end", "vectors")}
    spans = [texts[p][a:b] for p, a, b in zip(got["position"], got["char_start"], got["char_end"])]
    assert spans == [t for text in texts for t in (text.split() or [text])], "every word as written, in order"
    assert words.segment_unit == "word" and words.n_segments == len(spans)
    w = spans.index("bronchiolitis.")
    inside = (per["position"] == got["position"][w]) & (per["char_start"] >= got["char_start"][w]) & (
        per["char_end"] <= got["char_end"][w])
    assert inside.sum() >= 2, "a word of several pieces"
    mean = per["vectors"][inside].astype(np.float32).mean(0)
    cos = float(mean @ got["vectors"][w].astype(np.float32)) / float(np.linalg.norm(mean))
    assert cos > 0.995, cos  # the pieces' mean (of their unit rows here, of their raw states in the run)


def test_clause_runs_keep_their_words_on_request(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache
) -> None:
    """A run with clause segments and `word_states` keeps every word as the word run reads
    it, each tied to the clause it lies in (a clause's span holds its words' spans, in order); the clauses' and the
    documents' vectors are those of a run without words, and POST /passages returns the same words."""
    from contracts.embed import WORD_ARRAYS, PassageRequest
    from contracts.packed import PackedArray
    from services.embedder.passages import embed_passages

    texts = [*SEG_TEXTS, "No fever, but cough.", "Sospetta bronchiolite, esclusa polmonite."]
    snap = snapshot(texts)
    spec = EmbeddingRunSpec(max_length=18, shard_size=4, batch_tokens=120, segments=True, word_states=True)
    result = run_embedding(payload(snap.uri, spec), store, settings=settings, models=models)
    seg = {n: stored_array(store, result.segments, n) for n in ("position", "char_start", "char_end", "vectors")}
    offsets = np.cumsum([0] + [len(stored_array(store, [i], "position")) for i in result.segments])[:-1]
    owner = np.concatenate([stored_array(store, [info], "word_segment") + o for info, o in zip(result.segments, offsets)])
    vectors = stored_array(store, result.segments, "word_vectors")
    assert set(WORD_ARRAYS) <= set(np.load(io.BytesIO(store.read_bytes(result.segments[0].uri))).files)
    words = run_embedding(payload(snap.uri, SPEC.model_copy(update={"segments": True, "segment_unit": "word"}),
                                  prefix="embedding-runs/8"), store, settings=settings, models=models)
    np.testing.assert_array_equal(vectors, stored_array(store, words.segments, "vectors"))
    w_doc, w_start, w_end = (stored_array(store, words.segments, n) for n in ("position", "char_start", "char_end"))
    assert np.all(np.diff(owner) >= 0) and np.array_equal(seg["position"][owner], w_doc)
    assert np.all(seg["char_start"][owner] <= w_start) and np.all(w_end <= seg["char_end"][owner])
    clause_of = {texts[d][a:b]: texts[d][seg["char_start"][o]:seg["char_end"][o]]
                 for d, a, b, o in zip(w_doc, w_start, w_end, owner)}
    assert clause_of["cough."] == "but cough." and clause_of["polmonite."] == "esclusa polmonite."

    plain = run_embedding(payload(snap.uri, SPEC.model_copy(update={"segments": True}), prefix="embedding-runs/9"),
                          store, settings=settings, models=models)
    np.testing.assert_array_equal(seg["vectors"], stored_array(store, plain.segments, "vectors"))
    np.testing.assert_array_equal(load_vectors(store, result), load_vectors(store, plain))
    got = embed_passages(models, PassageRequest(texts=texts, spec=spec, documents=False), settings)
    np.testing.assert_array_equal(PackedArray.model_validate(got.segments.word_vectors.model_dump()).array(), vectors)
    np.testing.assert_array_equal(PackedArray.model_validate(got.segments.word_segment.model_dump()).array(), owner)


def test_word_states_need_clauses_and_the_notes_own_pass() -> None:
    assert EmbeddingRunSpec(segments=True).word_states is False, "off unless asked for"
    for bad, says in (({}, "no segments"), ({"segments": True, "segment_unit": "token"}, "segment_unit 'token'"),
                      ({"segments": True, "document_vectors": "segments"}, "document_vectors 'segments'")):
        with pytest.raises(ValueError, match=f"word_states\n.*{says}"):
            EmbeddingRunSpec(word_states=True, **bad)

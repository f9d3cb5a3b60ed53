"""Each distinct segment text embedded once: repeats (after the tokenizer's normalisation) share one vector,
the one they would have got alone (up to the float rounding of a batch's shape), within a shard and, through
the run's cache, across shards."""

from __future__ import annotations

import io

import numpy as np
import torch

from artifacts import ArtifactStore
from contracts.embed import EmbeddingRunSpec, EmbedJobPayload
from services.embedder.config import EmbedderSettings
from services.embedder.distinct import SegmentCache, distinct_texts
from services.embedder.encoder import embed_texts
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.runs import run_embedding
from services.embedder.segments import embed_segments

NOTES = [
    "Torace: MV fisiologico. Tosse da 2 giorni.",
    "TORACE: mv fisiologico. Sospetta bronchiolite, esclusa polmonite.",  # MiniLM lower-cases: a repeat
    "Torace: MV fisiologico. Tosse da 2 giorni.",
    "Febbre. Torace: MV ridotto.",
]


def test_distinct_texts_follow_the_tokenizers_normalisation(lm: LoadedModel) -> None:
    found = distinct_texts(lm, ["Torace:", "torace:", "TORACE:", "Torace:", "Addome:"])
    assert found.texts == ["Torace:", "Addome:"] and found.inverse.tolist() == [0, 0, 0, 0, 1]
    assert found.keys == ["torace:", "addome:"]


def test_a_repeated_segment_gets_exactly_the_vector_it_gets_alone(lm: LoadedModel) -> None:
    seg = embed_segments(lm, NOTES)
    pieces = [NOTES[d][a:b] for d, a, b in zip(seg.doc.tolist(), seg.char_start.tolist(), seg.char_end.tolist())]
    assert len(pieces) == 13 and seg.n_embedded == 7  # "torace:" / "mv fisiologico." / "tosse da 2 giorni." repeat
    for i, piece in enumerate(pieces):
        copies = [j for j, other in enumerate(pieces) if other.casefold() == piece.casefold()]
        for j in copies:  # every copy of a text holds the one vector computed for it, bit for bit
            torch.testing.assert_close(torch.from_numpy(seg.vectors[j]), torch.from_numpy(seg.vectors[i]), rtol=0, atol=0)
        alone = embed_texts(lm, [piece])
        # the vector it gets alone, up to float rounding: the batch's shape picks the matmul's blocking (bit-equal
        # with AVX-512 kernels; within 1e-7 with ATEN_CPU_CAPABILITY=avx2, an AVX2-only CPU's kernels)
        torch.testing.assert_close(torch.from_numpy(seg.vectors[i]), torch.from_numpy(alone.vectors[0]),
                                   rtol=0, atol=1e-6)
        assert seg.n_tokens[i] == alone.n_tokens[0]


def test_the_cache_serves_texts_already_embedded(lm: LoadedModel) -> None:
    cache = SegmentCache()
    first = embed_segments(lm, NOTES[:2], cache=cache)
    again = embed_segments(lm, NOTES, cache=cache)
    assert first.n_embedded == 5 and again.n_embedded == 2 and len(cache) == 7  # "Febbre." and "MV ridotto."
    torch.testing.assert_close(torch.from_numpy(again.vectors), torch.from_numpy(embed_segments(lm, NOTES).vectors),
                               rtol=0, atol=0)
    full = SegmentCache(max_bytes=2 * 384 * 4)  # room for two vectors: the rest is embedded every time
    embed_segments(lm, NOTES, cache=full)
    assert len(full) == 2 and embed_segments(lm, NOTES, cache=full).n_embedded == 5


def test_a_run_reports_its_distinct_segments(
    store: ArtifactStore, snapshot, settings: EmbedderSettings, models: ModelCache
) -> None:
    spec = EmbeddingRunSpec(max_length=18, shard_size=2, batch_tokens=120, segments=True)
    payload = EmbedJobPayload(run_id=9, snapshot_uri=snapshot(NOTES).uri, artifact_prefix="embedding-runs/9",
                              spec=spec)
    result = run_embedding(payload, store, settings=settings, models=models)
    assert (result.n_segments, result.n_segments_computed, result.n_segments_embedded) == (13, 13, 7)
    with np.load(io.BytesIO(store.read_bytes(result.segments[1].uri))) as z:  # shard 1 served by shard 0
        assert z["vectors"].shape == (6, 384)
    resumed = run_embedding(payload, store, settings=settings, models=models)  # every shard reused
    assert (resumed.n_segments, resumed.n_segments_computed, resumed.n_segments_embedded) == (13, 0, 0)

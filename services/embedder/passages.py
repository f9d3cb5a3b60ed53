"""Texts embedded as an embedding run embeds its documents (POST /passages): the run's model, prompt,
precision and pooling, chunk-and-average, its segments, and the same rounding as its shards (document
vectors float32, segment vectors float16), so that a stored note sent as text gets the run's vectors.

It follows `runs.ShardWork._compute` step by step; a text's vectors do not depend on its batch (each
chunk's padded width is a function of its own length: encoder.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from contracts.embed import EmbeddingRunSpec, PassageRequest, PassageResponse, PassageSegments
from contracts.model_allowlist import canonical_encoder
from contracts.packed import PackedArray
from services.embedder.batching import Batcher
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import Embedded, default_batch_tokens
from services.embedder.errors import RequestTooLargeError
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.segments import IN_CONTEXT, SegmentVectors, embed_documents, embed_segments


def check_passages(texts: Sequence[str], *, max_texts: int, max_chars: int) -> None:
    """Raise `RequestTooLargeError` naming the first text over the limits."""
    if len(texts) > max_texts:
        raise RequestTooLargeError(f"{len(texts)} texts in one request; the limit is {max_texts}")
    for i, text in enumerate(texts):
        if len(text) > max_chars:
            raise RequestTooLargeError(f"text {i} has {len(text)} characters; the limit is {max_chars} per passage")


def _embed(lm: LoadedModel, texts: Sequence[str], spec: EmbeddingRunSpec, settings: EmbedderSettings,
           documents: bool) -> tuple[Embedded | None, SegmentVectors | None]:
    kw = {"pooling": spec.pooling, "normalize": spec.normalize,
          "batch_tokens": spec.batch_tokens or settings.batch_tokens or default_batch_tokens(lm.device),
          "max_batch_size": settings.max_batch_size, "pad_multiple": spec.pad_multiple}
    in_note = spec.segments and (spec.segment_unit in IN_CONTEXT or bool(spec.word_states))
    if not documents and not in_note:  # segments alone: no documents' pass
        return None, (embed_segments(lm, texts, unit=spec.segment_unit, **kw) if spec.segments else None)
    embedded, segments = embed_documents(lm, texts, segments=spec.segments, unit=spec.segment_unit,
                                         documents=spec.document_vectors, word_states=bool(spec.word_states), **kw)
    embedded = embedded if documents else None
    return embedded, segments


class Part(NamedTuple):
    """One request's share of a batch: its documents' vectors, its segments (doc counted from its first text)."""
    documents: np.ndarray | None  # float32 [texts, d]
    segments: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None  # doc, start, end, vectors float16
    words: tuple[np.ndarray, np.ndarray] | None = None  # word vectors float16, their segment (row of `segments`)


def split(computed: tuple[Embedded | None, SegmentVectors | None], sizes: list[int]) -> list[Part]:
    embedded, segments = computed
    parts, first = [], 0
    for n in sizes:
        seg = words = None
        if segments is not None:
            rows = (segments.doc >= first) & (segments.doc < first + n)
            seg = (segments.doc[rows] - first, segments.char_start[rows], segments.char_end[rows],
                   segments.vectors[rows].astype("float16"))
            if segments.word_segment is not None:
                lo, hi = np.flatnonzero(rows)[[0, -1]]  # a request's segments are contiguous
                mine = (segments.word_segment >= lo) & (segments.word_segment <= hi)
                words = (segments.word_vectors[mine].astype("float16"), segments.word_segment[mine] - lo)
        parts.append(Part(None if embedded is None else embedded.vectors[first:first + n].astype("float32"), seg,
                          words))
        first += n
    return parts


_batcher: Batcher[Part] = Batcher(max_texts=256)


def embed_passages(models: ModelCache, body: PassageRequest, settings: EmbedderSettings) -> PassageResponse:
    """The texts' document vectors (when asked) and segment vectors (when the spec has segments); requests for
    the same model and spec that wait while it is busy are computed together (batching.py)."""
    check_passages(body.texts, max_texts=settings.max_texts, max_chars=settings.max_passage_chars)
    spec = body.spec
    lm = models.get(spec.model, max_length=spec.max_length, prompt_name=spec.prompt_name, precision=spec.precision)
    _batcher.max_texts = settings.max_texts
    # the model's lock: its tokenizer is not re-entrant, one pass at a time on this model (as /embed)
    part = _batcher.run(lm.lock, (id(lm.lock), spec.model_dump_json(), body.documents), body.texts,
                        lambda texts: _embed(lm, texts, spec, settings, body.documents), split)
    packed = None if part.segments is None else PassageSegments(
        doc=PackedArray.of(part.segments[0].astype("int64")), start=PackedArray.of(part.segments[1].astype("int32")),
        end=PackedArray.of(part.segments[2].astype("int32")), vectors=PackedArray.of(part.segments[3]),
        **({} if part.words is None else {"word_vectors": PackedArray.of(part.words[0]),
                                          "word_segment": PackedArray.of(part.words[1].astype("int64"))}))
    return PassageResponse(
        model_name=canonical_encoder(spec.model, models.default_model), precision=lm.precision, engine=lm.engine,
        prompt=lm.prompt_text, provenance=lm.provenance, dim=lm.dim,
        documents=None if part.documents is None else PackedArray.of(part.documents), segments=packed)

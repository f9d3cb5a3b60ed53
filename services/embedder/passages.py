"""Texts embedded as an embedding run embeds its documents (POST /passages): the run's model, prompt,
precision and pooling, chunk-and-average, its segments, and the same rounding as its shards (document
vectors float32, segment vectors float16), so that a stored note sent as text gets the run's vectors.

It follows `runs.ShardWork._compute` step by step; a text's vectors do not depend on its batch (each
chunk's padded width is a function of its own length: encoder.py)."""

from __future__ import annotations

from collections.abc import Sequence

from contracts.embed import EmbeddingRunSpec, PassageRequest, PassageResponse, PassageSegments
from contracts.model_allowlist import canonical_encoder
from contracts.packed import PackedArray
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import Embedded, default_batch_tokens, embed_texts
from services.embedder.errors import RequestTooLargeError
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.segments import SegmentVectors, documents_from_segments, embed_segments


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
          "max_batch_size": settings.max_batch_size}
    segments = embedded = None
    if spec.segments:
        segments = embed_segments(lm, texts, unit=spec.segment_unit, **kw)
    if documents and spec.document_vectors == "segments":  # a run's documents from its segments': no second pass
        embedded = documents_from_segments(segments, len(texts), normalize=spec.normalize, n_special=lm.n_special)
    elif documents:
        embedded = embed_texts(lm, texts, **kw)
    return embedded, segments


def embed_passages(models: ModelCache, body: PassageRequest, settings: EmbedderSettings) -> PassageResponse:
    """The texts' document vectors (when asked) and segment vectors (when the spec has segments)."""
    check_passages(body.texts, max_texts=settings.max_texts, max_chars=settings.max_passage_chars)
    spec = body.spec
    lm = models.get(spec.model, max_length=spec.max_length, prompt_name=spec.prompt_name, precision=spec.precision)
    with lm.lock:  # the tokenizer is not re-entrant: one request at a time on this model (as /embed)
        embedded, segments = _embed(lm, body.texts, spec, settings, body.documents)
    packed = None if segments is None else PassageSegments(
        doc=PackedArray.of(segments.doc.astype("int64")), start=PackedArray.of(segments.char_start.astype("int32")),
        end=PackedArray.of(segments.char_end.astype("int32")), vectors=PackedArray.of(segments.vectors.astype("float16")))
    return PassageResponse(
        model_name=canonical_encoder(spec.model, models.default_model), precision=lm.precision, engine=lm.engine,
        prompt=lm.prompt_text, provenance=lm.provenance, dim=lm.dim,
        documents=None if embedded is None else PackedArray.of(embedded.vectors.astype("float32")), segments=packed)

"""Query embedding (POST /embed): bounded, synchronous; the limits are checked before any work."""

from __future__ import annotations

from collections.abc import Sequence

from contracts.embed import EmbedRequest, EmbedResponse, ModelInfo
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import default_batch_tokens, embed_texts
from services.embedder.errors import RequestTooLargeError
from services.embedder.models import LoadedModel, ModelCache


def check_limits(texts: Sequence[str], *, max_texts: int, max_chars: int) -> None:
    """Raise `RequestTooLargeError` naming the first offending text, its size and the limit."""
    if len(texts) > max_texts:
        raise RequestTooLargeError(f"{len(texts)} texts in one request; the limit is {max_texts}")
    for i, text in enumerate(texts):
        if len(text) > max_chars:
            raise RequestTooLargeError(
                f"text {i} has {len(text)} characters; the limit is {max_chars} per text"
            )


def embed_query(models: ModelCache, request: EmbedRequest, settings: EmbedderSettings) -> EmbedResponse:
    """Vectors for `request.texts`, in order; long texts are chunk-and-averaged, never truncated."""
    check_limits(request.texts, max_texts=settings.max_texts, max_chars=settings.max_chars)
    lm = models.get(request.model)
    with lm.lock:
        out = embed_texts(
            lm, request.texts, pooling=request.pooling, normalize=request.normalize,
            batch_tokens=settings.batch_tokens or default_batch_tokens(lm.device),
            max_batch_size=settings.max_batch_size,
        )
    return EmbedResponse(
        model=request.model or "default", dim=lm.dim, vectors=out.vectors.tolist(),
        n_chunks=out.n_chunks.tolist(), n_tokens=out.n_tokens.tolist(),
    )


def model_info(lm: LoadedModel) -> ModelInfo:
    return ModelInfo(
        name=lm.name, path=lm.path, dim=lm.dim, max_length=lm.max_length, n_special=lm.n_special,
        device=str(lm.device), precision=lm.precision,
    )

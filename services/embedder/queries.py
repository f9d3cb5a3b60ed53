"""Query embedding (POST /embed): bounded, synchronous; the limits are checked before any work."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from contracts.embed import EmbedRequest, EmbedResponse, ModelInfo
from contracts.model_allowlist import canonical_encoder
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import Embedded, default_batch_tokens, embed_texts
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


class _Rows(NamedTuple):
    vectors: np.ndarray  # [n, d]
    n_chunks: np.ndarray
    n_tokens: np.ndarray


def _rows(out: Embedded, start: int, stop: int) -> _Rows:
    return _Rows(out.vectors[start:stop], out.n_chunks[start:stop], out.n_tokens[start:stop])


@dataclass(eq=False)
class _Waiting:
    """One request's texts, waiting for the model; `out` or `error` is set by whoever embeds them."""

    texts: Sequence[str]
    out: _Rows | None = None
    error: BaseException | None = None


class _Coalescer:
    """Dynamic batching of concurrent requests (as Hugging Face's text-embeddings-inference does).

    A request queues its texts under (model, pooling, normalize) and takes the model's lock. Whoever
    holds the lock embeds every text queued under its key at that moment (up to `max_texts`) in one
    call, and hands each request its rows; a request whose texts were embedded meanwhile just
    returns. Twenty one-line queries then cost about one forward pass instead of twenty."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.queued: dict[tuple, list[_Waiting]] = {}

    def embed(self, lm: LoadedModel, texts: Sequence[str], *, pooling: str, normalize: bool,
              settings: EmbedderSettings) -> _Rows:
        # ModelCache.get hands out copies of one loaded model (same weights, same lock)
        key, mine = (id(lm.model), lm.prefix_ids, lm.max_length, pooling, normalize), _Waiting(texts)
        with self.mutex:
            self.queued.setdefault(key, []).append(mine)
        with lm.lock:
            if mine.out is None and mine.error is None:
                self._run(lm, self._take(key, settings.max_texts), pooling=pooling, normalize=normalize,
                          settings=settings)
        if mine.error is not None:
            raise mine.error
        assert mine.out is not None
        return mine.out

    def _take(self, key: tuple, max_texts: int) -> list[_Waiting]:
        """The queued requests of `key`, oldest first, up to `max_texts` texts (at least one request)."""
        with self.mutex:
            queued = self.queued[key]
            n, taken = 0, 0
            while taken < len(queued) and (taken == 0 or n + len(queued[taken].texts) <= max_texts):
                n += len(queued[taken].texts)
                taken += 1
            batch, self.queued[key] = queued[:taken], queued[taken:]
            if not self.queued[key]:
                del self.queued[key]
        return batch

    @staticmethod
    def _run(lm: LoadedModel, batch: list[_Waiting], *, pooling: str, normalize: bool,
             settings: EmbedderSettings) -> None:
        def run(texts: Sequence[str]) -> Embedded:
            return embed_texts(lm, texts, pooling=pooling, normalize=normalize,
                               batch_tokens=settings.batch_tokens or default_batch_tokens(lm.device),
                               max_batch_size=settings.max_batch_size)

        try:
            out = run([t for w in batch for t in w.texts])
        except Exception:  # noqa: BLE001 - one request's bad input must not fail the others: alone, each
            for w in batch:
                try:
                    w.out = _rows(run(w.texts), 0, len(w.texts))
                except Exception as exc:  # noqa: BLE001 - re-raised in the request's own thread
                    w.error = exc
            return
        start = 0
        for w in batch:
            w.out = _rows(out, start, start + len(w.texts))
            start += len(w.texts)


_coalescer = _Coalescer()


def embed_query(models: ModelCache, request: EmbedRequest, settings: EmbedderSettings) -> EmbedResponse:
    """Vectors for `request.texts`, in order; long texts are chunk-and-averaged, never truncated.
    Concurrent requests for one model are embedded together (`_Coalescer`)."""
    check_limits(request.texts, max_texts=settings.max_texts, max_chars=settings.max_chars)
    lm = models.get(request.model, prompt_name=request.prompt_name)
    out = _coalescer.embed(lm, request.texts, pooling=request.pooling, normalize=request.normalize,
                           settings=settings)
    return EmbedResponse(
        model=request.model or "default", model_name=canonical_encoder(request.model, models.default_model),
        prompt_name=lm.prompt, dim=lm.dim, vectors=out.vectors.tolist(),
        n_chunks=out.n_chunks.tolist(), n_tokens=out.n_tokens.tolist(),
    )


def model_info(lm: LoadedModel) -> ModelInfo:
    return ModelInfo(
        name=lm.name, path=lm.path, dim=lm.dim, max_length=lm.max_length, n_special=lm.n_special,
        device=str(lm.device), precision=lm.precision, prompts={k: v[0] for k, v in lm.prompts.items()},
        default_prompt=lm.default_prompt, provenance=lm.provenance,
    )

"""Excerpts centred on the chunk that drives a feature, and BLAS on one thread while naming batches run."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from services.interpreter.corpus import Corpus
from services.interpreter.evidence import cut_excerpt


class _OneBlasThread:
    """BLAS on one thread while any naming batch runs: batches of one event loop interleave at their
    awaits, so the limit is set by the first to enter and restored by the last to leave (nested
    threadpool_limits would restore out of order and leave the process on one thread)."""

    def __init__(self) -> None:
        self.users = 0
        self.limiter: threadpool_limits | None = None

    def __enter__(self) -> None:
        if self.users == 0:
            self.limiter = threadpool_limits(limits=1, user_api="blas")
        self.users += 1

    def __exit__(self, *exc: object) -> None:
        self.users -= 1
        if self.users == 0 and self.limiter is not None:
            self.limiter.restore_original_limits()
            self.limiter = None


ONE_BLAS_THREAD = _OneBlasThread()


class DrivingChunks:
    """Excerpts centred on each document's strongest chunk for a feature, as evidence.excerpts cuts
    them, with every chunk's k-th largest SAE pre-activation cached: a document recurs across the k
    features it activates, so its chunks go through the whole encoder once, later features cost
    one dot product (a feature is in a chunk's top k iff its pre-activation reaches the k-th)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._kth: dict[int, np.ndarray] = {}

    def span(self, position: int, feature: int) -> tuple[int, int] | None:
        """(char_start, char_end) of the strongest chunk; None with one chunk (evidence.strongest_chunk)."""
        chunks, sae = self.corpus.chunks, self.corpus.sae
        if chunks is None or sae is None or len(rows := chunks.rows(position)) <= 1:
            return None
        v = chunks.vectors[rows.start:rows.stop].astype(np.float32)  # [c, d]
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)  # the SAE saw unit-norm documents
        kth = self._kth.get(position)
        if kth is None:
            pre_all = (v - sae.b_dec) @ sae.w_enc.T + sae.b_enc  # [c, n]
            kth = self._kth[position] = np.partition(pre_all, -sae.k, axis=1)[:, -sae.k]  # [c]
        pre = sae.feature_preactivation(v, feature)  # [c]
        act = np.where(pre >= kth - 1e-5 * np.abs(kth), np.maximum(pre, 0.0), 0.0)  # matvec vs matmul rounding
        best = int(np.argmax(act)) if act.max() > 0 else int(np.argmax(pre))
        return int(chunks.char_start[rows.start + best]), int(chunks.char_end[rows.start + best])

    def excerpts(self, feature: int, positions: Sequence[int], max_chars: int) -> list[str]:
        return [cut_excerpt(self.corpus.text(p), self.span(p, feature), max_chars) for p in positions]

"""Chunk-and-average planning: which tokens go in which chunk, and which chunks share a batch.

Pure numpy on token counts, no model: the encoder turns the plan into tensors.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ChunkPlan(NamedTuple):
    """Chunks of many documents, document-major; token indices exclude special tokens."""

    doc: np.ndarray  # int64 [C]: index of the chunk's document in the input
    start: np.ndarray  # int64 [C]: first token of the chunk
    end: np.ndarray  # int64 [C]: one past the last token

    @property
    def lengths(self) -> np.ndarray:
        """int64 [C]: content tokens per chunk (specials not counted)."""
        return self.end - self.start


def chunk_token_windows(n_tokens: np.ndarray, window: int) -> ChunkPlan:
    """Cut each document of `n_tokens[i]` tokens into K_i = ceil(N_i / window) contiguous chunks.

    The chunks of a document are balanced (sizes differ by at most one, all <= window), so
    that no chunk is a short tail: the document vector is the plain mean of its chunk
    vectors, and a 3-token tail would otherwise weigh as much as a 250-token chunk. An
    empty document gets one empty chunk (the encoder pools its special tokens instead).
    Every token lands in exactly one chunk.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    n = np.asarray(n_tokens, dtype=np.int64)  # [D]
    k = np.maximum(1, -(-n // window))  # [D] ceil(N / W), at least one chunk
    first = np.cumsum(k) - k  # [D] index of each document's first chunk
    doc = np.repeat(np.arange(len(n), dtype=np.int64), k)  # [C]
    j = np.arange(int(k.sum()), dtype=np.int64) - first[doc]  # [C] chunk index within its document
    # Balanced boundaries floor(j·N/K): consecutive differences are floor(N/K) or ceil(N/K) <= W.
    start = (j * n[doc]) // k[doc]
    end = ((j + 1) * n[doc]) // k[doc]
    return ChunkPlan(doc=doc, start=start, end=end)


def pack_batches(seq_lengths: np.ndarray, *, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Group sequence indices into batches of at most `batch_tokens` padded tokens.

    Sequences are sorted by length, longest first (a stable sort, so the batches are a
    deterministic function of the lengths), and each batch takes as many as fit when padded
    to its first (longest) member: padding is only the difference to neighbours in the
    sort. A sequence longer than the budget goes alone. Returns int64 index arrays.
    """
    lengths = np.asarray(seq_lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    i = 0
    while i < len(order):
        size = max(1, min(max_batch_size, batch_tokens // int(lengths[order[i]])))
        batches.append(order[i : i + size])
        i += size
    return batches

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


def padded_length(seq_lengths: np.ndarray, multiple: int = 1) -> np.ndarray:
    """int64 [C]: the width each sequence is padded to, a function of its own length only.

    Lengths round up to a step of 1/8 of their power of two (1 under 16, 16-31 to even, 32-63 to multiples of
    4, 64-127 of 8, 128-255 of 16, ...), and to a step of at least `multiple`, so padding adds under
    1/8 of a long sequence and there are at most 8 widths per doubling. With `multiple` 4 (a run's
    default, contracts.embed.PAD_MULTIPLE) a demo note's 34 clauses of 6-30 tokens fall in about
    5 widths instead of 12 (13 % more tokens than with 1): one note is 5 forward passes, where a pass
    of a few rows costs about as much as 80 tokens.

    Why: under bf16 the attention kernels' result for a sequence's real tokens depends on how
    far it is padded (the softmax and P·V reductions run over the padded width), by about 1e-3
    on a unit document vector. A text padded to a width fixed by its own length therefore gets the
    same vector alone (a search query) as inside any batch (the embedding run that stored it) in fp32
    and int8, and in bf16 where the matrix products' kernel does not change with the batch's row
    count. On an AMX CPU it does: oneDNN multiplies 33 to 256 rows of the feed-forward output
    (1,536 -> 384) with another kernel than 32 rows or fewer, one bf16 step apart, so a demo note's
    vector alone and beside six others differ by up to 8e-4 (none with oneDNN capped at AVX512-BF16).
    """
    n = np.asarray(seq_lengths, dtype=np.int64)
    bits = np.zeros_like(n)
    positive = n > 0
    bits[positive] = np.floor(np.log2(n[positive])).astype(np.int64) + 1  # bit_length
    step = np.maximum(np.left_shift(1, np.maximum(bits - 4, 0)), multiple)
    return -(-n // step) * step


def pack_batches(seq_lengths: np.ndarray, *, batch_tokens: int, max_batch_size: int,
                 max_attention: int | None = None) -> list[np.ndarray]:
    """Group sequence indices into batches of equal padded length, at most `batch_tokens` tokens.

    `seq_lengths` are the widths the sequences are padded to (`padded_length`): a batch holds
    sequences of one width only, so a sequence's padding never depends on its neighbours.
    Sequences are sorted by width, widest first (a stable sort, so the batches are a
    deterministic function of the widths), and each batch takes as many of one width as fit
    in the budget. A sequence wider than the budget goes alone. `max_attention` also bounds
    rows x width² (the attention scores of a batch, per head), for an engine whose long batches
    run slower than short ones (CTranslate2). Returns int64 index arrays.
    """
    lengths = np.asarray(seq_lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    batches: list[np.ndarray] = []
    i = 0
    while i < len(order):
        width = int(sorted_lengths[i])
        group_end = i + int(np.searchsorted(-sorted_lengths[i:], -width, side="right"))
        size = max(1, min(max_batch_size, batch_tokens // max(width, 1)))
        if max_attention is not None:
            size = max(1, min(size, max_attention // max(width * width, 1)))
        for j in range(i, group_end, size):
            batches.append(order[j : min(j + size, group_end)])
        i = group_end
    return batches

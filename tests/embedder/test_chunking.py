"""Chunk planning and batch packing: every token in exactly one chunk, budgets respected."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.embedder.chunking import chunk_token_windows, pack_batches, padded_length


@pytest.mark.parametrize("window", [1, 2, 16, 254])
def test_every_token_lands_in_exactly_one_chunk(window: int) -> None:
    n_tokens = np.array([0, 1, window - 1, window, window + 1, 2 * window, 7 * window + 3, 1000])
    n_tokens = np.maximum(n_tokens, 0)
    plan = chunk_token_windows(n_tokens, window)
    for d, n in enumerate(n_tokens):
        mine = plan.doc == d
        starts, ends = plan.start[mine], plan.end[mine]
        assert len(starts) == max(1, math.ceil(n / window))
        covered = np.zeros(n, dtype=np.int64)
        for s, e in zip(starts, ends):
            covered[s:e] += 1
        assert (covered == 1).all()
        assert (starts[1:] == ends[:-1]).all(), "chunks are contiguous and in order"
        assert ((ends - starts) <= window).all()
        if n:
            assert (ends - starts).max() - (ends - starts).min() <= 1, "balanced chunks"


def test_chunk_plan_is_document_major() -> None:
    plan = chunk_token_windows(np.array([40, 5, 17]), 16)
    assert plan.doc.tolist() == [0, 0, 0, 1, 2, 2]
    assert plan.lengths.tolist() == [13, 13, 14, 5, 8, 9]


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window"):
        chunk_token_windows(np.array([3]), 0)


def test_pack_batches_respects_budget_and_covers_all() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 258, size=500)
    batches = pack_batches(lengths, batch_tokens=2048, max_batch_size=64)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(500))
    for b in batches:
        assert len(b) <= 64
        assert len(b) * lengths[b].max() <= 2048
    padded = sum(len(b) * lengths[b].max() for b in batches)
    assert padded / lengths.sum() < 1.05, "sorting keeps padding small"
    again = pack_batches(lengths, batch_tokens=2048, max_batch_size=64)
    assert all((a == b).all() for a, b in zip(batches, again)), "deterministic"


def test_pack_batches_oversized_sequence_goes_alone() -> None:
    batches = pack_batches(np.array([10, 500, 10]), batch_tokens=100, max_batch_size=8)
    assert [b.tolist() for b in batches] == [[1], [0, 2]]


def test_padded_length_is_own_length_rounded_up_a_little() -> None:
    n = np.arange(0, 1025)
    w = padded_length(n)
    assert (w >= n).all() and (w[:16] == n[:16]).all()
    assert ((w - n) / np.maximum(n, 1)).max() < 1 / 8, "padding adds under an eighth"
    assert ((w - n).sum() / n.sum()) < 0.045, "about 4% on average"
    assert len(np.unique(w[257:513])) == 8, "eight widths per doubling"
    assert (padded_length(n[::-1]) == w[::-1]).all(), "a function of each length alone"


def test_a_pad_multiple_puts_short_sequences_in_few_widths() -> None:
    """A run's default: short clauses (6-30 tokens with their specials) in 7 widths instead of 18; a long
    sequence padded as before."""
    n = np.arange(0, 1025)
    w = padded_length(n, 4)
    assert (w >= n).all() and (w % 4 == 0).all() and (w[64:] == padded_length(n)[64:]).all()
    assert len(np.unique(w[6:31])) == 7 and len(np.unique(padded_length(n)[6:31])) == 18
    assert (padded_length(n[::-1], 4) == w[::-1]).all(), "a function of each length alone"


def test_pack_batches_never_mixes_widths() -> None:
    rng = np.random.default_rng(1)
    widths = padded_length(rng.integers(3, 258, size=500))
    batches = pack_batches(widths, batch_tokens=2048, max_batch_size=64)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for b in batches:
        assert len(set(widths[b].tolist())) == 1
        assert len(b) * widths[b[0]] <= 2048
    assert sum(len(b) * widths[b[0]] for b in batches) == widths.sum(), "no padding beyond each width"


def test_pack_batches_bounds_the_attention_of_a_batch_when_asked() -> None:
    widths = np.array([512] * 3 + [128] * 40 + [16] * 600)
    batches = pack_batches(widths, batch_tokens=8192, max_batch_size=1024, max_attention=512 * 512)
    by_width = {w: sorted({len(b) for b in batches if widths[b[0]] == w}) for w in (512, 128, 16)}
    assert by_width == {512: [1], 128: [8, 16], 16: [88, 512]}, by_width  # 16 rows of 128; 8,192 tokens of 16
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(widths)))
    unbounded = pack_batches(widths, batch_tokens=8192, max_batch_size=1024)
    assert {len(b) for b in unbounded if widths[b[0]] == 512} == {3}

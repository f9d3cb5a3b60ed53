"""Segment vectors in an SAE run: what it trains on, and documents' codes as the max over their
segments (issue #16: the status of one mention among many survives only at the sentence level).

The embedding run's segment shards (contracts.embed.SEGMENT_ARRAYS) hold one row per segment in
document order, every document having at least one. Training rows and held-out rows are chosen by
*document* (a held-out document contributes no segment to training), with the same split as today.
"""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.sparse import max_pool_rows
from services.sae.encoding import encode_all, save_sparse
from services.sae.model import TopKSae


class Segments(NamedTuple):
    vectors: np.ndarray  # float32 [S, d]
    position: np.ndarray  # int64 [S]: the document's row, non-decreasing
    char_start: np.ndarray  # int32 [S]
    char_end: np.ndarray  # int32 [S]


def load_segments(store: ArtifactStore, shards: list[ArtifactInfo], n_docs: int) -> Segments:
    """Concatenate segment shards in order; checks every document 0..n_docs-1 has a row."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in Segments._fields}
    for info in shards:
        with np.load(io.BytesIO(store.read_bytes(info.uri))) as z:
            for name in Segments._fields:
                parts[name].append(z[name])
    seg = Segments(*(np.concatenate(parts[name]) if parts[name] else np.zeros(0) for name in Segments._fields))
    seg = seg._replace(vectors=np.ascontiguousarray(seg.vectors, dtype=np.float32),
                       position=seg.position.astype(np.int64))
    if len(seg.position) and (np.any(np.diff(seg.position) < 0) or seg.position[-1] != n_docs - 1):
        raise ValueError("segment shards are not in document order or do not end at the last document")
    if len(np.unique(seg.position)) != n_docs:
        raise ValueError(f"segment shards cover {len(np.unique(seg.position))} of {n_docs} documents")
    return seg


def training_vectors(x: np.ndarray, seg: Segments | None, train_on: str, train_rows: np.ndarray,
                     hold_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(train [N_t, d], held-out [N_h, d]): documents' vectors, their segments', or both (segments
    first), of the training documents and of the held-out ones."""
    if train_on == "documents":
        return x[train_rows], x[hold_rows]
    if seg is None:
        raise ValueError(f"train_on = {train_on!r} needs segment vectors")
    in_train = np.isin(seg.position, train_rows)  # [S]
    in_hold = np.isin(seg.position, hold_rows)
    if train_on == "segments":
        return seg.vectors[in_train], seg.vectors[in_hold]
    return (np.concatenate([seg.vectors[in_train], x[train_rows]]),
            np.concatenate([seg.vectors[in_hold], x[hold_rows]]))


class SegmentCodes(NamedTuple):
    documents: sp.csr_matrix  # float32 [N, n]: row-wise max over each document's segments
    segments: sp.csr_matrix  # float32 [S, n]: each segment's top-k


def pooled_codes(sae: TopKSae, seg: Segments, n_docs: int) -> SegmentCodes:
    """Every segment encoded, then a document's activation of a feature = its max over the segments."""
    codes = encode_all(sae, seg.vectors)  # [S, n], ≤ k non-zeros a row, all ≥ 0 (ReLU before top-k)
    return SegmentCodes(max_pool_rows(codes, seg.position, n_docs), codes)


def save_segment_codes(store: ArtifactStore, prefix: str, seg: Segments,
                       codes: sp.csr_matrix) -> tuple[ArtifactInfo, ArtifactInfo]:
    """`<prefix>/segment_codes.csr.npz` and `<prefix>/segments.npz` (position, char_start, char_end)."""
    info = save_sparse(store, f"{prefix}/segment_codes.csr.npz", codes, "sae-segment-codes")
    buf = io.BytesIO()
    np.savez(buf, position=seg.position, char_start=seg.char_start, char_end=seg.char_end)
    return info, store.write_bytes(f"{prefix}/segments.npz", buf.getvalue(), kind="sae-segments")

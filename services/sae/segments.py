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
    words: np.ndarray | None = None  # float16 [W, d]: with word states, every word read in its note
    word_segment: np.ndarray | None = None  # int64 [W]: each word's segment (row), non-decreasing

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(vectors [R, d], document [R]) of what the SAE reads: the words where the run kept them (a segment is
        then read by its words), else the segments."""
        if self.words is None:
            return self.vectors, self.position
        return self.words, self.position[self.word_segment]


ARRAYS = ("vectors", "position", "char_start", "char_end")


def load_segments(store: ArtifactStore, shards: list[ArtifactInfo], n_docs: int) -> Segments:
    """Concatenate segment shards in order (their words too, where every shard has them); checks every document
    0..n_docs-1 has a row."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in Segments._fields}
    rows = 0
    for info in shards:
        with np.load(io.BytesIO(store.read_bytes(info.uri))) as z:
            for name in ARRAYS:
                parts[name].append(z[name])
            if "word_segment" in z.files:
                parts["words"].append(z["word_vectors"])
                parts["word_segment"].append(z["word_segment"].astype(np.int64) + rows)
            rows += len(z["position"])
    if 0 < len(parts["words"]) < len(shards):
        raise ValueError("some segment shards hold their words and some do not")
    seg = Segments(*(np.concatenate(parts[name]) if parts[name] else np.zeros(0) for name in ARRAYS),
                   *(np.concatenate(parts[name]) if parts[name] else None for name in ("words", "word_segment")))
    seg = seg._replace(vectors=np.ascontiguousarray(seg.vectors, dtype=np.float32),
                       position=seg.position.astype(np.int64))
    if len(seg.position) and (np.any(np.diff(seg.position) < 0) or seg.position[-1] != n_docs - 1):
        raise ValueError("segment shards are not in document order or do not end at the last document")
    if len(np.unique(seg.position)) != n_docs:
        raise ValueError(f"segment shards cover {len(np.unique(seg.position))} of {n_docs} documents")
    return seg


def training_vectors(x: np.ndarray, seg: Segments | None, train_on: str, train_rows: np.ndarray,
                     hold_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(train [N_t, d], held-out [N_h, d]) float32: documents' vectors, their segments' (`Segments.rows`: their
    words' where the run kept them), or both (segments first), of the training documents and of the held-out ones."""
    if train_on == "documents":
        return x[train_rows], x[hold_rows]
    if seg is None:
        raise ValueError(f"train_on = {train_on!r} needs segment vectors")
    vectors, doc = seg.rows()
    in_train = np.isin(doc, train_rows)  # [R]
    in_hold = np.isin(doc, hold_rows)
    train, hold = (vectors[in_train].astype(np.float32, copy=False), vectors[in_hold].astype(np.float32, copy=False))
    if train_on == "segments":
        return train, hold
    return np.concatenate([train, x[train_rows]]), np.concatenate([hold, x[hold_rows]])


class SegmentCodes(NamedTuple):
    documents: sp.csr_matrix  # float32 [N, n]: row-wise max over each document's segments
    segments: sp.csr_matrix  # float32 [S, n]: each segment's top-k


def pooled_codes(sae: TopKSae, seg: Segments, n_docs: int) -> SegmentCodes:
    """Every segment encoded, then a document's activation of a feature = its max over the segments. Where the run
    kept its words, a segment's codes are the max over its words' (each ≤ k non-zeros; a segment then has more)."""
    if seg.words is None:
        codes = encode_all(sae, seg.vectors)  # [S, n], ≤ k non-zeros a row, all ≥ 0 (ReLU before top-k)
    else:
        codes = max_pool_rows(encode_all(sae, seg.words), seg.word_segment, len(seg.position))
    return SegmentCodes(max_pool_rows(codes, seg.position, n_docs), codes)


def save_segment_codes(store: ArtifactStore, prefix: str, seg: Segments,
                       codes: sp.csr_matrix) -> tuple[ArtifactInfo, ArtifactInfo]:
    """`<prefix>/segment_codes.csr.npz` and `<prefix>/segments.npz` (position, char_start, char_end)."""
    info = save_sparse(store, f"{prefix}/segment_codes.csr.npz", codes, "sae-segment-codes")
    buf = io.BytesIO()
    np.savez(buf, position=seg.position, char_start=seg.char_start, char_end=seg.char_end)
    return info, store.write_bytes(f"{prefix}/segments.npz", buf.getvalue(), kind="sae-segments")

"""What naming reads from the artifact store: texts, document vectors, codes, chunk provenance.

Texts stay a pyarrow array (no Python string per document until one is needed); vectors are
float32 [N, d] unit-norm; codes a CSC matrix [N, n] so that a feature's column is a slice.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from artifacts import ArtifactStore
from contracts.interpret import CorpusRef
from services.interpreter.sae_encoder import SaeEncoder


@dataclass
class ChunkIndex:
    """Every chunk of every document, grouped by document position."""

    vectors: np.ndarray
    """float16 [C, d]: pooled chunk vectors, not normalised."""
    char_start: np.ndarray
    """int32 [C]"""
    char_end: np.ndarray
    """int32 [C]"""
    starts: np.ndarray
    """int64 [N + 1]: chunks of document p are rows starts[p]:starts[p+1]."""

    @classmethod
    def from_arrays(cls, arrays: list[dict[str, np.ndarray]], n_docs: int) -> ChunkIndex:
        position = np.concatenate([a["position"] for a in arrays])
        order = np.argsort(position, kind="stable")  # shards are in order already; be safe
        position = position[order]
        starts = np.searchsorted(position, np.arange(n_docs + 1))
        take = lambda name: np.concatenate([a[name] for a in arrays])[order]  # noqa: E731
        return cls(take("vectors"), take("char_start"), take("char_end"), starts)

    def rows(self, position: int) -> range:
        return range(int(self.starts[position]), int(self.starts[position + 1]))


class DistinctVectors(NamedTuple):
    vectors: np.ndarray
    """float32 [U, d]: each distinct vector once, in the order np.unique gives."""
    group: np.ndarray
    """int64 [N]: the distinct vector of each position."""
    positions: np.ndarray
    """int64 [N]: positions grouped by distinct vector, each group in position order ..."""
    starts: np.ndarray
    """int64 [U + 1]: ... group g being positions[starts[g]:starts[g + 1]]."""


@dataclass
class Corpus:
    texts: pa.Array
    """[N] document texts, by position."""
    doc_ids: np.ndarray
    """int64 [N]: the gateway's document ids."""
    vectors: np.ndarray
    """float32 [N, d] unit-norm document vectors."""
    codes: sp.csc_matrix
    """float32 [N, n] SAE activations."""
    chunks: ChunkIndex | None = None
    sae: SaeEncoder | None = None
    """The SAE's encoder, to find each document's strongest chunk; None: excerpts from the start."""

    @property
    def n_docs(self) -> int:
        return self.vectors.shape[0]

    @cached_property
    def distinct(self) -> DistinctVectors:
        """The distinct vectors and their copies (segments repeat: templates, stock phrases)."""
        vectors = np.ascontiguousarray(self.vectors)
        keys = vectors.view(np.dtype((np.void, vectors.dtype.itemsize * vectors.shape[1]))).ravel()
        _, first, group = np.unique(keys, return_index=True, return_inverse=True)  # [U], [N]
        group = group.reshape(-1)
        starts = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=len(first)))])
        return DistinctVectors(vectors[first], group, np.argsort(group, kind="stable"), starts)

    def distinct_sample(self, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(ids [n], ascending; their vectors [n, d]) of a fixed sample (seed 0) of n of the distinct vectors, made
        once per n and kept (every search of the corpus shares it: 77 MB at 50,000 × 384); None where there are no
        more than n (neighbours.py)."""
        u = len(self.distinct.vectors)
        if u <= n:
            return None
        kept = self.__dict__.setdefault("_distinct_samples", {})  # beside cached_property's values
        if n not in kept:
            ids = np.sort(np.random.default_rng(0).choice(u, n, replace=False))
            kept[n] = (ids, self.distinct.vectors[ids])
        return kept[n]

    @cached_property
    def centring(self) -> tuple[np.ndarray, np.ndarray]:
        """The mean document vector mu [d] and each document's norm once centred on it, |v - mu| [N]
        (|v|= 1: 1 - 2 v·mu + |mu|²), without a centred copy of the vectors."""
        mu = self.vectors.mean(axis=0, dtype=np.float64).astype(np.float32)
        squared = 1.0 - 2.0 * (self.vectors @ mu) + float(mu @ mu)
        return mu, np.sqrt(np.maximum(squared, 1e-12)).astype(np.float32)

    @property
    def n_features(self) -> int:
        return self.codes.shape[1]

    def text(self, position: int) -> str:
        value = self.texts[position].as_py()
        return value or ""

    def text_sizes(self) -> np.ndarray:
        """int64 [N]: each text's length in bytes (0 where there is none), without reading the texts into Python."""
        import pyarrow.compute as pc

        return np.asarray(pc.fill_null(pc.binary_length(self.texts), 0), dtype=np.int64)

    def column(self, feature: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, activations) of the documents where `feature` fires."""
        lo, hi = self.codes.indptr[feature], self.codes.indptr[feature + 1]
        values = self.codes.data[lo:hi]
        keep = values > 0
        return self.codes.indices[lo:hi][keep].astype(np.int64), values[keep]


SEGMENT_CORPUS_DOCUMENTS = 20_000
"""Documents whose segments a segment corpus holds at most (a seeded sample beyond): at 200,000 notes of
15 sentences each, all segments' vectors would be 4.6 GB; 20,000 notes' give every feature that fires
on more than a few in 10,000 sentences enough evidence."""


def _span_shards(store: ArtifactStore, uris: list[str]) -> list[dict[str, np.ndarray]]:
    """Chunk or segment shards (.npz): the arrays both kinds hold, one dict a shard, in order."""
    shards = []
    for uri in uris:
        with np.load(io.BytesIO(store.read_bytes(uri))) as z:
            shards.append({k: z[k] for k in ("vectors", "position", "char_start", "char_end")})
    return shards


def _snapshot(store: ArtifactStore, uri: str) -> pa.Table:
    with store.open(uri) as f:
        table = pq.read_table(f, columns=["position", "doc_id", "text"])
    positions = table.column("position").to_numpy()
    if not np.array_equal(positions, np.arange(len(positions))):
        table = table.sort_by("position")
    return table


def segment_corpus(table: pa.Table, shards: list[dict[str, np.ndarray]], codes: sp.csr_matrix, *,
                   max_documents: int = SEGMENT_CORPUS_DOCUMENTS, seed: int = 0) -> Corpus:
    """A corpus whose units are segments (sentences): texts are the segments' own spans, vectors their
    embeddings (unit norm), codes their SAE codes, and doc_ids the ids of the documents they come from
    (repeated). Features of an SAE trained on segments are about sentences ("suspected", "ruled out"):
    named from whole notes, where they are one sentence among twenty, their keywords drown in the
    notes' other words. Past `max_documents` documents, the segments of a seeded sample of them."""
    position = np.concatenate([z["position"] for z in shards]).astype(np.int64)
    if codes.shape[0] != len(position):
        raise ValueError(f"corpus mismatch: {len(position)} segments, {codes.shape[0]} segment code rows")
    n_docs = table.num_rows
    if len(position) and (position.min() < 0 or position.max() >= n_docs):
        raise ValueError(f"corpus mismatch: segment positions outside the {n_docs} documents")
    rows = np.arange(len(position))
    if n_docs > max_documents:
        keep = np.zeros(n_docs, dtype=bool)
        keep[np.random.default_rng(seed).choice(n_docs, max_documents, replace=False)] = True
        rows = rows[keep[position]]
    start = np.concatenate([z["char_start"] for z in shards])[rows]
    end = np.concatenate([z["char_end"] for z in shards])[rows]
    vectors = np.concatenate([z["vectors"] for z in shards])[rows].astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    texts = table.column("text").combine_chunks()
    pos = position[rows]
    pieces = [(texts[p].as_py() or "")[a:b] for p, a, b in zip(pos.tolist(), start.tolist(), end.tolist())]
    doc_ids = table.column("doc_id").to_numpy()[pos]
    return Corpus(pa.array(pieces, type=pa.string()), doc_ids, vectors, codes[rows].tocsc())


def load_corpus(store: ArtifactStore, ref: CorpusRef, *, with_sae: bool = True) -> Corpus:
    """Read every artifact of `ref`; checks that the row counts agree. With segments in `ref`, a
    corpus of segments (`segment_corpus`)."""
    table = _snapshot(store, ref.snapshot_uri)
    if ref.segments and ref.segment_codes_uri:
        codes = sp.load_npz(io.BytesIO(store.read_bytes(ref.segment_codes_uri))).tocsr()
        return segment_corpus(table, _span_shards(store, ref.segments), codes)
    vectors = np.concatenate([np.load(io.BytesIO(store.read_bytes(u))) for u in ref.embeddings])
    codes = sp.load_npz(io.BytesIO(store.read_bytes(ref.codes_csc_uri))).tocsc()
    n = table.num_rows
    if vectors.shape[0] != n or codes.shape[0] != n:
        raise ValueError(f"corpus mismatch: {n} documents, {vectors.shape[0]} vectors, {codes.shape[0]} code rows")
    chunks = None
    if ref.chunks:
        chunks = ChunkIndex.from_arrays(_span_shards(store, ref.chunks), n)
    sae = None
    if with_sae and ref.sae_uri:
        sae = SaeEncoder.load(store, ref.sae_uri)
    return Corpus(table.column("text").combine_chunks(), table.column("doc_id").to_numpy(),
                  vectors.astype(np.float32, copy=False), codes, chunks, sae)

"""What naming reads from the artifact store: texts, document vectors, codes, chunk provenance.

Texts stay a pyarrow array (no Python string per document until one is needed); vectors are
float32 [N, d] unit-norm; codes a CSC matrix [N, n] so that a feature's column is a slice.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

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

    @property
    def n_features(self) -> int:
        return self.codes.shape[1]

    def text(self, position: int) -> str:
        value = self.texts[position].as_py()
        return value or ""

    def column(self, feature: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, activations) of the documents where `feature` fires."""
        lo, hi = self.codes.indptr[feature], self.codes.indptr[feature + 1]
        values = self.codes.data[lo:hi]
        keep = values > 0
        return self.codes.indices[lo:hi][keep].astype(np.int64), values[keep]


def load_corpus(store: ArtifactStore, ref: CorpusRef, *, with_sae: bool = True) -> Corpus:
    """Read every artifact of `ref`; checks that the row counts agree."""
    with store.open(ref.snapshot_uri) as f:
        table = pq.read_table(f, columns=["position", "doc_id", "text"])
    positions = table.column("position").to_numpy()
    if not np.array_equal(positions, np.arange(len(positions))):
        table = table.sort_by("position")
    vectors = np.concatenate([np.load(io.BytesIO(store.read_bytes(u))) for u in ref.embeddings])
    codes = sp.load_npz(io.BytesIO(store.read_bytes(ref.codes_csc_uri))).tocsc()
    n = table.num_rows
    if vectors.shape[0] != n or codes.shape[0] != n:
        raise ValueError(f"corpus mismatch: {n} documents, {vectors.shape[0]} vectors, {codes.shape[0]} code rows")
    chunks = None
    if ref.chunks:
        arrays = []
        for uri in ref.chunks:
            with np.load(io.BytesIO(store.read_bytes(uri))) as z:
                arrays.append({k: z[k] for k in ("vectors", "position", "char_start", "char_end")})
        chunks = ChunkIndex.from_arrays(arrays, n)
    sae = None
    if with_sae and ref.sae_uri:
        sae = SaeEncoder.load(store, ref.sae_uri)
    return Corpus(table.column("text").combine_chunks(), table.column("doc_id").to_numpy(),
                  vectors.astype(np.float32, copy=False), codes, chunks, sae)

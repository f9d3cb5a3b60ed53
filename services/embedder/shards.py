"""Shard files of an embedding run in the artifact store, and the snapshot read shard by shard.

Layout under the run's prefix (see contracts.embed): `embeddings/shard-00000.npy`
(float32 [docs_in_shard, d]) and `chunks/shard-00000.npz` (CHUNK_ARRAYS), and with
`spec.segments` also `segments/shard-00000.npz` (SEGMENT_ARRAYS, and WORD_ARRAYS with `spec.word_states`). The embeddings file is written
last: a shard whose files all exist, with the expected shapes, is complete; `.tmp-*` leftovers of
a killed writer are never listed by the store, so they are ignored.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from services.embedder.encoder import Embedded
from services.embedder.errors import EmbedderInputError
from services.embedder.segments import SegmentVectors


class ShardStats(NamedTuple):
    """What a finished shard holds, read back from its files or taken from the computation."""

    embeddings: ArtifactInfo
    chunks: ArtifactInfo
    n_chunks: np.ndarray  # int64 [docs_in_shard]: chunks per document
    n_tokens: int  # tokens fed to the model, specials included
    segments: ArtifactInfo | None = None
    n_segments: int = 0


def shard_keys(prefix: str, index: int) -> tuple[str, str]:
    """Store keys of shard `index`: (embeddings .npy, chunks .npz)."""
    base = prefix.rstrip("/")
    return f"{base}/embeddings/shard-{index:05d}.npy", f"{base}/chunks/shard-{index:05d}.npz"


def segment_key(prefix: str, index: int) -> str:
    return f"{prefix.rstrip('/')}/segments/shard-{index:05d}.npz"


def write_segments(store: ArtifactStore, prefix: str, index: int, first_position: int,
                   seg: SegmentVectors) -> ArtifactInfo:
    buf = io.BytesIO()
    words = {} if seg.word_segment is None else {"word_vectors": seg.word_vectors.astype(np.float16),
                                                 "word_segment": seg.word_segment.astype(np.int64)}
    np.savez(buf, vectors=seg.vectors.astype(np.float16), position=(seg.doc + first_position).astype(np.int64),
             char_start=seg.char_start, char_end=seg.char_end, **words)
    return store.write_bytes(segment_key(prefix, index), buf.getvalue(), kind="embedding-segments")


def write_shard(store: ArtifactStore, prefix: str, index: int, first_position: int, emb: Embedded,
                seg: SegmentVectors | None = None) -> ShardStats:
    """Write the chunks file (and the segments file), then the embeddings file, each atomically."""
    seg_info = None if seg is None else write_segments(store, prefix, index, first_position, seg)
    emb_key, chunk_key = shard_keys(prefix, index)
    buf = io.BytesIO()
    np.savez(
        buf,
        vectors=emb.chunks.vectors.astype(np.float16),
        position=(emb.chunks.doc + first_position).astype(np.int64),
        token_start=emb.chunks.token_start, token_end=emb.chunks.token_end,
        char_start=emb.chunks.char_start, char_end=emb.chunks.char_end,
    )
    chunk_info = store.write_bytes(chunk_key, buf.getvalue(), kind="embedding-chunks")
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(emb.vectors, dtype=np.float32))
    emb_info = store.write_bytes(emb_key, buf.getvalue(), kind="embeddings")
    # n_tokens stays the documents' (what a reused shard reads back); segments are a second pass
    return ShardStats(emb_info, chunk_info, emb.n_chunks, int(emb.n_tokens.sum()), seg_info,
                      0 if seg is None else len(seg.doc))


def read_segment_stats(store: ArtifactStore, prefix: str, index: int, *, first_position: int, n_docs: int,
                       dim: int) -> tuple[ArtifactInfo, int] | None:
    """(info, segments) of a complete segments file: every document of the shard has a row."""
    key = segment_key(prefix, index)
    if not store.exists(key):
        return None
    try:
        data = store.read_bytes(key)
        with np.load(io.BytesIO(data)) as z:
            position, shape = z["position"], z["vectors"].shape
    except (ValueError, OSError, KeyError):
        return None
    local = position - first_position
    if shape != (len(position), dim) or not len(local) or np.any(np.diff(local) < 0):
        return None
    if local[0] != 0 or local[-1] != n_docs - 1 or len(np.unique(local)) != n_docs:
        return None
    return _info(store, key, data, "embedding-segments"), len(position)


def read_shard_stats(
    store: ArtifactStore, prefix: str, index: int, *, first_position: int, n_docs: int, dim: int,
    n_special: int, segments: bool = False,
) -> ShardStats | None:
    """The stats of a complete shard, or None when it is missing or not of the expected shape.
    With `segments`, its segments file must be complete too (their tokens are not counted)."""
    emb_key, chunk_key = shard_keys(prefix, index)
    if not (store.exists(emb_key) and store.exists(chunk_key)):
        return None
    seg = read_segment_stats(store, prefix, index, first_position=first_position, n_docs=n_docs,
                             dim=dim) if segments else None
    if segments and seg is None:
        return None
    try:
        emb_bytes, chunk_bytes = store.read_bytes(emb_key), store.read_bytes(chunk_key)
        vectors = np.load(io.BytesIO(emb_bytes))
        with np.load(io.BytesIO(chunk_bytes)) as z:
            position, start, end = z["position"], z["token_start"], z["token_end"]
    except (ValueError, OSError, KeyError):
        return None
    if vectors.shape != (n_docs, dim) or vectors.dtype != np.float32:
        return None
    n_chunks = np.bincount(position - first_position, minlength=n_docs).astype(np.int64)
    if len(n_chunks) != n_docs or (n_chunks == 0).any():
        return None
    n_tokens = int((end.astype(np.int64) - start).sum()) + n_special * len(position)
    return ShardStats(
        _info(store, emb_key, emb_bytes, "embeddings"), _info(store, chunk_key, chunk_bytes, "embedding-chunks"),
        n_chunks, n_tokens, *(seg or (None, 0)),
    )


def _info(store: ArtifactStore, key: str, data: bytes, kind: str) -> ArtifactInfo:
    return ArtifactInfo(uri=store.uri(key), size=len(data), sha256=hashlib.sha256(data).hexdigest(), kind=kind)


def snapshot_rows(store: ArtifactStore, snapshot_uri: str) -> int:
    """Documents in the snapshot, from the Parquet footer (no data read)."""
    if not store.exists(snapshot_uri):
        raise EmbedderInputError(f"dataset snapshot {snapshot_uri!r} does not exist")
    with store.open(snapshot_uri) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


def iter_snapshot_shards(
    store: ArtifactStore, snapshot_uri: str, shard_size: int
) -> Iterator[tuple[int, list[str]]]:
    """(first position, texts) per shard of `shard_size` documents, in position order.

    Reads record batches (never the whole file) and checks that `position` runs 0..N-1,
    since shard i must be exactly documents [i*S, (i+1)*S).
    """
    with store.open(snapshot_uri) as f:
        parquet = pq.ParquetFile(f)
        pending: list[str] = []
        first = expected = 0
        for batch in parquet.iter_batches(batch_size=min(shard_size, 65536), columns=["position", "text"]):
            positions = batch.column("position").to_numpy()
            if len(positions) and not np.array_equal(positions, np.arange(expected, expected + len(positions))):
                raise EmbedderInputError(
                    f"snapshot {snapshot_uri!r}: column 'position' is not 0..N-1 in row order near row {expected}"
                )
            expected += len(positions)
            pending.extend(_texts(batch.column("text")))
            while len(pending) >= shard_size:
                yield first, pending[:shard_size]
                pending = pending[shard_size:]
                first += shard_size
        if pending:
            yield first, pending


def _texts(column: pa.Array) -> list[str]:
    """Python strings, a null text read as empty."""
    return ["" if t is None else t for t in column.to_pylist()]

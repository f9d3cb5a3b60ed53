"""Text search over an extended SAE run: the notes appended since its embedding run, found as that run's own.

The extension job (runs/extend.py) embeds the new notes with the embedding run's spec, documents and segments as its
shards hold theirs (`encode_texts(..., search_vectors=True)`). Every note appended to the run so far keeps its
vectors in one artifact of the SAE run (`appended_vectors`: a previous extension's, then this one's), and the job
builds the text index and the segment ranker over the embedding run's notes followed by those
(`<prefix>/search/`), as text_index.py builds them for an embedding run. Text search reads the SAE run's own when it
has them; the embedding run, which other SAE runs may share, is not touched. The dense baseline of a concept reads
the same vectors.
"""

from __future__ import annotations

import io
from itertools import chain
from typing import Any

import faiss
import numpy as np

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from gateway.search import segment_rank, text_index

APPENDED = "appended_vectors"
SEARCH_ARTIFACTS = ("text_index", "segment_ranker")
_SEGMENT_FIELDS = ("vectors", "position", "char_start", "char_end")


def merge_appended(store: ArtifactStore, prefix: str, artifacts: dict[str, Any], keys: list[str]) -> ArtifactInfo:
    """`<prefix>/appended_vectors.npz`: the vectors of every note appended since the embedding run (a previous
    extension's first, then these batches'): documents float32 [A, d], and where the run has segments, theirs
    (float16) with their dataset positions and spans."""
    parts: list[dict[str, np.ndarray]] = []
    if APPENDED in artifacts:
        with np.load(io.BytesIO(store.read_bytes(artifacts[APPENDED]["uri"])), allow_pickle=False) as z:
            parts.append({name: z[name] for name in z.files})
    for key in keys:
        with np.load(io.BytesIO(store.read_bytes(key)), allow_pickle=False) as z:
            part = {"documents": z["vectors"]}
            if "search_segment_vectors" in z.files:
                part |= {"segment_vectors": z["search_segment_vectors"], "position": z["search_position"],
                         "char_start": z["search_char_start"], "char_end": z["search_char_end"]}
            parts.append(part)
    merged = {name: np.concatenate([p[name] for p in parts]) for name in parts[-1]}
    buf = io.BytesIO()
    np.savez(buf, **merged)
    return store.write_bytes(f"{prefix}/{APPENDED}.npz", buf.getvalue(), kind="appended-vectors")


def appended(store: ArtifactStore, artifacts: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """The appended notes' vectors (merge_appended's arrays), None when the run holds none."""
    if APPENDED not in artifacts:
        return None
    with np.load(io.BytesIO(store.read_bytes(artifacts[APPENDED]["uri"])), allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    faiss.normalize_L2(x)
    return x


def build_search(store: ArtifactStore, settings: Any, embedding_result: dict[str, Any], appended_uri: str,
                 prefix: str) -> dict[str, ArtifactInfo]:
    """The text index (and, where the embedding run has segments, the segment ranker) over the embedding run's notes
    and then the appended ones, under `<prefix>/search/`, by the names the SAE run's result gives them."""
    extra = appended(store, {APPENDED: {"uri": appended_uri}})
    documents = np.concatenate([text_index.read_shards(store, [s["uri"] for s in embedding_result["shards"]]),
                                unit_rows(extra["documents"])])
    kind = text_index.choose_kind(len(documents), flat_max_docs=settings.search_flat_max_docs,
                                  large=settings.search_large_index)
    index = text_index.build_index(documents, kind)
    out = {"text_index": store.write_bytes(f"{prefix}/search/{kind}.faiss", faiss.serialize_index(index).tobytes(),
                                           kind=text_index.KIND)}
    segments = text_index.rankable_segments(embedding_result)
    if segments and "segment_vectors" in extra:
        new = {"vectors": extra["segment_vectors"], **{k: extra[k] for k in _SEGMENT_FIELDS[1:]}}
        ranker = segment_rank.build(documents, chain(text_index.segment_shards(store, segments), [new]),
                                    max_distinct=settings.search_segments_max)
        if ranker is not None:
            out["segment_ranker"] = store.write_bytes(f"{prefix}/search/segments.npz", segment_rank.to_bytes(ranker),
                                                      kind=segment_rank.KIND)
    return out

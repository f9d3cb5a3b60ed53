"""The artifacts of an SAE run's extension: each batch of appended notes' codes as a checkpoint, then the run's
codes (documents, and segments where the run has them) written whole again, the old rows first, under a prefix of
the extension's own. Nothing here touches the run's row: the switch is one update (runs/extend.py)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from gateway.domain.features.models import Feature
from gateway.domain.runs.passages import EncodedTexts

STATS_FIELDS = ("density", "mean_activation", "max_activation", "histogram", "neighbours")
"""What the statistics give a feature's row; its names, skip reason and families stay."""


def _csr_arrays(prefix: str, matrix: sp.csr_matrix) -> dict[str, np.ndarray]:
    return {f"{prefix}_data": matrix.data.astype(np.float32), f"{prefix}_indices": matrix.indices.astype(np.int32),
            f"{prefix}_indptr": matrix.indptr.astype(np.int64), f"{prefix}_shape": np.asarray(matrix.shape, np.int64)}


def _csr(z: Any, prefix: str) -> sp.csr_matrix:
    return sp.csr_matrix((z[f"{prefix}_data"], z[f"{prefix}_indices"], z[f"{prefix}_indptr"]),
                         shape=tuple(z[f"{prefix}_shape"]))


def write_batch(store: ArtifactStore, key: str, encoded: EncodedTexts, first_position: int) -> None:
    """One batch's codes [texts, n] and, with segments, their codes [S, n], document positions and spans; the texts'
    vectors for text search where they were computed."""
    arrays = _csr_arrays("codes", sp.csr_matrix(encoded.codes, dtype=np.float32))
    if encoded.segments is not None:
        arrays |= _csr_arrays("segment_codes", sp.csr_matrix(encoded.segment_rows, dtype=np.float32))
        arrays["position"] = encoded.segments.doc.astype(np.int64) + first_position
        arrays["char_start"], arrays["char_end"] = encoded.segments.spans[:, 0], encoded.segments.spans[:, 1]
    if (search := encoded.search) is not None:  # what text search reads (runs/extend_search.py)
        arrays["vectors"] = search.documents.astype(np.float32)
        if search.segment_vectors is not None:
            arrays["search_segment_vectors"] = search.segment_vectors.astype(np.float16)
            arrays["search_position"] = search.doc.astype(np.int64) + first_position
            arrays["search_char_start"], arrays["search_char_end"] = search.spans[:, 0], search.spans[:, 1]
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    store.write_bytes(key, buf.getvalue(), kind="sae-extend-batch")


def _npz(matrix: sp.spmatrix) -> bytes:
    buf = io.BytesIO()
    sp.save_npz(buf, matrix, compressed=False)  # as services/sae/encoding.py save_sparse writes codes
    return buf.getvalue()


def merge(store: ArtifactStore, prefix: str, artifacts: dict[str, Any], keys: list[str]) -> dict[str, ArtifactInfo]:
    """The run's codes with every batch's rows after them: `codes.{csr,csc}.npz` and, where the run has segment
    codes, `segment_codes.csr.npz` and `segments.npz`, all under `prefix`. Returns them by the result's names."""
    batches = [np.load(io.BytesIO(store.read_bytes(k)), allow_pickle=False) for k in keys]
    old = sp.load_npz(io.BytesIO(store.read_bytes(artifacts["codes_csr"]["uri"]))).tocsr()
    codes = sp.vstack([old, *(_csr(z, "codes") for z in batches)], format="csr").astype(np.float32)  # [N + new, n]
    codes.sort_indices()
    out = {"codes_csr": store.write_bytes(f"{prefix}/codes.csr.npz", _npz(codes), kind="sae-codes"),
           "codes_csc": store.write_bytes(f"{prefix}/codes.csc.npz", _npz(codes.tocsc()), kind="sae-codes")}
    if artifacts.get("segment_codes") and artifacts.get("segments"):
        old_seg = sp.load_npz(io.BytesIO(store.read_bytes(artifacts["segment_codes"]["uri"]))).tocsr()
        seg = sp.vstack([old_seg, *(_csr(z, "segment_codes") for z in batches)], format="csr").astype(np.float32)
        seg.sort_indices()
        out["segment_codes"] = store.write_bytes(f"{prefix}/segment_codes.csr.npz", _npz(seg), kind="sae-segment-codes")
        with np.load(io.BytesIO(store.read_bytes(artifacts["segments"]["uri"])), allow_pickle=False) as index:
            parts = {name: np.concatenate([index[name], *(z[name].astype(index[name].dtype) for z in batches)])
                     for name in ("position", "char_start", "char_end")}
        buf = io.BytesIO()
        np.savez(buf, **parts)
        out["segments"] = store.write_bytes(f"{prefix}/segments.npz", buf.getvalue(), kind="sae-segments")
    for z in batches:
        z.close()
    return out


def update_feature_stats(session: Session, *, sae_run_id: int, rows: list[dict[str, Any]]) -> None:
    """Each feature's statistics replaced in place (its id, names and family stay), in one statement."""
    ids = dict(session.execute(select(Feature.index, Feature.id).where(Feature.sae_run_id == sae_run_id)).all())
    changes = [{"id": ids[r["index"]], **{name: r[name] for name in STATS_FIELDS}} for r in rows if r["index"] in ids]
    if changes:
        session.execute(update(Feature), changes)

"""Importing document vectors computed elsewhere (another machine, a GPU) as a succeeded embedding run.

Synchronous, like a dataset upload: the 4xx that names the bad row must be the upload's answer, and
nothing is stored unless every check passes (`vector_files`: shape, ids, finiteness; here: the
dataset, the form's fields, the query model). Then the vectors are written as the embedded runs'
shards (`embeddings/shard-NNNNN.npy`, float32 [docs_in_shard, d], position order, and `spec.json`),
catalogued, and the run recorded as succeeded with model `imported:<name>` and pooling `imported`.
An imported run has no chunk provenance (`chunks` is empty, `n_chunks` None): the interpreter then
takes each document's excerpt from its start. The SAE trains on the shards as it does on embedded ones.

Optional segment vectors (the form's `segments` file, see `segment_files`) are checked against the
document vectors and the dataset's texts, then stored as an embedded run with `segments: true`
stores them (`segments/shard-NNNNN.npz`, one per embeddings shard, contracts.embed.SEGMENT_ARRAYS),
so SAE runs with `train_on` segments and `max_over_segments` codes take them as they take those.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.embed import EmbeddingImportResult, EmbeddingRunSpec, Pooling
from gateway.db import session_scope, utcnow
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.runs import repo
from gateway.domain.runs.embedding import check_allowed_model
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.models import EmbeddingRun
from gateway.domain.runs.query_model import IMPORTED, queries_unit_norm
from gateway.domain.runs.segment_files import SegmentUpload, read_segments, text_lengths
from gateway.domain.runs.vector_files import DatasetKeys, Vectors, read_vectors
from gateway.search import text_index
from gateway.services import ServiceClients, ServiceError

SHARD_SIZE = EmbeddingRunSpec().shard_size
MAX_NAME = 200
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class ImportRequest:
    """The upload and the form's fields (see `import_request`)."""

    dataset_id: int
    path: Path
    source: str
    name: str
    dim: int | None = None
    normalize: bool = True
    query_model: str | None = None
    query_pooling: Pooling = "mean"
    segments_path: Path | None = None  # the optional segment vectors (segment_files)
    segments_source: str | None = None
    query_prompted: bool = False  # the query model has prompts: queries go in as 'query: …'


def import_request(fields: dict[str, str], *, path: Path, filename: str | None, segments_path: Path | None = None,
                   segments_filename: str | None = None) -> ImportRequest:
    """The form's fields checked: each problem a 422 naming its field."""
    source = (filename or "upload")[:300]
    name = (fields.get("name") or "").strip() or Path(source).stem or "upload"
    if len(name) > MAX_NAME or not name.isprintable():
        raise RunInputError(f"name: at most {MAX_NAME} printable characters", field="name")
    pooling = (fields.get("query_pooling") or "mean").strip()
    if pooling not in get_args(Pooling):
        raise RunInputError(f"query_pooling: {pooling!r} is not one of {', '.join(get_args(Pooling))}",
                            field="query_pooling")
    return ImportRequest(
        dataset_id=_integer(fields, "dataset_id", required=True), path=path, source=source, name=name,
        dim=_integer(fields, "dim", required=False), normalize=_boolean(fields, "normalize", default=True),
        query_model=(fields.get("query_model") or "").strip() or None, query_pooling=pooling,  # type: ignore[arg-type]
        segments_path=segments_path,
        segments_source=None if segments_path is None else (segments_filename or "segments")[:300],
    )


def _integer(fields: dict[str, str], key: str, *, required: bool) -> Any:
    raw = (fields.get(key) or "").strip()
    if not raw and not required:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 2**31:
        raise RunInputError(f"{key}: a positive integer form field is required", field=key)
    return int(raw)


def _boolean(fields: dict[str, str], key: str, *, default: bool) -> bool:
    raw = (fields.get(key) or "").strip().lower()
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    if raw:
        raise RunInputError(f"{key}: true or false, not {raw!r}", field=key)
    return default


async def import_embedding_run(app_state: Any, req: ImportRequest, principal: Principal,
                               request_id: str | None) -> EmbeddingRun:
    """Check everything, then store the vectors as a succeeded run (and its text index when texts
    can be embedded to meet them). Raises RunInputError (4xx) with nothing stored."""
    settings = app_state.settings
    size = req.path.stat().st_size + (req.segments_path.stat().st_size if req.segments_path else 0)
    if size > settings.max_upload_bytes:
        what = "file and segments: together" if req.segments_path else "file:"
        raise RunInputError(f"{what} {size:,} bytes is over the {settings.max_upload_bytes:,}-byte upload limit",
                            field="file", status_code=413)
    keys = await asyncio.to_thread(dataset_keys, app_state.factory, app_state.store, req.dataset_id, principal)
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    work = settings.uploads_dir / f"vectors-{uuid.uuid4().hex}.npy"
    seg_work = settings.uploads_dir / f"segments-{uuid.uuid4().hex}.npy"
    try:
        vectors = await asyncio.to_thread(read_vectors, req.path, keys, work_path=work,
                                          max_bytes=settings.max_upload_bytes, normalize=req.normalize)
        d = vectors.array.shape[1]
        if req.dim is not None and req.dim != d:
            raise RunInputError(f"dim: the form says {req.dim}, the vectors have {d} values", field="dim")
        segments = None
        if req.segments_path is not None:
            chars = await asyncio.to_thread(snapshot_text_lengths, app_state.factory, app_state.store, keys)
            segments = await asyncio.to_thread(read_segments, req.segments_path, keys, chars, vectors.array,
                                               work_path=seg_work, max_bytes=settings.max_upload_bytes,
                                               normalize=req.normalize)
        if req.query_model is not None:
            req = await check_query_model(app_state.services, req, d)
        run = await asyncio.to_thread(store_run, app_state.factory, app_state.store, req, keys, vectors,
                                      principal, request_id, segments)
    finally:
        work.unlink(missing_ok=True)
        seg_work.unlink(missing_ok=True)
    if req.query_model is not None:
        await asyncio.to_thread(text_index.build_after_run, app_state.factory, app_state.store, settings, run.id)
    return run


def _snapshot_uri(factory: Any, dataset_id: int, principal: Principal | None = None) -> str:
    """The dataset's snapshot; 422 when it has no documents, or when `principal` does not see it (as
    if it did not exist)."""
    with session_scope(factory) as session:
        ds = dataset_repo.get_dataset(session, dataset_id=dataset_id)
        if ds is None or (principal is not None and not principal.sees(ds.project_id)):
            raise RunInputError(f"dataset_id: dataset {dataset_id} does not exist", field="dataset_id")
        if ds.n_documents == 0 or ds.snapshot_artifact_id is None:
            raise RunInputError(f"dataset_id: dataset {dataset_id} has no documents", field="dataset_id")
        return artifact_repo.get(session, artifact_id=ds.snapshot_artifact_id).uri


def snapshot_text_lengths(factory: Any, store: ArtifactStore, keys: DatasetKeys) -> np.ndarray:
    """int64 [N]: each document's text length in characters, read from the snapshot batch by batch."""
    with store.open(_snapshot_uri(factory, keys.dataset_id)) as f:
        pf = pq.ParquetFile(f)
        return text_lengths(pf.iter_batches(batch_size=8192, columns=["position", "text"]), keys.n)


def dataset_keys(factory: Any, store: ArtifactStore, dataset_id: int, principal: Principal | None = None) -> DatasetKeys:
    """The dataset's ids in position order, read from its snapshot; 422 when it has no documents, or
    when `principal` does not see it (as if it did not exist)."""
    uri = _snapshot_uri(factory, dataset_id, principal)
    with store.open(uri) as f:
        table = pq.read_table(f, columns=["position", "doc_id", "external_id"]).sort_by("position")
    return DatasetKeys(dataset_id, table.column("doc_id").to_numpy(),
                       table.column("external_id").combine_chunks().cast(pa.string()))


async def check_query_model(services: ServiceClients, req: ImportRequest, d: int) -> ImportRequest:
    """The query model is allowed, loads on the embedder and makes vectors of the upload's dimension;
    returns the request with the model's own name for 'default' and whether it has prompts (then
    queries go in with its 'query' prompt)."""
    check_allowed_model(req.query_model, field="query_model")
    try:
        out = await services.post("embedder", "/embed", {"texts": ["ok"], "model": req.query_model,
                                                         "pooling": req.query_pooling})
    except ServiceError as exc:
        raise RunInputError(f"query_model: {exc.detail}", field="query_model") from None
    if out["dim"] != d:
        raise RunInputError(f"query_model: {req.query_model!r} makes {out['dim']}-dimensional vectors, the upload's "
                            f"have {d}", field="query_model")
    return replace(req, query_model=out.get("model_name") or req.query_model,
                   query_prompted=bool(out.get("prompt_name")))


def store_run(factory: Any, store: ArtifactStore, req: ImportRequest, keys: DatasetKeys, vectors: Vectors,
              principal: Principal, request_id: str | None, segments: SegmentUpload | None = None) -> EmbeddingRun:
    """The run row, its shards and catalogue entries; on any failure all of them are removed again."""
    d = vectors.array.shape[1]
    spec = {"imported": True, "name": req.name, "source": req.source, "format": vectors.format,
            "id_column": vectors.id_column, "normalize": req.normalize, "shard_size": SHARD_SIZE,
            "query_model": req.query_model, "query_pooling": req.query_pooling if req.query_model else None}
    if req.query_prompted:
        spec["query_prompt_name"] = "query"
    if segments is not None:
        spec |= {"segments": True, "segments_source": req.segments_source, "segments_format": segments.format,
                 "segments_id_column": segments.id_column}
    with session_scope(factory) as session:
        run = repo.add_embedding_run(session, dataset_id=req.dataset_id, model=f"imported:{req.name}",
                                     pooling=IMPORTED, normalize=req.normalize, dim=d, n_documents=keys.n,
                                     spec=spec, status="running")
        run_id = run.id
    prefix = f"embedding-runs/{run_id}"
    try:
        shards, norms = write_shards(store, prefix, vectors.array, normalize=req.normalize)
        # A query meets the stored vectors as they are: unit norm when scaled here, or when they came so
        # (vectors exported from a run, "as given"); otherwise as the query model gives them.
        query_normalize = queries_unit_norm(req.normalize, *norms)
        seg_shards = [] if segments is None else write_segment_shards(store, prefix, segments)
        manifest = {"model": f"imported:{req.name}", "pooling": IMPORTED, "normalize": req.normalize,
                    "max_length": None, "shard_size": SHARD_SIZE, "dim": d, "source": req.source}
        if segments is not None:  # as an embedded run's manifest says it
            manifest["segments"] = True
        store.write_bytes(f"{prefix}/spec.json", json.dumps(manifest, sort_keys=True).encode(), kind="embedding-spec")
        result = EmbeddingImportResult(
            name=req.name, source=req.source, format=vectors.format, id_column=vectors.id_column,  # type: ignore[arg-type]
            dtype=vectors.dtype, dim=d, n_documents=keys.n, normalize=req.normalize, norm_min=norms[0],
            norm_max=norms[1], shards=shards, segments=seg_shards,
            n_segments=0 if segments is None else len(segments.position),
            n_segments_uploaded=0 if segments is None else segments.n_uploaded,
            n_documents_without_segments=0 if segments is None else segments.n_filled)
        with session_scope(factory) as session:
            run = repo.get_embedding_run(session, run_id=run_id)
            for info in [*shards, *seg_shards]:
                artifact_repo.record(session, info=info, owner_type="embedding_run", owner_id=run_id)
            run.status, run.finished_at, run.result = "succeeded", utcnow(), result.model_dump(mode="json")
            run.spec = {**(run.spec or {}), "query_normalize": query_normalize}
            audit(session, principal, "embedding_run.import", target_type="embedding_run", target_id=run_id,
                  request_id=request_id, details={"dataset_id": req.dataset_id, "n_documents": keys.n, "dim": d,
                                                  "format": vectors.format,
                                                  **({} if segments is None else {"n_segments": result.n_segments})})
        return run
    except BaseException:
        store.delete(prefix)
        with session_scope(factory) as session:
            artifact_repo.forget_owner(session, owner_type="embedding_run", owner_id=run_id)
            repo.delete_embedding_run(session, run_id=run_id)
        raise


def write_shards(store: ArtifactStore, prefix: str, vectors: np.ndarray, *,
                 normalize: bool) -> tuple[list[ArtifactInfo], tuple[float, float]]:
    """float32 [N, d] in position order → `{prefix}/embeddings/shard-NNNNN.npy` of SHARD_SIZE rows each
    (contracts.embed's layout), each row scaled to unit norm when `normalize`. Returns the shards'
    infos and the smallest and largest norm of the rows as given."""
    infos, low, high = [], np.inf, 0.0
    for index, start in enumerate(range(0, len(vectors), SHARD_SIZE)):
        block = np.array(vectors[start:start + SHARD_SIZE], dtype=np.float32)  # [s, d], a copy
        # float64: a float32 square overflows past 1.8e19; rows are never all zeros here (checked)
        norms = np.linalg.norm(block.astype(np.float64), axis=1, keepdims=True)  # [s, 1]
        low, high = min(low, float(norms.min())), max(high, float(norms.max()))
        if normalize:
            block = (block / norms).astype(np.float32)
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(block))
        key = f"{prefix}/embeddings/shard-{index:05d}.npy"
        infos.append(store.write_bytes(key, buf.getvalue(), kind="embeddings"))
    return infos, (low, high)


def write_segment_shards(store: ArtifactStore, prefix: str, seg: SegmentUpload) -> list[ArtifactInfo]:
    """`{prefix}/segments/shard-NNNNN.npz`, one per embeddings shard (the segments of its SHARD_SIZE
    documents), arrays as an embedded run writes them (services/embedder/shards.write_segments)."""
    n_docs = int(seg.position[-1]) + 1
    infos = []
    for index, first in enumerate(range(0, n_docs, SHARD_SIZE)):
        lo, hi = np.searchsorted(seg.position, [first, first + SHARD_SIZE])  # rows of this shard's documents
        buf = io.BytesIO()
        np.savez(buf, vectors=np.asarray(seg.vectors[lo:hi], dtype=np.float16), position=seg.position[lo:hi],
                 char_start=seg.char_start[lo:hi], char_end=seg.char_end[lo:hi])
        infos.append(store.write_bytes(f"{prefix}/segments/shard-{index:05d}.npz", buf.getvalue(),
                                       kind="embedding-segments"))
    return infos

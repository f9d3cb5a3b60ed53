"""Importing an SAE trained elsewhere: sparsify's folder (cfg.json + sae.safetensors) as a zip.

The upload is checked before anything is stored (the zip's names and sizes, cfg.json's fields
against the embedding run: d_in, k ≤ n); then the two files go to the artifact store and a job
analyses the SAE like a trained one (encoding, statistics, families), without training.
"""

from __future__ import annotations

import asyncio
import json
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from contracts.runs import SaeRunCreate
from contracts.sae import SaeConfig, SaeImportPayload
from gateway.db import session_scope
from gateway.domain.auth.scope import visible
from gateway.domain.auth.service import Principal, audit
from gateway.domain.jobs.runner import JobContext
from gateway.domain.runs import repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.jobs import start_run_job
from gateway.domain.runs.models import SaeRun
from gateway.domain.runs.sae import SaeRunJob, _prepare, drive_sae_service

KIND = "sae_import"
FILES = ("cfg.json", "sae.safetensors")
MAX_CFG_BYTES = 1 << 20
# Trained float32 weights hardly compress (about 1.1×); a member expanding more than this is a zip bomb,
# refused before its bytes are written anywhere. Members under RATIO_FREE_BYTES are not checked.
MAX_COMPRESSION_RATIO = 50
RATIO_FREE_BYTES = 1 << 20


def _members(zf: zipfile.ZipFile, max_bytes: int) -> dict[str, zipfile.ZipInfo]:
    """cfg.json and sae.safetensors at the zip's root or in one folder; names and sizes checked."""
    found: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        path = PurePosixPath(info.filename)
        if info.filename.startswith("/") or ".." in path.parts or "\\" in info.filename:
            raise RunInputError(f"file: unsafe path in the zip: {info.filename!r}", field="file")
        if path.name in FILES and len(path.parts) <= 2 and not info.is_dir():
            if path.name in found:
                raise RunInputError(f"file: the zip holds two {path.name} files", field="file")
            found[path.name] = info
    missing = [name for name in FILES if name not in found]
    if missing:
        raise RunInputError(f"file: the zip lacks {', '.join(missing)} (sparsify's layout: cfg.json + sae.safetensors)",
                            field="file")
    if found["cfg.json"].file_size > MAX_CFG_BYTES or found["sae.safetensors"].file_size > max_bytes:
        raise RunInputError("file: a member of the zip is larger than allowed", field="file")
    for info in found.values():
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FREE_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise RunInputError(f"file: {PurePosixPath(info.filename).name} expands {ratio:,.0f}× when unzipped, over "
                                f"the limit of {MAX_COMPRESSION_RATIO}× (compression ratio; weights barely compress)",
                                field="file")
    return found


def check_cfg(raw: bytes, d: int) -> dict[str, Any]:
    """sparsify's cfg.json, checked against the embedding dimension d."""
    try:
        cfg = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunInputError(f"cfg.json: not valid JSON ({exc})", field="cfg.json") from None
    if not isinstance(cfg, dict):
        raise RunInputError("cfg.json: must be a JSON object", field="cfg.json")
    for key, want in (("activation", "topk"), ("transcode", False), ("skip_connection", False)):
        if cfg.get(key, want) != want:
            raise RunInputError(f"cfg.json.{key}: {cfg.get(key)!r} is not supported (need {want!r})", field=f"cfg.json.{key}")
    for key in ("d_in", "k"):
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise RunInputError(f"cfg.json.{key}: a positive integer is required", field=f"cfg.json.{key}")
    if cfg["d_in"] != d:
        raise RunInputError(f"cfg.json.d_in: {cfg['d_in']} does not match the embedding run's dimension {d}",
                            field="cfg.json.d_in")
    n = cfg.get("num_latents") or cfg.get("expansion_factor", 0) * d
    if not isinstance(n, int) or n < 1:
        raise RunInputError("cfg.json.num_latents: give num_latents or expansion_factor", field="cfg.json.num_latents")
    if cfg["k"] > n:
        raise RunInputError(f"cfg.json.k: {cfg['k']} exceeds n = {n}", field="cfg.json.k")
    return {**cfg, "num_latents": n}


async def import_sae_run(app_state: Any, *, zip_path: Path, filename: str | None, embedding_run_id: int,
                         principal: Principal, request_id: str | None) -> SaeRun:
    max_bytes = app_state.settings.max_upload_bytes
    with session_scope(app_state.factory) as session:
        emb = repo.get_embedding_run(session, run_id=embedding_run_id)
        if emb is None or not visible(session, principal, "embedding_run", emb.id) or emb.status != "succeeded" or not emb.dim:
            raise RunInputError(f"embedding_run_id: no succeeded embedding run {embedding_run_id}", field="embedding_run_id")
        d = emb.dim
    try:
        zf = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile:
        raise RunInputError("file: not a zip file (zip the folder holding cfg.json and sae.safetensors)", field="file") from None
    with zf:
        members = _members(zf, max_bytes)
        cfg = check_cfg(zf.read(members["cfg.json"]), d)
        body = SaeRunCreate(embedding_run_id=embedding_run_id)
        with session_scope(app_state.factory) as session:
            run = SaeRun(embedding_run_id=embedding_run_id, status="queued", d=d, n_latents=cfg["num_latents"],
                         k=cfg["k"], imported=True, source=(filename or "upload.zip")[:300],
                         config={"sae": SaeConfig().resolved(False).model_dump(mode="json"),
                                 "stats": body.stats.model_dump(mode="json"),
                                 "families": body.families.model_dump(mode="json"), "imported_cfg": cfg})
            session.add(run)
            session.flush()
            audit(session, principal, "sae_run.import", target_type="sae_run", target_id=run.id, request_id=request_id,
                  details={"embedding_run_id": embedding_run_id, "k": cfg["k"], "n": cfg["num_latents"]})
        for name in FILES:
            with zf.open(members[name]) as src, app_state.store.open_write(f"sae-runs/{run.id}/upload/{name}", kind="sae-upload") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    return await start_run_job(app_state, run, kind=KIND, payload=SaeRunJob(run_id=run.id), principal=principal)


async def sae_import_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    job = SaeRunJob.model_validate(payload)
    train = await asyncio.to_thread(_prepare, ctx, job.run_id)
    svc_payload: BaseModel = SaeImportPayload(**train.model_dump(), source_prefix=f"sae-runs/{job.run_id}/upload")
    return await drive_sae_service(ctx, job.run_id, "sae_import", svc_payload)

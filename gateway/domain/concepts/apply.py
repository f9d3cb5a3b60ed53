"""Applying a concept to its whole dataset: a resumable job that scores every document in blocks
of rows and stores the matches (positions, scores, the features that made each match).

Each block is a checkpoint artifact (`concepts/<id>/apply-<version>/block-NNNNN.npz`); a retried
job skips the blocks it finds, so a killed worker loses at most the block in flight. The merged
`matches.npz` (sorted by score, best first) is written last and is what the CSV export reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from contracts.jobs import JobOut
from gateway.db import session_scope, utcnow
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.concepts.models import Concept
from gateway.domain.concepts.probe import top_contributions
from gateway.domain.concepts.scope import probe_codes, segment_scope
from gateway.domain.concepts.service import (get_or_404, match_expression, probe_probability, probe_weights, reads_context,
                                             run_data)
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.jobs.runner import JobContext
from gateway.domain.jobs.service import RateMeter, submit
from gateway.search.space import codes_uri

KIND = "concept_apply"
TOP_FEATURES = 5  # matching features kept per document for the export


class ConceptApplyJob(BaseModel):
    concept_id: int
    version: str = Field(description="Hash of the concept's definition: a new concept never reuses an old job.")
    block_rows: int = Field(default=50_000, ge=1, description="Documents per checkpointed block.")
    codes: str | None = Field(default=None, description="The codes it scores where the run was extended to appended "
                              "notes (runs/extend.py): applying after an extension is a new job.")

    def prefix(self) -> str:
        tag = f"-{hashlib.sha256(self.codes.encode()).hexdigest()[:8]}" if self.codes else ""
        return f"concepts/{self.concept_id}/apply-{self.version}{tag}"


def concept_version(concept: Concept) -> str:
    definition = {"kind": concept.kind, "expression": concept.expression, "probe": concept.probe,
                  "run": concept.sae_run_id, "created": concept.created_at.isoformat()}
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:16]


async def start_apply(app_state: Any, concept_id: int, principal: Principal, request_id: str | None,
                      *, block_rows: int = 50_000) -> JobOut:
    """Submit the apply job (the same concept twice: the same job) and remember it on the concept."""
    with session_scope(app_state.factory) as session:
        concept = get_or_404(session, concept_id)
        if concept.kind == "probe" and not concept.probe:
            raise ConceptInputError(f"concept {concept_id} has no trained probe yet: label notes of both classes "
                                    f"(POST /api/v1/concepts/{concept_id}/queue), then retrain", field="concept_id",
                                    status_code=409)
        data = run_data(session, app_state.store, concept.sae_run_id)  # 409 while the run has no codes
        payload = ConceptApplyJob(concept_id=concept.id, version=concept_version(concept), block_rows=block_rows,
                                  codes=codes_uri(data.run) if (data.run.result or {}).get("extension") else None)
        audit(session, principal, "concept.apply", target_type="concept", target_id=concept.id, request_id=request_id)
    job = await submit(app_state.factory, app_state.runner, kind=KIND, queue="gateway", payload=payload,
                       created_by_key_id=principal.key_id)
    with session_scope(app_state.factory) as session:
        get_or_404(session, concept_id).apply_job_id = job.id
    return job


class Scorer(NamedTuple):
    """How a block of rows is scored: a probe's probabilities, or an expression's match."""

    weights: np.ndarray  # float64 [columns]: what ranks a document's matching features
    probe: dict[str, Any] | None
    match: Any  # the expression's Match over every document, or None
    n_features: int  # the run's; a probe with context reads 2n columns, the note's second

    def block(self, rows: sp.csr_matrix, start: int) -> tuple[np.ndarray, np.ndarray]:
        """(mask bool [rows], score float32 [rows]) for rows start..start+len."""
        if self.probe is not None:
            p = probe_probability(self.probe, rows)
            return p >= self.probe["threshold"], p.astype(np.float32)
        end = start + rows.shape[0]
        return self.match.mask[start:end], self.match.score[start:end]


def _scorer(concept: Concept, space: Any) -> Scorer:
    n = space.n_features
    if concept.kind == "probe":  # with context the codes have 2n columns (scope.probe_codes)
        return Scorer(probe_weights(concept.probe, 2 * n if reads_context(concept.probe) else n), concept.probe, None, n)
    match = match_expression(concept.expression, space)  # vectorised over every document: milliseconds
    weights = np.zeros(n)
    weights[match.features] = 1.0
    return Scorer(weights, None, match, n)


def _block(ctx: JobContext, key: str, scorer: Scorer, rows: sp.csr_matrix, start: int) -> None:
    mask, score = scorer.block(rows, start)
    hit = np.flatnonzero(mask)
    buf = io.BytesIO()
    top = top_contributions(rows[hit], scorer.weights, top=TOP_FEATURES)
    n = scorer.n_features  # a column past n: a feature read on the whole note
    np.savez(buf, positions=(hit + start).astype(np.int64), scores=score[hit].astype(np.float32),
             features=np.where(top >= n, top - n, top).astype(np.int32))
    ctx.store.write_bytes(key, buf.getvalue(), kind="concept-block")


def apply_concept(ctx: JobContext, job: ConceptApplyJob) -> dict[str, Any]:
    with session_scope(ctx.factory) as session:
        concept = get_or_404(session, job.concept_id)
        data = run_data(session, ctx.store, concept.sae_run_id)
        space, dataset_id = data.space, data.dataset.id
        scorer = _scorer(concept, space)
    # [docs, n]: rows are cheap to slice; a probe with segment words reads only those segments
    words = scorer.probe.get("segment_words") if scorer.probe is not None else None
    codes = probe_codes(ctx.factory, dataset_id, space, segment_scope(space, words), np.arange(space.n_docs),
                        context=len(scorer.weights) > scorer.n_features)  # 2n weights: a probe with context
    n_docs, prefix = codes.shape[0], job.prefix()
    keys = [f"{prefix}/block-{b:05d}.npz" for b in range(-(-n_docs // job.block_rows))]
    meter = RateMeter(n_docs, "documents")
    for b, key in enumerate(keys):
        start, end = b * job.block_rows, min((b + 1) * job.block_rows, n_docs)
        if not ctx.store.exists(key):  # a resumed job skips the blocks it already wrote
            ctx.check_cancelled()
            _block(ctx, key, scorer, codes[start:end], start)
        ctx.report(meter.progress(end, f"block {b + 1} of {len(keys)}"), force=b == len(keys) - 1)
    return _merge(ctx, job, keys, n_docs)


def _merge(ctx: JobContext, job: ConceptApplyJob, keys: list[str], n_docs: int) -> dict[str, Any]:
    parts = [np.load(io.BytesIO(ctx.store.read_bytes(k))) for k in keys]
    positions = np.concatenate([p["positions"] for p in parts]) if parts else np.zeros(0, np.int64)
    scores = np.concatenate([p["scores"] for p in parts]) if parts else np.zeros(0, np.float32)
    features = np.concatenate([p["features"] for p in parts]) if parts else np.zeros((0, TOP_FEATURES), np.int32)
    order = np.lexsort((positions, -scores))  # best first; ties in document order
    buf = io.BytesIO()
    np.savez(buf, positions=positions[order], scores=scores[order], features=features[order])
    info = ctx.store.write_bytes(f"{job.prefix()}/matches.npz", buf.getvalue(),
                                 kind="concept-matches")
    with session_scope(ctx.factory) as session:
        artifact_repo.record(session, info=info, owner_type="concept", owner_id=job.concept_id)
        concept = get_or_404(session, job.concept_id)
        concept.applied = {"uri": info.uri, "n_matches": int(len(positions)), "n_documents": n_docs,
                           "version": job.version, "applied_at": utcnow().isoformat(),
                           "trained_on": (concept.labelling or {}).get("trained_on")}
    return {"concept_id": job.concept_id, "n_matches": int(len(positions)), "n_documents": n_docs}


async def apply_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(apply_concept, ctx, ConceptApplyJob.model_validate(payload))

"""The labelling queue: the next notes to label, leased to the caller so that two labellers never read the same
note at once, picked by the policy (policy.py) from the concept's seed or its current probe; every batch is
recorded with its policy, shares and seed."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy import select

from contracts.labels import QueueBatch, QueueItem, QueueSeed
from contracts.search import TextSearch
from gateway.db import session_scope, utcnow
from gateway.domain.auth.principal import Principal
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.datasets.models import Document
from gateway.domain.labels import repo
from gateway.domain.labels.models import LabelLease
from gateway.domain.labels.policy import Pick, QueuePolicy, plan_batch
from gateway.domain.labels.service import concept_or_404
from gateway.domain.labels.training import every_note_rows, scope_words

LEASE = timedelta(minutes=10)
SEED_HITS = 200  # a seed's ranked hits considered (its best first)
TEXT_SEED_HITS = 50  # a text seed's nearest notes count as its hits; the next ones as its near misses
POLICY = QueuePolicy()


def _open(n_docs: int, labelled: set[int], leased_to_others: set[int]) -> np.ndarray:
    open_ = np.ones(n_docs, dtype=bool)
    taken = np.fromiter(labelled | leased_to_others, dtype=np.int64)
    open_[taken[taken < n_docs]] = False
    return open_


def expression_seed(expression: str, space: Any) -> tuple[np.ndarray, np.ndarray]:
    """(hits best first, near misses best first): the notes the expression selects, by its score; then those it
    does not select with the most activation on the features it reads (the notes just below its cut)."""
    from gateway.domain.concepts.service import match_expression

    match = match_expression(expression, space)
    hits = np.flatnonzero(match.mask)
    hits = hits[np.argsort(-match.score[hits], kind="stable")][:SEED_HITS]
    if not match.features:
        return hits, np.empty(0, np.int64)
    near_score = np.asarray(space.codes[:, match.features].sum(1)).ravel()
    near_score[match.mask] = 0
    near = np.flatnonzero(near_score > 0)
    return hits, near[np.argsort(-near_score[near], kind="stable")][:SEED_HITS]


async def text_seed(app_state: Any, sae_run_id: int, text: str) -> tuple[np.ndarray, np.ndarray]:
    from gateway.search.service import text_search

    found = await text_search(app_state, sae_run_id, TextSearch(mode="text", text=text, limit=SEED_HITS))
    ranked = np.array([item.position for item in found.items], dtype=np.int64)
    return ranked[:TEXT_SEED_HITS], ranked[TEXT_SEED_HITS:]


def _state(app_state: Any, concept_id: int, principal: Principal, seed: QueueSeed | None) -> dict[str, Any]:
    from gateway.domain.concepts.service import run_data

    with session_scope(app_state.factory) as session:
        concept = concept_or_404(session, concept_id)
        if concept.kind != "probe":
            raise ConceptInputError(f"concept {concept_id} is an expression: the queue picks notes for a probe",
                                    field="concept_id", status_code=409)
        data = run_data(session, app_state.store, concept.sae_run_id, field="concept_id")  # 409 without codes
        if seed is not None:
            concept.seed = seed.model_dump(mode="json", exclude_none=True)
        now = utcnow()
        others = repo.leased_positions(session, concept_id=concept_id, now=now, not_holder=principal.name)
        labelled = repo.labelled_positions(session, concept_id=concept_id)
        n_batches = repo.batch_count(session, concept_id=concept_id)
        counts = repo.label_counts(session, concept_id=concept_id)
        return {"space": data.space, "dataset_id": data.dataset.id, "probe": concept.probe, "seed": concept.seed,
                "open": _open(data.space.n_docs, labelled, others), "n_batches": n_batches,
                "counts": counts, "version": (concept.labelling or {}).get("version"), "sae_run_id": concept.sae_run_id,
                "words": scope_words(concept.probe, concept.labelling)}


def _probability(app_state: Any, state: dict[str, Any]) -> tuple[np.ndarray, sp.csr_matrix] | None:
    """(the current probe's P(positive) for every note, the rows it read) once both classes have labels and a
    probe exists; None before."""
    from gateway.domain.concepts.service import probe_probability

    probe, counts = state["probe"], state["counts"]
    if not probe or not (counts["positive"] and counts["negative"]) or probe.get("context"):
        return None
    rows = every_note_rows(app_state.factory, state["space"], state["dataset_id"], state["sae_run_id"],
                           state["words"])
    return probe_probability(probe, rows), rows


async def next_batch(app_state: Any, concept_id: int, n: int, principal: Principal, seed: QueueSeed | None,
                     request_id: str | None) -> QueueBatch:
    import asyncio

    state = await asyncio.to_thread(_state, app_state, concept_id, principal, seed)
    read = await asyncio.to_thread(_probability, app_state, state)
    probability, rows = read if read is not None else (None, None)
    hits = near = None
    if probability is None and state["seed"]:
        given = QueueSeed.model_validate(state["seed"])
        if given.expression is not None:
            hits, near = await asyncio.to_thread(expression_seed, given.expression, state["space"])
        else:
            hits, near = await text_seed(app_state, state["sae_run_id"], given.text)
    digest = hashlib.sha256(f"{concept_id}:{state['n_batches']}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    picks = plan_batch(n, open_=state["open"], rng=rng, policy=POLICY, probability=probability,
                       codes=rows,
                       seed_hits=hits, seed_near=near)
    phase = "probe" if probability is not None else "seed" if hits is not None else "random"
    return await asyncio.to_thread(_lease, app_state, concept_id, principal, picks, probability, state, phase)


def _lease(app_state: Any, concept_id: int, principal: Principal, picks: list[Pick], probability: np.ndarray | None,
           state: dict[str, Any], phase: str) -> QueueBatch:
    from gateway.domain.auth import trail

    expires = utcnow() + LEASE
    policy = {"phase": phase, **POLICY.describe(), "seed": state["seed"], "probe_version": state["version"],
              "lease_minutes": LEASE.total_seconds() / 60}
    with session_scope(app_state.factory) as session:
        docs = dict(session.execute(select(Document.position, Document).where(
            Document.dataset_id == state["dataset_id"], Document.position.in_([p.position for p in picks]))).all())
        items = [{"document_id": docs[p.position].id, "position": p.position, "reason": p.reason} for p in picks]
        batch = repo.add_batch(session, concept_id=concept_id, created_by=principal.name, policy=policy, items=items)
        repo.drop_leases(session, concept_id=concept_id, document_ids=[i["document_id"] for i in items])
        leases = [LabelLease(concept_id=concept_id, document_id=i["document_id"], batch_id=batch.id,
                             holder=principal.name, reason=i["reason"], expires_at=expires, released=False)
                  for i in items]
        session.add_all(leases)
        session.flush()
        trail.record_read(session, "label.queue", dataset_id=state["dataset_id"], count=len(items),
                          concept_id=concept_id, batch_id=batch.id)
        out = [QueueItem(document_id=i["document_id"], external_id=docs[i["position"]].external_id,
                         position=i["position"], reason=i["reason"], lease_id=lease.id,
                         probability=None if probability is None else round(float(probability[i["position"]]), 4))
               for i, lease in zip(items, leases)]
        remaining = int(state["open"].sum()) - len(items)
        return QueueBatch(batch_id=batch.id, phase=phase, policy=policy, expires_at=expires, items=out,
                          remaining=max(remaining, 0))

"""The labelling page of a concept: one note at a time, its whole text with the segments that drive the probe
marked, answered with y / n / s (undo u); the next note is already on the page, hidden, so an answer never waits
for the server. Each answer brings the note after it and the counts and estimate, refreshed; the probe retrains
in the background after every RETRAIN_EVERY labels of both classes, as the API's answers start it.

The page carries the queue's batch itself: the note shown, the next one rendered hidden, the rest as a list of
(document, lease); an answer sends the one after next, or none, and the server then asks the queue again."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from gateway.dashboard.concept_pages import concept_or_404
from gateway.dashboard.label_notes import REASONS, QueuedNote, driving_features, read_note
from gateway.dashboard.views import check_csrf, render
from gateway.db import session_scope
from gateway.deps import CurrentUser, RequestId, require_login
from gateway.domain.auth.principal import Principal
from gateway.domain.concepts.describe import labelling_out
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.models import Concept
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.labels import repo as label_repo
from gateway.domain.labels import service as label_service
from gateway.domain.labels.queue import next_batch
from gateway.domain.labels.training import (MIN_RANDOM_FOR_ESTIMATE, RETRAIN_EVERY, concept_lock, retrain_due,
                                            retrain_when_due)
from gateway.domain.runs import repo as run_repo

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
BATCH = 10  # notes asked of the queue at a time (the page holds them; their leases keep them off other labellers)
MAX_POLLS = 60  # status polls after an answer while a retraining is due or running (2 s apart: two minutes)
LabelForm = Annotated[str, Form(pattern="^(positive|negative|skip)$")]
OptionalForm = Annotated[str, Form()]


def optional_int(text: str) -> int | None:
    return int(text) if text.strip().lstrip("-").isdigit() else None


def optional_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def status_context(session: Session, concept: Concept, polls: int = 0) -> dict[str, Any]:
    """The counts by class, the estimate and whether a retraining is due or running (the panel polls meanwhile)."""
    counts = label_repo.label_counts(session, concept_id=concept.id)
    training = concept_lock(concept.id).locked() or retrain_due(concept, counts)
    return {"concept": concept, "counts": counts, "labelling": labelling_out(session, concept),
            "training": training, "polls": polls, "polling": training and polls < MAX_POLLS,
            "retrain_every": RETRAIN_EVERY, "min_random": MIN_RANDOM_FOR_ESTIMATE}


def page_crumbs(session: Session, concept: Concept) -> dict[str, Any]:
    run = run_repo.get_sae_run(session, run_id=concept.sae_run_id)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    return {"run": run, "embedding_run": emb, "dataset": dataset_repo.get_dataset(session, dataset_id=emb.dataset_id)}


def notes_context(state: Any, concept_id: int, shown: list[QueuedNote], polls: int = 0) -> dict[str, Any]:
    """Blocking. The notes to render (each read, and audited, through the search service) and the status panel."""
    with session_scope(state.factory) as session:
        concept = concept_or_404(session, concept_id)
        drive = driving_features(session, state.store, concept)
        views = [read_note(state, concept, note, drive, session) for note in shown]
        return {**status_context(session, concept, polls), "views": views, "drive": drive, "reasons": REASONS}


def queued(items: list[Any], exclude: set[int]) -> list[QueuedNote]:
    return [QueuedNote(i.document_id, i.lease_id, i.reason, i.probability) for i in items
            if i.document_id not in exclude]


def flash(request: Request, message: str, status_code: int) -> Response:
    """An error shown above the note (the answer's own target is the hidden next note)."""
    return render(request, "partials/_flash.html", {"error": message}, status_code=status_code,
                  headers={"HX-Retarget": "#label-flash", "HX-Reswap": "innerHTML"})


@router.get("/concepts/{concept_id}/label", response_class=HTMLResponse)
async def label_page(request: Request, concept_id: int, principal: CurrentUser, rid: RequestId) -> Response:
    """The page, with the queue's next batch: the first note shown, the second rendered hidden, the rest listed.
    A viewer reads the counts and the estimate; only a labeller or an editor is handed notes (and leases)."""
    state = request.app.state
    with session_scope(state.factory) as session:
        concept = concept_or_404(session, concept_id)
        base = {**page_crumbs(session, concept), "concept": concept, "problem": None, "rest": [], "phase": None,
                "remaining": None}
        kind = concept.kind
    if kind != "probe":
        base["problem"] = "This concept is a saved expression: only a probe is labelled note by note."
    batch = None
    if base["problem"] is None and principal.can_label:
        try:
            batch = await next_batch(state, concept_id, BATCH, principal, None, rid)
        except ConceptInputError as exc:
            base["problem"] = exc.message
    notes = queued(batch.items, set()) if batch else []
    ctx = await asyncio.to_thread(notes_context, state, concept_id, notes[:2])
    if batch is not None:
        base.update(rest=notes[2:], phase=batch.phase, remaining=batch.remaining)
    return render(request, "pages/label.html", {**ctx, **base}, status_code=409 if base["problem"] else 200)


@router.get("/concepts/{concept_id}/label/status", response_class=HTMLResponse)
async def label_status(request: Request, concept_id: int,
                       polls: Annotated[int, Query(ge=0, le=MAX_POLLS)] = 0) -> Response:
    """The counts and the estimate, polled while a retraining is due or running."""
    ctx = await asyncio.to_thread(notes_context, request.app.state, concept_id, [], polls)
    return render(request, "partials/_label_status.html", ctx)


def _record_answer(state: Any, principal: Principal, concept_id: int, document_id: int, label: str,
                   lease_id: int | None) -> None:
    """Store the answer. A lease the page held too long (or that a later batch renewed) is not refused: the
    page answers the note it shows, and the last write wins, as for two labellers on one note."""
    with session_scope(state.factory) as session:
        try:
            label_service.set_label(session, principal, concept_id, document_id, label, lease_id=lease_id)
            return
        except ConceptInputError as exc:
            if exc.field != "lease_id":
                raise
    with session_scope(state.factory) as session:
        label_service.set_label(session, principal, concept_id, document_id, label)


@router.post("/concepts/{concept_id}/label/answer", response_class=HTMLResponse)
async def answer(request: Request, concept_id: int, principal: CurrentUser, rid: RequestId,
                 background: BackgroundTasks, document_id: Annotated[int, Form()], label: LabelForm,
                 lease_id: OptionalForm = "", shown: OptionalForm = "", next_document_id: OptionalForm = "",
                 next_lease_id: OptionalForm = "", next_reason: OptionalForm = "", next_probability: OptionalForm = "",
                 csrf_token: OptionalForm = "") -> Response:
    """Label the note; answer with the note after the one now shown (rendered hidden): the page's `next_…` one,
    else the first of a new batch (without the note shown), whose others come with it. The counts and the
    estimate come out of band; a retraining starts after the response when one is due."""
    check_csrf(request, csrf_token)
    state = request.app.state
    try:
        await asyncio.to_thread(_record_answer, state, principal, concept_id, document_id, label,
                                optional_int(lease_id))
    except ConceptInputError as exc:
        return flash(request, exc.message, exc.status_code)
    rest: list[QueuedNote] | None = None
    upcoming = optional_int(next_document_id)
    if upcoming is not None:
        notes = [QueuedNote(upcoming, optional_int(next_lease_id), next_reason or None,
                            optional_float(next_probability))]
    else:
        try:
            batch = await next_batch(state, concept_id, BATCH, principal, None, rid)
        except ConceptInputError as exc:
            return flash(request, exc.message, exc.status_code)
        rest = queued(batch.items, {document_id, optional_int(shown) or -1})
        notes, rest = rest[:1], rest[1:]
    ctx = await asyncio.to_thread(notes_context, state, concept_id, notes)
    if ctx["training"]:
        background.add_task(asyncio.to_thread, retrain_when_due, state, concept_id)
    return render(request, "partials/_label_answered.html", {**ctx, "rest": rest, "oob": True})


@router.post("/concepts/{concept_id}/label/undo", response_class=HTMLResponse)
async def undo(request: Request, concept_id: int, principal: CurrentUser, document_id: Annotated[int, Form()],
               lease_id: OptionalForm = "", reason: OptionalForm = "", probability: OptionalForm = "",
               csrf_token: OptionalForm = "") -> Response:
    """Undo the note's last answer and show it again (its lease kept: it is answered with it again)."""
    check_csrf(request, csrf_token)
    state = request.app.state

    def restore() -> None:
        with session_scope(state.factory) as session:
            label_service.undo_label(session, principal, concept_id, document_id)

    try:
        await asyncio.to_thread(restore)
    except ConceptInputError as exc:
        return flash(request, exc.message, exc.status_code)
    note = QueuedNote(document_id, optional_int(lease_id), reason or None, optional_float(probability))
    ctx = await asyncio.to_thread(notes_context, state, concept_id, [note])
    return render(request, "partials/_label_answered.html", {**ctx, "rest": None, "oob": True})

"""Paste a note: on an SAE run's page, the note read as the run reads its own (POST /api/v1/sae-runs/{id}/encode:
each clause's strongest named features marked on the text); on a concept's page, the concept's decision on it
(POST /api/v1/concepts/{id}/classify: score, threshold, the features that carried the decision on the clauses they
fired on). Both call the API's domain functions, so a paste is audited as those calls are (a read: a viewer may)."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from contracts.classify import ClassifyRequest, EncodeTextsRequest
from gateway.dashboard.views import check_csrf, render
from gateway.deps import SessionDep
from gateway.domain.concepts.classify import classify_texts
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.runs.encode import encode_run_texts
from gateway.domain.runs.errors import RunInputError

router = APIRouter(include_in_schema=False)
SHOWN = 3  # evidence names written beside a marked clause (all of them in its title and its panel)
SHOWN_RUN = 1  # a run's reading marks every clause with ten features: the strongest name beside it, the rest on hover


class Piece(NamedTuple):
    text: str
    features: list[Any]  # the features marked on it, strongest first
    clause: int | None  # the marked clause's number (its panel: #paste-clause-<n>); None: text between clauses


def pieces(text: str, marks: list[tuple[int, int, list[Any]]]) -> list[Piece]:
    """The text cut at the marked spans (in order, not overlapping: later overlaps are merged into the first)."""
    out: list[Piece] = []
    at = 0
    for start, end, features in sorted(marks, key=lambda m: (m[0], m[1])):
        start, end = max(start, at), min(end, len(text))
        if end <= start:
            continue
        if start > at:
            out.append(Piece(text[at:start], [], None))
        out.append(Piece(text[start:end], features, sum(p.clause is not None for p in out)))
        at = end
    if at < len(text):
        out.append(Piece(text[at:], [], None))
    return out


def _error(request: Request, message: str, status_code: int, field: str | None = None) -> Response:
    """The API's message without its field path (the form has one text, the page names its run or concept)."""
    for prefix in ("texts.0", field):
        message = message.removeprefix(f"{prefix}: ")
    return render(request, "partials/_paste_result.html", {"error": message}, status_code=status_code)


@router.post("/sae-runs/{run_id}/paste", response_class=HTMLResponse)
async def paste_on_run(request: Request, run_id: int, session: SessionDep, text: Annotated[str, Form()] = "",
                       csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    try:
        body = EncodeTextsRequest(texts=[text], top=10)
        out = await encode_run_texts(request.app.state, session, run_id, body)
    except (RunInputError, ConceptInputError) as exc:
        return _error(request, exc.message, exc.status_code, exc.field)
    except ValidationError as exc:
        return _error(request, exc.errors()[0]["msg"], 422)
    item = out.items[0]
    marks = [(s.start, s.end, s.features) for s in item.segments or [] if s.features]
    return render(request, "partials/_paste_result.html", {
        "kind": "features", "run_id": run_id, "pieces": pieces(text, marks), "features": item.features,
        "n_active": item.n_active, "shown": SHOWN_RUN, "has_segments": item.segments is not None})


@router.post("/concepts/{concept_id}/try", response_class=HTMLResponse)
async def try_on_concept(request: Request, concept_id: int, session: SessionDep, text: Annotated[str, Form()] = "",
                         csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    try:
        body = ClassifyRequest(texts=[text])
        out = await classify_texts(request.app.state, session, concept_id, body.texts)
    except (RunInputError, ConceptInputError) as exc:
        return _error(request, exc.message, exc.status_code, exc.field)
    except ValidationError as exc:
        return _error(request, exc.errors()[0]["msg"], 422)
    item = out.items[0]
    by_span: dict[tuple[int, int], list[Any]] = {}
    for e in item.evidence:
        if e.segment is not None:
            by_span.setdefault((e.segment.start, e.segment.end), []).append(e)
    if item.segment is not None:  # an expression's SEGMENT(…) clause
        by_span.setdefault((item.segment.start, item.segment.end), [])
    marks = [(a, b, features) for (a, b), features in by_span.items()]
    return render(request, "partials/_paste_result.html", {
        "kind": "decision", "run_id": out.sae_run_id, "pieces": pieces(text, marks), "item": item,
        "concept_kind": out.kind, "shown": SHOWN})

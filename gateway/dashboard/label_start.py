"""From a search to labelling: "Label these" on the search page makes a concept to label note by note, its queue
seeded by the search's expression (or its text), and opens its labelling page; a probe of that run with the same
seed (and no examples) is opened instead of a second one. It creates a concept: an editor's (gateway/authz.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from contracts.concepts import ConceptCreate
from contracts.labels import QueueSeed
from gateway.dashboard.views import check_csrf, render
from gateway.db import session_scope
from gateway.deps import CurrentUser, RequestId, require_login
from gateway.domain.concepts import repo
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.service import create_concept

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
MAX_SEED_CHARS = 4_000  # the longest expression a seed holds (contracts/labels.py; a text seed: 2,000)


def same_seed_concept(state: Any, run_id: int, name: str, seed: dict[str, str]) -> int | None:
    """The run's probe to label with this seed: the one of this name, else any; a ConceptInputError (409) when
    the name is taken by another concept."""
    with session_scope(state.factory) as session:
        named = repo.find_concept(session, sae_run_id=run_id, name=name)
        if named is not None:
            if named.kind == "probe" and named.seed == seed and not named.examples:
                return named.id
            raise ConceptInputError(f"name: SAE run {run_id} already has a concept named {name!r}, with another "
                                    "seed: choose another name", field="name", status_code=409)
        rows, _ = repo.list_concepts(session, sae_run_id=run_id, limit=1000)
        return next((c.id for c in rows if c.kind == "probe" and c.seed == seed and not c.examples), None)


def seed_of(mode: str, q: str) -> QueueSeed:
    return QueueSeed(text=q.strip()) if mode == "text" else QueueSeed(expression=q.strip())


def flash(request: Request, message: str, status_code: int) -> Response:
    return render(request, "partials/_flash.html", {"error": message}, status_code=status_code)


@router.post("/sae-runs/{run_id}/label", response_class=HTMLResponse)
async def label_these(request: Request, run_id: int, principal: CurrentUser, rid: RequestId,
                      name: Annotated[str, Form(max_length=200)] = "",
                      q: Annotated[str, Form(max_length=MAX_SEED_CHARS)] = "",
                      mode: Annotated[str, Form(pattern="^(expression|text)$")] = "expression",
                      csrf_token: Annotated[str, Form()] = "") -> Response:
    """Create (or find) the concept seeded by the search, then send the browser to its labelling page."""
    check_csrf(request, csrf_token)
    if not name.strip() or not q.strip():
        return flash(request, "Give the concept a name (and search for something first).", 422)
    try:
        seed = seed_of(mode, q)
    except ValidationError as exc:
        return flash(request, f"seed: {exc.errors()[0]['msg']}", 422)
    state = request.app.state
    try:
        concept_id = await asyncio.to_thread(same_seed_concept, state, run_id, name.strip(),
                                             seed.model_dump(mode="json", exclude_none=True))
        if concept_id is None:
            body = ConceptCreate(sae_run_id=run_id, name=name.strip(), kind="probe", seed=seed,
                                 description=f"Labelled note by note from the search “{q.strip()[:300]}”.")
            concept_id = await create_concept(state, body, principal, rid)
    except ConceptInputError as exc:
        return flash(request, exc.message, exc.status_code)
    return Response(status_code=200, headers={"HX-Redirect": f"/concepts/{concept_id}/label"})

"""The document page of an SAE run: one note as the SAE reads it, clause by clause (or sentence by sentence),
each segment with its strongest named features, and one feature's activation marked across the segments
(`?feature=F`), as Neuronpedia marks a latent over a text's tokens. A read of patient text: audited (by
`service.document_features`, as the API's)."""

from __future__ import annotations

import asyncio
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response

from contracts.search import DocumentFeatures
from gateway.dashboard.sae_pages import crumbs, sae_run_or_404
from gateway.dashboard.views import Pager, render
from gateway.deps import SessionDep, require_login
from gateway.search import service
from gateway.search.space import SearchNotReady

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
SEGMENTS_PER_PAGE = 200
PER_SEGMENT = 6
NOTE_FEATURES = 24
SHADES = 5


def shades(found: DocumentFeatures) -> dict[int, int]:
    """Segment row → its shade (1..SHADES) where the marked feature fires: its activation there as a share of
    the largest among the listed segments, in steps (classes: the CSP refuses inline styles)."""
    acts = {s.index: s.marked_activation or 0.0 for s in found.segments or []}
    top = max(acts.values(), default=0.0)
    return {i: max(1, math.ceil(round(SHADES * a / top, 6))) for i, a in acts.items() if a > 0}


@router.get("/sae-runs/{run_id}/documents/{document_id}", response_class=HTMLResponse)
async def document_page(
    request: Request, run_id: int, document_id: int, session: SessionDep,
    feature: Annotated[int | None, Query(ge=0)] = None, offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    run = sae_run_or_404(session, run_id)
    ctx: dict[str, Any] = {**crumbs(session, run), "found": None, "problem": None, "shades": {}, "pager": None}
    try:
        found = await asyncio.to_thread(service.document_features, request.app.state, run.id, document_id,
                                        limit=NOTE_FEATURES, per_segment=PER_SEGMENT, segment_offset=offset,
                                        segment_limit=SEGMENTS_PER_PAGE, mark=feature, session=session)
    except (service.MarkOutOfRange, service.DocumentNotInRun) as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except SearchNotReady as exc:
        return render(request, "pages/document.html", {**ctx, "problem": str(exc)}, status_code=409)
    ctx.update(found=found, shades=shades(found))
    if found.n_segments is not None and found.n_segments > SEGMENTS_PER_PAGE:
        ctx["pager"] = Pager(offset=offset, limit=SEGMENTS_PER_PAGE, total=found.n_segments)
    return render(request, "pages/document.html", ctx)

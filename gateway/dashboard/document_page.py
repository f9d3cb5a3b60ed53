"""The document page of an SAE run: one note as the SAE reads it, clause by clause (or sentence by sentence),
each segment with its strongest named features, and one feature's activation marked across the segments
(`?feature=F`), as Neuronpedia marks a latent over a text's tokens. A read of patient text: audited."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response

from gateway.dashboard.sae_pages import crumbs, sae_run_or_404
from gateway.dashboard.views import Pager, render
from gateway.deps import SessionDep, require_login
from gateway.domain.auth import trail
from gateway.search import service
from gateway.search.results import activations_at, feature_labels
from gateway.search.space import SearchNotReady, load_search_space

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
SEGMENTS_PER_PAGE = 200
PER_SEGMENT = 6
NOTE_FEATURES = 24


def marked_feature(session: SessionDep, state: Any, run: Any, feature: int, segments: list[Any],
                   position: int) -> dict[str, Any]:
    """The marked feature's name, its activation in the document and in each listed segment, each as a share of
    the largest of them (the shade the page gives the segment)."""
    space = load_search_space(session, state.store, run)
    label, reliable = feature_labels(session, sae_run_id=run.id, indices=[feature])[feature]
    in_doc = float(activations_at(space.codes, [feature], np.array([position]))[0, 0])
    seg = space.segment_codes()
    rows = np.array([s.index for s in segments], dtype=np.int64)
    acts = activations_at(seg.codes, [feature], rows)[:, 0] if seg is not None and len(rows) else np.zeros(len(rows))
    top = float(acts.max()) if len(acts) and acts.max() > 0 else 1.0
    return {"index": feature, "label": label, "reliable": reliable, "in_document": in_doc,
            "threshold": space.thresholds.get(feature),
            "by_segment": {int(r): (float(a), float(a) / top) for r, a in zip(rows, acts)},
            "segments_firing": int(np.count_nonzero(acts))}


@router.get("/sae-runs/{run_id}/documents/{document_id}", response_class=HTMLResponse)
async def document_page(
    request: Request, run_id: int, document_id: int, session: SessionDep,
    feature: Annotated[int | None, Query(ge=0)] = None, offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    run = sae_run_or_404(session, run_id)
    state = request.app.state
    ctx: dict[str, Any] = {**crumbs(session, run), "found": None, "problem": None, "marked": None, "pager": None}
    try:
        found = await asyncio.to_thread(service.document_features, state, run.id, document_id, limit=NOTE_FEATURES,
                                        per_segment=PER_SEGMENT, segment_offset=offset,
                                        segment_limit=SEGMENTS_PER_PAGE, session=session)
    except service.DocumentNotInRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except SearchNotReady as exc:
        return render(request, "pages/document.html", {**ctx, "problem": str(exc)}, status_code=409)
    trail.record_read(session, "document.features", dataset_id=ctx["dataset"].id, count=1, sae_run_id=run.id,
                      document_id=document_id)
    ctx["found"] = found
    if feature is not None:
        if feature >= (run.n_latents or 0):
            raise HTTPException(status.HTTP_404_NOT_FOUND,
                                detail=f"feature {feature} is out of range: SAE run {run.id} has features "
                                       f"0..{(run.n_latents or 0) - 1}")
        ctx["marked"] = marked_feature(session, state, run, feature, found.segments or [], found.position)
    if found.n_segments is not None and found.n_segments > SEGMENTS_PER_PAGE:
        ctx["pager"] = Pager(offset=offset, limit=SEGMENTS_PER_PAGE, total=found.n_segments)
    return render(request, "pages/document.html", ctx)

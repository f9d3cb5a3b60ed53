"""Dashboard pages of concepts: the list, and one concept (held-out metrics, confusion matrix, PR
curve, named weights; for a probe trained on labels its counts, estimate and learning curve; apply with live
progress, CSV export, delete)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from gateway.dashboard.charts import Series, line_chart_svg
from gateway.dashboard.views import check_csrf, render, shown_projects
from gateway.db import session_scope
from gateway.deps import CurrentUser, RequestId, SessionDep, StoreDep, require_login
from gateway.domain.concepts import repo
from gateway.domain.concepts.apply import start_apply
from gateway.domain.concepts.describe import concept_out, concept_summary
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.models import Concept
from gateway.domain.concepts.service import delete_concept
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.jobs import repo as job_repo
from gateway.domain.labels.training import RETRAIN_EVERY
from gateway.domain.jobs.service import to_out
from gateway.domain.runs import repo as run_repo

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])


def concept_or_404(session: SessionDep, concept_id: int) -> Concept:
    concept = repo.get_concept(session, concept_id=concept_id)
    if concept is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"concept {concept_id} not found")
    return concept


def pr_chart(curve: dict[str, Any] | None) -> Markup | None:
    if not curve or not curve.get("recall"):
        return None
    points = list(zip(curve["recall"], curve["precision"]))
    ap = curve.get("average_precision")
    return Markup(line_chart_svg([Series("precision", points, "s1")], x_label="recall", y_label="precision",
                                 title=f"Precision-recall on held-out documents (average precision {ap:.3f})"))


def learning_chart(labelling: dict[str, Any] | None) -> Markup | None:
    """Cross-validated F1 of the features' probe and of TF-IDF + LR against the labels they were trained on."""
    curve = (labelling or {}).get("curve") or []
    series = [Series(name, [(p["labels"], p[key]) for p in curve if p.get(key) is not None], css)
              for name, key, css in (("SAE features", "features", "s1"), ("TF-IDF + LR", "tfidf", "s2"))]
    if not any(s.points for s in series):
        return None
    return Markup(line_chart_svg([s for s in series if s.points], x_label="labels", y_label="cross-validated F1",
                                 title="Learning curve: F1 against the labels so far", y_max=1.0, dots=True))


def apply_context(session: SessionDep, concept: Concept) -> dict[str, Any]:
    """The apply box: the job (live while it runs) and, once done, the export link."""
    job = job_repo.get_job(session, job_id=concept.apply_job_id) if concept.apply_job_id else None
    job_out = to_out(job) if job else None
    active = job_out is not None and job_out.status.value in ("queued", "running")
    return {"concept": concept_out(session, concept), "job": job_out, "active": active}


@router.get("/concepts", response_class=HTMLResponse)
def concepts_page(request: Request, session: SessionDep,
                  sae_run_id: Annotated[int | None, Query()] = None) -> Response:
    rows, total = repo.list_concepts(session, sae_run_id=sae_run_id, project_ids=shown_projects(request))
    return render(request, "pages/concepts.html", {"concepts": [concept_summary(c) for c in rows], "total": total,
                                                   "sae_run_id": sae_run_id, "word_methods": WORD_METHODS})


WORD_METHODS = {"regex": "keyword regex", "words_regex": "your regex", "tfidf_lr": "TF-IDF + LR",
                "tfidf_lr_segments": "TF-IDF + LR on its segments"}


@router.get("/concepts/{concept_id}", response_class=HTMLResponse)
def concept_page(request: Request, concept_id: int, session: SessionDep) -> Response:
    concept = concept_or_404(session, concept_id)
    run = run_repo.get_sae_run(session, run_id=concept.sae_run_id)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    ctx = {**apply_context(session, concept), "run": run, "embedding_run": emb,
           "dataset": dataset_repo.get_dataset(session, dataset_id=emb.dataset_id),
           "pr_chart": pr_chart((concept.metrics or {}).get("pr_curve")),
           "learning_chart": learning_chart(concept.labelling), "retrain_every": RETRAIN_EVERY}
    return render(request, "pages/concept.html", ctx)


@router.get("/concepts/{concept_id}/apply", response_class=HTMLResponse)
def apply_box(request: Request, concept_id: int, session: SessionDep) -> Response:
    """The apply partial, polled by HTMX while the job runs."""
    return render(request, "partials/_concept_apply.html", apply_context(session, concept_or_404(session, concept_id)))


@router.post("/concepts/{concept_id}/apply", response_class=HTMLResponse)
async def apply(request: Request, concept_id: int, principal: CurrentUser, rid: RequestId,
                csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    try:
        await start_apply(request.app.state, concept_id, principal, rid)
    except ConceptInputError as exc:
        return render(request, "partials/_flash.html", {"error": exc.message}, status_code=exc.status_code)
    with session_scope(request.app.state.factory) as session:  # sees the job just submitted
        return render(request, "partials/_concept_apply.html",
                      apply_context(session, concept_or_404(session, concept_id)))


@router.post("/concepts/{concept_id}/delete", response_class=HTMLResponse)
def delete(request: Request, concept_id: int, principal: CurrentUser, store: StoreDep, rid: RequestId,
           csrf_token: Annotated[str, Form()] = "") -> Response:
    """Delete the concept (and its matches), then show its run's concepts."""
    check_csrf(request, csrf_token)
    run_id = delete_concept(request.app.state.factory, store, concept_id=concept_id, principal=principal,
                            request_id=rid)
    if run_id is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"concept {concept_id} not found")
    return Response(status_code=200, headers={"HX-Redirect": f"/concepts?sae_run_id={run_id}"})

"""Dashboard pages (HTML). Each page's data comes from the same repos as the JSON API."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlparse

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from gateway.dashboard.charts import Bar, bar_chart_svg
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.embedding import create_embedding_run, embedding_request
from gateway.domain.runs.errors import RunInputError

from gateway.api.v1.datasets import listed_document, receive_and_import
from gateway.deps import CurrentUser, RequestId, SessionDep, StoreDep, require_login
from gateway.domain.auth import trail
from gateway.domain.auth.service import audit, end_session, start_session, verify_key
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.datasets.parsing import DatasetInputError
from gateway.domain.datasets.service import delete_dataset
from gateway.domain.jobs import repo as job_repo
from contracts.jobs import JobOut
from contracts.sae import MAX_SAMPLES
from gateway.domain.jobs.service import to_out
from gateway.dashboard.views import Pager, check_csrf, login_page_response, render, shown_projects
from gateway.uploads import UploadError

public = APIRouter(include_in_schema=False)
# Login first: a page of a dataset that does not exist is a 401 (login page), not a 404.
router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
PAGE_SIZE = 25
SHOWN_CHARS = 600  # of each document's text in the dataset page's table


@public.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> Response:
    return login_page_response(request)


@public.post("/login", response_class=HTMLResponse)
def login(
    request: Request, session: SessionDep, key: Annotated[str, Form()], csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/datasets",
) -> Response:
    check_csrf(request, csrf_token)
    principal = verify_key(session, key.strip())
    if principal is None:
        trail.record_failed_login(session, request, method="dashboard")
        return login_page_response(request, status_code=401, error="That key is not valid.")
    request.session.clear()
    request.session["sid"] = start_session(session, principal, max_age_s=request.app.state.settings.session_max_age_s)
    audit(session, principal, "session.login")
    target = next if next.startswith("/") and not urlparse(next).netloc and not next.startswith("//") else "/datasets"
    return RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)


@router.post("/logout")
def logout(request: Request, session: SessionDep, principal: CurrentUser,
           csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    if isinstance(token := request.session.get("sid"), str):
        end_session(session, token)
    audit(session, principal, "session.logout")
    request.session.clear()
    return RedirectResponse("/login", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/project")
def switch_project(request: Request, _: CurrentUser, project_id: Annotated[int, Form()],
                   csrf_token: Annotated[str, Form()] = "") -> Response:
    """Make another of the user's projects the current one (its datasets, concepts and jobs are listed)."""
    check_csrf(request, csrf_token)
    if project_id not in {p.id for p in request.state.projects}:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"project {project_id} not found")
    request.session["project"] = project_id
    return RedirectResponse("/datasets", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/datasets", response_class=HTMLResponse)
def datasets_page(request: Request, session: SessionDep, _: CurrentUser) -> Response:
    rows, total = dataset_repo.list_datasets(session, limit=200, offset=0, project_ids=shown_projects(request))
    return render(request, "pages/datasets.html", {"datasets": rows, "total": total})


@router.post("/datasets/upload", response_class=HTMLResponse)
async def upload(request: Request, principal: CurrentUser, rid: RequestId) -> Response:
    check_csrf(request)
    app = request.app
    try:
        ds = await receive_and_import(request, app.state.settings, app.state.store, principal, rid)
    except (DatasetInputError, UploadError) as exc:
        return render(request, "partials/_upload_form.html", {"error": exc.message, "error_field": exc.field,
                      "error_locator": getattr(exc, "locator", None)}, status_code=422)
    return Response(status_code=200, headers={"HX-Redirect": f"/datasets/{ds.id}"})


@router.get("/datasets/{dataset_id}", response_class=HTMLResponse)
def dataset_page(
    request: Request, dataset_id: int, session: SessionDep, _: CurrentUser,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    ds = dataset_repo.get_dataset(session, dataset_id=dataset_id)
    if ds is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"dataset {dataset_id} not found")
    rows, total = dataset_repo.list_documents(session, dataset_id=ds.id, limit=PAGE_SIZE, offset=offset,
                                              text_chars=SHOWN_CHARS + 1)  # one more: the template adds "…"
    docs = [listed_document(doc, text) for doc, text in rows]
    trail.record_read(session, "documents.read", dataset_id=ds.id, count=len(docs), offset=offset)
    runs, _ = run_repo.list_embedding_runs(session, limit=50, offset=0, dataset_id=ds.id)
    ctx = {"dataset": ds, "documents": docs, "pager": Pager(offset=offset, limit=PAGE_SIZE, total=total), "runs": runs}
    template = "partials/_documents.html" if request.headers.get("hx-request") else "pages/dataset.html"
    return render(request, template, ctx)


@router.post("/datasets/{dataset_id}/delete", response_class=HTMLResponse)
def delete(request: Request, dataset_id: int, principal: CurrentUser, store: StoreDep, rid: RequestId,
           csrf_token: Annotated[str, Form()] = "") -> Response:
    """Delete the dataset and everything computed from it (as DELETE /api/v1/datasets/{id}), then list the rest."""
    check_csrf(request, csrf_token)
    if not delete_dataset(request.app.state.factory, store, dataset_id=dataset_id, principal=principal, request_id=rid):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"dataset {dataset_id} not found")
    return Response(status_code=200, headers={"HX-Redirect": "/datasets"})


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request, session: SessionDep, _: CurrentUser) -> Response:
    rows, total = job_repo.list_jobs(session, limit=100, offset=0, project_ids=shown_projects(request))
    jobs = [to_out(j) for j in rows]
    active = any(j.status in ("queued", "running") for j in jobs)
    template = "partials/_jobs.html" if request.headers.get("hx-request") else "pages/jobs.html"
    return render(request, template, {"jobs": jobs, "total": total, "active": active})


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_progress(request: Request, job_id: str, session: SessionDep, _: CurrentUser) -> Response:
    """One job's progress as a fragment that polls itself while the job runs."""
    job = job_repo.get_job(session, job_id=job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"job {job_id} not found")
    return render(request, "partials/_job_progress.html", job_progress_context(to_out(job)))


JOB_INTROS = {"interpret_run": "Naming the features:", "embedding_run": "Embedding:", "sae_run": "Training the SAE:",
              "concept_apply": "Applying the concept:"}


def job_progress_context(job: JobOut) -> dict[str, object]:
    """What the progress fragment says, and where its 'done' link goes (from the job, never the URL)."""
    ctx: dict[str, object] = {"job": job, "intro": JOB_INTROS.get(job.kind, f"{job.kind}:")}
    run_id = job.payload.get("sae_run_id")
    if job.kind == "interpret_run" and isinstance(run_id, int):
        ctx.update(done_url=f"/sae-runs/{run_id}/features?sort=score", done_text="See the named features")
    return ctx


@router.post("/datasets/{dataset_id}/embed", response_class=HTMLResponse)
async def start_embedding(
    request: Request, dataset_id: int, principal: CurrentUser, rid: RequestId,
    model: Annotated[str, Form(max_length=300)] = "default", pooling: Annotated[str, Form(max_length=20)] = "mean",
    segments: Annotated[str, Form(max_length=20)] = "none",
    document_vectors: Annotated[str, Form(max_length=20)] = "encoded",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)
    try:
        body = embedding_request(dataset_id, model=model.strip() or "default", pooling=pooling, segments=segments,
                                 document_vectors=document_vectors)
        run, _ = await create_embedding_run(request.app.state, body, principal, rid)
    except RunInputError as exc:  # its message starts with the field: "document_vectors: 'segments' makes ..."
        return render(request, "partials/_flash.html", {"error": exc.message}, status_code=422)
    return Response(status_code=200, headers={"HX-Redirect": f"/embedding-runs/{run.id}"})


@router.get("/embedding-runs/{run_id}", response_class=HTMLResponse)
def embedding_run_page(request: Request, run_id: int, session: SessionDep, _: CurrentUser) -> Response:
    run = run_repo.get_embedding_run(session, run_id=run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"embedding run {run_id} not found")
    ds = dataset_repo.get_dataset(session, dataset_id=run.dataset_id)
    job = job_repo.get_job(session, job_id=run.job_id) if run.job_id else None
    hist = (run.result or {}).get("chunks_per_doc_histogram", {})
    unit = "segments" if (run.spec or {}).get("document_vectors") == "segments" else "chunks"  # its chunks then
    chart = bar_chart_svg(
        # Every bin from 1 to the longest document, empty ones included, so the shape is honest.
        [Bar(str(k), hist.get(str(k), 0)) for k in range(1, max(map(int, hist), default=0) + 1)],
        title=f"Documents by number of {unit}", x_label=f"{unit} per document", y_label="documents",
    )
    ctx = {"run": run, "dataset": ds, "job": to_out(job) if job else None, "chart": Markup(chart),
           "sae_runs": run_repo.list_sae_runs(session, embedding_run_id=run.id),
           "active": run.status in ("queued", "running"), "max_samples": MAX_SAMPLES}
    template = "partials/_embedding_run.html" if request.headers.get("hx-request") else "pages/embedding_run.html"
    return render(request, template, ctx)

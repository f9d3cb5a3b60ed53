"""Dashboard pages of SAE runs: the run (metrics, loss curve, heatmaps, sweep), its features,
one feature, and its families."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup
from pydantic import ValidationError

from contracts.interpret import BackendOptions, ReinterpretRequest
from contracts.runs import SaeRunCreate
from contracts.sae import SaeConfig
from gateway.dashboard.charts import Bar, Series, bar_chart_svg, heatmap_svg, line_chart_svg
from gateway.dashboard.pages import job_progress_context
from gateway.dashboard.views import Pager, check_csrf, render
from gateway.deps import CurrentUser, RequestId, SessionDep, require_login
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.interpret import InterpretationRequest, reinterpret_feature, start_interpretation
from gateway.domain.jobs import repo as job_repo
from gateway.domain.jobs.service import to_out
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.extend import coverage
from gateway.domain.runs.models import SaeRun
from gateway.domain.runs.sae import create_sae_runs
from gateway.domain.runs.training_text import training_text
from gateway.services import ServiceError, ServiceUnavailable

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
FEATURES_PER_PAGE = 50
FAMILIES_PER_PAGE = 40
# a family opens by itself (the three largest of the first page) only up to this size: iteration 0's largest is
# often the densest feature's tree holding most features (the demo's 1,403 of 3,072), a page 34,000 pixels long
FAMILY_OPEN_MAX = 100
# a feature page lists this many of the feature's children in each family (a family's root can have hundreds: the
# densest feature's page was 7,000 pixels of them); the rest are a count and a link to the family's tree
FEATURE_PAGE_CHILDREN = 12


def sae_run_or_404(session: SessionDep, run_id: int) -> SaeRun:
    run = run_repo.get_sae_run(session, run_id=run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"SAE run {run_id} not found")
    return run


def crumbs(session: SessionDep, run: SaeRun) -> dict[str, Any]:
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    return {"run": run, "embedding_run": emb, "dataset": dataset_repo.get_dataset(session, dataset_id=emb.dataset_id)}


@router.post("/embedding-runs/{run_id}/sae", response_class=HTMLResponse)
async def start_sae(
    request: Request, run_id: int, principal: CurrentUser, rid: RequestId,
    k: Annotated[str, Form()] = "32", expansion_factor: Annotated[str, Form()] = "8",
    epochs: Annotated[str, Form()] = "50", csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)
    try:
        ks = [int(v) for v in k.replace(" ", "").split(",") if v]
        configs = [SaeConfig(k=kk, expansion_factor=int(expansion_factor), epochs=int(epochs)) for kk in ks]
        body = SaeRunCreate(embedding_run_id=run_id, config=configs[0], sweep=configs[1:])
        runs = await create_sae_runs(request.app.state, body, principal, rid)
    except RunInputError as exc:
        return render(request, "partials/_flash.html", {"error": exc.message}, status_code=422)
    except (ValidationError, ValueError, IndexError) as exc:
        msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else "k, expansion factor and epochs must be whole numbers"
        return render(request, "partials/_flash.html", {"error": msg}, status_code=422)
    return Response(status_code=200, headers={"HX-Redirect": f"/sae-runs/{runs[0].id}"})


def loss_chart(run: SaeRun) -> str:
    curve = run.loss_curve or []
    return line_chart_svg(
        [Series("FVU", [(p["step"], p["fvu"]) for p in curve], "s1"),
         Series("dead fraction", [(p["step"], p["dead_fraction"]) for p in curve], "s2")],
        title="Training: FVU and dead fraction per step", x_label="step", y_label="fraction",
    )


def feature_names(session: SessionDep, run: SaeRun, indices: list[int]) -> dict[int, str]:
    """"F12 wheezing" (or "F12 “wheezing”?" when the name is unreliable) for hover text."""
    found = feature_repo.features_by_index(session, sae_run_id=run.id, indices=sorted(set(indices)))
    out = {}
    for i in indices:
        best = found.get(i, (None, None))[1]
        name = "" if best is None else (f" {best.label}" if best.reliable is not False else f" “{best.label}”?")
        out[i] = f"F{i}{name}"
    return out


def heatmaps(store: Any, session: SessionDep, run: SaeRun) -> list[dict[str, Any]]:
    uri = ((run.result or {}).get("artifacts") or {}).get("heatmaps", {}).get("uri")
    if not uri:
        return []
    data = json.loads(store.read_bytes(uri))
    out = []
    for name, title in (("densest", "Densest features"), ("most_connected", "Most connected features")):
        h = data.get(name)
        if not h:
            continue
        names = feature_names(session, run, h["features"])
        labels = [names[i] for i in h["features"]]
        out.append({"title": title,
                    "cooc": Markup(heatmap_svg(h["c_norm"], labels, title=f"{title}: co-occurrence C_norm")),
                    "cos": Markup(heatmap_svg(h["decoder_cosine"], labels, title=f"{title}: decoder cosine", vmax=1.0))})
    return out


@router.get("/sae-runs/{run_id}", response_class=HTMLResponse)
def sae_run_page(request: Request, run_id: int, session: SessionDep) -> Response:
    run = sae_run_or_404(session, run_id)
    job = job_repo.get_job(session, job_id=run.job_id) if run.job_id else None
    ctx = {**crumbs(session, run), "job": to_out(job) if job else None, "active": run.status in ("queued", "running"),
           "loss_chart": Markup(loss_chart(run)), "heatmaps": heatmaps(request.app.state.store, session, run),
           "sweep": sweep_of(session, run), "training_text": training_text(session, run),
           "coverage": coverage(session, run)}
    template = "partials/_sae_run.html" if request.headers.get("hx-request") else "pages/sae_run.html"
    return render(request, template, ctx)


@router.get("/sae-runs/{run_id}/sweep", response_class=HTMLResponse)
def sae_sweep_fragment(request: Request, run_id: int, session: SessionDep) -> Response:
    """The run page's sweep table, polled while one of its runs trains (each run's status and metrics)."""
    run = sae_run_or_404(session, run_id)
    if not run.sweep_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"SAE run {run_id} is not part of a sweep")
    return render(request, "partials/_sae_sweep.html", {"run": run, "sweep": sweep_of(session, run)})


def sweep_of(session: SessionDep, run: SaeRun) -> list[SaeRun]:
    """The runs of `run`'s sweep in the order they were made ([] for a run alone)."""
    return sorted(run_repo.list_sae_runs(session, sweep_id=run.sweep_id), key=lambda r: r.id) if run.sweep_id else []


def sparkline(counts: list[int], width: int = 80, height: int = 18) -> Markup:
    """A tiny activation histogram for a table row (decorative: the row has the numbers)."""
    if not counts or max(counts) == 0:
        return Markup("")
    top, w = max(counts), width / len(counts)
    bars = "".join(f'<rect x="{i * w:.1f}" y="{height - height * c / top:.1f}" width="{max(w - 0.5, 0.5):.1f}" '
                   f'height="{height * c / top:.1f}"/>' for i, c in enumerate(counts) if c)
    return Markup(f'<svg class="spark" width="{width}" height="{height}" aria-hidden="true">{bars}</svg>')


@router.get("/sae-runs/{run_id}/features", response_class=HTMLResponse)
def features_page(
    request: Request, run_id: int, session: SessionDep,
    sort: Annotated[str, Query(pattern="^(index|density|max_activation|mean_activation|score)$")] = "score",
    offset: Annotated[int, Query(ge=0)] = 0, q: Annotated[str, Query(max_length=200)] = "",
    reliability: Annotated[str, Query(pattern="^(|reliable|unreliable|unnamed)$")] = "",
) -> Response:
    run = sae_run_or_404(session, run_id)
    rows, total = feature_repo.list_features(session, sae_run_id=run.id, sort=sort, limit=FEATURES_PER_PAGE,
                                             offset=offset, text=q.strip() or None, reliability=reliability or None)
    items = [{"f": f, "best": best, "spark": sparkline(f.histogram.get("counts", []))} for f, best in rows]
    ctx = {**crumbs(session, run), "items": items, "sort": sort, "q": q, "reliability": reliability,
           "filters": urlencode({k: v for k, v in (("q", q), ("reliability", reliability)) if v}),
           "pager": Pager(offset=offset, limit=FEATURES_PER_PAGE, total=total)}
    return render(request, "pages/features.html", ctx)


@router.get("/sae-runs/{run_id}/features/{index}", response_class=HTMLResponse)
def feature_page(request: Request, run_id: int, index: int, session: SessionDep) -> Response:
    run = sae_run_or_404(session, run_id)
    found = feature_repo.get_feature(session, sae_run_id=run.id, index=index)
    if found is None:
        n = run.n_latents or 0
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"feature {index} not found (features are 0..{n - 1})")
    feat, best = found
    counts = feat.histogram.get("counts", [])
    width = feat.max_activation / max(len(counts), 1)
    chart = bar_chart_svg([Bar(f"{(i + 0.5) * width:.2f}", c) for i, c in enumerate(counts)],
                          title=f"Activation histogram of feature {index}", x_label="activation", y_label="documents")
    fam_ids = feature_repo.families_of_feature(session, sae_run_id=run.id, index=index)
    families = feature_repo.families_by_id(session, family_ids=fam_ids)
    places = family_places(feature_repo.family_members(session, family_ids=fam_ids), index, FEATURE_PAGE_CHILDREN)
    neighbours = {j for j, _ in feat.neighbours.get("cooccurring", []) + feat.neighbours.get("decoder", [])}
    neighbours |= {j for p in places.values() for j in [*p["children"], *([p["parent"]] if p["parent"] is not None else [])]}
    names = {i: b for i, (_, b) in feature_repo.features_by_index(session, sae_run_id=run.id, indices=sorted(neighbours)).items()}
    ctx = {**crumbs(session, run), "feature": feat, "best": best, "chart": Markup(chart),
           "interpretations": feature_repo.interpretations_of(session, feature_id=feat.id), "names": names,
           "cooccurring": feat.neighbours.get("cooccurring", []), "decoder": feat.neighbours.get("decoder", []),
           "families": [{"family": f, **places[f.id]} for f in families]}
    return render(request, "pages/feature.html", ctx)


def family_places(members: dict[int, list[Any]], index: int, max_children: int) -> dict[int, dict[str, Any]]:
    """Per family id: the feature's parent (None for the root), its first `max_children` children (densest first)
    and how many more it has."""
    out = {}
    for fid, ms in members.items():
        me = next((m for m in ms if m.feature_index == index), None)
        children = [m.feature_index for m in ms if m.parent_index == index]
        out[fid] = {"parent": me.parent_index if me else None, "depth": me.depth if me else 0,
                    "children": children[:max_children], "more_children": max(0, len(children) - max_children)}
    return out


def family_tree(members: list[Any]) -> list[dict[str, Any]]:
    """Nested {index, children} from (index, parent_index) pairs, root first."""
    nodes = {m.feature_index: {"index": m.feature_index, "children": []} for m in members}
    roots = []
    for m in members:
        if m.parent_index is None or m.parent_index not in nodes:
            roots.append(nodes[m.feature_index])
        else:
            nodes[m.parent_index]["children"].append(nodes[m.feature_index])
    return roots


@router.get("/sae-runs/{run_id}/families", response_class=HTMLResponse)
def families_page(
    request: Request, run_id: int, session: SessionDep, iteration: Annotated[int, Query(ge=0)] = 0,
    offset: Annotated[int, Query(ge=0)] = 0, family: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    """`family=ID` opens the page of its iteration that holds that family (links from a feature)."""
    run = sae_run_or_404(session, run_id)
    target = feature_repo.families_by_id(session, family_ids=[family]) if family is not None else []
    if target and target[0].sae_run_id == run.id:
        iteration = target[0].iteration
        offset = feature_repo.family_rank(session, family=target[0]) // FAMILIES_PER_PAGE * FAMILIES_PER_PAGE
    counts = feature_repo.family_counts(session, sae_run_id=run.id)
    fams = feature_repo.list_families(session, sae_run_id=run.id, iteration=iteration, limit=FAMILIES_PER_PAGE,
                                      offset=offset)  # largest first
    members = feature_repo.family_members(session, family_ids=[f.id for f in fams])
    wanted = sorted({m.feature_index for ms in members.values() for m in ms})
    found = feature_repo.features_by_index(session, sae_run_id=run.id, indices=wanted)
    info = {i: {"density": f.density, "label": best.label if best else None, "reliable": best.reliable if best else None}
            for i, (f, best) in found.items()}
    ctx = {**crumbs(session, run), "families": [{"family": f, "tree": family_tree(members[f.id])} for f in fams],
           "iterations": sorted(counts), "iteration": iteration, "info": info, "open_family": family,
           "open_max": FAMILY_OPEN_MAX,
           "pager": Pager(offset=offset, limit=FAMILIES_PER_PAGE, total=counts.get(iteration, 0))}
    return render(request, "pages/families.html", ctx)


@router.post("/sae-runs/{run_id}/interpret", response_class=HTMLResponse)
async def start_naming(
    request: Request, run_id: int, principal: CurrentUser, rid: RequestId,
    backend: Annotated[str, Form()] = "keywords", csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)
    try:
        body = InterpretationRequest(backends=[BackendOptions(backend=backend)])
        job = await start_interpretation(request.app.state, run_id, body, principal, rid)
    except RunInputError as exc:
        return render(request, "partials/_flash.html", {"error": exc.message}, status_code=422)
    except ValidationError as exc:
        return render(request, "partials/_flash.html", {"error": exc.errors()[0]["msg"]}, status_code=422)
    return render(request, "partials/_job_progress.html", job_progress_context(job))


@router.post("/sae-runs/{run_id}/features/{index}/reinterpret", response_class=HTMLResponse)
async def reinterpret_now(
    request: Request, run_id: int, index: int, principal: CurrentUser, rid: RequestId,
    backend: Annotated[str, Form()] = "keywords", csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """The feature page's Re-interpret button: name it again now; answers the _reinterpret partial."""
    check_csrf(request, csrf_token)
    ctx: dict[str, Any] = {"run_id": run_id, "index": index, "backend": backend}
    try:
        out = await reinterpret_feature(request.app.state, run_id, index, ReinterpretRequest(backend=backend),
                                        principal, rid)
    except RunInputError as exc:
        return render(request, "partials/_reinterpret.html", {**ctx, "error": exc.message}, status_code=exc.status_code)
    except ValidationError as exc:
        return render(request, "partials/_reinterpret.html", {**ctx, "error": exc.errors()[0]["msg"]}, status_code=422)
    except (ServiceError, ServiceUnavailable) as exc:
        return render(request, "partials/_reinterpret.html", {**ctx, "error": str(exc)}, status_code=502)
    return render(request, "partials/_reinterpret.html", {**ctx, "result": out})

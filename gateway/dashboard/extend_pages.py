"""The SAE run page's "Encode the new notes" button: the extension job of gateway/domain/runs/extend.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from contracts.append import ExtendRequest
from gateway.dashboard.views import check_csrf, render
from gateway.deps import CurrentUser, RequestId, require_login
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.extend import start_extend

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])


@router.post("/sae-runs/{run_id}/extend", response_class=HTMLResponse)
async def extend_run(request: Request, run_id: int, principal: CurrentUser, rid: RequestId,
                     csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    try:
        out = await start_extend(request.app.state, run_id, ExtendRequest(), principal, rid)
    except RunInputError as exc:
        return render(request, "partials/_flash.html", {"error": exc.message}, status_code=exc.status_code)
    return Response(status_code=200, headers={"HX-Redirect": f"/jobs/{out.job_id}"})

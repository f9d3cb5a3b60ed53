"""FastAPI dependencies and their `Annotated` aliases, in one place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from artifacts import ArtifactStore
from gateway.config import GatewaySettings
from gateway.db import unit_of_work
from gateway.domain.auth import trail
from gateway.domain.auth.service import Principal, session_principal, verify_key
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.datasets.models import Dataset
from gateway.domain.jobs.runner import JobRunner
from gateway.logging import request_id_var
from gateway.services import ServiceClients


def get_settings_dep(request: Request) -> GatewaySettings:
    return request.app.state.settings


def _open_session(request: Request) -> Iterator[Session]:
    """The request's session, open until the response has been sent (a response model or a template
    may still read from it); whatever was not committed by then is rolled back."""
    session = request.app.state.factory()
    try:
        yield session
    finally:
        session.close()


def get_session(session: Annotated[Session, Depends(_open_session)]) -> Iterator[Session]:
    """A unit of work per request: committed when the handler returns, *before* the response is sent
    (`scope="function"` below), so a client's next request reads what this one wrote and a failed commit
    is this request's error, not a lost write behind a 2xx; rolled back on any error."""
    with unit_of_work(session):
        yield session


SettingsDep = Annotated[GatewaySettings, Depends(get_settings_dep)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_store(request: Request) -> ArtifactStore:
    return request.app.state.store


def get_runner(request: Request) -> JobRunner:
    return request.app.state.runner


def get_services(request: Request) -> ServiceClients:
    return request.app.state.services


StoreDep = Annotated[ArtifactStore, Depends(get_store)]
RunnerDep = Annotated[JobRunner, Depends(get_runner)]
ServicesDep = Annotated[ServiceClients, Depends(get_services)]


class NotAuthenticated(Exception):
    """Raised by the dashboard's dependency; answered with the login page and a 401."""


def _principal_from_request(request: Request, session: Session) -> Principal | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token:
        return verify_key(session, token.strip())
    token = request.session.get("sid") if "session" in request.scope else None
    if isinstance(token, str) and token:
        return session_principal(session, token)  # None once logged out: the row is gone
    return None


def require_api_key(request: Request, session: SessionDep) -> Principal:
    principal = _principal_from_request(request, session)
    if principal is None:
        trail.record_failed_login(session, request)  # only when a (wrong) key was presented
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or invalid API key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.principal = principal
    trail.bind(session, request, principal)
    return principal


def require_login(request: Request, session: SessionDep) -> Principal:
    principal = _principal_from_request(request, session)
    if principal is None:
        trail.record_failed_login(session, request)  # only when a (wrong) key was presented
        raise NotAuthenticated()
    request.state.principal = principal
    trail.bind(session, request, principal)
    return principal


CurrentKey = Annotated[Principal, Depends(require_api_key)]
CurrentUser = Annotated[Principal, Depends(require_login)]


def request_id() -> str | None:
    return request_id_var.get()


RequestId = Annotated[str | None, Depends(request_id)]


def valid_dataset(dataset_id: int, session: SessionDep) -> Dataset:
    ds = dataset_repo.get_dataset(session, dataset_id=dataset_id)
    if ds is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"dataset {dataset_id} not found")
    return ds


DatasetDep = Annotated[Dataset, Depends(valid_dataset)]

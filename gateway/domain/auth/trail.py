"""The audit trail of reads: who saw document text (listings, search results, feature examples,
exports), failed logins, and the filtered listing of events.

An event holds ids, counts and sizes, never text: a query that could hold patient text is
recorded by its length and a keyed hash (HMAC-SHA-256 with a key derived from the server's
secret), so equal queries can be matched without a dictionary attack on the log.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.domain.auth import repo
from gateway.domain.auth.models import AuditEvent
from gateway.domain.auth.service import Principal
from gateway.logging import request_id_var

_CONTEXT = "prisma.audit"
QUERY_HASH_CHARS = 16  # hex characters of the HMAC kept: enough to match equal queries


@dataclass(frozen=True)
class AuditContext:
    """What a route's read events need besides their own ids: the caller and the query-hash key."""

    principal: Principal
    query_key: bytes


def _query_key(request: Request) -> bytes:
    state = request.app.state
    key = getattr(state, "audit_query_key", None)
    if key is None:
        secret = state.settings.resolved_secret_key().encode()
        key = state.audit_query_key = hmac.new(secret, b"prisma audit query hash", hashlib.sha256).digest()
    return key


def bind(session: Session, request: Request, principal: Principal) -> None:
    """Called by authentication: the request's session now knows who is reading."""
    session.info[_CONTEXT] = AuditContext(principal=principal, query_key=_query_key(request))


def query_fingerprint(session: Session, query: str) -> dict[str, Any]:
    """Length and keyed hash of a query; never the query itself."""
    ctx: AuditContext | None = session.info.get(_CONTEXT)
    key = ctx.query_key if ctx else b""
    digest = hmac.new(key, query.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return {"query_chars": len(query), "query_hmac": digest[:QUERY_HASH_CHARS]}


def record_read(
    session: Session, action: str, *, dataset_id: int | None, count: int, query: str | None = None,
    **ids: int | str | None,
) -> None:
    """A read of document text by the request's caller: `count` documents of `dataset_id` (and other
    ids, e.g. `sae_run_id`, `feature`). Written in the request's unit of work."""
    ctx: AuditContext | None = session.info.get(_CONTEXT)
    details: dict[str, Any] = {"count": count, **{k: v for k, v in ids.items() if v is not None}}
    if query is not None:
        details.update(query_fingerprint(session, query))
    event = repo.add_audit_event(
        session, actor=ctx.principal.name if ctx else "unknown", api_key_id=ctx.principal.key_id if ctx else None,
        action=action, target_type="dataset" if dataset_id is not None else None, target_id=dataset_id,
        request_id=request_id_var.get(), details=details,
    )
    event.project_id = project_of_dataset(session, dataset_id)


def project_of_dataset(session: Session, dataset_id: int | None) -> int | None:
    """The project the dataset belongs to (None without a dataset, or for one just deleted)."""
    from gateway.domain.datasets.models import Dataset

    if dataset_id is None:
        return None
    with session.no_autoflush:
        dataset = session.get(Dataset, dataset_id)
    return dataset.project_id if dataset is not None else None


def dataset_of_sae_run(session: Session, sae_run_id: int) -> int | None:
    from gateway.domain.runs import repo as run_repo

    run = run_repo.get_sae_run(session, run_id=sae_run_id)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id) if run else None
    return emb.dataset_id if emb else None


def record_search(session: Session, sae_run_id: int, query: str, mode: str, result: Any) -> Any:
    """A search that returned documents (expression or text mode); gives `result` back unchanged.
    Label searches return features, not documents, and are not recorded."""
    if result is not None and mode in ("expression", "text"):
        record_read(session, "search.results", dataset_id=dataset_of_sae_run(session, sae_run_id),
                    count=len(result.items), query=query, sae_run_id=sae_run_id, mode=mode, total=result.total)
    return result


def record_export(session: Session, plan: Any) -> None:
    """A concept's matches exported as CSV (external ids, labels, metadata of every match)."""
    record_read(session, "export.csv", dataset_id=plan.dataset_id, count=plan.n_matches, concept_id=plan.concept_id)


def client_address(request: Request) -> str | None:
    return request.client.host if request.client else None


def record_failed_login(session: Session, request: Request, *, method: str | None = None) -> None:
    """A wrong credential: an API key that matches no live key (only when one was presented: a
    request without any is not a login attempt), or a wrong key typed into the dashboard's login.
    Records the client address and the method; never the secret. Committed at once, since the
    request then fails and its unit of work is rolled back."""
    if method is None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return
        method = "api_key"
    session.rollback()
    repo.add_audit_event(session, actor="anonymous", action="auth.failed", request_id=request_id_var.get(),
                         details={"client": client_address(request), "method": method, "path": request.url.path})
    session.commit()


def _naive_utc(at: datetime | None) -> datetime | None:
    """Times are stored as naive UTC; an aware filter is converted, a naive one taken as UTC."""
    return at.astimezone(UTC).replace(tzinfo=None) if at is not None and at.tzinfo else at


def list_events(
    session: Session, *, actor: str | None = None, action: str | None = None, since: datetime | None = None,
    until: datetime | None = None, limit: int = 100, offset: int = 0,
) -> tuple[list[AuditEvent], int]:
    """Events newest first, filtered by actor (exact), action (exact, or a prefix ending in '.',
    e.g. 'documents.'), and time (since inclusive, until exclusive); with the total count."""
    since, until = _naive_utc(since), _naive_utc(until)
    conds = []
    if actor:
        conds.append(AuditEvent.actor == actor)
    if action:
        conds.append(AuditEvent.action.startswith(action, autoescape=True) if action.endswith(".")
                     else AuditEvent.action == action)
    if since is not None:
        conds.append(AuditEvent.at >= since)
    if until is not None:
        conds.append(AuditEvent.at < until)
    total = session.scalar(select(func.count()).select_from(AuditEvent).where(*conds)) or 0
    rows = session.scalars(select(AuditEvent).where(*conds).order_by(AuditEvent.id.desc()).limit(limit).offset(offset))
    return list(rows), total

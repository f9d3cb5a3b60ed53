"""Starting the job that computes a run (embedding, SAE, SAE import) and linking the two."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from gateway.db import session_scope
from gateway.domain.auth.service import Principal
from gateway.domain.jobs.service import submit

RunT = TypeVar("RunT")


async def start_run_job(app_state: Any, run: RunT, *, kind: str, payload: BaseModel, principal: Principal) -> RunT:
    """Submit the run's job (deterministic id) and record it on the run's row; returns the run."""
    job = await submit(app_state.factory, app_state.runner, kind=kind, queue="gateway", payload=payload,
                       created_by_key_id=principal.key_id)
    with session_scope(app_state.factory) as session:
        session.get(type(run), run.id).job_id = job.id  # type: ignore[attr-defined]
    run.job_id = job.id  # type: ignore[attr-defined]
    return run

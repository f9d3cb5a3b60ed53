"""The job that computes a run (embedding, SAE, SAE import): starting it, linking the two, and
ending the run when its service job fails or is cancelled."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel

from gateway.db import session_scope, utcnow
from gateway.domain.auth.service import Principal
from gateway.domain.jobs.runner import JobCancelled, JobContext
from gateway.domain.jobs.service import submit
from gateway.domain.jobs.service_jobs import run_service_job

RunT = TypeVar("RunT")


async def start_run_job(app_state: Any, run: RunT, *, kind: str, payload: BaseModel, principal: Principal) -> RunT:
    """Submit the run's job (deterministic id) and record it on the run's row; returns the run."""
    job = await submit(app_state.factory, app_state.runner, kind=kind, queue="gateway", payload=payload,
                       created_by_key_id=principal.key_id)
    with session_scope(app_state.factory) as session:
        session.get(type(run), run.id).job_id = job.id  # type: ignore[attr-defined]
    run.job_id = job.id  # type: ignore[attr-defined]
    return run


async def run_service_job_for(ctx: JobContext, run_model: type, run_id: int, service: str, function: str,
                              payload: BaseModel) -> dict[str, Any]:
    """The service job that computes a run; if it raises, the run ends as it did (cancelled when a
    cancel was asked, else failed) and the job's error propagates."""
    try:
        return await run_service_job(ctx, service, function, payload.model_dump(mode="json"))
    except BaseException:
        cancelled = await asyncio.to_thread(ctx.recorder.cancel_requested)
        await asyncio.to_thread(_end_run, ctx, run_model, run_id, "cancelled" if cancelled else "failed")
        if cancelled:
            raise JobCancelled(ctx.job_id) from None
        raise


def _end_run(ctx: JobContext, run_model: type, run_id: int, status: str) -> None:
    with session_scope(ctx.factory) as session:
        run = session.get(run_model, run_id)
        run.status, run.finished_at = status, utcnow()

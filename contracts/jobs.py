"""Job payloads and progress: JSON (pydantic) between the gateway, the queues and the workers."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


TERMINAL = {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled}


class Progress(BaseModel):
    """What a running job reports; rate and ETA are derived by the reporter."""

    done: int = Field(default=0, ge=0, description="Units finished (documents, steps, features).")
    total: int | None = Field(default=None, ge=0, description="Units in all, when known.")
    unit: str = Field(default="items", description="What a unit is, for display.")
    rate: float | None = Field(default=None, description="Units per second since the job started.")
    eta_seconds: float | None = Field(default=None, description="Seconds left at the current rate.")
    message: str | None = Field(default=None, description="Short status line, never document text.")


class JobOut(BaseModel):
    id: str
    kind: str
    queue: str
    status: JobStatus
    payload: dict[str, Any]
    progress: Progress
    result: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


class JobPage(BaseModel):
    items: list[JobOut]
    total: int


def deterministic_job_id(kind: str, payload: BaseModel | dict[str, Any]) -> str:
    """The same work gets the same id, so enqueuing it twice runs it once."""
    data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
    digest = hashlib.sha256(json.dumps([kind, data], sort_keys=True).encode()).hexdigest()
    return f"{kind}-{digest[:20]}"


# -- the queue wire format, shared by the gateway and every worker ----------------------------

def progress_key(arq_job_id: str) -> str:
    """The Redis key where a service worker publishes a job's Progress (JSON) for the gateway."""
    return f"prisma:progress:{arq_job_id}"


def dump_job_data(obj: Any) -> bytes:
    """arq's serializer for payloads and results: JSON, never pickle (exceptions become their str)."""
    return json.dumps(obj, default=str).encode()


def load_job_data(data: bytes) -> Any:
    return json.loads(data)

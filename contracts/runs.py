"""Wire schemas of embedding runs (the gateway's view; the embedder's contract is contracts.embed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contracts.embed import EmbeddingRunSpec


class EmbeddingRunCreate(EmbeddingRunSpec):
    """POST /api/v1/embedding-runs: which dataset, and how to embed it."""

    dataset_id: int = Field(description="The dataset to embed.")


class EmbeddingRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    dataset_id: int
    status: str = Field(description="queued | running | succeeded | failed | cancelled")
    job_id: str | None
    model: str
    model_path: str | None
    pooling: str
    normalize: bool
    max_length: int | None
    dim: int | None
    n_documents: int | None
    n_chunks: int | None
    n_tokens: int | None
    docs_per_s: float | None
    spec: dict[str, Any]
    result: dict[str, Any] | None = Field(description="The embedder's EmbedJobResult (shards, histogram, timings).")
    created_at: datetime
    finished_at: datetime | None


class EmbeddingRunPage(BaseModel):
    items: list[EmbeddingRunOut]
    total: int

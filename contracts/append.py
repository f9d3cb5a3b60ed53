"""Notes joining a dataset after its runs were trained: the append's answer, and a run's extension."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AppendOut(BaseModel):
    dataset_id: int
    added: int = Field(description="Documents added by this request.")
    n_documents: int = Field(description="The dataset's documents now.")
    first_position: int = Field(description="Position of the first added document; the others follow it.")


class ExtendRequest(BaseModel):
    batch_documents: int = Field(default=256, ge=1, le=4096,
                                 description="New documents embedded and encoded per checkpointed batch.")


class ExtendOut(BaseModel):
    sae_run_id: int
    job_id: str
    from_documents: int = Field(description="Documents the run's codes hold before the extension.")
    to_documents: int = Field(description="Documents they will hold after it (the dataset's count now).")
